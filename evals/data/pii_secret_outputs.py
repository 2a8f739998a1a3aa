"""Every output of the credential detector on CredData's development files, as digests, to show that a change
meant only for speed changes no output (issue 39).

    .venv/bin/python -m evals.data.pii_secret_outputs --data ../shared/data [--out digests.json] [--compare old.json]

Per file: the spans of `find_secrets` (start, end, kind, placeholder, evidence: so the model's scores), its skip
counters, and every candidate of the model with its features and skip reason. The digest of each file and of all
of them is printed or written; with --compare, the files whose digest differs from an earlier run are named.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

from corpus.pii import find_secrets
from corpus.pii import secrets as S

from . import _pii_creddata as cd


def file_outputs(text: str, ext: str) -> tuple:
    spans, skipped = find_secrets(text, ext=ext)
    cands = [((c.start, c.end, c.line, c.name, c.op, c.quote), None if feats is None else tuple(feats),
              S.skip_reason(c, text)) for c, feats in S.candidate_features(text, ext)]
    return ([(s.start, s.end, s.kind, s.placeholder, s.evidence) for s in spans], sorted(skipped.items()), cands)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, help="write {file id: digest} and the overall digest as JSON")
    parser.add_argument("--compare", type=Path, help="a JSON written by --out of an earlier run")
    args = parser.parse_args()
    files, _ = cd.load(args.data)
    start = time.process_time()
    digests = {f.id: hashlib.sha256(repr(file_outputs(f.text, f.ext)).encode()).hexdigest() for f in files}
    overall = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()
    print(f"{len(files)} files, {time.process_time() - start:.1f} s CPU, outputs digest {overall}")
    if args.out:
        args.out.write_text(json.dumps({"overall": overall, "files": digests}, indent=0, sort_keys=True))
    if args.compare:
        old = json.loads(args.compare.read_text())
        changed = sorted(k for k in set(old["files"]) | set(digests) if old["files"].get(k) != digests.get(k))
        print("same outputs" if not changed else f"{len(changed)} files differ: {changed[:20]}")
        sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
