"""The one front door to the sandbox's judge for code answers: evaluations (HumanEval/MBPP pass@k) and the code
reward both come through here. The verdict is decided outside the sandboxed solution (synth/sandbox/judge.py)."""

from __future__ import annotations

from synth.sandbox.names import reference_entry_points

__all__ = ["judge_code", "reference_entry_points"]


def judge_code(solution: str, tests: str | list[str], *, prelude: str = "", entry_points: list[str] | None = None,
               timeout_s: float = 10.0, sandbox=None):
    """The sandbox's Judgement of `solution` against `tests`; `sandbox` reuses an open `synth.sandbox.Sandbox`
    (else a one-off judge starts and stops its own)."""
    if sandbox is not None:
        return sandbox.judge(solution, tests, prelude=prelude, entry_points=entry_points, timeout_s=timeout_s)
    from synth.sandbox import judge

    return judge(solution, tests, prelude=prelude, entry_points=entry_points, timeout_s=timeout_s)
