"""Extraction throughput: web_extract_v1's extraction (resiliparse + block rules, post bodies of threads,
trafilatura fallback; charset handling included) vs trafilatura.extract with its defaults, on the same pages
in one run, one core each. Main-text F1 is in `cidermill eval data extraction`.

Page sets: `default` (the Readability gold pages and the HTML responses of the bundled/shared WARCs, as in
earlier rounds), and the development sets of ../shared/data/web_extraction by kind: `multilingual` (the
non-English article pages: daniel_multilingual, chinese_wce, postlight's Japanese pages ...), `forums`
(every page whose kind is forum: harvest_web_forum_52, wcxb_dev's forums ...), `other` (wcxb_dev's service,
product, listing, documentation pages).

    .venv/bin/python benchmarks/web_extract.py --pages default,multilingual,forums,other
"""

from __future__ import annotations

import argparse
import logging

from web_common import SHARED, html_pages, measure, report


def ours(pages):
    import trafilatura  # noqa: F401  (imported before timing starts, like the peer's)

    from corpus.web.extract import extract_page

    return sum(len(extract_page(c, t, u).text) for c, t, u in pages)


def peer(pages):
    import trafilatura

    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    return sum(len(trafilatura.extract(c, url=u) or "") for c, t, u in pages)


def dev_pages(which: str) -> list[tuple[bytes, str | None, str | None]]:
    """(payload, Content-Type, url) of the development sets' pages of one kind (see the module docstring)."""
    from evals.data._extraction_sets import NEW_SETS, load_set

    out = []
    for name in NEW_SETS:
        folder = SHARED / "web_extraction" / name
        if not folder.is_dir():
            continue
        for p in load_set(folder):
            if (which == "forums" and p.kind == "forum") or (which == "other" and p.kind == "other") or (
                    which == "multilingual" and p.kind == "article" and p.lang_group != "Latin"):
                out.append((p.source, "text/html", p.url))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2, help="fresh runs per side; the fastest counts")
    parser.add_argument("--pages", default="default", help="comma-separated: default, multilingual, forums, other")
    args = parser.parse_args()
    for which in args.pages.split(","):
        pages = html_pages() if which == "default" else dev_pages(which)
        if not pages:
            print(f"\n{which}: no pages found under {SHARED}")
            continue
        o = measure(ours, pages, warmup=(pages[:3],), repeats=args.repeats)
        p = measure(peer, pages, warmup=(pages[:3],), repeats=args.repeats)
        report(f"HTML -> main text, {which} pages", "docs", len(pages), o, p, "ours: web_extract_v1 (hybrid)",
               "trafilatura.extract defaults")
        print(f"  characters extracted: ours {o[2]:,}, trafilatura {p[2]:,}")


if __name__ == "__main__":
    main()
