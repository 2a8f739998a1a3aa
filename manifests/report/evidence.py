"""Reading a row's `drop_detail` (the evidence a stage recorded) and finding what to highlight in its text.

`drop_detail` is short JSON written by the stage that dropped the row (corpus/stage.py `drop_by_reason`).
Any object is shown as it is; these keys are also highlighted in the text:
- `spans`: character ranges of the text, `[[start, end], ...]`, `[[start, end, label], ...]` or
  `[{"start", "end", "label"}, ...]` (PII, secrets, a safety window);
- `window`: one range, `{"start", "end"}` or `[start, end]` (the part of the page a score was measured on);
- `terms`, `matches`, `words`, `ngrams`, `ngram`, `match`: strings that occur in the text (safety terms, the
  decontamination n-gram, a license line); every occurrence is marked, case-insensitively, with any run of
  punctuation or space in the text standing for a space in the term (n-grams are stored normalised).
A detail that is not JSON is shown as text.
"""

from __future__ import annotations

import json
import re

TERM_KEYS = ("terms", "matches", "words", "ngrams", "ngram", "match")
MAX_MARKS = 50


def parse_detail(raw) -> dict | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"detail": str(raw)}
    return value if isinstance(value, dict) else {"detail": value}


def _range(item, label: str) -> tuple[int, int, str] | None:
    if isinstance(item, dict):
        start, end, label = item.get("start"), item.get("end"), str(item.get("label", label))
    elif isinstance(item, (list, tuple)) and len(item) >= 2:
        start, end = item[0], item[1]
        label = str(item[2]) if len(item) > 2 else label
    else:
        return None
    if isinstance(start, int) and isinstance(end, int) and 0 <= start < end:
        return start, end, label
    return None


def _terms(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, str) else str(v[0]) for v in value
                if isinstance(v, str) or (isinstance(v, (list, tuple)) and v and isinstance(v[0], str))]
    return []


def highlights(text: str, detail: dict | None) -> list[tuple[int, int, str, str]]:
    """Non-overlapping (start, end, label, kind) ranges of `text` to mark, in order; kind is "span", "window"
    or "term". Ranges outside the text are clipped or dropped."""
    if not detail or not text:
        return []
    found: list[tuple[int, int, str, str]] = []
    for item in detail.get("spans") or []:
        r = _range(item, "span")
        if r:
            found.append((*r, "span"))
    window = detail.get("window")
    if window is not None:
        r = _range(window, "window")
        if r:
            found.append((*r, "window"))
    lowered = text.lower()
    for key in TERM_KEYS:
        for term in _terms(detail.get(key)):
            term = term.strip()
            if len(term) < 2:
                continue
            # a normalised n-gram (punctuation dropped, lower case) still finds "four. She ... farmers' market"
            pattern = r"[\W_]+".join(re.escape(w) for w in term.lower().split())
            for m in re.finditer(pattern, lowered):
                found.append((m.start(), m.end(), term, "term"))
                if len(found) > MAX_MARKS:
                    break
    clipped = sorted((max(0, s), min(len(text), e), label, kind) for s, e, label, kind in found if s < len(text))
    fine = [r for r in clipped if r[3] != "window"]
    # a window is marked only where no finer mark falls inside it (it stays listed in the detail either way)
    windows = [r for r in clipped if r[3] == "window" and not any(r[0] < f[1] and f[0] < r[1] for f in fine)]
    out: list[tuple[int, int, str, str]] = []
    for r in sorted(fine + windows):
        if r[0] < r[1] and (not out or r[0] >= out[-1][1]):  # overlapping marks: the earlier one wins
            out.append(r)
    return out[:MAX_MARKS]
