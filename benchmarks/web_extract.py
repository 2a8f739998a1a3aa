"""Extraction throughput: web_extract_v1's extraction (resiliparse + trafilatura fallback, charset
handling included) vs trafilatura.extract with its defaults, on the Readability gold pages and the
HTML responses of the bundled/shared WARCs. Main-text F1 is in `cidermill eval data extraction`.

    .venv/bin/python benchmarks/web_extract.py
"""

from __future__ import annotations

import argparse

import logging

from web_common import html_pages, measure, report


def ours(pages):
    import trafilatura  # noqa: F401  (imported before timing starts, like the peer's)

    from corpus.web.extract import extract_page

    return sum(len(extract_page(c, t, u).text) for c, t, u in pages)


def peer(pages):
    import trafilatura

    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    return sum(len(trafilatura.extract(c, url=u) or "") for c, t, u in pages)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2, help="fresh runs per side; the fastest counts")
    args = parser.parse_args()
    pages = html_pages()
    o = measure(ours, pages, warmup=(pages[:3],), repeats=args.repeats)
    p = measure(peer, pages, warmup=(pages[:3],), repeats=args.repeats)
    report("HTML -> main text", "docs", len(pages), o, p, "ours: web_extract_v1 (hybrid)", "trafilatura.extract defaults")
    print(f"  characters extracted: ours {o[2]:,}, trafilatura {p[2]:,}")


if __name__ == "__main__":
    main()
