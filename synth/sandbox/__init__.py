"""A sandbox for untrusted generated code: see sandbox.py (one run), pool.py (many), isolation.py (how)."""

from .isolation import available, choose
from .limits import SandboxLimits, SandboxResult, Verdict
from .pool import run_many
from .sandbox import Sandbox

__all__ = ["Sandbox", "SandboxLimits", "SandboxResult", "Verdict", "available", "choose", "run_many"]
