"""Math tag/symbol signals and filter, the domain allow-list."""

from __future__ import annotations

import pyarrow as pa
import pytest

from corpus.registry import stage_class
from manifests.errors import ConfigError


def _stage(name, options=None):
    return stage_class(name)(options or {})


def test_signal_counts_on_string_and_binary_html():
    from corpus.math.signals import MATH_TAGS, latex_words, math_symbols

    assert 40 <= len(MATH_TAGS) <= 60
    assert 300 <= len(math_symbols()) <= 400 and "∀" in math_symbols() and "α" not in math_symbols()
    assert "frac" in latex_words() and len(latex_words()) > 300
    page = '<script type="math/tex">x \\le y</script> for all x ∈ ℝ: ∀ε>0 \\frac{1}{2} \\int_0^1'
    table = pa.table({"html": [page, "<p>No math here, just $5 and 10% off.</p>", None]})
    result = _stage("math_signals_v1", {"field": "html"})(table)
    cols = result.table
    assert result.stats.counters == {"tags": 3, "rows_with_tags": 1, "symbols": 2, "rows_with_symbols": 1,
                                     "latex": 3, "rows_with_latex": 1}
    assert cols.column("math__n_tags").to_pylist() == [3, 0, 0]  # math/tex, \frac{, \int_
    assert cols.column("math__n_symbols").to_pylist() == [2, 0, 0]  # ∈ ∀ (ℝ is a letter)
    assert cols.column("math__n_latex").to_pylist() == [3, 0, 0]  # \le \frac \int
    binary = pa.table({"html": pa.array([page.encode()], pa.binary())})
    assert _stage("math_signals_v1", {"field": "html"})(binary).table.column("math__n_symbols").to_pylist() == [2]


def test_math_filter_modes_and_reasons():
    table = pa.table({"text": ["Let $x \\in A$ and $y \\le x$ with \\sum_i a_i \\cdot b ≤ ∞",
                               '<span class="katex">x</span> see KaTeX output',
                               "A plain page about cooking pasta for dinner."]})
    scored = _stage("math_signals_v1")(table).table
    assert _stage("math_filter_v1")(scored).rejects.column("drop_reason").to_pylist() == ["no_math"]
    symbols = _stage("math_filter_v1", {"require": "symbols"})(scored)
    assert symbols.table.column("text").to_pylist() == [table.column("text")[0].as_py()]
    assert _stage("math_filter_v1", {"require": "both"})(scored).stats.rows_out == 1  # \sum_ is a tag too
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
    result = _stage("math_domains_v1", {"domains_file": str(path)})(table)
    assert result.table.column("text").to_pylist() == ["a", "b", "f"]
    assert result.rejects.column("drop_reason").to_pylist() == ["domain_not_allowed", "domain_denied", "no_url"]
    path.write_text("math.stackexchange.com maybe\n")
    with pytest.raises(ConfigError, match="line 1"):
        _stage("math_domains_v1", {"domains_file": str(path)})


def test_bundled_domain_file_parses():
    from corpus.stages.math_domains import load_domain_labels
    from tests.conftest import SAMPLES

    labels = load_domain_labels(SAMPLES / "math" / "math_domains.txt")
    assert labels["mathoverflow.net"] == "allow" and labels["wordpress.com"] == "deny"
