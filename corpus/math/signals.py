"""Math signals in web pages: template tags (MathJax, KaTeX, MathML, LaTeX environments) and symbols.

Tags: strings that only a page rendering mathematics carries (the AFM report's "math tag
filter"; the list is ours, after OpenWebMath's detection of MathJax/KaTeX/MathML pages).
Symbols: Unicode math operators from the unicode-math table (../shared/data/math_web/symbols:
Latin-1 math signs, the Mathematical Operators block U+2200-22FF and Miscellaneous Technical
U+2300-23FF, 342 symbols) and LaTeX command words (the shared 341-word list plus 17 common commands it lacks). Greek
letters are left out: they are ordinary letters on Greek pages.

Counting runs as pyarrow regexes over a whole column (string or binary HTML alike).
"""

from __future__ import annotations

import functools
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..code.paths import shared_data

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


@functools.lru_cache(maxsize=1)
def math_symbols() -> tuple[str, ...]:
    """Unicode math symbols (not letters) in Latin-1, Mathematical Operators and Misc Technical."""
    table = json.loads(shared_data("math_web", "symbols", "unicode_math_symbols.json").read_text())
    out = []
    for entry in table:
        cp = int(entry["codepoint"][2:], 16)
        if entry["class"] != "mathalpha" and any(lo <= cp <= hi for lo, hi in MATH_BLOCKS):
            out.append(entry["char"])
    return tuple(dict.fromkeys(out))


# Ubiquitous commands the shared list lacks (checked against it): added so `\int` or `\leq` count.
EXTRA_LATEX = ("int", "infty", "left", "begin", "leq", "geq", "neq", "cdots", "dots", "dfrac", "tfrac", "inf",
               "subseteq", "emptyset", "rightarrow", "beta", "overline")


@functools.lru_cache(maxsize=1)
def latex_words() -> tuple[str, ...]:
    path = shared_data("math_web", "openwebmath_lists", "latex_words_haruka.txt")
    words = [w.strip().lstrip("\\") for w in path.read_text().splitlines()] + list(EXTRA_LATEX)
    return tuple(dict.fromkeys(w for w in words if w and re.fullmatch(r"[A-Za-z]+", w)))


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[str, str, str]:
    tags = "|".join(re.escape(t) for t in MATH_TAGS)
    symbols = "|".join(re.escape(s) for s in math_symbols())
    # a command ends where its letters end, so `\in` does not count inside `\int`
    latex = r"\\(?:" + "|".join(sorted(latex_words(), key=len, reverse=True)) + r")(?:[^A-Za-z]|$)"
    return tags, symbols, latex


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
