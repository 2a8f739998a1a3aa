"""Math tag/symbol signals and filter, the domain allow-list."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus.registry import stage_class
from manifests.errors import ConfigError


def _stage(name, options=None):
    return stage_class(name)(options or {})


LOADER = ("<head><script src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js'></script>"
          "<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']]}};</script>"
          "<link rel='stylesheet' href='https://cdn.jsdelivr.net/npm/katex/dist/katex.min.css'></head>")


def _tags(*pages):
    table = pa.table({"html": list(pages)})
    return _stage("math_signals_v1", {"field": "html"})(table).table.column("math__n_tags").to_pylist()


def test_site_wide_loader_without_formulas_gives_no_tags():
    # a Q&A network / framework-docs page: MathJax and KaTeX loaded on every page, no formula on this one
    page = f"<html>{LOADER}<body><h1>How do I center a div?</h1><p>Use flexbox.</p></body></html>"
    assert _tags(page) == [0]
    with_math = f"<html>{LOADER}<body><p>Solve \\(x^2 = 2\\) for x.</p></body></html>"
    assert _tags(with_math) == [1]


def test_dollars_in_scripts_comments_and_prices_are_not_formulas():
    pages = [
        "<html><body><script>var a = $$('div'); var b = $$('.x');</script><p>Shop now.</p></body></html>",
        "<html><body><!-- $$ x^2 $$ template placeholder --><p>About us.</p></body></html>",
        "<html><body><p>Tickets cost $5 - $10, parking $$ or $$$ (expensive).</p></body></html>",
        "<html><body><p>Was $20, now $15 and free shipping over $50.</p></body></html>",
        "<html><body><style>.a:after{content:'$$x^2$$'}</style><p>Plain text.</p></body></html>",
    ]
    assert _tags(*pages) == [0, 0, 0, 0, 0]


def test_rendered_math_elements_and_delimited_tex_count_once_each():
    pages = [
        "<html><body><p>Let $x \\in A$ and $$\\int_0^1 f = 1.$$</p></body></html>",  # 2 delimited formulas
        '<html><body><p>We have <script type="math/tex">a^2+b^2=c^2</script>.</p></body></html>',
        # KaTeX: the visible HTML half and the MathML half with its TeX annotation are one formula
        '<html><body><p><span class="katex"><span class="katex-mathml"><math><semantics><mi>x</mi>'
        '<annotation encoding="application/x-tex">x</annotation></semantics></math></span>'
        '<span class="katex-html">x</span></span> is real.</p></body></html>',
        "<html><body><p><math><mi>y</mi><mo>=</mo><mn>2</mn></math> and \\[ y > 1 \\]</p></body></html>",
        '<html><body><p><img class="latex" src="https://s0.wp.com/latex.php?latex=n%5E2" alt="n^2"></p></body></html>',
    ]
    assert _tags(*pages) == [2, 1, 1, 2, 1]


def test_symbol_density_is_measured_on_the_page_text():
    # a large page (like a 700 KB Wikipedia article) whose text is math: raw-HTML density would be diluted
    markup = "".join(f'<div class="nav-item" data-x="{i:06d}"><script>var v{i}=1;</script></div>' for i in range(4000))
    text = "For all ε > 0 there is δ > 0 with |f(x) − f(y)| ≤ ε whenever ∀ x ∈ U, x ≠ y. " * 3
    page = f"<html><body>{markup}<p>{text}</p></body></html>"
    assert len(page) > 200_000
    cols = _stage("math_signals_v1", {"field": "html"})(pa.table({"html": [page]})).table
    assert cols.column("math__n_symbols").to_pylist() == [15]  # ≤ ∀ ∈ ≠ − (5 per sentence) x 3
    assert cols.column("math__symbol_density").to_pylist()[0] > 40  # 15 per ~250 characters of text
    assert _stage("math_filter_v1", {"require": "symbols"})(cols).stats.rows_out == 1


def test_binary_html_is_decoded_by_its_declared_charset():
    page = "<html><body><p>Poincaré proved that ∀ x … no: the conjecture.</p></body></html>"
    raw = page.replace("∀ x … no", "x").encode("cp1252")
    table = pa.table({"content": pa.array([raw], pa.binary()), "content_type": ["text/html; charset=ISO-8859-1"]})
    from corpus.stages.math_filters import signal_columns, SignalsConfig
    from corpus.math.visible import visible_math
    from corpus.math.html_math import decode_markup as to_str

    assert "Poincaré" in to_str(raw, "text/html; charset=ISO-8859-1")
    assert visible_math(to_str(raw, "text/html; charset=ISO-8859-1")).text == "Poincaré proved that x: the conjecture."
    cols = signal_columns(table, SignalsConfig(field="content"), "math_signals_v1")
    assert cols["math__n_symbols"].to_pylist() == [0]  # é is a letter (Latin-1 math signs are × ÷ ± ¬ ...)


def test_signal_counts_on_text_and_lists():
    from corpus.math.signals import MATH_TAGS, latex_words, math_symbols

    assert 300 <= len(math_symbols()) <= 400 and "∀" in math_symbols() and "α" not in math_symbols()
    assert "frac" in latex_words() and len(latex_words()) > 300 and len(MATH_TAGS) >= 40
    table = pa.table({"text": ["for all x ∈ ℝ: ∀ε>0 $\\frac{1}{2}$ \\int_0^1", "Just $5 and 10% off.", None]})
    result = _stage("math_signals_v1", {"field": "text", "markup": "text"})(table)
    cols = result.table
    assert result.stats.counters == {"tags": 1, "rows_with_tags": 1, "symbols": 2, "rows_with_symbols": 1,
                                     "latex": 2, "rows_with_latex": 1}
    assert cols.column("math__n_tags").to_pylist() == [1, 0, 0]  # $\frac{1}{2}$
    assert cols.column("math__n_symbols").to_pylist() == [2, 0, 0]  # ∈ ∀ (ℝ is a letter)
    assert cols.column("math__n_latex").to_pylist() == [2, 0, 0]  # \frac \int


def test_math_filter_modes_and_reasons():
    table = pa.table({"text": ["<p>Let $x \\in A$ and $y \\le x$ with \\sum_i a_i \\cdot b ≤ ∞</p>",
                               '<p><span class="katex">x</span> see KaTeX output</p>',
                               "<p>A plain page about cooking pasta for dinner.</p>"]})
    scored = _stage("math_signals_v1")(table).table
    assert _stage("math_filter_v1")(scored).rejects.column("drop_reason").to_pylist() == ["no_math"]
    symbols = _stage("math_filter_v1", {"require": "symbols"})(scored)
    assert symbols.table.column("text").to_pylist() == [table.column("text")[0].as_py()]
    assert _stage("math_filter_v1", {"require": "both"})(scored).stats.rows_out == 1
    assert _stage("math_filter_v1", {"require": "tags"})(table).stats.rows_out == 2  # scores itself
    with pytest.raises(ConfigError, match="min_tags must be >= 1"):
        _stage("math_filter_v1", {"min_tags": 0})


def test_domain_allow_list(tmp_path):
    from corpus.stages.math_domains import label_for, load_domain_labels

    path = tmp_path / "domains.txt"
    path.write_text("# labelled\nmath.stackexchange.com allow\nwikipedia.org   # encyclopedia\n"
                    "simple.wikipedia.org deny\nstackexchange.com deny\n")
    labels = load_domain_labels(path)
    assert label_for("math.stackexchange.com", labels) == "allow"
    assert label_for("cooking.stackexchange.com", labels) == "deny"
    assert label_for("en.wikipedia.org", labels) == "allow" and label_for("simple.wikipedia.org", labels) == "deny"
    table = pa.table({"text": list("abcdef"), "url": [
        "https://math.stackexchange.com/questions/1", "https://en.wikipedia.org/wiki/Group", "https://example.com/x",
        "https://simple.wikipedia.org/wiki/Cat", None, "MATH.StackExchange.com/q/2"]})
    result = _stage("math_domains_v1", {"domains_file": str(path), "mode": "gate"})(table)
    assert result.table.column("text").to_pylist() == ["a", "b", "f"]
    assert result.rejects.column("drop_reason").to_pylist() == ["domain_not_allowed", "domain_denied", "no_url"]
    path.write_text("math.stackexchange.com maybe\n")
    with pytest.raises(ConfigError, match="line 1"):
        _stage("math_domains_v1", {"domains_file": str(path)})


def test_domains_boost_instead_of_gating(tmp_path):
    path = tmp_path / "domains.txt"
    path.write_text("math.stackexchange.com\nwikipedia.org allow\nsimple.wikipedia.org neutral\ngithub.com deny\n")
    urls = ["https://math.stackexchange.com/q/1", "https://en.wikipedia.org/wiki/Group", "https://blog.example.com/p",
            "https://blog.example.com/q", "https://github.com/x/y", "https://simple.wikipedia.org/wiki/Cat", None]
    scores = [0.3, 0.1, 0.7, 0.4, 0.99, 0.3, 0.6]
    table = pa.table({"url": urls, "math__classifier_score": pa.array(scores, pa.float32())})
    result = _stage("math_domains_v1", {"domains_file": str(path)})(table)  # boost: 0.2 allowed, 0.5 others
    # an unlisted blog above 0.5 is kept (the old allow-list dropped it); a denied domain drops at any score
    assert result.table.column("url").to_pylist() == [urls[0], urls[2], None]
    assert result.rejects.column("drop_reason").to_pylist() == ["low_math_score", "low_math_score",
                                                                 "domain_denied", "low_math_score"]
    with pytest.raises(ConfigError, match="math__classifier_score"):
        _stage("math_domains_v1", {"domains_file": str(path)})(pa.table({"url": urls}))
    with pytest.raises(ConfigError, match="allowed_min_score <= min_score"):
        _stage("math_domains_v1", {"domains_file": str(path), "min_score": 0.1})


def test_shipped_domain_list_parses_with_its_criterion():
    from corpus.stages.math_domains import DEFAULT_DOMAINS, label_for, load_domain_labels

    labels = load_domain_labels(DEFAULT_DOMAINS)
    assert sum(v == "allow" for v in labels.values()) >= 120
    assert label_for("math.stackexchange.com", labels) == "allow"
    assert label_for("cooking.stackexchange.com", labels) == "neutral"
    assert label_for("someone.wordpress.com", labels) == "neutral" and label_for("github.com", labels) == "deny"
    assert "Criterion" in (DEFAULT_DOMAINS.parent / "SOURCE.txt").read_text()


def test_bundled_domain_file_parses():
    from corpus.stages.math_domains import load_domain_labels
    from tests.conftest import SAMPLES

    labels = load_domain_labels(SAMPLES / "math" / "math_domains.txt")
    assert labels["mathoverflow.net"] == "allow" and labels["wordpress.com"] == "deny"


def test_separator_dots_currency_and_legal_sections_are_not_math_symbols():
    # a wiki page with `·` between menu items, a German law page with § signs, prices in £/¥
    text = "Home · News · Spells · Games " * 10 + "Nach § 823 BGB und § 1004 BGB " * 5 + "£5 or ¥600"
    cols = _stage("math_signals_v1", {"field": "text", "markup": "text"})(pa.table({"text": [text]})).table
    assert cols.column("math__n_symbols").to_pylist() == [0]
    assert _stage("math_filter_v1")(cols).stats.rows_out == 0
    assert _stage("math_signals_v1", {"field": "text", "markup": "text"})(
        pa.table({"text": ["3 × 4 ± 1 ÷ 2, ¬p"]})).table.column("math__n_symbols").to_pylist() == [4]


def test_real_pages_loader_and_sql_dollars_give_no_tags_real_math_does(shared_data):
    # Readability test pages, labelled by reading: quanta-1 loads MathJax site-wide for a story without
    # formulas; toc-missing has PostgreSQL `$$` function bodies; mathjax and wikipedia-3 render formulas
    pages = shared_data / "web_extraction" / "mozilla_readability" / "test-pages"
    names = ["quanta-1", "toc-missing", "mathjax", "wikipedia-3"]
    raw = [(pages / n / "source.html").read_bytes() for n in names]
    assert b"MathJax" in raw[0] and b"$$" in raw[1]
    table = pa.table({"html": pa.array(raw, pa.binary())})
    tags = _stage("math_signals_v1", {"field": "html"})(table).table.column("math__n_tags").to_pylist()
    assert tags[:2] == [0, 0] and min(tags[2:]) >= 5, tags


def test_macro_only_spans_are_not_formulas():
    # sites set up their notation on every page: a \(...\) block of \newcommand, a $\def...$, a MathJax
    # math/tex script of \DeclareMathOperator; none of them shows a formula to the reader
    macros = ("<p class='hidden'>\\(\\newcommand{\\R}{\\mathbb{R}}\\renewcommand*{\\vec}[1]{\\mathbf{#1}}\\)</p>"
              "<p>$\\def\\eps{\\varepsilon}\\def\\f#1#2{\\frac{#1}{#2}}$</p>"
              '<script type="math/tex">\\DeclareMathOperator*{\\argmin}{arg\\,min} \\let\\a=\\alpha</script>')
    pages = [f"<html><body>{macros}<p>Installation: run pip install.</p></body></html>",
             # the same set-up followed by real formulas that use the macros: those two count
             f"<html><body>{macros}<p>For \\(x \\in \\R\\) and $\\eps > 0$ we have ...</p></body></html>",
             # a definition followed by math in the same span: the span counts once
             "<html><body><p>\\(\\newcommand{\\N}{\\mathbb{N}} n \\in \\N\\)</p></body></html>"]
    assert _tags(*pages) == [0, 2, 1]
    from corpus.math.visible import strip_macro_definitions

    assert strip_macro_definitions("\\newcommand{\\R}[1][x]{\\mathbb{R}^{#1}} y^2").strip() == "y^2"
    assert strip_macro_definitions("\\def\\f#1{\\frac{#1}{2}}\\let\\b\\beta").strip() == ""


def test_min_tag_density_needs_formulas_per_page_text():
    # one formula in ~4,000 characters of code/prose is a stray (0.25 per 1,000 characters); two formulas
    # in ~400 characters is a math page (5 per 1,000); min_tags alone keeps both
    prose = "<p>" + "Configure the server, restart it and check the log files for errors. " * 57 + "</p>"
    stray = f"<html><body>{prose}<p>Timeouts grow as \\(2^k\\).</p></body></html>"
    short = ("<html><body><p>Let \\(f(x) = x^2\\). Its derivative is \\(f'(x) = 2x\\), positive for every "
             "positive x, so f increases there; on the negative half-line it decreases, and its minimum is "
             "at zero, where the derivative vanishes. The second derivative is the constant two.</p></body></html>")
    scored = _stage("math_signals_v1", {"field": "html"})(pa.table({"html": [stray, short]})).table
    assert scored.column("math__n_tags").to_pylist() == [1, 2]
    density = scored.column("math__tag_density").to_pylist()
    from corpus.math.visible import visible_math

    text_chars = [len(visible_math(p).text) for p in (stray, short)]
    assert 3_900 < text_chars[0] < 4_200 and text_chars[1] < 400
    assert density == pytest.approx([1000 / text_chars[0], 2000 / text_chars[1]], rel=1e-5)
    keep = _stage("math_filter_v1", {"require": "tags"})(scored)
    assert keep.stats.rows_out == 2
    dense = _stage("math_filter_v1", {"require": "tags", "min_tag_density": 0.5})(scored)
    assert dense.table.column("html").to_pylist() == [short]
    assert dense.rejects.column("drop_reason").to_pylist() == ["no_math"]
    with pytest.raises(ConfigError, match="min_tag_density must be >= 0"):
        _stage("math_filter_v1", {"min_tag_density": -1})


def test_formula_rich_pages_get_the_lower_classifier_threshold(tmp_path):
    path = tmp_path / "domains.txt"
    path.write_text("math.stackexchange.com\ngithub.com deny\n")
    options = {"domains_file": str(path), "min_score": 0.45, "allowed_min_score": 0.2, "formula_min_score": 0.3,
               "formula_min_tags": 5, "formula_min_tag_density": 1.0}
    table = pa.table({
        "url": ["https://docs.example.org/a", "https://docs.example.org/b", "https://docs.example.org/c",
                "https://docs.example.org/d", "https://github.com/x", "https://math.stackexchange.com/q/1", None],
        "math__classifier_score": pa.array([0.35, 0.35, 0.35, 0.25, 0.9, 0.25, 0.5], pa.float32()),
        # a: 12 formulas at 2/kB (formula-rich); b: 12 formulas at 0.6/kB (diluted); c: 4 formulas at 3/kB
        "math__n_tags": pa.array([12, 12, 4, 40, 40, 0, 0], pa.int32()),
        "math__tag_density": pa.array([2.0, 0.6, 3.0, 5.0, 5.0, 0.0, 0.0], pa.float32())})
    result = _stage("math_domains_v1", options)(table)
    # a passes at 0.35 >= 0.3; b and c are not formula-rich (0.35 < 0.45); d is rich but under 0.3;
    # a denied domain drops whatever its formulas; an allowed domain keeps its own 0.2
    assert result.table.column("url").to_pylist() == ["https://docs.example.org/a", "https://math.stackexchange.com/q/1",
                                                      None]
    assert result.rejects.column("drop_reason").to_pylist() == ["low_math_score", "low_math_score", "low_math_score",
                                                                "domain_denied"]
    off = _stage("math_domains_v1", {k: v for k, v in options.items() if not k.startswith("formula")})(table)
    assert off.stats.rows_out == 2  # without the option, a needs 0.45
    with pytest.raises(ConfigError, match="formula_min_score needs math__n_tags, math__tag_density"):
        _stage("math_domains_v1", options)(table.drop(["math__n_tags", "math__tag_density"]))
    with pytest.raises(ConfigError, match="formula_min_score <= min_score"):
        _stage("math_domains_v1", {**options, "formula_min_score": 0.6})
