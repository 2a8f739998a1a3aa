"""Does `web_extract_v1`'s language gate ever cost a page the language filter would keep? (issue 44)

    CIDERMILL_SHARED_DATA=/work/shared/data .venv/bin/python benchmarks/web_language_gate_check.py

Every real HTML page we have (the end-to-end benchmark's pool: the web-extraction development sets and the
WARC excerpts; the Readability pages; the bundled WARCs) is extracted with the gate of `configs/web.yaml`
(`languages: [en]`, score >= 0.9). Each page the gate took (extractor `blocks_other_language`) is extracted
again in full, without it, and language-identified as `web_lang_v1` does: a page whose full text is English
at the filter's 0.65 would have been kept by the language filter and is lost to the gate. Prints the pages
the gate took per source and every such loss (0 at the seventh session of 2026-11-28, of 461 taken).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main() -> int:
    import e2e_input
    import web_common
    from corpus.readers.warc import split_http
    from corpus.stages.web_extract import WebExtractConfig, language_gate
    from corpus.stages.web_lang import WebLangConfig, identify
    from corpus.web.extract import extract_page

    gate = language_gate(("en",), WebExtractConfig().other_language_min_score)
    max_chars = WebLangConfig().max_chars   # the language filter's own reading of a text
    pages = []
    for p in e2e_input.gold_set_pages({"synthesized_urls": 0, "urls_from_domain": 0}) + e2e_input.warc_pages():
        if p.html:
            _, ctype, body = split_http(p.block)
            pages.append((p.origin.split("/")[0], body, ctype, p.url))
    pages += [("readability" if url is None else "bundled WARCs", body, ctype, url)
              for body, ctype, url in web_common.html_pages()]
    taken, lost, n = Counter(), [], 0
    for origin, body, ctype, url in pages:
        if not body or len(body) > 4 << 20:
            continue
        try:
            gated = extract_page(body, ctype, url, other_language=gate)
        except Exception:  # noqa: BLE001  (a page the extractor chokes on is the same with or without the gate)
            continue
        n += 1
        if not gated.extractor.startswith("blocks_other_language"):
            continue
        taken[origin] += 1
        lang, score = identify(extract_page(body, ctype, url).text, max_chars)
        if lang == "en" and score >= 0.65:
            lost.append((origin, url, identify(gated.text, max_chars), (lang, round(score, 3))))
    print(f"{n:,} pages extracted; the gate took {sum(taken.values()):,}: "
          + ", ".join(f"{k} {v}" for k, v in taken.most_common()))
    print(f"pages the full extraction would keep (English >= 0.65) but the gate took: {len(lost)}")
    for row in lost:
        print("  ", *row)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
