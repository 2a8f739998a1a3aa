"""The checkers that judge a model's answers, one place for both users: rewards in training/rewards and the
evaluations in evals/model. They sit in synth, the lowest layer that needs them (synthetic-data filters check
math answers and tool calls too), so training and evals import them downward.

- instructions: IFEval's 25 verifiable checks (`ifeval.follows`, `ifeval.score`);
- tool calls: Python call syntax and BFCL's AST check (`parse_calls`, `bfcl_correct`);
- math answers: final-answer extraction and equivalence (synth/math/answers.py);
- code: the sandbox judge's front door (`judge_code`; `reference_entry_points`: a task's entry points from its
  reference solution).
"""

from synth.math.answers import answers_equal, extract_final, numbers_in

from .code import judge_code, reference_entry_points
from .ifeval import follows
from .toolcalls import bfcl_correct, parse_calls

__all__ = ["answers_equal", "bfcl_correct", "extract_final", "follows", "judge_code", "numbers_in", "parse_calls",
           "reference_entry_points"]
