"""Raw page text for classifier negatives: everything a browser would show, boilerplate included.

AFM-style quality classifiers learn "clean, main-content text" (C4, Wikipedia) against "what a
crawler gets" (menus, cookie banners, link lists). When a training version holds HTML bytes
(a `content` column from the WARC reader) rather than text, this turns each page into that raw
text: drop script/style/comments, drop tags, unescape entities, fold whitespace. No main-content
extraction on purpose. Long pages are cut into chunks of `chunk_words`, so a few pages give enough
examples and lengths resemble documents.
"""

from __future__ import annotations

import html

import pyarrow as pa
import pyarrow.compute as pc


def html_to_raw_text(content: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    # charset detection is the extractor's job; for negatives, UTF-8 with replacement is enough
    text = pa.array([None if b is None else (b.decode("utf-8", "replace") if isinstance(b, bytes) else b)
                     for b in content.to_pylist()], pa.string())
    for tag in ("script", "style", "noscript"):  # RE2 has no backreferences: one pattern per tag
        text = pc.replace_substring_regex(text, rf"(?is)<{tag}\b.*?</{tag}\s*>", " ")
    text = pc.replace_substring_regex(text, r"(?s)<!--.*?-->", " ")
    text = pc.replace_substring_regex(text, r"(?s)<[^>]*>", " ")
    text = pa.array([None if t is None else html.unescape(t) for t in text.to_pylist()], pa.string())
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(text, r"\s+", " "))


def chunk_words(ids: list[str], texts: list[str | None], chunk_words: int, min_words: int) -> tuple[list, list]:
    out_ids, out_texts = [], []
    for rid, t in zip(ids, texts):
        words = (t or "").split()
        for k in range(0, len(words), chunk_words):
            piece = words[k:k + chunk_words]
            if len(piece) >= min_words:
                out_ids.append(f"{rid}#c{k // chunk_words}")
                out_texts.append(" ".join(piece))
    return out_ids, out_texts
