"""Safety and profanity: LDNOOBW word counts, a URL/domain blocklist and a trained safety model
as score columns (`safety__*`), and a filter that applies thresholds to them.

- Word lists: "List of Dirty, Naughty, Obscene, and Otherwise Bad Words" (CC-BY-4.0, 28 languages,
  bundled in corpus/web/data/ldnoobw). The list follows the row's `lang` (web_lang_v1) when the
  column exists, else `default_language`. Matches are whole words / phrases (not inside a longer
  word), except in Japanese, Thai and Chinese, which do not separate words (as C4 did; a few
  very common subwords are allowed there, as in C4's code). `safety__badwords_ratio` is matches
  per whitespace-separated word, so one stray word in a long article does not condemn it.
- URLs: a domain blocklist from files (a listed domain blocks its subdomains); and
  `safety__url_badwords`, true when a word of the URL (split at non-alphanumerics) is on the list.
- `safety__score`: P(unsafe) of the linear model in corpus/web/safety_model.py (trained by the
  project on hh-rlhf red-team turns vs benign requests and web prose; see that file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import require
from ..registry import register
from ..stage import Filter, Scorer
from ..web import safety_model

DATA = Path(__file__).resolve().parents[1] / "web" / "data"
_UNSPACED = {"ja", "th", "zh"}
_ALLOW = {"ja": {"sm", "グロ", "女の子"}, "zh": {"性"}}
_URL_WORD = re.compile(r"[^0-9a-z]+")


def load_wordlist(folder: Path, lang: str) -> list[str]:
    path = folder / lang
    if not path.is_file():
        return []
    words = {w.strip().lower() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()}
    return sorted(words - _ALLOW.get(lang, set()), key=lambda w: (-len(w), w))


def wordlist_regex(words: list[str], lang: str) -> re.Pattern | None:
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in words)
    if lang in _UNSPACED:
        return re.compile(alternatives)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")


def load_domains(paths: list[str]) -> frozenset[str]:
    domains = set()
    for p in paths:
        for line in Path(p).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip().lower().lstrip(".")
            if line:
                domains.add(line)
    return frozenset(domains)


def domain_blocked(url: str | None, domains: frozenset[str]) -> bool:
    if not url or not domains:
        return False
    try:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return False
    parts = host.split(".")
    return any(".".join(parts[i:]) in domains for i in range(len(parts)))


@dataclass(frozen=True, kw_only=True)
class WebSafetyConfig:
    wordlist_dir: str = str(DATA / "ldnoobw")
    default_language: str = "en"  # the list for rows without a `lang` column / value
    blocklist_paths: list[str] = field(default_factory=lambda: [str(DATA / "url_blocklist.txt")])
    model_path: str | None = str(safety_model.MODEL_PATH)  # None: no model score (column of nulls)

    def __post_init__(self):
        require(Path(self.wordlist_dir).is_dir(), f"wordlist_dir {self.wordlist_dir} is not a folder of LDNOOBW lists")
        for p in self.blocklist_paths:
            require(Path(p).is_file(), f"blocklist_paths: {p} is not a file (one domain per line)")
        require(self.model_path is None or Path(self.model_path).is_file(),
                f"model_path {self.model_path} not found; train it with `python -m corpus.web.safety_model train --data FOLDER --out PATH`")


@register
class WebSafety(Scorer):
    """Adds `safety__badwords`, `safety__badwords_ratio`, `safety__url_blocked`,
    `safety__url_badwords` and `safety__score` (P(unsafe) of the trained model)."""

    name = "web_safety_v1"
    Config = WebSafetyConfig

    def __init__(self, config=None):
        super().__init__(config)
        self._regex: dict[str, re.Pattern | None] = {}
        self._domains = load_domains(self.config.blocklist_paths)
        en = load_wordlist(Path(self.config.wordlist_dir), "en")
        self._url_words = frozenset(w for w in en if " " not in w and w.isalnum())

    def _pattern(self, lang: str) -> re.Pattern | None:
        if lang not in self._regex:
            self._regex[lang] = wordlist_regex(load_wordlist(Path(self.config.wordlist_dir), lang), lang)
        return self._regex[lang]

    def score(self, table: pa.Table) -> dict[str, pa.Array]:
        cfg = self.config
        texts = [t or "" for t in table.column("text").to_pylist()]
        langs = (table.column("lang").to_pylist() if "lang" in table.schema.names else [None] * len(texts))
        counts = []
        for text, lang in zip(texts, langs):
            pattern = self._pattern(lang or cfg.default_language)
            counts.append(sum(1 for _ in pattern.finditer(text.lower())) if pattern is not None else 0)
        n_words = pc.fill_null(pc.list_value_length(pc.utf8_split_whitespace(pa.array(texts, pa.string()))), 0)
        counts_arr = np.array(counts, np.int32)
        ratio = counts_arr / np.maximum(n_words.to_numpy(zero_copy_only=False), 1)
        urls = table.column("url").to_pylist() if "url" in table.schema.names else [None] * len(texts)
        blocked = [domain_blocked(u, self._domains) for u in urls]
        url_bad = [bool(u) and any(w in self._url_words for w in _URL_WORD.split(u.lower())) for u in urls]
        model = (pa.array(safety_model.score(texts, Path(cfg.model_path)), pa.float32()) if cfg.model_path
                 else pa.nulls(len(texts), pa.float32()))
        return {"safety__badwords": pa.array(counts_arr), "safety__badwords_ratio": pa.array(ratio, pa.float32()),
                "safety__url_blocked": pa.array(blocked, pa.bool_()), "safety__url_badwords": pa.array(url_bad, pa.bool_()),
                "safety__score": model}

    def counters(self, table: pa.Table, columns: dict[str, pa.Array]) -> dict[str, int]:
        return {"pages_with_badwords": int(pc.sum(pc.greater(columns["safety__badwords"], 0)).as_py() or 0),
                "urls_blocked": int(pc.sum(columns["safety__url_blocked"]).as_py() or 0)}


@dataclass(frozen=True, kw_only=True)
class WebSafetyFilterConfig:
    drop_blocked_domains: bool = True
    drop_url_badwords: bool = True
    max_badwords_ratio: float | None = 0.005  # about one listed word per 200 words
    max_score: float | None = 0.9  # safety__score above this drops; None switches it off

    def __post_init__(self):
        require(self.max_badwords_ratio is None or self.max_badwords_ratio >= 0,
                f"max_badwords_ratio must be >= 0; got {self.max_badwords_ratio}")
        require(self.max_score is None or 0 <= self.max_score <= 1, f"max_score must be in [0, 1]; got {self.max_score}")


@register
class WebSafetyFilter(Filter):
    """Drops `blocked_domain`, `url_badwords`, `badwords_ratio`, `unsafe_score` (first that applies);
    needs web_safety_v1 before it. Null scores keep the row."""

    name = "web_safety_filter_v1"
    Config = WebSafetyFilterConfig

    def reasons(self, table: pa.Table) -> pa.Array:
        cfg = self.config
        checks = []
        if cfg.drop_blocked_domains:
            checks.append((table.column("safety__url_blocked"), "blocked_domain"))
        if cfg.drop_url_badwords:
            checks.append((table.column("safety__url_badwords"), "url_badwords"))
        if cfg.max_badwords_ratio is not None:
            checks.append((pc.greater(table.column("safety__badwords_ratio"), cfg.max_badwords_ratio), "badwords_ratio"))
        if cfg.max_score is not None:
            checks.append((pc.greater(table.column("safety__score"), cfg.max_score), "unsafe_score"))
        reasons = pa.nulls(table.num_rows, pa.string())
        for mask, reason in reversed(checks):  # the first check that fails names the reason
            reasons = pc.if_else(pc.fill_null(mask, False), pa.scalar(reason), reasons)
        return reasons
