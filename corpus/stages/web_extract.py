"""WARC rows (`content` bytes, `content_type`, `url`) -> `text`, `title`, `date`, `charset`.

Cheap decisions first, so that the extractor only sees pages worth its time: an empty payload
(`empty_payload`), a page over `max_html_bytes` (`html_too_large`), bytes that do not look like
markup (`not_html`). Then charset decoding (corpus/web/charset.py) and extraction under a
per-record time limit (`extract_timeout`); a page the extractor chokes on is `extract_error`, one
with no text left is `empty_text`. `url` is kept; the raw `content` column is removed unless
`keep_content`. Counters: pages per extractor used (`blocks`, `blocks+trafilatura` where trafilatura's
second opinion added lines, `posts` where the page was read as a thread's post bodies
(corpus/web/threads.py), `trafilatura`, `resiliparse`, `blocks_other_language` where `languages` is set
and the page's text is in another language, so the costly steps were skipped; `_forum` when the URL or
generator names a forum, comments kept) and per charset source. A byte-identical copy of a page this
worker has extracted already is not extracted again (corpus/web/payload_cache.py: the same page, counted
the same way).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from manifests.config import require
from ..registry import register
from ..stage import Mapper, with_columns
from ..web.extract import ExtractTimeout, extract_page, time_limit
from ..web.payload_cache import PAGES
from ..web.threads import ThreadRules

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class WebExtractConfig:
    extractor: Literal["hybrid", "resiliparse", "trafilatura"] = "hybrid"
    fallback_below_chars: int = 800  # hybrid: trafilatura decides when less confident main text is left
    # skip trafilatura's own fallback extractors (readability-lxml, jusText); None: skipped in hybrid mode's
    # fallback (as good on both development sets, and faster), kept when `extractor: trafilatura`
    trafilatura_fast: bool | None = None
    favor_precision: bool = False  # trafilatura's precision mode
    # hybrid: when this many headings inside the kept text lost their text (0 = never), trafilatura reads
    # the page too and the lines it has inside our text, and we lack, are added (about 5% of pages)
    second_opinion_headings: int = 2
    second_opinion_max_chars: int = 500_000  # no second opinion on larger pages (its cost grows with the page)
    # hybrid: a page whose running text is a list of dated posts (a forum thread) is read as its post bodies
    read_threads: bool = True
    # hybrid: when set (the pipeline's language filter's languages), a page whose resiliparse text fastText
    # (as web_lang_v1 reads it) puts in another language with a score >= other_language_min_score keeps that
    # text and skips the thread analysis and trafilatura (extractor `blocks_other_language`): the language
    # filter drops it anyway, and those steps are most of extraction's cost on the pages that reach them
    languages: tuple[str, ...] | None = None
    other_language_min_score: float = 0.9  # set a priori, above the language filter's 0.65; not tuned
    timeout_s: float = 5.0  # per record; 0 = no limit
    max_html_bytes: int = 4 << 20
    keep_content: bool = False

    def __post_init__(self):
        require(self.timeout_s >= 0, f"timeout_s must be >= 0 (0 = no limit); got {self.timeout_s}")
        require(self.max_html_bytes > 0, f"max_html_bytes must be > 0; got {self.max_html_bytes}")
        require(self.fallback_below_chars >= 0, f"fallback_below_chars must be >= 0; got {self.fallback_below_chars}")
        require(self.second_opinion_headings >= 0,
                f"second_opinion_headings must be >= 0 (0 = never); got {self.second_opinion_headings}")
        require(self.second_opinion_max_chars >= 0,
                f"second_opinion_max_chars must be >= 0; got {self.second_opinion_max_chars}")
        require(self.languages is None or bool(self.languages),
                "languages must list at least one code, e.g. [en] (or be left out: every page extracted in full)")
        if self.languages is not None:  # a tuple: the settings are part of the payload cache's key
            object.__setattr__(self, "languages", tuple(self.languages))
        require(0.0 < self.other_language_min_score <= 1.0,
                f"other_language_min_score must be in (0, 1]; got {self.other_language_min_score}")


def _head(content: bytes, limit: int = 80) -> str:
    """The payload's first bytes, as text, for the evidence of a `not_html` drop."""
    return content[:limit].decode("utf-8", errors="replace")


