"""The end-to-end benchmark's input: Common-Crawl-style WARC files built from real pages.

Every page comes from ../shared/data (or the repository's bundled WARC samples), with its URL:
- the web-extraction development sets (Readability, trafilatura's evaluation pages, WCXB, Postlight,
  the forum, Chinese and multilingual news sets): the URL from the set's metadata, else the page's own
  `<link rel=canonical>` / `og:url`, else one made from the set's domain field or, last, from the set
  name and page id (`https://<set>.invalid/<id>`; counted as `synthesized_urls`);
- the real WARC excerpts (Common Crawl, ClueWeb, wget crawls): their response records byte for byte
  (HTTP status and headers as crawled, non-HTML responses included, as in a real crawl).

Duplicates, in a realistic share of the pool (default 10% exact + 5% near): an exact duplicate is the
same bytes under another URL (a tracking parameter, http/https, a trailing slash); a near duplicate is
a re-crawl of a page with one paragraph removed and an "Updated" line added. Pages are shuffled with a
fixed seed and written round-robin into `files` gzip-per-record WARC files (as Common Crawl does).

A request for more records than the pool holds goes round the pool again, and each round after the first is
made of distinct pages, so the input keeps the pool's duplicate share (and its exact and near duplicates) at
every size instead of becoming a re-crawl of the same pages (before 2026-11-29 it repeated the pool byte for
byte, so at 16 x 1,000 records ~70% of the records were exact repeats: extracted once per worker by the
payload cache and removed by dedup, which no real crawl does). A page of round r keeps its markup, its host
and its words; within every run of text outside scripts, styles and comments the words between the first
and the last are put in another order (a permutation seeded by the run's text and r, so an exact duplicate
of the pool stays an exact duplicate of its original in the same round, and a near duplicate stays near);
a run without spaces (Chinese, Japanese) has its characters permuted instead. The byte length is the same,
so the HTTP headers stand; the URL gets a `/r<r>` path prefix. A record whose body is compressed or chunked,
or is not HTML, is repeated as it is (the summary counts those: `repeats_unchanged`); `variants` counts the
distinct copies. `records.jsonl` gives each record's round; a variant's duplicate group is its own.

The GPL-licensed daniel_multilingual pages go into these temporary files only (evaluation use), never
into the repository.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import uuid
import zlib
from dataclasses import dataclass, replace
from urllib.parse import urlsplit, urlunsplit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))
EXTRACTION = SHARED / "web_extraction"
GOLD_SETS = ["wcxb_dev", "daniel_multilingual", "postlight_parser_fixtures", "harvest_web_forum_52",
             "chinese_wce", "smartreader_extra"]
_CANONICAL = re.compile(rb"""<link[^>]+rel=["']?canonical["']?[^>]*href=["']([^"'>\s]+)|"""
                        rb"""<meta[^>]+property=["']og:url["'][^>]*content=["']([^"'>\s]+)""", re.I)
_PARAGRAPH = re.compile(rb"<p[\s>].{40,2000}?</p>", re.I | re.S)


@dataclass
class Page:
    block: bytes  # the HTTP response: status line, headers, body
    url: str
    origin: str  # where it came from: set name, or the WARC file
    kind: str = "original"  # original | exact_duplicate | near_duplicate
    html: bool = True
    group: int = -1  # the original's index: an original and its copies share it


def _http(body: bytes, charset: str | None) -> bytes:
    ctype = "text/html" + (f"; charset={charset}" if charset else "")
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def _page_url(body: bytes, known: str | None, fallback: str) -> tuple[str, bool]:
    if known:
        return known, False
    m = _CANONICAL.search(body[:200_000])
    if m:
        url = (m.group(1) or m.group(2)).decode("latin-1")
        if url.startswith("http"):
            return url, False
    return fallback, True


def _utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def gold_set_pages(stats: dict) -> list[Page]:
    """Pages of the extraction sets that ship gold.jsonl.gz, Readability's and trafilatura's."""
    pages = []
    for name in GOLD_SETS:
        folder = EXTRACTION / name
        if not (folder / "gold.jsonl.gz").is_file():
            continue
        with gzip.open(folder / "gold.jsonl.gz", "rt", encoding="utf-8") as f:
            for row in map(json.loads, f):
                body = gzip.decompress((folder / row["file"]).read_bytes())
                domain = row.get("domain")
                fallback = f"http://{domain}/{row['id']}" if domain else f"https://{name.replace('_', '-')}.invalid/{row['id']}"
                url, made = _page_url(body, row.get("url"), fallback)
                stats["synthesized_urls"] += made and not domain
                stats["urls_from_domain"] += made and bool(domain)
                charset = "utf-8" if row.get("encoding") == "utf-8" and _utf8(body) else None
                pages.append(Page(_http(body, charset), url, name))
    readability = EXTRACTION / "mozilla_readability" / "test-pages"
    for d in sorted(readability.iterdir()) if readability.is_dir() else []:
        if (d / "source.html").is_file():
            body = (d / "source.html").read_bytes()
            url, made = _page_url(body, None, f"https://mozilla-readability.invalid/{d.name}")
            stats["synthesized_urls"] += made
            pages.append(Page(_http(body, "utf-8" if _utf8(body) else None), url, "mozilla_readability"))
    traf = EXTRACTION / "trafilatura_eval"
    if (traf / "evaldata.json").is_file():
        for url, item in json.loads((traf / "evaldata.json").read_text()).items():
            path = traf / "files" / item["file"]
            if path.is_file():
                body = path.read_bytes()
                if path.suffix == ".gz":
                    body = gzip.decompress(body)
                pages.append(Page(_http(body, None), url, "trafilatura_eval"))
    return pages


def warc_pages() -> list[Page]:
    """Every response record of the real WARC excerpts, as crawled."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    files = sorted((REPO / "data" / "samples").glob("*_warc/*.warc.gz"))
    files += [SHARED / "warc" / "resiliparse" / "clueweb-quirk.warc.gz",
              SHARED / "warc" / "whirlwind_cc2024_22" / "whirlwind.warc.gz"]
    pages, seen = [], set()
    for path in files:
        if not path.is_file():
            continue
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=False):
                block = rec.reader.read()
                digest = hashlib.sha1(block).digest()
                if digest in seen:  # the bundled cc_warc sample is the resiliparse excerpt: once only
                    continue
                seen.add(digest)
                head = block[:4096].split(b"\r\n\r\n", 1)[0].lower()
                html = b"html" in head.split(b"content-type:", 1)[-1][:200] if b"content-type:" in head else True
                pages.append(Page(block, (rec.headers.get("WARC-Target-URI") or "").strip("<>"),
                                  f"warc:{path.parent.name}/{path.name}", html=html))
    return pages


def _url_variant(url: str, rng: random.Random) -> str:
    choice = rng.randrange(3)
    if choice == 0:
        return url + ("&" if "?" in url else "?") + f"utm_source=feed{rng.randrange(100)}"
    if choice == 1 and url.startswith("http://"):
        return "https://" + url[7:]
    if choice == 1 and url.startswith("https://"):
        return "http://" + url[8:]
    return url.rstrip("/") if url.endswith("/") else url + "/"


def _near_duplicate(page: Page, rng: random.Random) -> Page | None:
    """A re-crawl: one paragraph gone, an "Updated" line added after another; None if the page has
    fewer than five paragraphs (too little text for a near copy to stay near)."""
    head, sep, body = page.block.partition(b"\r\n\r\n")
    paragraphs = list(_PARAGRAPH.finditer(body))
    if len(paragraphs) < 5:
        return None
    drop = rng.randrange(1, len(paragraphs))
    stamp = f"<p>Updated {rng.randrange(1, 28)} March 2024, {rng.randrange(0, 24):02d}:{rng.randrange(60):02d}.</p>"
    anchor = paragraphs[0].end()
    d0, d1 = paragraphs[drop].span()
    new = body[:anchor] + stamp.encode() + body[anchor:d0] + body[d1:]
    head = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % len(new), head)
    return Page(head + sep + new, _url_variant(page.url, rng), page.origin, "near_duplicate", group=page.group)


_MARKUP = re.compile(rb"(<script\b.*?</script\s*>|<style\b.*?</style\s*>|<!--.*?-->|<[^>]*>)", re.I | re.S)
_SPACE = re.compile(rb"(\s+)")
_PLAIN = re.compile(rb"^(?:content-encoding|transfer-encoding):", re.I | re.M)


def _permute(items: list, seed: int) -> list:
    rng = random.Random(seed)
    out = list(items)
    rng.shuffle(out)
    return out


def _reword_run(text: bytes, rnd: int) -> bytes:
    """One run of text between tags, its words (or, without spaces, its characters) but the first and the last
    in another order; the same text in the same round always gets the same order."""
    seed = zlib.crc32(text) ^ (rnd * 0x9E3779B1)
    if len(text.split()) >= 4:
        tokens = _SPACE.split(text)  # words at even positions, the spaces between them at odd ones
        inner = [i for i in range(0, len(tokens), 2) if tokens[i]][1:-1]
        for i, w in zip(inner, _permute([tokens[i] for i in inner], seed)):
            tokens[i] = w
        return b"".join(tokens)
    if text.isascii():  # markup's indentation, a label: nothing to reorder
        return text
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError:
        return text
    core = s.strip()
    if len(core) < 8 or core.isascii():
        return text
    start = s.index(core[0])
    return (s[:start + 1] + "".join(_permute(list(core[1:-1]), seed)) + s[start + len(core) - 1:]).encode("utf-8")


def variant(page: Page, rnd: int) -> Page | None:
    """Round `rnd` (>= 1) of a pool page as a distinct page of the same markup, host and words (module
    docstring); None for a page that cannot be varied safely (not HTML, compressed or chunked body)."""
    head, sep, body = page.block.partition(b"\r\n\r\n")
    if not page.html or not sep or _PLAIN.search(head):
        return None
    parts = _MARKUP.split(body)  # text at even positions, markup at odd ones
    for i in range(0, len(parts), 2):
        if len(parts[i]) >= 12:
            parts[i] = _reword_run(parts[i], rnd)
    new = b"".join(parts)
    if new == body:
        return None
    u = urlsplit(page.url)
    return replace(page, block=head + sep + new,
                   url=urlunsplit((u.scheme, u.netloc, f"/r{rnd}" + (u.path or "/"), u.query, u.fragment)))


def build_pool(*, exact_share: float, near_share: float, seed: int) -> tuple[list[Page], dict]:
    if not EXTRACTION.is_dir():   # without it the pool is the 62 bundled pages: not the benchmark's input
        raise SystemExit(f"e2e input: {EXTRACTION} not found; set CIDERMILL_SHARED_DATA to the shared data folder")
    stats = {"synthesized_urls": 0, "urls_from_domain": 0}
    originals = gold_set_pages(stats) + warc_pages()
    for i, p in enumerate(originals):
        p.group = i
    rng = random.Random(seed)
    # shares of the final pool: originals / (1 - exact - near) records in all
    total = int(len(originals) / (1 - exact_share - near_share))
    n_exact, n_near = round(total * exact_share), round(total * near_share)
    html = [p for p in originals if p.html]
    exact = [Page(p.block, _url_variant(p.url, rng), p.origin, "exact_duplicate", group=p.group)
             for p in rng.sample(html, n_exact)]
    near: list[Page] = []
    for p in rng.sample(html, len(html)):
        if len(near) == n_near:
            break
        if (copy := _near_duplicate(p, rng)) is not None:
            near.append(copy)
    pool = originals + exact + near
    rng.shuffle(pool)
    stats.update(originals=len(originals), exact_duplicates=len(exact), near_duplicates=len(near),
                 html_originals=len(html))
    return pool, stats


def _record(page: Page, record_id: str, date: str) -> bytes:
    block = page.block
    headers = [("WARC-Type", "response"), ("WARC-Date", date), ("WARC-Record-ID", f"<urn:uuid:{record_id}>"),
               ("Content-Length", str(len(block))), ("Content-Type", "application/http; msgtype=response"),
               ("WARC-Target-URI", page.url),
               ("WARC-Payload-Digest", "sha1:" + hashlib.sha1(block.partition(b"\r\n\r\n")[2]).hexdigest())]
    if page.html:  # as Common Crawl's WARCs say it (datatrove's reader reads this header)
        headers.append(("WARC-Identified-Payload-Type", "text/html"))
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return gzip.compress(head.encode() + block + b"\r\n\r\n", compresslevel=6)


def write_warcs(folder: Path, *, docs: int, files: int, exact_share: float = 0.10, near_share: float = 0.05,
                seed: int = 0, start: int = 0) -> dict:
    """Write `docs` response records into `files` WARC files under `folder`, and `records.jsonl` beside them
    (id, url, kind, round, duplicate group, origin of every record); return a summary. `start`: begin at that
    record of the sequence (past the pool: a small input of later rounds' variants only)."""
    pool, stats = build_pool(exact_share=exact_share, near_share=near_share, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed + 1)
    handles = [open(folder / f"crawl-{i:05d}.warc.gz", "wb") for i in range(files)]
    sidecar = open(folder.parent / f"{folder.name}-records.jsonl", "w")
    kinds: dict[str, int] = {}
    copies = [0, 0]  # records past the pool: repeated as they are, varied
    html = 0
    try:
        for k in range(start, start + docs):
            page = pool[k % len(pool)]
            rnd = k // len(pool)
            if rnd:  # another round of the pool: distinct pages (module docstring), a group of their own
                varied = variant(page, rnd)
                copies[varied is not None] += 1
                page = replace(varied, group=page.group + rnd * len(pool)) if varied else page
            kind = page.kind
            kinds[kind] = kinds.get(kind, 0) + 1
            html += page.html
            rid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            date = f"2024-03-{1 + k % 28:02d}T{k % 24:02d}:{k % 60:02d}:00Z"
            handles[(k - start) % files].write(_record(page, rid, date))
            sidecar.write(json.dumps({"id": rid, "url": page.url, "kind": kind, "round": rnd, "group": page.group,
                                      "origin": page.origin, "html": page.html}) + "\n")
    finally:
        for h in handles + [sidecar]:
            h.close()
    paths = sorted(folder.glob("crawl-*.warc.gz"))
    return {**stats, "records": docs, "html_records": html, "by_kind": kinds, "pool": len(pool),
            "variants": copies[1], "repeats_unchanged": copies[0],
            "files": [str(p) for p in paths], "bytes": sum(p.stat().st_size for p in paths)}
