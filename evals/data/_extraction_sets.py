"""The extraction development sets beyond Readability and trafilatura_eval: loaders, language groups.

Six folders under ../shared/data/web_extraction share one layout (html/<id>.html.gz with the page's bytes
as stored, gold.jsonl.gz with one JSON object per page; each folder's SOURCE.txt says where it comes from).
Their gold differs in kind, so each set is scored with what its gold supports:
- full text (`gold_text`): daniel_multilingual (news in en/zh/el/pl/ru; GPL-3.0, read here for evaluation
  only, never copied), wcxb_dev (also with/without snippets), chinese_wce (hand-cleaned Chinese pages in
  their original charsets), smartreader_extra (Readability-style output) and harvest_web_forum_52 (the post
  bodies of forum threads, no titles, user names or dates): the shingle metric;
- snippets: wcxb_dev's with/without lists and trafilatura_eval's: the snippet metric;
- the first words of the main text only (postlight_parser_fixtures): whether that start is found (the
  snippet metric's recall; it says nothing about precision).
harvest_web_forum_52's pages also carry each post: `posts_found` is the share of posts of which at least
half the shingles are in the output (a thread that lost posts scores low even when the rest is clean).
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from ._extraction_langs import lang_group, page_kind
from ._extraction_metrics import GoldPage, load_readability, load_trafilatura_eval, shingles, squash, summarize

# name -> kind of gold ("text": full main text; "start": first words of the main text only)
NEW_SETS = {"daniel_multilingual": "text", "wcxb_dev": "text", "postlight_parser_fixtures": "start",
            "harvest_web_forum_52": "text", "chinese_wce": "text", "smartreader_extra": "text"}
def load_set(folder: str | Path, limit: int = 0) -> list[GoldPage]:
    """One folder of the shared layout -> GoldPages (sorted by id), the page bytes exactly as stored."""
    folder = Path(folder)
    pages = []
    with gzip.open(folder / "gold.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for row in sorted(rows, key=lambda r: r["id"]):
        path = folder / row["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{folder / 'gold.jsonl.gz'}: page {row['id']}: file {path} missing")
        with gzip.open(path, "rb") as f:
            source = f.read()
        gold = row.get("gold_text")
        with_, without = list(row.get("with") or []), list(row.get("without") or [])
        posts = [p["text"] for p in row["posts"]] if row.get("posts") else None
        pages.append(GoldPage(row["id"], source, page_kind(row["kind"]), with_, without, gold_text=gold,
                              url=row.get("url"), lang_group=lang_group(row.get("lang"), gold or " ".join(with_)),
                              posts=posts))
        if limit and len(pages) == limit:
            break
    return pages


def posts_found(predicted: str, posts: list[str], share: float = 0.5) -> tuple[int, int]:
    """(posts with at least `share` of their shingles in `predicted`, posts with shingles)."""
    pred, flat = shingles(predicted), squash(predicted)
    found = total = 0
    for post in posts:
        bag = shingles(post)
        n = sum(bag.values())
        if n:
            found += sum((bag & pred).values()) >= share * n
        elif squash(post):  # under four tokens: the post itself must be there
            found += squash(post) in flat
        else:
            continue
        total += 1
    return found, total


# Every development set, and the metrics each one's gold supports (the first is the set's headline).
ALL_SETS = ("mozilla_readability", "trafilatura_eval", *NEW_SETS)
SET_METRICS = {"mozilla_readability": ("shingle_f1", "snippet_f1"), "trafilatura_eval": ("shingle_f1", "snippet_f1"),
               "daniel_multilingual": ("shingle_f1",), "wcxb_dev": ("shingle_f1", "snippet_f1"),
               "postlight_parser_fixtures": ("start_found",), "harvest_web_forum_52": ("shingle_f1", "posts_found"),
               "chinese_wce": ("shingle_f1",), "smartreader_extra": ("shingle_f1",)}


def in_split(name: str, split: str) -> bool:
    """Whether page `name` is in the tune or check half (a CRC of the name), or `split` is all."""
    if split == "all":
        return True
    return (zlib.crc32(name.encode()) % 2 == 0) == (split == "tune")


def load_pages(data: str | Path, name: str, limit: int = 0) -> list[GoldPage]:
    data = Path(data)
    if name == "mozilla_readability":
        return load_readability(data / name / "test-pages", limit)
    if name == "trafilatura_eval":
        return load_trafilatura_eval(data / name, limit)
    if name in NEW_SETS:
        return load_set(data / name, limit)
    raise ValueError(f"unknown extraction set {name!r}; known: {', '.join(ALL_SETS)}")


def score(texts: list[str], pages: list[GoldPage]) -> dict:
    """summarize() plus the set-specific figures: start found (snippet recall) and posts found."""
    out = summarize(texts, pages)
    if pages:
        out["start_found"] = out["snippet_r"]
        if any(p.posts for p in pages):
            found = total = 0
            for text, page in zip(texts, pages):
                a, b = posts_found(text, page.posts or [])
                found, total = found + a, total + b
            out["posts_found"] = found / total if total else 0.0
    return out