def _looks_like_markup(content: bytes) -> bool:
    return b"<" in content[:2048]


def language_gate(languages: tuple[str, ...], min_score: float):
    """text -> whether fastText's best language for it (web_lang_v1's reading) is not one of `languages`,
    with at least `min_score`."""
    from .web_lang import WebLangConfig, identify

    wanted, max_chars = frozenset(languages), WebLangConfig().max_chars

    def other(text: str) -> bool:
        lang, score = identify(text, max_chars)
        return lang is not None and lang not in wanted and score >= min_score

    return other


@register
class WebExtract(Mapper):
    """HTML payload -> `text`, `title`, `date`, `charset`; drops pages without text, with a reason."""

    name = "web_extract_v1"
    Config = WebExtractConfig

    def reads(self) -> tuple[str, ...]:
        return ("content",)

    def transform(self, table: pa.Table):
        cfg = self.config
        n = table.num_rows
        contents = table.column("content").to_pylist()
        types = table.column("content_type").to_pylist() if "content_type" in table.schema.names else [None] * n
        urls = table.column("url").to_pylist() if "url" in table.schema.names else [None] * n
        texts, titles, dates, charsets = [None] * n, [None] * n, [None] * n, [None] * n
        reasons: list[str | None] = [None] * n
        found: list[dict | None] = [None] * n  # each drop's evidence (drop_detail)
        counters: Counter = Counter()
        if cfg.extractor != "resiliparse":
            import trafilatura  # noqa: F401  (its import takes seconds: not on a page's time limit)
        other_language = language_gate(cfg.languages, cfg.other_language_min_score) if cfg.languages else None
        for i, (content, ctype, url) in enumerate(zip(contents, types, urls)):
            if not content:
                reasons[i], found[i] = "empty_payload", {"bytes": 0 if content is None else len(content)}
                continue
            if len(content) > cfg.max_html_bytes:
                reasons[i], found[i] = "html_too_large", {"bytes": len(content), "max": cfg.max_html_bytes}
                continue
            if not _looks_like_markup(content):
                reasons[i], found[i] = "not_html", {"content_type": ctype, "head": _head(content)}
                continue
            key = PAGES.key(cfg, content, ctype, url)
            try:
                page = PAGES.get(key)  # a byte-identical copy extracted before gives the same page
                if page is None:
                    with time_limit(cfg.timeout_s):
                        page = extract_page(content, ctype, url, extractor=cfg.extractor,
                                            fallback_below_chars=cfg.fallback_below_chars,
                                            trafilatura_fast=cfg.trafilatura_fast,
                                            favor_precision=cfg.favor_precision,
                                            second_opinion_headings=cfg.second_opinion_headings,
                                            second_opinion_max_chars=cfg.second_opinion_max_chars,
                                            thread_rules=ThreadRules() if cfg.read_threads else None,
                                            other_language=other_language)
                    PAGES.put(key, page)
            except ExtractTimeout:
                reasons[i], found[i] = "extract_timeout", {"timeout_s": cfg.timeout_s, "bytes": len(content)}
                continue
            except Exception as exc:  # a broken page must not stop the task; it is counted
                log.debug("extraction failed for %s: %s", url, exc)
                reasons[i], found[i] = "extract_error", {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
                continue
            texts[i], titles[i], dates[i], charsets[i] = page.text, page.title, page.date, page.charset
            counters[f"extractor_{page.extractor}"] += 1
            counters[f"charset_{page.charset.split('(')[-1].rstrip(')')}"] += 1
            if not page.text:
                reasons[i], found[i] = "empty_text", {"bytes": len(content), "extractor": page.extractor,
                                                      "title": page.title}
        out = with_columns(table, {"text": pa.array(texts, pa.string()), "title": pa.array(titles, pa.string()),
                                   "date": pa.array(dates, pa.string()), "charset": pa.array(charsets, pa.string())})
        if not cfg.keep_content:
            out = out.drop_columns(["content"])
        return out, (pa.array(reasons, pa.string()), found), dict(counters)
