"""Real web pages for `cidermill eval data safety`'s second check: false drops of the shipped model on
pages that are in none of its training sources. From the development machine's shared data:
- English main text of trafilatura's and Readability's test pages (extracted with trafilatura, cached),
- the 300 C4 documents, ~300-word chunks of the Wikipedia sample,
grouped by simple word counts into `health_pages` (>= 5 health words), `news_pages` (web pages with
>= 3 reporting words: said, police, officials, ...) and `other_pages`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

_STOP = set("the of and to in a is that for it as was with be by on not he i this are or his from at which but have "
            "an they you were her she".split())
_NEWS = re.compile(r"\b(?:said|says|according to|reported|police|officials?|government|spokes(?:man|woman|person))\b", re.I)
_HEALTH = re.compile(r"\b(?:health|patients?|disease|symptoms?|treatment|doctors?|medical|clinical|infections?|vaccines?"
                     r"|therapy|hospitals?|diagnos\w*|cancer|medications?|disorder)\b", re.I)


def is_english(text: str) -> bool:
    words = text.lower().split()
    return len(words) >= 50 and sum(w in _STOP for w in words) / len(words) > 0.2


def web_pages(root: Path, cache: Path | None = None) -> list[dict]:
    """{id, url, text} of the English test pages of trafilatura's and Readability's sets (cached as jsonl)."""
    if cache is not None and cache.is_file():
        return [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines()]
    import trafilatura

    base = root / "web_extraction"
    items = []
    gold = json.loads((base / "trafilatura_eval" / "evaldata.json").read_text(encoding="utf-8"))
    for url, item in gold.items():
        p = base / "trafilatura_eval" / "files" / item["file"]
        if p.is_file():
            items.append((f"trafilatura/{item['file']}", url, p))
    for d in sorted((base / "mozilla_readability" / "test-pages").iterdir()):
        items.append((f"readability/{d.name}", None, d / "source.html"))
    out = []
    for doc_id, url, p in items:
        text = trafilatura.extract(p.read_bytes().decode("utf-8", "replace")) or ""
        if is_english(text):
            out.append({"id": doc_id, "url": url, "text": text})
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return out


def c4_docs(root: Path) -> list[dict]:
    with open(root / "web_text" / "llamafactory_demo" / "c4_demo.jsonl", encoding="utf-8") as f:
        return [{"id": f"c4/{i}", "url": None, "text": json.loads(line)["text"]} for i, line in enumerate(f)]


def wiki_chunks(root: Path, words: int = 300) -> list[dict]:
    out = []
    text = (root / "web_text" / "llamafactory_demo" / "wiki_demo.txt").read_text(encoding="utf-8")
    for a, article in enumerate(line for line in text.splitlines() if line.strip()):
        toks = article.split()
        for c in range(0, min(len(toks), 3000), words):
            out.append({"id": f"wiki/{a}/{c}", "url": None, "text": " ".join(toks[c:c + words])})
    return [d for d in out if len(d["text"].split()) >= 80]


def grouped_pages(root: Path, cache: Path | None = None) -> list[tuple[str, dict]]:
    """(group, page) for every page: health_pages, news_pages or other_pages (module docstring)."""
    out = []
    for src, docs in (("web", web_pages(root, cache)), ("c4", c4_docs(root)), ("wiki", wiki_chunks(root))):
        for d in docs:
            if len(_HEALTH.findall(d["text"])) >= 5:
                out.append(("health_pages", d))
            elif src == "web" and len(_NEWS.findall(d["text"])) >= 3:
                out.append(("news_pages", d))
            else:
                out.append(("other_pages", d))
    return out
