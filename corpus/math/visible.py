"""Math signals from what a reader of the page sees, not from the raw HTML.

A page counts as carrying math markup only where formulas sit in its visible content:
- rendered-math elements: `<math>` (MathML), MathJax output (`mjx-container`, `.MathJax*` spans) and its
  sources (`<script type="math/tex">`, which MathJax replaces in place by the formula), KaTeX output
  (`.katex`), StackExchange's `.math-container`, formula images (`img` with LaTeX alt text and a
  LaTeX renderer's URL or class);
- delimited TeX in text nodes: `\\(...\\)`, `\\[...\\]`, `$$...$$`, `$...$` and `\\begin{equation}`-style
  environments, where the delimited span looks like a formula.
Never counted: `<head>`, `<script>` (other than math/tex), `<style>`, `<noscript>`, `<template>`,
`<textarea>`, comments and attributes, so a site-wide MathJax/KaTeX loader on a page without formulas
gives no tags, and `$$` in a script, a comment or a price (`$5 - $10`) is not a formula.

A span that only defines macros (`\\(\\newcommand{\\R}{\\mathbb{R}}\\)`, `$\\def\\eps{\\varepsilon}$`, a MathJax
`math/tex` script of `\\DeclareMathOperator`s: sites put such a block on every page to set up their
notation) shows no formula and is not counted.

`$...$` follows pandoc's rule: no space just inside either dollar and no digit right after the
closing one; its content must also look like math (a lone letter, a digit, a TeX command or an
operator), so "$5 and $10" or "$$ or $$$" around ordinary words never pair up. Symbol counts and density (per 1,000
characters) are measured on the page text with formulas as LaTeX (html_math.page_text's rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .html_math import latexify, node_text, parse_html

HIDDEN = ("head", "script", "style", "noscript", "template", "textarea", "iframe", "object")
# output/source elements of math renderers; an element inside one already counted is not counted again
_RENDERED_CLASSES = {"MathJax", "MathJax_Display", "MathJax_SVG", "MathJax_SVG_Display", "MathJax_CHTML",
                     "katex", "math-container", "mwe-math-element", "tex", "latex", "math-tex"}
# formula images carry their TeX in alt: Sphinx's imgmath writes <img class="math" alt="\\int f\\,dx">
_TEX_IMG_CLASSES = {"tex", "latex", "math"}
_TEX_IMG_SRC = re.compile(r"latex|codecogs|mathtex|mimetex|wp-latex|/math/render/", re.I)
_ENVS = r"equation|align|gather|multline|eqnarray|displaymath|math"

_DELIMITED = re.compile(
    r"\$\$(?P<dd>[^$]{1,5000}?)\$\$"
    r"|\\\[(?P<br>.{1,5000}?)\\\]"
    r"|\\\((?P<pa>.{1,2000}?)\\\)"
    rf"|\\begin\{{(?:{_ENVS})\*?\}}(?P<env>.{{0,5000}}?)\\end\{{(?:{_ENVS})\*?\}}"
    r"|(?<![\\$\w])\$(?P<d>[^\s$](?:[^$\n]{0,300}?[^\s$\\])?)\$(?![\d$])",
    re.S)
_MATHY = re.compile(r"\\[A-Za-z]+|[=^_<>+*/|{}\d]|(?<![A-Za-z])[A-Za-z](?![A-Za-z])")


_DEFINING = re.compile(r"\\(?:(?:re)?newcommand|providecommand|DeclareMathOperator|newenvironment|renewenvironment)\*?"
                       r"|\\[gex]?def(?![A-Za-z])|\\let(?![A-Za-z])")


def _skip_group(text: str, i: int) -> int:
    """Index after the brace group, control sequence or single character that starts at `i` (spaces skipped)."""
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        return i
    if text[i] == "{":
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "{" and (j == 0 or text[j - 1] != "\\"):
                depth += 1
            elif text[j] == "}" and text[j - 1] != "\\":
                depth -= 1
                if depth == 0:
                    return j + 1
        return len(text)  # unbalanced: the rest is the group
    if text[i] == "\\":
        m = re.match(r"\\(?:[A-Za-z]+|.)", text[i:], re.S)
        return i + m.end()
    return i + 1


def strip_macro_definitions(body: str) -> str:
    """`body` without its macro definitions (`\\newcommand{\\R}{\\mathbb{R}}`, `\\def\\eps{\\varepsilon}`,
    `\\DeclareMathOperator{\\tr}{tr}`, `\\let\\a\\b`): what is left is what the reader sees."""
    out, pos = [], 0
    for m in _DEFINING.finditer(body):
        if m.start() < pos:
            continue
        out.append(body[pos:m.start()])
        cmd, i = m.group(0).rstrip("*"), m.end()
        i = _skip_group(body, i)  # the name being defined
        if cmd == "\\let":
            i = _skip_group(body, i + (body[i:i + 1] == "="))
        elif cmd.endswith("def"):
            while i < len(body) and body[i] != "{":  # parameter text (#1#2)
                i += 1
            i = _skip_group(body, i)
        else:
            while True:  # [n] and [default] arguments, then the body (two for environments)
                j = i
                while j < len(body) and body[j].isspace():
                    j += 1
                if j < len(body) and body[j] == "[":
                    close = body.find("]", j)
                    i = len(body) if close < 0 else close + 1
                else:
                    break
            i = _skip_group(body, i)
            if "environment" in cmd:
                i = _skip_group(body, i)
        pos = i
    out.append(body[pos:])
    return "".join(out)


def shows_something(body: str) -> bool:
    """Whether a span of display math or a MathJax source shows anything once its macro definitions are out."""
    return bool(strip_macro_definitions(body).strip(" \t\r\n{}"))


def is_formula(body: str) -> bool:
    """A delimited span that looks like math: a TeX command, an operator, a digit or a lone letter (a variable);
    macro definitions alone are not a formula."""
    body = strip_macro_definitions(body).strip() if "\\" in body else body.strip()
    return bool(body) and _MATHY.search(body) is not None


def count_delimited(text: str) -> int:
    """Formulas in `text` delimited as TeX (`$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]`, environments)."""
    n = 0
    for m in _DELIMITED.finditer(text):
        body = next(g for g in m.groups() if g is not None)
        if m.group("env") is not None or m.group("pa") is not None or m.group("br") is not None:
            n += shows_something(body)
        else:
            n += is_formula(body)
    return n


def _classes(el) -> set[str]:
    return set((el.get("class") or "").split())


def _is_rendered_math(el) -> bool:
    tag = el.tag.rsplit("}", 1)[-1].lower()
    if tag in ("math", "mjx-container"):
        return True
    if tag == "script":  # MathJax 2 source: a formula unless it only defines macros
        return (el.get("type") or "").lower().startswith("math/tex") and shows_something(el.text or "")
    if tag == "img":
        alt = (el.get("alt") or "").strip()
        return bool(alt) and bool(_TEX_IMG_SRC.search(el.get("src") or "") or _classes(el) & _TEX_IMG_CLASSES)
    return bool(_classes(el) & _RENDERED_CLASSES)


@dataclass(frozen=True)
class VisibleMath:
    n_tags: int  # rendered-math elements + delimited formulas in visible text
    text: str  # page text, formulas as LaTeX


def visible_math(markup: str | bytes | None) -> VisibleMath:
    """Rendered-math count and page text of an HTML page (str, or bytes already known to be UTF-8)."""
    if not markup or not (markup.strip() if isinstance(markup, str) else markup.strip()):
        return VisibleMath(0, "")
    root = parse_html(markup)
    for el in list(root.iter(*HIDDEN)):
        if el.tag == "script" and (el.get("type") or "").lower().startswith("math/tex"):
            continue  # MathJax 2 replaces the script by the rendered formula in place
        el.drop_tree()  # keeps the tail, which is visible text
    for el in list(root.iter()):
        if not isinstance(el.tag, str):  # comments and processing instructions: never shown
            el.drop_tree() if el.getparent() is not None else None
    n_rendered = 0
    for el in root.iter():
        if isinstance(el.tag, str) and _is_rendered_math(el):
            if not any(isinstance(a.tag, str) and _is_rendered_math(a) for a in el.iterancestors()):
                n_rendered += 1
    # text nodes outside the rendered-math elements (their TeX would be counted twice)
    raw = " ".join(t for t in root.xpath("//body//text()") if not _inside_rendered(t))
    n_delimited = count_delimited(raw)
    latexify(root)
    body = root.find("body")
    return VisibleMath(n_rendered + n_delimited, node_text(body if body is not None else root))


def _inside_rendered(text_node) -> bool:
    el = text_node.getparent()
    if el is None:
        return False
    if text_node.is_tail:  # a tail belongs to the parent's content, not to the element it follows
        el = el.getparent()
    while el is not None:
        if isinstance(el.tag, str) and _is_rendered_math(el):
            return True
        el = el.getparent()
    return False
