"""`cidermill eval data pii`: recall and precision of PII detection on values planted into real text.

Into each of the 300 real C4 documents bundled in data/samples/c4 we plant, between sentences,
values of every category in the formats people write them: emails, phone numbers (US and
international formats), IPv4/IPv6 addresses, payment card numbers (valid Luhn, Visa/Mastercard/
Amex/Discover, with spaces, dashes or none), US SSNs and IBANs (valid mod-97 check digits). The
detector (corpus/web/pii.py, used by web_pii_v1) then runs on the planted text. A planted value is
found when a detected span of the same category covers it. Precision counts every detection of
the category; detections that are already in the original document (real PII in C4, e.g. a
shop's phone number) are reported apart, since they are not errors of the detector.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from pathlib import Path

from evals.report import EvalReport

NAME = "pii"
HELP = "PII detection recall/precision on values planted into real C4 documents"
TARGET_RECALL = 0.95
TARGET_CATEGORIES = ("email", "phone", "ip", "card")

_FIRST = ["john", "maria", "wei", "fatima", "olga", "li", "pedro", "anna", "james", "priya"]
_LAST = ["smith", "garcia", "chen", "khan", "ivanova", "nguyen", "silva", "muller", "brown", "patel"]
_DOMAINS = ["gmail.com", "example.org", "mail.co.uk", "uni-heidelberg.de", "company.io", "yahoo.fr"]


def _email(rng):
    sep = rng.choice([".", "_", "", "-"])
    user = f"{rng.choice(_FIRST)}{sep}{rng.choice(_LAST)}{rng.choice(['', str(rng.randint(1, 99))])}"
    return f"{user}@{rng.choice(_DOMAINS)}"


def _phone(rng):
    a, b, c = rng.randint(201, 989), rng.randint(200, 999), rng.randint(0, 9999)
    return rng.choice([f"({a}) {b}-{c:04d}", f"{a}-{b}-{c:04d}", f"{a}.{b}.{c:04d}", f"+1 {a} {b} {c:04d}",
                       f"+44 20 {rng.randint(7000, 8999)} {c:04d}", f"+49 30 {rng.randint(100, 999)} {c:04d}",
                       f"+33 1 {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)} {rng.randint(10, 99)}"])


def _ip(rng):
    if rng.random() < 0.8:
        return ".".join(str(x) for x in [rng.randint(11, 223), rng.randint(0, 255), rng.randint(0, 255), rng.randint(1, 254)])
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    return ":".join(groups) if rng.random() < 0.5 else f"2001:db8::{groups[0]}:{groups[1]}"


def _luhn_complete(prefix: str, length: int, rng) -> str:
    body = prefix + "".join(str(rng.randint(0, 9)) for _ in range(length - len(prefix) - 1))
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return body + str((10 - total % 10) % 10)


def _card(rng):
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16)])
    digits = _luhn_complete(prefix, length, rng)
    sep = rng.choice([" ", "-", ""])
    if length == 15:
        return sep.join([digits[:4], digits[4:10], digits[10:]])
    return sep.join(digits[i:i + 4] for i in range(0, 16, 4))


def _ssn(rng):
    return f"{rng.randint(1, 665):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def _iban(rng):
    country, length = rng.choice([("DE", 22), ("GB", 22), ("FR", 27), ("NL", 18), ("ES", 24)])
    if country in ("GB", "NL"):
        bban = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4))
        bban += "".join(str(rng.randint(0, 9)) for _ in range(length - 8))
    else:
        bban = "".join(str(rng.randint(0, 9)) for _ in range(length - 4))
    check = 98 - int("".join(str(int(c, 36)) for c in bban + country + "00")) % 97
    iban = f"{country}{check:02d}{bban}"
    return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4)) if rng.random() < 0.7 else iban


MAKERS = {"email": _email, "phone": _phone, "ip": _ip, "card": _card, "ssn": _ssn, "iban": _iban}
_LEADS = {"email": "Contact: ", "phone": "Call us at ", "ip": "Server address ", "card": "Card number ",
          "ssn": "SSN ", "iban": "IBAN: "}


def plant(text: str, rng: random.Random, per_doc: int) -> tuple[str, list[tuple[int, int, str]]]:
    """Insert `per_doc` values after sentence ends; returns the text and (start, end, category)."""
    cuts = [m.end() for m in re.finditer(r"[.!?](?=\s)", text)] or [len(text)]
    chosen = sorted(rng.sample(cuts, min(per_doc, len(cuts))))
    pieces, spans, pos, offset = [], [], 0, 0
    for cut in chosen:
        category = rng.choice(list(MAKERS))
        value = MAKERS[category](rng)
        insert = f" {_LEADS[category]}{value}."
        pieces.append(text[pos:cut])
        start = offset + (cut - pos) + 1 + len(_LEADS[category])
        spans.append((start, start + len(value), category))
        pieces.append(insert)
        offset += (cut - pos) + len(insert)
        pos = cut
    pieces.append(text[pos:])
    return "".join(pieces), spans


def add_arguments(parser: argparse.ArgumentParser) -> None:
    default = Path(__file__).resolve().parents[2] / "data" / "samples" / "c4" / "c4_demo.jsonl.gz"
    parser.add_argument("--docs", default=str(default), help="jsonl(.gz) of real documents with a `text` field")
    parser.add_argument("--per-doc", type=int, default=4, help="values planted per document")
    parser.add_argument("--seed", type=int, default=0)


def run(args) -> EvalReport:
    from corpus.web.pii import CATEGORIES, find_pii

    opener = gzip.open if args.docs.endswith(".gz") else open
    with opener(args.docs, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    rng = random.Random(args.seed)
    planted = {c: 0 for c in CATEGORIES}
    found = {c: 0 for c in CATEGORIES}
    detected = {c: 0 for c in CATEGORIES}
    correct = {c: 0 for c in CATEGORIES}
    in_original = {c: 0 for c in CATEGORIES}
    misses: list[str] = []
    for text in texts:
        original = {(text[s.start:s.end], s.category) for s in find_pii(text)}
        new_text, spans = plant(text, rng, args.per_doc)
        hits = find_pii(new_text)
        for s in hits:
            detected[s.category] += 1
            if (new_text[s.start:s.end], s.category) in original:
                in_original[s.category] += 1
        for start, end, category in spans:
            planted[category] += 1
            match = [h for h in hits if h.category == category and h.start <= start and h.end >= end]
            if match:
                found[category] += 1
                correct[category] += 1
            elif len(misses) < 10:
                misses.append(f"{category}: {new_text[start:end]!r}")
    rows = []
    for c in CATEGORIES:
        false_pos = detected[c] - correct[c] - in_original[c]
        rows.append({"category": c, "planted": planted[c], "found": found[c],
                     "recall": found[c] / planted[c] if planted[c] else None,
                     "detected": detected[c], "already_in_text": in_original[c],
                     "precision": correct[c] / (correct[c] + false_pos) if correct[c] + false_pos else None,
                     "precision_all": correct[c] / detected[c] if detected[c] else None})
    report = EvalReport(NAME, tables={f"planted into {len(texts)} real C4 documents": rows})
    for row in rows:
        if row["category"] in TARGET_CATEGORIES:
            report.targets[f"{row['category']} recall {row['recall']:.3f} >= {TARGET_RECALL}"] = row["recall"] >= TARGET_RECALL
    report.notes.append("precision excludes detections of values already in the original C4 text (real PII there);"
                        " precision_all counts them as errors")
    report.notes += [f"missed {m}" for m in misses]
    return report
