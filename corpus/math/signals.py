"""Math signals in web pages: template tags (MathJax, KaTeX, MathML, LaTeX environments) and symbols.

Tags: strings that only a page rendering mathematics carries (the AFM report's "math tag
filter"; the list is ours, after OpenWebMath's detection of MathJax/KaTeX/MathML pages).
Symbols: Unicode math operators from the unicode-math table (shipped unmodified in
corpus/math/data/unicode_math, LPPL-1.3c: Latin-1 math signs, the Mathematical Operators block
U+2200-22FF and Miscellaneous Technical U+2300-23FF, 342 symbols) and LaTeX command words
(haruka-parser's 341-word list in corpus/math/data/latex_words, MIT, plus 17 common commands it lacks). Greek
letters are left out: they are ordinary letters on Greek pages.

Counting runs as pyarrow regexes over a whole column. `math_columns` counts MATH_TAGS as raw
substrings of the HTML (kept for the benchmark's comparison; scripts and site-wide loaders fire it);
the stages use `text_columns`, on the page text, and corpus/math/visible.py for tags.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DATA = Path(__file__).resolve().parent / "data"

# Strings that mark a math template. Matched case-sensitively as literal substrings.
MATH_TAGS = [
    # MathJax
    'type="math/tex', "type='math/tex", 'type="math/asciimath', "MathJax.Hub.Config", "MathJax.js", "mathjax.js",
    "cdn.mathjax.org", "mathjax@", "tex-mml-chtml.js", "tex-chtml.js", "tex-svg.js", "MathJax-Element",
    'class="MathJax', "<mjx-container", "window.MathJax",
    # KaTeX
    "katex.min.css", "katex.min.js", 'class="katex', "katex-display", "renderMathInElement", "auto-render.min.js",
    # MathML
    "<math", "<mrow>", "<mfrac", "<msup>", "<msub>", "<msqrt>", "<mover", "<munderover",
    'encoding="application/x-tex"', 'encoding="TeX"',
    # LaTeX in the page text and image-rendered formulas
    "\\begin{equation", "\\begin{align", "\\begin{pmatrix", "\\begin{bmatrix", "\\begin{cases", "\\frac{",
    "\\sqrt{", "\\mathbb{", "\\mathrm{", "\\left(", "\\sum_", "\\int_", "$$",
    "latex.php?", "codecogs.com/", "wp-latex", 'class="tex"', 'class="math-container"',
]

MATH_BLOCKS = (0x0080, 0x00FF), (0x2200, 0x22FF), (0x2300, 0x23FF)
# Latin-1 signs the table lists but web text uses for other things: currency, legal sections (German law
# pages: dozens of §), pilcrows and the middle dot menus and bylines use as a separator
NOT_MATH_ON_THE_WEB = frozenset("£¥§¶·")


@functools.lru_cache(maxsize=1)
def math_symbols() -> tuple[str, ...]:
    """Unicode math symbols (not letters) in Latin-1, Mathematical Operators and Misc Technical."""
    out = []
    for cp, _latex, cls in unicode_math_table():
        if cls != "mathalpha" and any(lo <= cp <= hi for lo, hi in MATH_BLOCKS) and chr(cp) not in NOT_MATH_ON_THE_WEB:
            out.append(chr(cp))
    return tuple(dict.fromkeys(out))


_ENTRY = re.compile(r'^\\UnicodeMathSymbol\{"([0-9A-Fa-f]+)\}\{(\\\S+)\s*\}\{\\(\w+)\}', re.M)


def unicode_math_table() -> list[tuple[int, str, str]]:
    """(codepoint, LaTeX command, math class) of every `\\UnicodeMathSymbol` line of unicode-math's table."""
    text = (DATA / "unicode_math" / "unicode-math-table.tex").read_text(encoding="utf-8")
    return [(int(cp, 16), cmd, cls) for cp, cmd, cls in _ENTRY.findall(text)]


# Ubiquitous commands the shared list lacks (checked against it): added so `\int` or `\leq` count.
EXTRA_LATEX = ("int", "infty", "left", "begin", "leq", "geq", "neq", "cdots", "dots", "dfrac", "tfrac", "inf",
               "subseteq", "emptyset", "rightarrow", "beta", "overline")


@functools.lru_cache(maxsize=1)
def latex_words() -> tuple[str, ...]:
    path = DATA / "latex_words" / "latex_words_haruka.txt"
    words = [w.strip().lstrip("\\") for w in path.read_text().splitlines()] + list(EXTRA_LATEX)
    return tuple(dict.fromkeys(w for w in words if w and re.fullmatch(r"[A-Za-z]+", w)))


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[str, str, str]:
    tags = "|".join(re.escape(t) for t in MATH_TAGS)
    symbols = "|".join(re.escape(s) for s in math_symbols())
    # a command ends where its letters end, so `\in` does not count inside `\int`
    latex = r"\\(?:" + "|".join(sorted(latex_words(), key=len, reverse=True)) + r")(?:[^A-Za-z]|$)"
    return tags, symbols, latex


def text_columns(texts: list[str], n_tags: list[int] | None = None) -> dict[str, pa.Array]:
    """math__n_symbols, math__n_latex, math__symbol_density (symbols + LaTeX commands per 1,000 characters)
    of page texts (not HTML: a large page's markup would dilute the density); given the pages' visible
    formula counts, also math__tag_density (formulas per 1,000 characters of the same texts)."""
    _tags, symbols, latex = _patterns()
    values = pa.array([t or "" for t in texts], pa.string())
    n_sym = pc.count_substring_regex(values, symbols).to_numpy(zero_copy_only=False)
    n_latex = pc.count_substring_regex(values, latex).to_numpy(zero_copy_only=False)
    n_chars = pc.utf8_length(values).to_numpy(zero_copy_only=False)
    density = 1000.0 * (n_sym + n_latex) / np.maximum(n_chars, 1)
    out = {"math__n_symbols": pa.array(n_sym, pa.int32()), "math__n_latex": pa.array(n_latex, pa.int32()),
           "math__symbol_density": pa.array(density, pa.float32())}
    if n_tags is not None:
        out["math__tag_density"] = pa.array(1000.0 * np.asarray(n_tags) / np.maximum(n_chars, 1), pa.float32())
    return out


def math_columns(values: pa.ChunkedArray | pa.Array) -> dict[str, pa.Array]:
    """math__n_tags, math__n_symbols, math__n_latex, math__symbol_density (symbols+latex per 1k chars)."""
    tags, symbols, latex = _patterns()
    values = pc.fill_null(values, b"" if pa.types.is_binary(values.type) else "")

    def count(pattern: str) -> np.ndarray:
        return pc.count_substring_regex(values, pattern).to_numpy(zero_copy_only=False)

    n_tags, n_sym, n_latex = count(tags), count(symbols), count(latex)
    n_chars = pc.binary_length(values).to_numpy(zero_copy_only=False)  # bytes: a cheap, stable length
    density = 1000.0 * (n_sym + n_latex) / np.maximum(n_chars, 1)
    return {
        "math__n_tags": pa.array(n_tags, pa.int32()),
        "math__n_symbols": pa.array(n_sym, pa.int32()),
        "math__n_latex": pa.array(n_latex, pa.int32()),
        "math__symbol_density": pa.array(density, pa.float32()),
    }
