"""A sandbox for untrusted generated code.

`judge(solution, tests)` (or `Sandbox.judge`) is the trusted verdict path: see judge.py.
sandbox.py holds the slots, process.py starts one child, child.py runs inside it (zygote.py and
zygote_child.py: the per-slot process that forks solution processes), isolation.py
says how it is isolated, wire.py is the only way values cross.
"""

from .levels import available, choose
from .judge import Judgement, TestResult, shown, split_tests
from .limits import SandboxLimits, SandboxResult, Verdict
from .pool import run_many
from .sandbox import Sandbox, judge

__all__ = ["Judgement", "Sandbox", "SandboxLimits", "SandboxResult", "TestResult", "Verdict", "available",
           "choose", "judge", "run_many", "shown", "split_tests"]
