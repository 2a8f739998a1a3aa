"""`cidermill data report`: the page's numbers equal the manifest's, samples per reason with their evidence,
kept samples, histograms, lineage and the diff; bounded reads; no external URL on the page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

from corpus.decontam.benchmarks import load_items
from corpus.executors import run_pipeline
from corpus.pipeline import load_pipeline
from manifests import Catalog
from manifests.errors import ConfigError
from manifests.main import main
from manifests.report import collect, write_report
from manifests.report.evidence import highlights, parse_detail

from ..conftest import write_jsonl


def _docs(c4_docs: list[dict]) -> tuple[list[dict], str]:
    """Real C4 pages, one of them carrying a GSM8K test question (to be dropped as contaminated)."""
    question = load_items("gsm8k", None)[0].segments[0]
    docs = [dict(d, id=f"c4-{i}") for i, d in enumerate(c4_docs[:120])]
    docs[7] = dict(docs[7], text=docs[7]["text"] + "\n\nHomework help: " + question)
    return docs, question


def build(tmp_path: Path, c4_docs, *, min_words: int = 100, name: str = "docs") -> tuple[Catalog, str, str]:
    docs, question = _docs(c4_docs)
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    write_jsonl(folder / "a.jsonl.gz", docs[:60], compress="gz")
    write_jsonl(folder / "b.jsonl.gz", docs[60:], compress="gz")
    pipeline = {
        "name": name,
        "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl.gz")], "options": {"id_field": "id"}},
        "output": {"root": str(tmp_path / "root"), "row_group_rows": 16},
        "executor": {"kind": "local", "workers": 1, "batch_rows": 50},
        "stages": [{"normalize_text_v1": {}}, {"text_stats_v1": {}},
                   {"text_length_v1": {"min_chars": 200, "min_words": min_words}},
                   {"decontaminate_v1": {"benchmarks": ["gsm8k"]}}],
    }
    out = run_pipeline(load_pipeline(pipeline), progress=False)
    return Catalog(tmp_path / "root"), f"{name}@{out.version.version_id}", question


class _Page(HTMLParser):
    """The parts of the page the tests read: funnel rows, reason sections and their samples, marks, links."""

    def __init__(self):
        super().__init__()
        self.funnel: dict[str, list[int]] = {}
        self.sections: dict[str, list[str]] = {}
        self.kept: list[str] = []
        self.marks: list[str] = []
        self.urls: list[str] = []
        self.hist_columns: list[str] = []
        self._stack: list[tuple[str, dict]] = []
        self._row: str | None = None
        self._section: str | None = None
        self._in_kept = False
        self._mark = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "tr" and "data-stage" in a:
            self._row = a["data-stage"]
            self.funnel[self._row] = []
        if tag == "section" and "reason" in a.get("class", ""):
            self._section = a["data-key"]
            self.sections[self._section] = []
        if tag == "div" and a.get("id") == "kept":
            self._in_kept = True
        if tag == "article":
            (self.kept if "kept" in a.get("class", "") else self.sections[self._section]).append(a["data-id"])
        if tag == "mark":
            self._mark = ""
        if tag == "div" and a.get("class") == "hist":
            self.hist_columns.append(a["data-column"])
        self._stack.append((tag, a))

    def handle_endtag(self, tag):
        if tag == "mark" and self._mark is not None:
            self.marks.append(self._mark)
            self._mark = None
        if tag == "tr":
            self._row = None
        self._stack.pop() if self._stack else None

    def handle_data(self, data):
        if self._mark is not None:
            self._mark += data
        if self._row and self._stack and self._stack[-1][0] == "td" and "n" in self._stack[-1][1].get("class", ""):
            if "rows-in" in self._stack[-1][1]["class"] or "rows-out" in self._stack[-1][1]["class"]:
                self.funnel[self._row].append(int(data.replace(",", "")))


def parse(page: Path) -> _Page:
    p = _Page()
    p.feed(page.read_text(encoding="utf-8"))
    return p


def test_the_page_shows_the_manifests_funnel_every_reason_with_samples_and_the_evidence(tmp_path, c4_docs):
    catalog, ref, question = build(tmp_path, c4_docs)
    version = catalog.resolve(ref)
    page = write_report(catalog, ref, tmp_path / "reports", samples=3)
    assert page.name == f"docs@{version.version_id[:12]}.html"
    p = parse(page)
    assert p.funnel == {s.name: [s.rows_in, s.rows_out] for s in version.manifest.stats}
    # every drop reason the manifest counts has a section, with min(3, count) samples of that reason
    counts = {f"{s.name}:{r}": n for s in version.manifest.stats for r, n in s.dropped.items()}
    assert counts["decontaminate_v1:contaminated:gsm8k"] == 1 and counts["text_length_v1:too_few_words"] > 3
    assert {k: len(v) for k, v in p.sections.items()} == {k: min(3, n) for k, n in counts.items()}
    rejects = catalog.resolve(f"docs.rejects@{version.manifest.extra['rejects_version']}").read()
    reason_of = {i: f"{s}:{r}" for i, s, r in zip(*(rejects.column(c).to_pylist()
                                                   for c in ("id", "drop_stage", "drop_reason")))}
    assert all(reason_of[i] == key for key, ids in p.sections.items() for i in ids)
    assert p.sections["decontaminate_v1:contaminated:gsm8k"] == ["c4-7"]
    # the decontamination n-gram is marked in the contaminated page's text; threshold drops show their value
    ngram = json.loads(rejects.filter(pa.compute.equal(rejects.column("id"), "c4-7")).column("drop_detail")[0]
                       .as_py())["ngram"]
    normalised = [(re.sub(r"[\W_]+", " ", m.lower()).strip(), m.lower()) for m in p.marks]
    assert any(norm == ngram and raw in question.lower() for norm, raw in normalised)
    assert len(p.kept) == 3 and set(p.kept) <= set(version.read(columns=["id"]).column("id").to_pylist())
    assert "n_chars(text)" in p.hist_columns
    assert [u for u in p.urls if re.match(r"[a-z]+:", u)] == []  # nothing on the page points outside it
    numbers = json.loads(page.with_suffix(".json").read_text())
    assert numbers["samples"] == {k: v for k, v in sorted(p.sections.items())}


def test_samples_are_seeded_and_reproducible(tmp_path, c4_docs):
    catalog, ref, _ = build(tmp_path, c4_docs)
    a = collect(catalog, ref, samples=2, seed=5)
    b = collect(catalog, ref, samples=2, seed=5)
    c = collect(catalog, ref, samples=2, seed=6)
    ids = lambda d: {k: [x.id for x in v] for k, v in d.dropped_samples.items()}  # noqa: E731
    assert ids(a) == ids(b) and [x.id for x in a.kept_samples] == [x.id for x in b.kept_samples]
    assert ids(a) != ids(c) or [x.id for x in a.kept_samples] != [x.id for x in c.kept_samples]


def test_vs_reports_rows_added_and_removed_by_reason_and_links_parents(tmp_path, c4_docs):
    catalog, base, _ = build(tmp_path, c4_docs, min_words=100)
    _, stricter, _ = build(tmp_path, c4_docs, min_words=200)
    data = collect(catalog, stricter, samples=2, vs=base)
    d = data.diff
    a, b = catalog.resolve(base), catalog.resolve(stricter)
    assert (d["rows_base"], d["rows"]) == (a.manifest.rows, b.manifest.rows)
    assert d["added"] == 0 and d["removed"] == a.manifest.rows - b.manifest.rows > 0
    assert d["removed_by_reason"] == {"text_length_v1:too_few_words": d["removed"]}
    page = parse(write_report(catalog, stricter, tmp_path / "r", samples=2, vs=base))
    assert page.sections  # the diff page keeps the rest of the report


def test_bad_arguments_are_one_line_errors(tmp_path, c4_docs, capsys):
    catalog, ref, _ = build(tmp_path, c4_docs)
    with pytest.raises(ConfigError, match="--samples must be >= 1; got 0"):
        write_report(catalog, ref, tmp_path / "r", samples=0)
    assert main(["data", "--root", str(tmp_path / "root"), "report", ref, "--out", str(tmp_path / "cli")]) == 0
    assert "report: " in capsys.readouterr().out and list((tmp_path / "cli").glob("docs@*.html"))


def test_evidence_marks_spans_windows_and_terms_without_overlap():
    text = "Call me at 555-0100 or mail bob@example.org; the word damn appears here, and DAMN again."
    detail = parse_detail(json.dumps({"spans": [[11, 19, "phone"], [28, 43, "email"]], "terms": ["damn"],
                                      "window": [0, 200]}))
    marks = [(text[s:e], label, kind) for s, e, label, kind in highlights(text, detail)]
    assert marks == [("555-0100", "phone", "span"), ("bob@example.org", "email", "span"),
                     ("damn", "damn", "term"), ("DAMN", "damn", "term")]  # the window holds marks: not marked
    assert highlights(text, {"window": {"start": 5, "end": 9}}) == [(5, 9, "window", "window")]
    assert parse_detail("not json") == {"detail": "not json"} and parse_detail(None) is None
    assert highlights("abc", {"spans": [[2, 99], [-1, 2], "x"]}) == [(2, 3, "span", "span")]
