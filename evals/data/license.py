"""`cidermill eval data license`: repository license decisions, ours beside askalono, on three sets.

1. licensee's spec fixtures (64 projects, ../shared/data/licenses/licensee). Each gets an SPDX
   expression and keep/drop label: licensee's key mapped to its SPDX id, and for the fixtures
   licensee calls `other`/no-license, a label written from reading the files (GOLD below, with why).
   licensee's own key accuracy is reported too (its `other` = unknown, compound or outside its 47).
2. code_licensed (10 real repositories, ../shared/data/code_licensed): each rebuilt from its
   manifest (files at their paths + its license file), labelled by the manifest's SPDX expression.
3. constructed repositories (evals/data/_license_cases.py), one or more per pattern of issue 23,
   built from real license texts and real metadata formats.

Per set: exact SPDX expression (as expressions: operand order does not matter), wrong keeps (the
label drops, we keep) and wrong drops (the label keeps, we drop; rate over the label's keeps),
under the permissive set of configs/code.yaml. The peer, askalono (pyaskalono), identifies each
root license file (or REUSE text) alone; a file-by-file matcher has no rule for combining files, so
its findings are AND-ed, and a repository without a license file is `unknown` for it.
This module reads ../shared (allowed for evals); the detector itself does not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from corpus.code.language import language_of
from corpus.code.license import PERMISSIVE, detect_repository, is_allowed, license_role
from corpus.code.license_expr import join, normalize, parse_expression, same_expression
from corpus.code.license_index import load_index
from evals.shared import shared_data

from ..report import EvalReport

NAME = "license"
HELP = "license decisions (exact expression, wrong keeps/drops) on licensee fixtures, code_licensed, constructed repos"
TARGET = 0.95
MAX_WRONG_DROP = 0.03

# licensee keys -> SPDX (bare GPL-family keys name the text: `-only`)
_KEYS = {"agpl-3.0": "AGPL-3.0-only", "gpl-2.0": "GPL-2.0-only", "gpl-3.0": "GPL-3.0-only", "lgpl-2.1": "LGPL-2.1-only",
         "lgpl-3.0": "LGPL-3.0-only", "gfdl-1.3": "GFDL-1.3-only", "unlicense": "Unlicense", "vim": "Vim"}
# Fixtures licensee labels `other` or no-license, labelled here from their files.
GOLD = {
    "bsd-plus-patents": "BSD-3-Clause AND LicenseRef-scancode-facebook-patent-rights-2",  # BSD text + PATENTS grant
    "case-sensitive": "unknown",  # an empty license file: intent without terms
    "cc-by-nc-sa": "CC-BY-NC-SA-4.0", "cc-by-nd": "CC-BY-ND-4.0",
    "copyright-encoding": "unknown",  # a copyright line only
    "description-license": "MIT",  # R DESCRIPTION `License: MIT + file LICENSE` + the R MIT template
    "fcpl-modified-mpl": "unknown", "wrk-modified-apache": "unknown",
    "pixar-modified-apache": "Pixar",  # the modified Apache text is SPDX's `Pixar` license (OpenUSD)
    "gemspec": "unknown",  # `project._gemspec` is not a gemspec name: nothing to read
    "license-folder": "unknown", "webmock": "unknown",
    "licenses-dir-with-multiple-license-files": "MIT AND MPL-2.0",  # REUSE texts only: all apply
    "licenses-dir-with-top-level-license": "Apache-2.0",  # the root file decides; LICENSES/MIT.txt recorded
    "multiple-license-files": "MIT OR MPL-2.0",  # separate root license files: alternatives
}


def add_arguments(parser) -> None:
    parser.add_argument("--licenses", help="folder of the license fixtures (default ../shared/data/licenses)")
    parser.add_argument("--code-licensed", help="folder of code_licensed (default ../shared/data/code_licensed)")
    parser.add_argument("--no-peer", action="store_true", help="skip askalono (about 0.8 s per file)")


def licensee_fixtures(root: Path) -> list[tuple[str, dict[str, bytes], str | None]]:
    """(name, {path: bytes}, expected key) for each fixture project in fixtures.yml."""
    import yaml

    fixtures = root / "licensee" / "spec" / "fixtures"
    expected = yaml.safe_load((fixtures / "fixtures.yml").read_text())
    out = []
    for name, want in expected.items():
        folder = fixtures / name
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        key = want.get("key")
        out.append((name, files, None if key in (None, "no-license") else key))
    return out


def licensee_key(detection, known: set[str]) -> str | None:
    if detection.status == "none":
        return None
    expr = detection.expression
    key = expr.lower().removesuffix("-only")
    if " " in expr or expr == "unknown" or key not in known:
        return "other"
    return key


def licensee_gold(name: str, key: str | None, spdx_ids: dict[str, str]) -> str:
    if name in GOLD:
        return GOLD[name]
    if key is None or key == "other":
        return "unknown"
    return _KEYS.get(key) or spdx_ids.get(key, key)


def code_licensed_repos(root: Path) -> dict[str, tuple[dict[str, bytes], list[str], str]]:
    """repo -> ({path: bytes} with its license file, source paths, expected SPDX expression)."""
    repos: dict[str, tuple[dict, list, str]] = {}
    for line in (root / "manifest.jsonl").read_text().splitlines():
        row = json.loads(line)
        files, sources, _ = repos.setdefault(row["repo"], ({}, [], row["repo_license_spdx"]))
        files[row["path"]] = (root / row["file"]).read_bytes()
        sources.append(row["path"])
        folder = (root / row["file"]).parent
        lic = next(folder.glob("_REPO_LICENSE_*"))
        files[row["repo_license_file"]] = lic.read_bytes()
    return repos


def detect(files: dict, sources: list[str] | None = None):
    text = {p: (b.decode("utf-8", "replace") if isinstance(b, bytes) else b) for p, b in files.items()}
    if sources is None:
        sources = [p for p in text if language_of(p, text[p][:200]) is not None]
    return detect_repository(list(text), text.__getitem__, source_paths=sorted(sources))


def askalono_expression(files: dict) -> str:
    """askalono on each root license file / REUSE text, findings AND-ed; `unknown` when none matches."""
    import askalono

    found = []
    for path, data in sorted(files.items()):
        if license_role(path) not in ("own", "reuse", "artifact", "bundled") or "/" in path and license_role(path) != "reuse":
            continue
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        try:
            found.append(askalono.identify(text).name)
        except Exception:  # askalono raises when nothing matches
            found.append("unknown")
    known = [f for f in found if f != "unknown"]
    if not known:
        return "unknown"
    return join(known, "AND") if len(known) == len(found) else join(known + ["LicenseRef-askalono-unmatched"], "AND")


def all_cases(lic_root: Path, code_root: Path) -> list[dict]:
    """Rows {set, case, pattern, files, sources, expected, keep} of the three sets."""
    index = load_index()
    rows = []
    for name, files, key in licensee_fixtures(lic_root):
        gold = licensee_gold(name, key, index.spdx_ids)
        rows.append({"set": "licensee", "case": name, "pattern": "licensee", "files": files, "sources": None,
                     "expected": gold, "keep": is_allowed(gold, PERMISSIVE), "licensee_key": key})
    for repo, (files, sources, want) in sorted(code_licensed_repos(code_root).items()):
        rows.append({"set": "code_licensed", "case": repo, "pattern": "real", "files": files, "sources": sources,
                     "expected": want, "keep": is_allowed(want, PERMISSIVE)})
    from ._license_cases import cases

    for c in cases():
        rows.append({"set": "constructed", "case": c.name, "pattern": c.pattern, "files": c.files, "sources": None,
                     "expected": c.expected, "keep": c.keep})
    return rows


def _score(rows: list[dict], field: str) -> dict:
    keeps = [r for r in rows if r["keep"]]
    wrong_keep = [r for r in rows if not r["keep"] and r[f"{field}_keep"]]
    wrong_drop = [r for r in keeps if not r[f"{field}_keep"]]
    exact = sum(same_expression(r[field], r["expected"]) for r in rows)
    return {"cases": len(rows), "exact": exact, "exact_rate": exact / len(rows), "wrong_keeps": len(wrong_keep),
            "wrong_drops": len(wrong_drop), "wrong_drop_rate": len(wrong_drop) / max(len(keeps), 1)}


def run(args) -> EvalReport:
    lic_root = Path(args.licenses) if getattr(args, "licenses", None) else shared_data("licenses")
    code_root = Path(args.code_licensed) if getattr(args, "code_licensed", None) else shared_data("code_licensed")
    peer = not getattr(args, "no_peer", False)
    start = time.perf_counter()
    load_index()
    build_s = time.perf_counter() - start
    rows = all_cases(lic_root, code_root)
    ours_s = peer_s = 0.0
    for r in rows:
        t = time.perf_counter()
        det = detect(r["files"], r["sources"])
        ours_s += time.perf_counter() - t
        r["ours"], r["ours_keep"], r["how"] = det.expression, is_allowed(det.expression, PERMISSIVE), det.explain()
        r["licensee_ok"] = r["set"] != "licensee" or licensee_key(det, _known(lic_root)) == r.get("licensee_key")
        if peer:
            t = time.perf_counter()
            r["askalono"] = askalono_expression(r["files"])
            peer_s += time.perf_counter() - t
            r["askalono_keep"] = is_allowed(r["askalono"], PERMISSIVE)
    report = EvalReport(NAME)
    table = []
    for name in ("licensee", "code_licensed", "constructed", "all"):
        sub = [r for r in rows if name in ("all", r["set"])]
        for who in ("ours", "askalono") if peer else ("ours",):
            table.append({"set": name, "detector": who, **_score(sub, who)})
    report.tables["decisions"] = table
    lic_rows = [r for r in rows if r["set"] == "licensee"]
    lic_acc = sum(r["licensee_ok"] for r in lic_rows) / len(lic_rows)
    report.tables["licensee keys"] = [{"fixtures": len(lic_rows), "licensee_key_accuracy": lic_acc}]
    report.tables["misses (ours)"] = [
        {"set": r["set"], "case": r["case"], "expected": r["expected"], "detected": r["ours"],
         "error": ("WRONG KEEP" if r["ours_keep"] and not r["keep"] else
                   "wrong drop" if r["keep"] and not r["ours_keep"] else "inexact")}
        for r in rows if not same_expression(r["ours"], r["expected"]) or r["ours_keep"] != r["keep"]]
    total = _score(rows, "ours")
    report.targets["0 wrong keeps"] = total["wrong_keeps"] == 0
    report.targets[f"wrong drops <= {MAX_WRONG_DROP:.0%} of the label's keeps"] = total["wrong_drop_rate"] <= MAX_WRONG_DROP
    report.targets[f"licensee key accuracy >= {TARGET}"] = lic_acc >= TARGET
    report.notes.append(f"index load/build {build_s:.1f} s (cached under CIDERMILL_CACHE after the first build)")
    report.notes.append(f"detection time: ours {ours_s:.2f} s" + (f", askalono {peer_s:.2f} s" if peer else "")
                        + f" for {len(rows)} repositories")
    report.notes.append("constructed cases by pattern: " + ", ".join(
        f"{p}={sum(r['pattern'] == p for r in rows)}" for p in dict.fromkeys(r["pattern"] for r in rows
                                                                               if r["set"] == "constructed")))
    return report


def _known(lic_root: Path) -> set[str]:
    return {p.stem for p in (lic_root / "licensee" / "vendor" / "choosealicense.com" / "_licenses").glob("*.txt")}


__all__ = ["run", "add_arguments", "licensee_fixtures", "licensee_key", "code_licensed_repos", "same_expression",
           "parse_expression", "normalize", "detect", "all_cases"]
