"""configs/web.yaml validates; the web-filtered demo runs end to end on the bundled WARCs."""

from __future__ import annotations

import pytest

from corpus.pipeline import load_pipeline

from .conftest import REPO

WEB_STAGES = ["http_response_v1", "web_extract_v1", "normalize_text_v1", "web_lang_v1", "lang_filter_v1",
              "gopher_repetition_v1", "gopher_quality_v1", "c4_quality_v1", "fineweb_quality_v1",
              "web_safety_v2", "web_safety_filter_v2", "pii_v3"]


def test_default_web_config_validates_with_stages_in_order():
    pipeline = load_pipeline(str(REPO / "configs" / "web.yaml"))
    assert [s.name for s in pipeline.stages][: len(WEB_STAGES)] == WEB_STAGES
    globals_ = ["url_dedup_v1", "exact_dedup_v1", "minhash_dedup_v1", "decontaminate_v1"]
    assert [s.name for s in pipeline.stages][len(WEB_STAGES):] == globals_
    assert [p[0].name for p in pipeline.passes()[1:]] == globals_  # each global stage starts a pass


@pytest.mark.slow
def test_web_filtered_demo_runs_and_keeps_clean_english_pages(tmp_path):
    from corpus.executors import run_pipeline

    pipeline = load_pipeline(str(REPO / "configs" / "demo" / "30-web-filtered.yaml"),
                             overrides={"output.root": str(tmp_path)})
    assert pipeline.name == "web-filtered"
    outcome = run_pipeline(pipeline, progress=False)
    table = outcome.version.read()
    stats = {s.name: s for s in outcome.stats}
    assert stats["web_extract_v1"].rows_in == 53
    assert 10 <= table.num_rows < 53
    assert set(table.column("lang").to_pylist()) == {"en"}
    assert {"text", "title", "url", "date", "lang_score", "safety__score"} <= set(table.schema.names)
    assert stats["lang_filter_v1"].dropped.get("wrong_language", 0) >= 5
    assert sum(stats[n].n_dropped for n in ("gopher_repetition_v1", "gopher_quality_v1",
                                            "c4_quality_v1", "fineweb_quality_v1")) >= 3
    assert stats["pii_v3"].counters.get("pii_email", 0) >= 1
    assert not any("@" in t and "<EMAIL>" not in t and "mailto" in t for t in table.column("text").to_pylist())
