"""Heuristic filters: our Gopher repetition + Gopher quality + C4 + FineWeb stages (chained, one
Arrow table) vs datatrove 0.10.1's same four filters chained per document, on the same texts:
the main text of every benchmark page (see web_common) plus the 300 bundled C4 documents.
Also checks that both keep and drop the same documents for the same reasons.

    .venv/bin/python benchmarks/web_quality.py
"""

from __future__ import annotations

import argparse

from web_common import c4_texts, html_pages, measure, report

WARMUP = ([" ".join(f"Warm-up line {i} loads the tokenizer, not the data." for i in range(3)) + "\n" + "\n".join(f"Line {i} of the warm-up text is here." for i in range(9))],)


def ours(texts):
    import pyarrow as pa

    # The classes directly, not through the registry (which imports every area's stages).
    from corpus.stages.web_quality_c4 import C4Quality
    from corpus.stages.web_quality_fineweb import FineWebQuality
    from corpus.stages.web_quality_gopher import GopherQuality, GopherRepetition

    stages = [GopherRepetition({}), GopherQuality({}), C4Quality({}), FineWebQuality({})]
    table = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    decisions = {}
    for stage in stages:
        result = stage(table)
        if result.rejects is not None:
            decisions.update(zip(result.rejects.column("id").to_pylist(),
                                 result.rejects.column("drop_reason").to_pylist()))
        table = result.table
    return [decisions.get(str(i)) for i in range(len(texts))]


def peer(texts):
    from datatrove.data import Document
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)

    filters = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter()]
    out = []
    for i, text in enumerate(texts):
        doc, reason = Document(text=text, id=str(i)), None
        for f in filters:
            verdict = f.filter(doc)
            if verdict is not True:
                reason = verdict[1] if isinstance(verdict, tuple) else "dropped"
                break
        out.append(reason)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2, help="fresh runs per side; the fastest counts")
    args = parser.parse_args()
    from corpus.web.extract import extract_page

    texts = [extract_page(c, t, u).text for c, t, u in html_pages()] + c4_texts()
    o = measure(ours, texts, warmup=WARMUP, repeats=args.repeats)
    p = measure(peer, texts, warmup=WARMUP, repeats=args.repeats)
    report("Gopher + C4 + FineWeb filters", "docs", len(texts), o, p,
           "ours: 4 stages, vectorised", "datatrove 0.10.1 chained filters")
    same = sum(a == b for a, b in zip(o[2], p[2]))
    print(f"  same decision and reason: {same}/{len(texts)}; kept {sum(r is None for r in o[2])}")


if __name__ == "__main__":
    main()
