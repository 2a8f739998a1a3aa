"""Run many sandboxed programs at once (threads waiting on subprocesses; the work is in the children)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Sequence

from .limits import SandboxLimits, SandboxResult
from .sandbox import Sandbox


def run_many(sandbox: Sandbox, programs: Sequence[str] | Iterable[str], *,
             limits: SandboxLimits | None = None) -> list[SandboxResult]:
    """Results in input order; at most `sandbox.max_workers` run at the same time."""
    programs = list(programs)
    if not programs:
        return []
    with ThreadPoolExecutor(max_workers=sandbox.max_workers) as pool:
        return list(pool.map(lambda p: sandbox.run(p, limits=limits), programs))
