"""Issue 25 on real pages: the shipped Debian documentation set (evals/data/math_pages), the retrained
classifier on real hard negatives, Sphinx formula images, navigation left out of the page text, and
configs/math.yaml's keep decision on the dev and held-out halves."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from corpus.registry import stage_class
from manifests.errors import ConfigError


def _debian(split=None, *, include_ambiguous=False):
    from evals.data.math_labelled import debian_rows

    return [r for r in debian_rows(include_ambiguous=include_ambiguous) if split is None or r["split"] == split]


def test_labels_name_a_reason_and_split_by_package():
    from evals.data.build_math_pages import read_labels

    rows = read_labels()
    assert len(rows) == 611 and len({r["id"] for r in rows}) == 611
    assert len({r["package"] for r in rows}) == 31
    assert all(r["reason"].strip() for r in rows)
    split_of = {}
    for r in rows:
        assert split_of.setdefault(r["package"], r["split"]) == r["split"], r["package"]  # one package, one half
    labels = Counter((r["split"], r["label"]) for r in rows)
    assert labels[("dev", "1")] >= 45 and labels[("heldout", "1")] >= 25 and labels[("heldout", "0")] >= 250
    pages = _debian(include_ambiguous=True)
    assert [p["id"] for p in pages] == [f"debian-{r['id']}" for r in rows]
    # HTML documents, except the werkzeug examples' raw Jinja/Genshi templates (drawn at random like the rest)
    not_documents = [p["id"] for p in pages if not p["html"].lstrip().lower().startswith(("<!doctype", "<html", "<?xml"))]
    assert len(not_documents) == 6 and all("werkzeug:examples/" in i and "/templates/" in i for i in not_documents)


def test_bad_labels_file_names_the_record(tmp_path):
    from evals.data.build_math_pages import read_labels

    bad = tmp_path / "labels.tsv"
    bad.write_text("# header\na\tpkg\t1\t/p\tdev\tmaybe\twhy\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"record 2 \(a\).*0/1/ambiguous"):
        read_labels(bad)


def test_sphinx_formula_images_count_and_become_latex():
    # Sphinx's imgmath (sympy's Debian docs): <img class="math" alt="TeX">; a logo image is not a formula
    page = ('<html><body><p>The integral <img class="math" src="../_images/math/2e6d.png" alt="\\int f\\,dx"/> '
            'of <img class="math" src="../_images/math/95aa.png" alt="f(x)"/>.</p>'
            '<img class="sidebar-logo" src="logo.png" alt="Logo"/></body></html>')
    cols = stage_class("math_signals_v1")({"field": "html"})(pa.table({"html": [page]})).table
    assert cols.column("math__n_tags").to_pylist() == [2]
    from corpus.math.html_math import page_text

    text = page_text(page)
    assert "The integral $\\int f\\,dx$ of $f(x)$." in text


def test_page_text_leaves_out_site_navigation_but_keeps_footnotes():
    from corpus.math.html_math import page_text

    page = ('<html><body><nav><a href="/">Home</a><a href="/api">API reference</a></nav>'
            '<div role="navigation"><ul><li>Tutorials</li></ul></div>'
            '<aside class="sidebar-drawer"><div class="sidebar-tree">Installation Contributing</div></aside>'
            '<main><h1>Orthogonal polynomials</h1><p>They satisfy \\(\\int P_n P_m w = 0\\).</p>'
            '<aside class="footnote" role="note">[1] Szego, 1939.</aside></main></body></html>')
    text = page_text(page)
    assert "Orthogonal polynomials" in text and "\\int P_n P_m w = 0" in text and "Szego" in text
    for menu in ("Home", "API reference", "Tutorials", "Installation"):
        assert menu not in text


def test_training_pages_with_a_bad_record_name_file_and_record(tmp_path):
    from corpus.math.classifier import read_pages

    path = tmp_path / "pages.jsonl"
    path.write_text('{"text": "x", "label": 1, "source": "a"}\n{"text": "y", "label": "math"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pages.jsonl: record 2: needs text .* label 0 or 1"):
        read_pages(path)


def test_classifier_is_not_fooled_by_code_tables_and_physics():
    """The issue's classifier failures (code, number tables, a few formulas in physics pages) on real pages
    of the held-out packages, which the classifier never saw and the threshold was not tuned on."""
    from corpus.math.classifier import load_model, predict
    from corpus.math.html_math import page_text
    from evals.data.math_filter import _config_threshold

    threshold = _config_threshold()
    rows = _debian("heldout")
    scores = predict(load_model(), [page_text(r["html"])[:20000] for r in rows])
    by_origin = {}
    for r, s in zip(rows, scores):
        by_origin.setdefault((r["origin"], r["label"]), []).append(float(s))
    # code and API prose (python3.11, flask): the old model put 16 of 50 at p >= 0.5
    code = by_origin[("debian/python3.11-doc", 0)] + by_origin[("debian/python-flask-doc", 0)]
    assert sum(s >= threshold for s in code) <= 2, sorted(code)[-5:]
    # a math library's Java API pages (the vocabulary of math, no formulas)
    api = by_origin[("debian/libcommons-math3-java-doc", 0)]
    assert sum(s >= threshold for s in api) <= 2, sorted(api)[-5:]
    math = [s for (o, lab), ss in by_origin.items() if lab == 1 for s in ss]
    assert sum(s >= threshold for s in math) >= 0.6 * len(math)


@pytest.mark.slow
def test_full_config_keep_on_the_shipped_real_pages_dev_and_held_out():
    """configs/math.yaml's keep decision on the shipped Debian pages (567 labelled, 44 ambiguous left out);
    the whole real-page eval (`cidermill eval data math_filter --real`, 1,427 pages) takes a few minutes on 2 cores."""
    from evals.data.math_filter import _prf, predictions, _config_threshold

    rows = _debian()
    preds = predictions(rows, _config_threshold())
    keep = preds["full config keep (configs/math.yaml)"]
    result = {}
    for split in ("dev", "heldout"):
        idx = [i for i, r in enumerate(rows) if r["split"] == split]
        result[split] = _prf([keep[i] for i in idx], [rows[i]["label"] for i in idx])
    assert result["dev"]["precision"] >= 0.9 and result["dev"]["recall"] >= 0.8, result
    assert result["heldout"]["tp"] + result["heldout"]["fn"] == 29  # reported, not tuned on
    # visible tags never fire on the 9 pages that load MathJax site-wide without a formula
    tags = next(v for k, v in preds.items() if k.startswith("tags (visible formulas"))
    loader_only = [i for i, r in enumerate(rows) if "mathjax" in r["html"].lower() and r["label"] == 0
                   and "notebooks/generated" in r["id"]]
    assert loader_only and not any(tags[i] for i in loader_only)
