"""Keep the LaTeX of a page's formulas when turning HTML into text.

Pages carry math as MathJax sources (`<script type="math/tex">`), as MathML (`<math>`, with a TeX
annotation when KaTeX or MathJax 3 rendered it), or as images with LaTeX alt text. Rendered
copies (MathJax preview spans, KaTeX's HTML half) would otherwise show up as garbled symbols next
to the source, so they are removed. MathML without a TeX annotation goes through the mmltex XSLT
stylesheets (Vasil Yaroshevich's XSLT MathML Library, shipped in corpus/math/data/mmltex) with lxml.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import re
from pathlib import Path

from lxml import etree, html


log = logging.getLogger("cidermill.math")

MATHML_NS = "http://www.w3.org/1998/Math/MathML"
BLOCK_TAGS = {"p", "div", "li", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table",
              "section", "article", "header", "footer", "dd", "dt", "hr", "br", "figure", "figcaption"}
# rendered copies of a formula whose source is kept elsewhere (a script, a MathML annotation)
RENDERED_CLASSES = {"MathJax_Preview", "MathJax_Display", "MathJax", "MathJax_SVG", "MathJax_CHTML",
                    "MathJax_SVG_Display", "MJX_Assistive_MathML", "katex-html"}


MMLTEX = Path(__file__).resolve().parent / "data" / "mmltex" / "mmltex.xsl"


@functools.lru_cache(maxsize=1)
def _mmltex() -> etree.XSLT:
    return etree.XSLT(etree.parse(str(MMLTEX)))  # shipped with the package: missing is a broken install


# Fallbacks are counted, not silent: a stage runs its batch inside `count_fallbacks()` and adds the
# counts to its stats counters (corpus/stages/math_filters.py CountsMathFallbacks), so they show in the manifest.
_FALLBACKS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("html_math_fallbacks", default=None)


@contextlib.contextmanager
def count_fallbacks():
    counts: dict[str, int] = {}
    token = _FALLBACKS.set(counts)
    try:
        yield counts
    finally:
        _FALLBACKS.reset(token)


def _count_fallback(kind: str) -> None:
    counts = _FALLBACKS.get()
    if counts is not None:
        counts[kind] = counts.get(kind, 0) + 1


def mathml_to_latex(math_el) -> str:
    for ann in math_el.iter("annotation", f"{{{MATHML_NS}}}annotation"):
        if (ann.get("encoding") or "").lower() in ("application/x-tex", "tex", "latex"):
            return (ann.text or "").strip()
    markup = etree.tostring(math_el, encoding="unicode", with_tail=False)  # the tail is page text, not MathML
    markup = re.sub(r"^<math\b(?![^>]*xmlns=)", f'<math xmlns="{MATHML_NS}"', markup)
    try:
        return str(_mmltex()(etree.fromstring(markup))).strip().strip("$").strip()
    except (etree.XMLSyntaxError, etree.XSLTApplyError):
        _count_fallback("mathml_text_fallback")  # markup the stylesheet cannot take: the MathML's text
    return " ".join("".join(math_el.itertext()).split())


def _replace(el, text: str) -> None:
    """Replace `el` by a text node holding `text` (kept in document order with its tail)."""
    parent = el.getparent()
    if parent is None:
        return
    combined = text + (el.tail or "")
    prev = el.getprevious()
    if prev is not None:
        prev.tail = (prev.tail or "") + combined
    else:
        parent.text = (parent.text or "") + combined
    parent.remove(el)


def latexify(root) -> None:
    """Rewrite formulas inside `root` (an lxml element) to `$...$` / `$$...$$` text, in place."""
    for el in list(root.iter()):
        if not isinstance(el.tag, str) or el.getparent() is None:
            continue
        if el.tag == "mjx-math":  # MathJax 3's rendering; its <mjx-assistive-mml><math> copy stays
            el.drop_tree()
        elif el.tag != "mjx-container" and RENDERED_CLASSES & set((el.get("class") or "").split()):
            el.drop_tree()
    for el in list(root.iter("script")):
        kind = (el.get("type") or "").lower()
        if kind.startswith("math/tex"):
            tex = (el.text or "").strip()
            tex = _LITERAL_BR.sub(" ", tex)  # forum software writes a formula's line breaks into the script
            _replace(el, f"$${tex}$$" if "mode=display" in kind else f"${tex}$")
    for el in list(root.iter("math", f"{{{MATHML_NS}}}math")):
        tex = mathml_to_latex(el)
        _replace(el, f"$${tex}$$" if el.get("display") == "block" else f"${tex}$")
    for el in list(root.iter("img")):
        alt, src = (el.get("alt") or "").strip(), el.get("src") or ""
        cls = el.get("class") or ""
        if alt and ("tex" in cls or "math" in cls.split() or "latex" in src or "codecogs" in src):
            _replace(el, f"${alt}$")


_FORMULA = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|\$[^$\n]+?\$", re.S)
_LITERAL_BR = re.compile(r"<br\s*/?>|&lt;br\s*/?&gt;", re.I)


def tidy_formulas(text: str) -> str:
    """Inside `$...$`, `$$...$$`, `\\(...\\)` and `\\[...\\]`: a literal `<br />` (forum software escapes
    the line breaks of a multi-line formula) becomes a space, and blank lines (which end a TeX formula)
    collapse to one line break."""
    if "$" not in text and "\\" not in text:
        return text

    def fix(m: re.Match) -> str:
        return re.sub(r"\n\s*\n", "\n", _LITERAL_BR.sub(" ", m.group(0)))

    return _FORMULA.sub(fix, text)


_SPACE = re.compile(r"[\s\x00-\x08\x0b\x0c\x0e-\x1f]+")


def node_text(el) -> str:
    """Text of an element with line breaks between blocks (lxml's text_content() runs them together)."""
    for sub in el.iter():  # source line breaks are white space (a `<br />` + newline is one break), except in <pre>
        if not isinstance(sub.tag, str) or sub.tag == "pre" or any(a.tag == "pre" for a in sub.iterancestors()):
            continue
        if sub.text:  # control characters (which lxml refuses to set) go with the white space
            sub.text = _SPACE.sub(" ", sub.text)
        if sub.tail and (sub.getparent() is None or sub.getparent().tag != "pre"):
            sub.tail = _SPACE.sub(" ", sub.tail)
    for sub in el.iter():
        if isinstance(sub.tag, str) and sub.tag in BLOCK_TAGS:
            sub.tail = "\n" + (sub.tail or "")
            if sub.tag in ("p", "pre", "blockquote", "li") or sub.tag.startswith("h"):
                sub.text = "\n" + (sub.text or "")
    text = el.text_content()
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def decode_markup(value: str | bytes | None, content_type: str | None = None) -> str:
    """A row's HTML as str. Bytes go through the web pipeline's decoder (corpus/web/charset.py: BOM, the
    HTTP header's charset, `<meta>`, strict UTF-8, detection), the one decoding path for every HTML reader."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        from ..web.charset import decode_html

        return decode_html(bytes(value), content_type)[0]
    return value


def parse_html(markup: str | bytes):
    if isinstance(markup, bytes):
        return html.document_fromstring(markup)
    return html.document_fromstring(markup.encode("utf-8"), parser=html.HTMLParser(encoding="utf-8"))


def _is_navigation(el) -> bool:
    """Site navigation by HTML semantics: <nav>, role=navigation, and <aside> other than notes (sidebars,
    menus; an <aside role="note"> is a footnote and stays). A site's menu otherwise fills the first
    thousands of characters of a documentation page and the classifier reads the menu, not the page."""
    role = (el.get("role") or "").lower()
    return el.tag == "nav" or role == "navigation" or (el.tag == "aside" and role != "note")


def page_text(markup: str | bytes) -> str:
    """Whole-page text with formulas as LaTeX (scripts, styles and site navigation removed)."""
    root = parse_html(markup)
    latexify(root)
    for el in list(root.iter("script", "style", "noscript", "template")):
        el.drop_tree()
    for el in [el for el in root.iter("nav", "aside", "div", "ul", "section") if _is_navigation(el)]:
        if el.getparent() is not None:
            el.drop_tree()
    body = root.find("body")
    return tidy_formulas(node_text(body if body is not None else root))
