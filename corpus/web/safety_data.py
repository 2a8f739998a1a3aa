"""Page-length texts for training (corpus/web/safety_model.py) and evaluating (evals/data/safety.py) the
page-safety model. Nothing here runs in a pipeline; every function that reads a data folder takes it
as an argument (the shared data of development machines; product code never defaults to it).

Every source document gets one split from a hash of its id, so no document (web page, C4 document,
Wikipedia article, hh-rlhf dialogue, written sentence) is in two splits:
  train 40% | dev 20% (early checks, threshold) | eval 40% (only `cidermill eval data safety`).
The written sentences (data/safety/constructed_sentences.tsv) carry their split in the file instead.

Pages:
- unsafe, written: 4-7 sentences of one category (sexual, hate, harassment, violence, self_harm),
  sampled without replacement from that category's pool of the split, one paragraph each.
- unsafe, red-team chat: the human turns of 2 hh-rlhf harmless-base dialogues, each with at least two
  terms of the page-safety list (explicit ones, or sexual/hate/self-harm context ones) in the
  sexual, hate, harassment, violence or self-harm categories (a weak label, stated as such: 76 of the
  2,312 dialogues); train/dev only.
- safe, hard: 4-7 written sentences of one hard-case group (news about crime, war and sex; sexual
  health; drugs and abuse; suicide prevention; sex education; fiction).
- safe, chat: 4 AlpacaEval or LLaMA-Factory instructions (same register as the red-team pages, so
  the chat genre is on both sides).
- safe, ordinary web: English pages of trafilatura's and Readability's test sets (extracted with
  trafilatura), the 300 C4 documents, ~300-word chunks of the Wikipedia sample.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from pathlib import Path

CONSTRUCTED = Path(__file__).resolve().parent / "data" / "safety" / "constructed_sentences.tsv"
UNSAFE = ("sexual", "hate", "harassment", "violence", "self_harm")
HARD = ("news_crime", "news_sex", "health_sexual", "health_drugs", "health_suicide", "sex_ed", "fiction")
_STOP = set("the of and to in a is that for it as was with be by on not he i this are or his from at which but have "
            "an they you were her she".split())


def split_of(doc_id: str) -> str:
    h = hashlib.blake2b(doc_id.encode(), digest_size=2).digest()[0] * 100 // 256
    return "train" if h < 40 else "dev" if h < 60 else "eval"


def is_english(text: str) -> bool:
    words = text.lower().split()
    return len(words) >= 50 and sum(w in _STOP for w in words) / len(words) > 0.2


def constructed(split: str, path: Path = CONSTRUCTED) -> dict[str, list[str]]:
    """group -> sentences of the split ('train' also serves dev pages: the file has train and eval)."""
    out: dict[str, list[str]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[0] not in ("train", "eval") or parts[1] not in UNSAFE + HARD:
            raise ValueError(f"{path}:{n}: expected split<TAB>group<TAB>sentence; got {line!r}")
        if parts[0] == split:
            out.setdefault(parts[1], []).append(parts[2])
    return out


def sentence_pages(pool: dict[str, list[str]], per_group: int, seed: int) -> list[tuple[str, str]]:
    """(group, page) pages of 4-7 sentences of one group, without replacement inside a page."""
    rng = random.Random(seed)
    pages = []
    for group in sorted(pool):
        sents = pool[group]
        for _ in range(per_group):
            k = min(len(sents), rng.randint(4, 7))
            pages.append((group, "\n".join(rng.sample(sents, k))))
    return pages


def web_pages(root: Path, cache: Path | None = None, limit: int | None = None) -> list[dict]:
    """English main text of trafilatura's and Readability's test pages: {id, url, text} (cached as jsonl;
    `limit` extracts only the first pages, for quick tests)."""
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
    items = items[:limit] if limit is not None else items
    out = []
    for doc_id, url, p in items:
        text = trafilatura.extract(p.read_bytes().decode("utf-8", "replace")) or ""
        if is_english(text):
            out.append({"id": doc_id, "url": url, "text": text})
    if cache is not None and limit is None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return out


def c4_docs(root: Path) -> list[dict]:
    with open(root / "web_text" / "llamafactory_demo" / "c4_demo.jsonl", encoding="utf-8") as f:
        return [{"id": f"c4/{i}", "text": json.loads(line)["text"]} for i, line in enumerate(f)]


def wiki_chunks(root: Path, words: int = 300) -> list[dict]:
    out = []
    text = (root / "web_text" / "llamafactory_demo" / "wiki_demo.txt").read_text(encoding="utf-8")
    for a, article in enumerate(line for line in text.splitlines() if line.strip()):
        toks = article.split()
        for c in range(0, min(len(toks), 3000), words):
            out.append({"id": f"wiki/{a}", "text": " ".join(toks[c:c + words])})
    return [d for d in out if len(d["text"].split()) >= 80]


def hh_human_turns(root: Path) -> list[dict]:
    out = []
    with gzip.open(root / "preference" / "hh_rlhf" / "harmless-base_test.jsonl.gz", "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            dialogue = json.loads(line)["chosen"]
            turns = re.findall(r"Human: (.*?)(?=\n\nAssistant:|\Z)", dialogue, flags=re.S)
            out.append({"id": f"hh/{i}", "text": "\n".join(t.strip() for t in turns)})
    return out


def chat_instructions(root: Path) -> list[dict]:
    out = []
    pref = root / "preference"
    for i, item in enumerate(json.loads((pref / "alpaca_eval_weighted" / "alpaca-7b.annotations.json").read_text())):
        out.append({"id": f"alpaca/{i}", "text": item["instruction"]})
    for i, item in enumerate(json.loads((pref / "llamafactory_demo" / "dpo_en_demo.json").read_text())):
        out.append({"id": f"dpo/{i}", "text": item["conversations"][0]["value"]})
    return out


def _redteam_unsafe(text: str, lex) -> bool:
    from . import safety_terms

    found = safety_terms.hits(safety_terms.tokens(text, lex), lex)
    strong = ("sexual", "hate", "self_harm")
    return sum(1 for _, k, tier in found if k < 5 and (tier == 0 or safety_terms.CATEGORIES[k] in strong)) >= 2


_NEWS = re.compile(r"\b(?:said|says|according to|reported|police|officials?|government|spokes(?:man|woman|person))\b", re.I)
_HEALTH = re.compile(r"\b(?:health|patients?|disease|symptoms?|treatment|doctors?|medical|clinical|infections?|vaccines?"
                     r"|therapy|hospitals?|diagnos\w*|cancer|medications?|disorder)\b", re.I)


def eval_pages(root: Path, cache: Path | None = None, per_group: int = 40) -> list[tuple[str, int, str, str | None]]:
    """(group, label, text, url) of the eval split: written unsafe pages per category and hard-case pages
    per group (eval sentences only), and real pages: `news_pages` (web pages with >= 3 reporting words:
    said, police, officials, ...), `health_pages` (web pages, C4 documents or Wikipedia chunks with >= 5
    health words), `other_pages` (the rest)."""
    pages: list[tuple[str, int, str, str | None]] = []
    written = constructed("eval")
    for group, text in sentence_pages({g: s for g, s in written.items() if g in UNSAFE}, per_group, 2):
        pages.append((group, 1, text, None))
    for group, text in sentence_pages({g: s for g, s in written.items() if g in HARD}, per_group, 3):
        pages.append((group, 0, text, None))
    real = [(d, "web") for d in web_pages(root, cache)] + [(d, "c4") for d in c4_docs(root)] \
        + [(d, "wiki") for d in wiki_chunks(root)]
    for d, src in real:
        if split_of(d["id"]) != "eval":
            continue
        if len(_HEALTH.findall(d["text"])) >= 5:
            pages.append(("health_pages", 0, d["text"], d.get("url")))
        elif src == "web" and len(_NEWS.findall(d["text"])) >= 3:
            pages.append(("news_pages", 0, d["text"], d.get("url")))
        else:
            pages.append(("other_pages", 0, d["text"], d.get("url")))
    return pages


def grouped(docs: list[dict], per_page: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    docs = list(docs)
    rng.shuffle(docs)
    return ["\n".join(d["text"] for d in docs[i:i + per_page]) for i in range(0, len(docs) - per_page + 1, per_page)]


def model_pages(root: Path, split: str, cache: Path | None = None,
                web_limit: int | None = None) -> list[tuple[str, str, int, str]]:
    """(group, genre, label, text) pages of a split ('train' or 'dev') for the model."""
    from . import safety_terms

    lex = safety_terms.load()
    seed = 0 if split == "train" else 1
    pages: list[tuple[str, str, int, str]] = []
    written = constructed("train")
    for group, text in sentence_pages({g: s for g, s in written.items() if g in UNSAFE}, 60, seed):
        pages.append((group, "prose", 1, text))
    for group, text in sentence_pages({g: s for g, s in written.items() if g in HARD}, 40, seed + 10):
        pages.append((group, "prose", 0, text))
    hh = [d for d in hh_human_turns(root) if split_of(d["id"]) == split]
    flagged = [d for d in hh if _redteam_unsafe(d["text"], lex)]
    pages += [("redteam_chat", "chat", 1, t) for t in grouped(flagged, 2, seed)]
    chat = [d for d in chat_instructions(root) if split_of(d["id"]) == split]
    pages += [("instructions", "chat", 0, t) for t in grouped(chat, 4, seed)]
    for group, docs in (("web_pages", web_pages(root, cache, web_limit)), ("c4", c4_docs(root)), ("wiki", wiki_chunks(root))):
        pages += [(group, "prose", 0, d["text"]) for d in docs if split_of(d["id"]) == split]
    return pages
