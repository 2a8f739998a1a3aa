"""Final-answer extraction and equivalence for math problems (GSM8K `#### N`, MATH `\\boxed{...}`).

`answers_equal(a, b)` decides whether two final answers mean the same value: equal normalised text,
else element-wise for tuples/intervals, else numeric (fractions, decimals, percents, thousands
separators, `\\frac`, `\\sqrt`, `\\pi`), else symbolic (sympy) for short expressions. It is
deliberately conservative: when unsure it says False, since a false match keeps a wrong answer.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

_NUM = r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+"


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (or \\fbox{...}) with nested braces; `\\boxed 5` too."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    rest = text[idx:]
    brace = rest.find("{")
    head = rest[: brace if brace >= 0 else len(rest)]
    if brace < 0 or head.strip() not in ("\\boxed", "\\fbox"):
        m = re.match(r"\\boxed\s+([^\s$]+)", rest)
        return m.group(1) if m else None
    depth = 0
    for i in range(brace, len(rest)):
        if rest[i] == "{":
            depth += 1
        elif rest[i] == "}":
            depth -= 1
            if depth == 0:
                return rest[brace + 1: i]
    return None  # unbalanced: no answer rather than a guess


def gsm8k_final(answer: str) -> str | None:
    m = re.search(r"####\s*(.+?)\s*$", answer.strip())
    return m.group(1).replace(",", "").strip() if m else None


def extract_final(text: str) -> str | None:
    """The final answer of a model's solution: \\boxed{}, `#### N`, `the answer is N`, else None."""
    if not text:
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    gsm = gsm8k_final(text)
    if gsm:
        return gsm
    m = re.findall(r"answer\s*(?:is|:|=)\s*\$?([^\n]+?)(?:\$|\.\s|\.$|\n|$)", text, re.I)
    if m:
        return m[-1].strip()
    return None


# ---- normalisation ------------------------------------------------------------------------------
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_UNITS = re.compile(r"\s*(?:\\(?:text|mbox|mathrm)\s*\{\s*)?(?:units?|cm|meters?|m|km|inches|inch|feet|ft|degrees?|"
                    r"dollars?|cents?|hours?|minutes?|seconds?|days?|miles?|mph|sq|square|cubic)\b\s*\}?\s*(?:\^\s*\{?\d\}?)?\s*$")


def normalize(ans: str) -> str:
    s = ans.strip()
    s = s.replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\ ", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = s.strip("$ ").rstrip(".").strip()
    s = re.sub(r"^[a-zA-Z]\s*=\s*(?=[^=]+$)", "", s)  # "x = 5" -> "5" (a single assignment only)
    s = re.sub(r"\^\s*\{?\\circ\}?", "", s).replace("°", "")
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    for _ in range(3):
        s2 = _UNITS.sub("", s)
        if s2 == s or not s2.strip():
            break
        s = s2
    s = _TEXT_CMD.sub(r"\1", s)
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)  # \frac12
    s = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"\s+", "", s)
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):  # thousands separators, not a tuple
        s = s.replace(",", "")
    s = re.sub(r"^\((\w)\)$", r"\1", s)  # "(C)" -> "C"
    return s


def _split_top(s: str) -> list[str]:
    """Split at commas outside brackets/braces: '(1,2),3' -> ['(1,2)', '3']."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _latex_to_py(s: str) -> str:
    """A small LaTeX -> Python expression rewrite for numeric/symbolic comparison."""
    s = s.replace("\\pi", "pi").replace("\\infty", "oo").replace("\\cdot", "*").replace("\\times", "*")
    s = s.replace("\\div", "/")
    for _ in range(6):  # innermost first, repeated for nesting
        s2 = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
        s2 = re.sub(r"\\sqrt\[([^{}\]]*)\]\{([^{}]*)\}", r"((\2)**(1/(\1)))", s2)
        s2 = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", s2)
        if s2 == s:
            break
        s = s2
    s = s.replace("^", "**").replace("{", "(").replace("}", ")")
    return s


@lru_cache(maxsize=4096)
def _sym(s: str):
    if len(s) > 120 or "\\" in _latex_to_py(s) or re.search(r"[=<>]", s):
        return None
    try:
        from sympy.parsing.sympy_parser import (convert_xor, implicit_multiplication_application, parse_expr,
                                                standard_transformations)

        expr = parse_expr(_latex_to_py(s), transformations=(*standard_transformations,
                                                            implicit_multiplication_application, convert_xor),
                          evaluate=True)
        return expr
    except Exception:  # sympy raises many kinds on odd input; an unparsable answer just does not match
        return None


def _numeric(s: str) -> float | None:
    if re.fullmatch(_NUM, s):
        return float(s.replace(",", ""))
    expr = _sym(s)
    if expr is None or not getattr(expr, "is_number", False):
        return None
    try:
        v = complex(expr.evalf())
    except Exception:
        return None
    return v.real if abs(v.imag) < 1e-12 else None


def answers_equal(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    na, nb = normalize(a), normalize(b)
    if not na or not nb:
        return False
    if na == nb:
        return True
    pa_, pb_ = _split_top(_strip_brackets(na)), _split_top(_strip_brackets(nb))
    if len(pa_) > 1 or len(pb_) > 1:
        same_brackets = na[:1] + na[-1:] == nb[:1] + nb[-1:] or not (_bracketed(na) and _bracketed(nb))
        return len(pa_) == len(pb_) and same_brackets and all(_scalar_equal(x, y) for x, y in zip(pa_, pb_))
    return _scalar_equal(na, nb)


def _bracketed(s: str) -> bool:
    return len(s) >= 2 and s[0] in "([" and s[-1] in ")]"


def _strip_brackets(s: str) -> str:
    return s[1:-1] if _bracketed(s) else s


def _scalar_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    x, y = _numeric(a), _numeric(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)
    if (x is None) != (y is None):
        return False
    ea, eb = _sym(a), _sym(b)
    if ea is None or eb is None:
        return False
    try:
        import sympy

        return bool(sympy.simplify(ea - eb) == 0)
    except Exception:
        return False


def numbers_in(text: str) -> list[str]:
    """Numbers as written (commas dropped): used to check that a rewrite kept every quantity."""
    return [n.replace(",", "").rstrip(".") for n in re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?", text)]
