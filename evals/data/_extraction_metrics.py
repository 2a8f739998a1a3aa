"""Gold pages and the two main-text metrics behind `cidermill eval data extraction`.

Development sets (both under ../shared/data/web_extraction; evals may read it, product code never does):
- `mozilla_readability`: 130 pages with the expected article HTML (`expected.html`) as gold text.
- `trafilatura_eval`: 990 pages with short 'with' snippets (must be in the main text) and 'without'
  snippets (boilerplate, must not be), trafilatura's own development set (so it favours trafilatura).

Metrics:
- shingle: the article-extraction shingle metric. Text -> tokens (`\\w+` runs, each CJK character a
  token of its own, case-folded, NFC) -> a bag of 4-token shingles. Per page precision = shared
  shingles / predicted shingles and recall = shared / gold shingles; both are averaged over pages and
  F1 is computed from the two averages. On trafilatura_eval there is no full gold text, so the gold
  bag is the 'with' snippets' shingles and precision is measured on the shingles whose label is known:
  predicted shingles found in 'with' snippets / those found in 'with' or 'without' snippets (a snippet
  shorter than 4 tokens is one shingle). A page with nothing extracted scores precision 0, recall 0.
- snippet: trafilatura's count: a 'with' snippet found in the output is a true positive, one missing a
  false negative; a 'without' snippet found is a false positive; counts are summed over pages.
  "Found" is substring after NFC and removing all whitespace. On Readability pages the snippets are
  derived from the gold: 'with' = the first 12 words of each gold block (paragraph, list item,
  heading, cell ...) of >= 5 words; 'without' = the first 12 words of each source block of >= 3
  words whose text is not in the gold text.

Page kind, where the data says it: Readability's `readerable` flag (article / other); on
trafilatura_eval a forum URL (forum, thread, viewtopic ...) is `forum`, a page whose gold metadata has
an author or a date is `article`, the rest `other`.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ._extraction_langs import lang_group, script_group

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SPACE = re.compile(r"\s+")
_BLOCKS = ("p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "dd", "dt", "blockquote", "pre",
           "figcaption", "caption")
_FORUM_URL = re.compile(r"forum|foren|/threads?/|viewtopic|showthread|/t\d+-|/topic", re.I)
SHINGLE = 4


@dataclass
class GoldPage:
    name: str
    source: bytes
    kind: str  # article / forum / other
    with_snippets: list[str]
    without_snippets: list[str]
    gold_text: str | None = None  # full gold text where the set has it
    url: str | None = None
    lang_group: str = ""  # Latin / CJK / Cyrillic / Greek / other
    posts: list[str] | None = None  # a forum thread's post bodies, where the set has them
    gold_shingles: Counter = field(default=None, repr=False)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFC", text).casefold())


def shingles(text: str, n: int = SHINGLE, *, short_whole: bool = False) -> Counter:
    tok = tokens(text)
    if len(tok) < n:
        return Counter([tuple(tok)]) if short_whole and tok else Counter()
    return Counter(tuple(tok[i:i + n]) for i in range(len(tok) - n + 1))


def squash(text: str) -> str:
    return _SPACE.sub("", unicodedata.normalize("NFC", text))


def _block_texts(root) -> list[str]:
    out = []
    for el in root.iter(*_BLOCKS):
        if any(a.tag in _BLOCKS for a in el.iterancestors()):
            continue  # the outermost block carries the text
        text = " ".join(el.text_content().split())
        if text:
            out.append(text)
    return out


def _gold_text(root) -> str:
    for el in root.iter(*_BLOCKS, "div", "br", "section", "article"):
        el.tail = "\n" + (el.tail or "")
    return root.text_content()


def load_readability(folder: str | Path, limit: int = 0) -> list[GoldPage]:
    import lxml.html

    pages = []
    for page in sorted(Path(folder).iterdir()):
        source, expected = page / "source.html", page / "expected.html"
        if not (source.is_file() and expected.is_file()):
            continue
        meta_path = page / "expected-metadata.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        gold_root = lxml.html.fromstring(expected.read_text(encoding="utf-8"))
        gold_blocks = _block_texts(gold_root)
        gold = _gold_text(gold_root)
        gold_squashed = squash(gold)
        with_ = [" ".join(b.split()[:12]) for b in gold_blocks if len(b.split()) >= 5]
        raw = source.read_bytes()
        try:
            src_root = lxml.html.fromstring(raw)
            for bad in src_root.iter("script", "style", "noscript", "template"):
                bad.drop_tree()
            src_blocks = _block_texts(src_root)
        except Exception:  # an unparsable source page gets no 'without' snippets
            src_blocks = []
        without = [" ".join(b.split()[:12]) for b in src_blocks
                   if len(b.split()) >= 3 and squash(b) not in gold_squashed]
        kind = "article" if meta.get("readerable", True) else "other"
        pages.append(GoldPage(page.name, raw, kind, with_, list(dict.fromkeys(without)), gold_text=gold,
                              lang_group=lang_group(meta.get("lang"), gold)))
    return pages[:limit] if limit else pages


def load_trafilatura_eval(folder: str | Path, limit: int = 0) -> list[GoldPage]:
    folder = Path(folder)
    gold = json.loads((folder / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url, item in gold.items():
        path = folder / "files" / item["file"]
        if not path.is_file():
            raise FileNotFoundError(f"{folder / 'evaldata.json'}: page {url}: file {path} missing")
        if _FORUM_URL.search(url):
            kind = "forum"
        elif item.get("author") or item.get("date"):
            kind = "article"
        else:
            kind = "other"
        pages.append(GoldPage(item["file"], path.read_bytes(), kind, list(item["with"]), list(item["without"]),
                              url=url, lang_group=script_group(" ".join(item["with"]))))
    pages.sort(key=lambda p: p.name)
    return pages[:limit] if limit else pages


def shingle_pr(predicted: str, page: GoldPage) -> tuple[float, float]:
    """(precision, recall) of one page's extracted text under the shingle metric."""
    pred = shingles(predicted)
    if page.gold_text is not None:
        if page.gold_shingles is None:
            page.gold_shingles = shingles(page.gold_text)
        gold = page.gold_shingles
        shared = sum((pred & gold).values())
        n_pred, n_gold = sum(pred.values()), sum(gold.values())
        return (shared / n_pred if n_pred else 0.0), (shared / n_gold if n_gold else 0.0)
    # Snippet-only gold: shingles of 'with' snippets are positives, of 'without' snippets negatives.
    pos, neg = Counter(), Counter()
    for s in page.with_snippets:
        pos.update(shingles(s, short_whole=True))
    for s in page.without_snippets:
        neg.update(shingles(s, short_whole=True))
    neg = neg - pos
    toks = tokens(predicted)
    pred_short = Counter(tuple(toks[i:i + k]) for k in range(1, SHINGLE) for i in range(len(toks) - k + 1))
    pred_all = pred + pred_short
    tp = sum((pred_all & pos).values())
    fp = sum((pred_all & neg).values())
    n_pos = sum(pos.values())
    return (tp / (tp + fp) if tp + fp else 0.0), (tp / n_pos if n_pos else 0.0)


