"""C4's line and page rules (Raffel et al. 2020), with the same decisions, reasons and rewritten
text as datatrove 0.10.1's `C4QualityFilter` (its badwords rule is web_safety's job here).

Lines that fail a line rule are removed from `text`; a page with "lorem ipsum" or a curly bracket
on a surviving line is dropped (`lorem_ipsum`, `curly_bracket`), and so is one with fewer than
`min_num_sentences` sentences in its surviving lines (`too_few_sentences`). Sentences are counted
by spaCy's sentencizer like datatrove, but only when needed: a surviving line holds at least one
sentence, so a page with enough surviving lines passes without tokenizing anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from ..registry import register
from ..stage import Mapper, decisions, with_columns
from ..web.words import SPACY, count_sentences

_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_END_PUNCTUATION = (".", "?", "!", '"', "'")
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


@dataclass(frozen=True, kw_only=True)
class C4QualityConfig:
    remove_citations: bool = True  # drop Wikipedia-style [1], [edit], [citation needed]
    filter_no_terminal_punct: bool = True  # remove lines not ending in . ? ! " ' (or ending in ...)
    min_num_sentences: int = 5  # -1 switches the page check off
    min_words_per_line: int = 3
    max_word_length: int = 1000  # remove lines with a longer word; -1 switches off
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True  # remove lines mentioning javascript
    filter_curly_bracket: bool = True
    filter_policy: bool = True  # remove lines about cookies / terms of use / privacy policy


@register
class C4Quality(Mapper):
    """Removes failing lines from `text`; drops `lorem_ipsum`, `curly_bracket`, `too_few_sentences`."""

    name = "c4_quality_v1"
    preload = SPACY  # its words/sentences come from spaCy's rules (corpus/web/words.py)
    Config = C4QualityConfig

    def transform(self, table: pa.Table):
        texts = [t or "" for t in table.column("text").to_pylist()]
        failures: list[tuple | None] = [None] * len(texts)
        new_texts: list[str] = []
        unsure: list[tuple[int, list[str]]] = []  # pages whose sentence count needs spaCy
        for i, text in enumerate(texts):
            kept, failures[i] = self._lines(text)
            new_texts.append("\n".join(kept).strip())
            if failures[i] is None and self.config.min_num_sentences != -1 \
                    and len(kept) < self.config.min_num_sentences:
                unsure.append((i, kept))
        counts = count_sentences([line for _, kept in unsure for line in kept])
        pos = 0
        for i, kept in unsure:
            n = sum(counts[pos:pos + len(kept)])
            pos += len(kept)
            if n < self.config.min_num_sentences:
                failures[i] = "too_few_sentences", {"sentences": n, "kept_lines": len(kept),
                                                    "min": self.config.min_num_sentences}
        out = with_columns(table, {"text": pa.array(new_texts, pa.string())})
        return out, decisions(failures)

    def _lines(self, text: str) -> tuple[list[str], tuple | None]:
        cfg = self.config
        kept = []
        for line in text.splitlines():
            line = line.strip()
            words = line.split()
            if (cfg.max_word_length != -1 and len(line) > cfg.max_word_length
                    and any(len(w) > cfg.max_word_length for w in words)):
                continue
            if cfg.remove_citations:
                line = _CITATION.sub("", line)
            if cfg.filter_no_terminal_punct and (not line.endswith(_END_PUNCTUATION) or line.endswith("...")):
                continue
            if len(words) < cfg.min_words_per_line:
                continue
            lower = line.lower()
            if cfg.filter_lorem_ipsum and "lorem ipsum" in lower:
                return kept, ("lorem_ipsum", {"line": _quote(line)})
            if cfg.filter_javascript and "javascript" in lower:
                continue
            if cfg.filter_curly_bracket and "{" in line:
                return kept, ("curly_bracket", {"line": _quote(line)})
            if cfg.filter_policy and any(p in lower for p in _POLICY):
                continue
            kept.append(line)
        return kept, None


def _quote(line: str, limit: int = 160) -> str:
    """The line that decided a drop, cut short for `drop_detail`."""
    return line if len(line) <= limit else line[:limit - 3] + "..."
