"""Leave-one-set-out check of the thresholds fitted on the extraction development sets (`--loso`).

The thresholds chosen on all development sets together in this round: the thread reading's
(corpus/web/threads.py `ThreadRules`): the share of the page's running text inside the posts
(`min_long_share`), the share of gaps between posts that hold a date (`min_dated_gaps`), the share of the
article extractor's running text inside the posts (`min_main_inside`) and the most of it outside them
(`max_outside_chars`); and the block rules' average line length under which a block is a list of short
items (corpus/web/blocks.py `BlockRules.short_line_chars`). For each set in turn, the grid point with the
best mean headline metric on the other sets is chosen, and the left-out set is scored with it; the table
shows that figure next to the shipped thresholds', without the thread reading at all and trafilatura's,
and the worst and mean difference between chosen and shipped."""

from __future__ import annotations

import itertools
from dataclasses import replace

LONG_SHARES = (0.6, 0.7, 0.8, 0.9)
DATED_GAPS = (0.3, 0.5, 0.7, 0.9)
MAIN_INSIDE = (0.3, 0.5, 0.7)
MAX_OUTSIDE = (1000, 2000, 4000, 10 ** 9)
SHORT_LINE_CHARS = (0, 14, 20)


def _page_options(page, short_line_chars: int) -> tuple[str, dict]:
    """(text without the thread reading, {(long_share, dated_gaps): (thread text, inside share, outside chars)})."""
    from resiliparse.parse.html import HTMLTree

    from corpus.web.blocks import BlockRules
    from corpus.web.charset import decode_html
    from corpus.web.extract import (_title, article_blocks, clean_text, extract_page, looks_like_forum,
                                    thread_worth_a_look)
    from corpus.web.threads import PageRepeats, ThreadRules, parse, placement

    rules = replace(BlockRules(), short_line_chars=short_line_chars)
    plain = extract_page(page.source, None, page.url, thread_rules=None, block_rules=rules).text
    html = decode_html(page.source)[0]
    tree = HTMLTree.parse(html)
    forum = looks_like_forum(tree, page.url)
    text, good_chars, _ = article_blocks(tree, forum, rules, title=_title(tree), fallback_below_chars=800)
    options: dict = {}
    if thread_worth_a_look(html, good_chars, forum, fallback_below_chars=800):
        repeats = PageRepeats(parse(html))
        for ls, dg in itertools.product(LONG_SHARES, DATED_GAPS):
            thread = repeats.thread(replace(ThreadRules(), min_long_share=ls, min_dated_gaps=dg))
            if thread:
                options[ls, dg] = (clean_text(thread.text), *placement(text, thread))
    return plain, options


def loso_tables(args, peer_scores: dict[str, float] | None = None) -> dict[str, list[dict]]:
    """The leave-one-set-out table; `peer_scores`: trafilatura's headline metric per set, for comparison."""
    from corpus.web.blocks import BlockRules
    from corpus.web.threads import ThreadRules

    from ._extraction_sets import SET_METRICS, in_split, load_pages, score

    shipped = ThreadRules()
    shipped_point = (BlockRules().short_line_chars, shipped.min_long_share, shipped.min_dated_gaps,
                     shipped.min_main_inside, shipped.max_outside_chars)
    grid = list(itertools.product(SHORT_LINE_CHARS, LONG_SHARES, DATED_GAPS, MAIN_INSIDE, MAX_OUTSIDE))
    if shipped_point not in grid:
        grid.append(shipped_point)
    results: dict[str, dict] = {}  # set -> grid point -> headline metric
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        pages = [p for p in load_pages(args.data, name, args.limit) if in_split(p.name, args.split)]
        if not pages:
            continue
        analysed = {slc: [_page_options(p, slc) for p in pages] for slc in SHORT_LINE_CHARS}
        metric = SET_METRICS[name][0]
        results[name] = {}
        for slc, ls, dg, mi, mo in grid:
            texts = []
            for plain, options in analysed[slc]:
                option = options.get((ls, dg))
                texts.append(option[0] if option and option[1] >= mi and option[2] < mo else plain)
            results[name][slc, ls, dg, mi, mo] = score(texts, pages)[metric]
        results[name]["off"] = score([plain for plain, _ in analysed[shipped_point[0]]], pages)[metric]
    rows = []
    for held_out in results:
        others = [s for s in results if s != held_out]
        if not others:
            continue
        best = max(grid, key=lambda g: (sum(results[s][g] for s in others) / len(others), g == shipped_point))
        rows.append({"left-out set": held_out, "metric": SET_METRICS[held_out][0],
                     "chosen on the others": str(best),
                     "left-out score, chosen": results[held_out][best],
                     "left-out score, shipped": results[held_out][shipped_point],
                     "left-out score, no thread reading": results[held_out]["off"],
                     "trafilatura": (peer_scores or {}).get(held_out),
                     "chosen - shipped": results[held_out][best] - results[held_out][shipped_point]})
    if rows:
        diffs = [r["chosen - shipped"] for r in rows]
        rows.append({"left-out set": "worst / mean", "metric": "",
                     "chosen on the others": f"shipped {shipped_point}", "left-out score, chosen": None,
                     "left-out score, shipped": None, "left-out score, no thread reading": None, "trafilatura": None,
                     "chosen - shipped": f"{min(diffs):+.4f} / "
                                                                          f"{sum(diffs) / len(diffs):+.4f}"})
    return {"leave-one-set-out: thresholds (short line chars, long share, dated gaps, main inside, max outside) "
            "chosen on the other sets": rows}
