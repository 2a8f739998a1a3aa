"""`math_qa_extract_v1`: HTML -> question and answers (formulas as LaTeX) in `text`.

Rows whose page has Q&A markup get `text` = title, question and answers (accepted first, then by
votes), plus qa__n_answers, qa__accepted_score, qa__best_score. Pages without Q&A markup either
drop (`no_qa`), or, with `fallback: page_text`, keep the whole page's text with formulas as LaTeX.
Answers under `min_answer_score` are left out; a question left with no answers drops
(`no_answer`) when `require_answer` is set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from manifests.errors import ConfigError

from manifests.config import require
from ..math.html_math import decode_markup, page_text
from ..math.qa import extract_qa
from .math_filters import CountsMathFallbacks
from ..registry import register
from ..stage import Mapper, with_columns

log = logging.getLogger("cidermill.math")


@dataclass(frozen=True, kw_only=True)
class MathQAConfig:
    field: str = "html"  # the HTML column (`content` for WARC rows, string or binary)
    content_type_field: str = "content_type"  # HTTP Content-Type (its charset decodes binary HTML), when present
    fallback: Literal["drop", "page_text"] = "drop"
    min_answer_score: int | None = None  # answers below this vote count are left out
    require_answer: bool = True
    max_answers: int | None = 3

    def __post_init__(self):
        require(self.max_answers is None or self.max_answers >= 1, f"max_answers must be >= 1; got {self.max_answers}")


@register
class MathQAExtract(CountsMathFallbacks, Mapper):
    """Question + answers from Q&A-site HTML into `text`, formulas kept as LaTeX."""

    name = "math_qa_extract_v1"
    Config = MathQAConfig

    def resources(self) -> dict:
        from ..math import html_math

        return {"mmltex": html_math.MMLTEX.parent}

    def transform(self, table: pa.Table):
        cfg = self.config
        if cfg.field not in table.schema.names:
            raise ConfigError(f"{self.name}: no column {cfg.field!r}; set `field:` to the HTML column")
        texts, reasons, found, n_answers, accepted, best = [], [], [], [], [], []
        old_text = table.column("text").to_pylist() if "text" in table.schema.names else [None] * table.num_rows
        types = (table.column(cfg.content_type_field).to_pylist() if cfg.content_type_field in table.schema.names
                 else [None] * table.num_rows)
        for markup, ctype, old in zip(table.column(cfg.field).to_pylist(), types, old_text):
            text, reason, n, acc, top, why = old, None, 0, None, None, None
            markup = decode_markup(markup, ctype)  # one charset path with the web pipeline
            try:
                qa = extract_qa(markup) if markup else None
            except Exception as exc:  # lxml on a broken page: count it, keep going
                log.debug("unparsable page: %s", exc)
                qa, reason = None, "bad_html"
                why = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
            if qa is not None:
                n_found = len(qa.answers)
                if cfg.min_answer_score is not None:
                    qa.answers = [a for a in qa.answers if (a.score or 0) >= cfg.min_answer_score]
                n = len(qa.answers)
                acc = next((a.score for a in qa.answers if a.accepted), None)
                top = max((a.score for a in qa.answers if a.score is not None), default=None)
                text = qa.to_text(max_answers=cfg.max_answers)
                if cfg.require_answer and not qa.answers:
                    reason = "no_answer"
                    why = {"answers_found": n_found, "min_answer_score": cfg.min_answer_score}
            elif reason is None:
                if cfg.fallback == "page_text" and markup:
                    text = page_text(markup)
                else:
                    reason = "no_qa"
                    why = {"markup_chars": len(markup or ""), "found": "no question/answer structure"}
            texts.append(text)
            reasons.append(reason)
            found.append(why)
            n_answers.append(n)
            accepted.append(acc)
            best.append(top)
        out = with_columns(table, {
            "text": pa.array(texts, pa.string()),
            "qa__n_answers": pa.array(n_answers, pa.int32()),
            "qa__accepted_score": pa.array(accepted, pa.int32()),
            "qa__best_score": pa.array(best, pa.int32()),
        })
        return out, (pa.array(reasons, pa.string()), found)
