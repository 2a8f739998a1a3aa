"""Versioned prompt templates for coding triplets (our own wording) and the parsers of their replies.

Changing a template's words means bumping its version: rows record `gen_template_id`/`version`.
Parsers return (value, None) or (None, reason); the reason becomes the row's drop reason.
"""

from __future__ import annotations

import ast
import builtins
import re

from synth.generation.template import PromptTemplate

QUESTION = PromptTemplate(
    id="coding_question", version="v1",
    system="You write clear programming interview questions for Python developers.",
    user=("Write one short interview question about {topic}. The candidate has to implement the Python "
          "function `{signature}`. In two to four sentences, say what the function receives and what it must "
          "return, with one small example. Do not give the solution."),
)

TESTS = PromptTemplate(
    id="coding_tests", version="v1",
    system="You write precise Python unit tests.",
    user=("Task:\n{question}\n\nWrite {n_tests} Python assert statements that a correct `{signature}` passes. "
          "Each assert calls `{entry_point}` with concrete arguments and compares the result with the exact "
          "expected value. Reply with a ```python code block holding only the assert lines."),
)

SOLUTION = PromptTemplate(
    id="coding_solution", version="v1",
    system="You are a careful Python programmer.",
    user=("Solve this task in Python.\n\n{question}\n\nWrite the complete function `{signature}`. Reply with "
          "one ```python code block containing the function (and any imports it needs)."),
)

_FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|$)", re.S)
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:interview\s+)?question\s*(?:\d+)?\s*[:.]\s*(?:\*\*)?\s*", re.I)
_SOLUTION_HEAD = re.compile(r"\n\s*(?:\*\*)?(?:solution|answer|hint|explanation)\b", re.I)


QUESTION_CHARS = (40, 1200)  # a cut question shorter or longer than this is no usable task


def cut_question(text: str) -> str:
    """A reply cut to its question: the label, and any code or solution after it, removed."""
    q = text.strip()
    q = _LABEL.sub("", q, count=1)
    q = q.split("```", 1)[0]
    q = _SOLUTION_HEAD.split(q, maxsplit=1)[0]
    return re.sub(r"\n\s*def \w+\(.*", "", q, flags=re.S).strip()


def clean_question(text: str, *, signature: str, entry_point: str,
                   min_chars: int = QUESTION_CHARS[0],
                   max_chars: int = QUESTION_CHARS[1]) -> tuple[str | None, str | None]:
    """The question text, cut before any code or solution; the signature is appended when the
    model did not name the function (so the task is always unambiguous)."""
    q = cut_question(text)
    if len(q) < min_chars:
        return None, "question_too_short"
    if len(q) > max_chars:
        return None, "question_too_long"
    if entry_point not in q:
        q = f"{q}\n\nImplement `{signature}`."
    return q, None


def extract_code(text: str) -> str:
    """The first fenced code block, else the text from its first `def`/`import` line."""
    m = _FENCE.search(text)
    if m:
        return m.group(1).strip("\n")
    m = re.search(r"^(?:from |import |def )", text, re.M)
    return text[m.start():].strip("\n") if m else ""


def parse_solution(text: str, *, entry_point: str) -> tuple[str | None, str | None]:
    code = extract_code(text)
    if not code:
        return None, "no_code"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None, "syntax_error"
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if entry_point not in names:
        return None, "entry_point_missing"
    return code, None


_BUILTINS = set(dir(builtins))


def _self_contained(test: ast.expr, entry_point: str) -> bool:
    """Only the entry point and builtins are named (`f(x) == y` with a free `x` raises NameError),
    and the expected side does not call the entry point (`f(1) == f(1)` checks nothing)."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if not names <= _BUILTINS | {entry_point}:
        return False
    if isinstance(test, ast.Compare):
        for side in test.comparators:
            if any(isinstance(n, ast.Name) and n.id == entry_point for n in ast.walk(side)):
                return False
    return True


def parse_tests(text: str, *, entry_point: str, max_tests: int) -> tuple[list[str], str | None]:
    """Single-line, self-contained assert statements that call the entry point. Duplicates are removed,
    and so are contradictions: asserts of `call == value` for one call with different values
    (a small model often writes both `f(x) == True` and `f(x) == False`); none of them is kept."""
    # Every line of the reply counts (models put asserts in a second code block, after the function,
    # or inside a function body); what makes an assert usable is that it is self-contained.
    body = text
    found: list[tuple[str, str | None]] = []          # (assert line, the call it checks for equality)
    expected: dict[str, set[str]] = {}
    for line in body.splitlines():
        line = line.strip()
        if not line.startswith("assert ") or f"{entry_point}(" not in line or line in (t for t, _ in found):
            continue
        try:
            test = ast.parse(line).body[0].test
        except SyntaxError:
            continue
        if not _self_contained(test, entry_point):
            continue
        call = None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            call = ast.unparse(test.left)
            expected.setdefault(call, set()).add(ast.unparse(test.comparators[0]))
        found.append((line, call))
    tests = [t for t, call in found if call is None or len(expected[call]) == 1][:max_tests]
    return tests, (None if tests else "no_valid_tests")