def snippet_counts(predicted: str, page: GoldPage) -> tuple[int, int, int]:
    """(tp, fn, fp) of one page under the snippet metric."""
    out = squash(predicted)
    tp = sum(1 for s in page.with_snippets if squash(s) in out)
    fp = sum(1 for s in page.without_snippets if squash(s) in out)
    return tp, len(page.with_snippets) - tp, fp


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def summarize(texts: list[str], pages: list[GoldPage]) -> dict:
    """Both metrics over `pages` (parallel to `texts`)."""
    n = len(pages)
    if not n:
        return {"pages": 0}
    prs = [shingle_pr(t, p) for t, p in zip(texts, pages)]
    sp, sr = sum(x[0] for x in prs) / n, sum(x[1] for x in prs) / n
    tp = fn = fp = 0
    for t, p in zip(texts, pages):
        a, b, c = snippet_counts(t, p)
        tp, fn, fp = tp + a, fn + b, fp + c
    np_ = tp / (tp + fp) if tp + fp else 0.0
    nr = tp / (tp + fn) if tp + fn else 0.0
    return {"pages": n, "shingle_p": sp, "shingle_r": sr, "shingle_f1": f1(sp, sr),
            "snippet_p": np_, "snippet_r": nr, "snippet_f1": f1(np_, nr),
            "empty": sum(1 for t in texts if not t.strip())}
