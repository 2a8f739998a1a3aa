"""`cidermill eval data license`: license decisions, ours beside askalono, on two development sets.

Set 1 (the project's 142, three parts):
1. licensee's spec fixtures (64 projects, ../shared/data/licenses/licensee). Each gets an SPDX
   expression and keep/drop label: licensee's key mapped to its SPDX id, and for the fixtures
   licensee calls `other`/no-license, a label written from reading the files (GOLD below, with why).
   licensee's own key accuracy is reported too (its `other` = unknown, compound or outside its 47).
2. code_licensed (10 real repositories, ../shared/data/code_licensed): each rebuilt from its
   manifest (files at their paths + its license file), labelled by the manifest's SPDX expression.
3. constructed repositories (evals/data/_license_cases.py), one or more per pattern of issues 23 and 38,
   built from real license texts and real metadata formats.
Set 2, licenses_real (53 real repositories chosen for hard cases, ../shared/data/licenses_real,
evals/data/_license_real.py): per repository and per hard-case kind, and per source file.

Every repository goes through the product path: what the repos reader carries (license_inputs.py)
-> the repository decision and the per-file rules (license_files.py), as `code_license_v1` runs them.
Per set: exact SPDX expression (as expressions: operand order does not matter; the repository as a
whole, `Detection.whole`), wrong keeps (the label drops, we keep), wrong drops (the label keeps, we drop;
rate over the label's keeps) and permissive repositories dropped as `ambiguous`, under the
permissive set of configs/code.yaml. licenses_real also scores each drawn source file's decision.
The peer, askalono (pyaskalono), identifies each root license file (or REUSE text) alone; a
file-by-file matcher has no rule for combining files, so its findings are AND-ed, and a repository
without a license file is `unknown` for it.
This module reads ../shared (allowed for evals); the detector itself does not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from corpus.code.license import PERMISSIVE, is_allowed, license_role
from corpus.code.license_expr import AMBIGUOUS, join, normalize, parse_expression, same_expression
from corpus.code.license_files import decide_repository
from corpus.code.license_index import load_index
from corpus.code.license_inputs import HEAD_CHARS, collect
from evals.shared import shared_data

from ..report import EvalReport

NAME = "license"
HELP = ("license decisions (exact expression, wrong keeps/drops, per hard-case kind and per file) on licensee "
        "fixtures, code_licensed, constructed repos and 53 real hard-case repositories")
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
    parser.add_argument("--licenses-real", help="folder of licenses_real/repos (default ../shared/data/licenses_real/repos)")
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


def decide(files: dict):
    """The repository's decision and per-file rules, through the product path (reader inputs -> stage)."""
    text = {p: (b.decode("utf-8", "replace") if isinstance(b, bytes) else b) for p, b in files.items()}
    return decide_repository(collect(sorted(text), text.get), index=load_index())


def detect(files: dict, sources: list[str] | None = None):
    """The repository's Detection (`sources` is accepted for old callers; the reader picks the heads)."""
    return decide(files).detection


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


def real_cases(root: Path) -> list[dict]:
    """Rows of licenses_real: the repository's label for exactness, its code's label for keep/drop."""
    from ._license_real import real_repos

    return [{"set": "licenses_real", "case": r["case"], "pattern": ", ".join(r["kinds"]), "kinds": r["kinds"],
             "files": r["files"], "sources": r["sources"], "expected": r["label"], "also": r["accept_also"],
             "no_spdx": r["no_spdx"], "keep": is_allowed(r["code_label"], r["allow_list"]),
             "file_labels": r["file_labels"]} for r in real_repos(root)]


def _exact(r: dict, field: str) -> bool:
    got = r[field]
    if r.get("no_spdx") and got in ("unknown", "NONE"):
        return True  # labels with no SPDX id score exact when the detector says unknown (SOURCE.txt)
    return any(same_expression(got, want) for want in [r["expected"], *r.get("also", [])])


def _score(rows: list[dict], field: str) -> dict:
    keeps = [r for r in rows if r["keep"]]
    wrong_keep = [r for r in rows if not r["keep"] and r[f"{field}_keep"]]
    wrong_drop = [r for r in keeps if not r[f"{field}_keep"]]
    ambiguous = [r for r in keeps if AMBIGUOUS in r[field]]
    exact = sum(_exact(r, field) for r in rows)
    return {"cases": len(rows), "exact": exact, "exact_rate": round(exact / max(len(rows), 1), 4),
            "wrong_keeps": len(wrong_keep), "wrong_drops": len(wrong_drop),
            "wrong_drop_rate": round(len(wrong_drop) / max(len(keeps), 1), 4),
            "permissive_dropped_ambiguous": f"{len(ambiguous)}/{len(keeps)}"}


def _file_rows(r: dict, repo) -> list[dict]:
    """Each drawn source file of a licenses_real repository: its decision beside its label."""
    out = []
    for path, label in r["file_labels"].items():
        want = r["keep"] if label is None else label[0]
        head = r["files"][path].decode("utf-8", "replace")[:HEAD_CHARS]
        got = repo.for_file(path, head)
        keep = is_allowed(got.expression, PERMISSIVE)
        out.append({"case": r["case"], "file": path, "want_keep": want, "keep": keep, "rule": got.rule,
                    "license": got.expression, "why": "" if label is None else label[1], "kinds": r["kinds"]})
    return out


def run(args) -> EvalReport:
    lic_root = Path(args.licenses) if getattr(args, "licenses", None) else shared_data("licenses")
    code_root = Path(args.code_licensed) if getattr(args, "code_licensed", None) else shared_data("code_licensed")
    real_root = (Path(args.licenses_real) if getattr(args, "licenses_real", None)
                 else shared_data("licenses_real", "repos"))
    peer = not getattr(args, "no_peer", False)
    start = time.perf_counter()
    load_index()
    build_s = time.perf_counter() - start
    rows = all_cases(lic_root, code_root) + real_cases(real_root)
    ours_s = peer_s = 0.0
    files: list[dict] = []
    for r in rows:
        t = time.perf_counter()
        repo = decide(r["files"])
        ours_s += time.perf_counter() - t
        det = repo.detection
        r["ours"], r["ours_keep"], r["how"] = det.whole, is_allowed(det.whole, PERMISSIVE), det.explain()
        r["licensee_ok"] = r["set"] != "licensee" or licensee_key(det, _known(lic_root)) == r.get("licensee_key")
        if r["set"] == "licenses_real":
            files += _file_rows(r, repo)
        if peer:
            t = time.perf_counter()
            r["askalono"] = askalono_expression(r["files"])
            peer_s += time.perf_counter() - t
            r["askalono_keep"] = is_allowed(r["askalono"], PERMISSIVE)
    report = EvalReport(NAME)
    table = []
    for name in ("licensee", "code_licensed", "constructed", "set 1 (142)", "licenses_real"):
        sub = [r for r in rows if r["set"] == name or (name == "set 1 (142)" and r["set"] != "licenses_real")]
        for who in ("ours", "askalono") if peer else ("ours",):
            table.append({"set": name, "detector": who, **_score(sub, who)})
    report.tables["decisions"] = table
    real = [r for r in rows if r["set"] == "licenses_real"]
    from ._license_real import KINDS

    report.tables["licenses_real by hard-case kind (repositories; files)"] = [
        {"kind": kind, **{k: v for k, v in _score([r for r in real if kind in r["kinds"]], "ours").items()
                          if k in ("cases", "exact", "wrong_keeps", "wrong_drops", "permissive_dropped_ambiguous")},
         "files": len(fk := [f for f in files if kind in f["kinds"]]),
         "file_wrong_keeps": sum(f["keep"] and not f["want_keep"] for f in fk),
         "file_wrong_drops": sum(f["want_keep"] and not f["keep"] for f in fk)}
        for kind in KINDS]
    report.tables["licenses_real files"] = [{
        "files": len(files), "label_keeps": sum(f["want_keep"] for f in files),
        "wrong_keeps": sum(f["keep"] and not f["want_keep"] for f in files),
        "wrong_drops": sum(f["want_keep"] and not f["keep"] for f in files),
        "decided_by_file_rules": sum(not f["rule"].startswith("repository") for f in files)}]
    report.tables["file misses (ours)"] = [
        {"case": f["case"], "file": f["file"], "want": "keep" if f["want_keep"] else "drop", "got": f["license"],
         "rule": f["rule"], "why": f["why"]} for f in files if f["keep"] != f["want_keep"]]
    lic_rows = [r for r in rows if r["set"] == "licensee"]
    lic_acc = sum(r["licensee_ok"] for r in lic_rows) / len(lic_rows)
    report.tables["licensee keys"] = [{"fixtures": len(lic_rows), "licensee_key_accuracy": lic_acc}]
    report.tables["misses (ours)"] = [
        {"set": r["set"], "case": r["case"], "expected": r["expected"], "detected": r["ours"],
         "error": ("WRONG KEEP" if r["ours_keep"] and not r["keep"] else
                   "wrong drop" if r["keep"] and not r["ours_keep"] else "inexact")}
        for r in rows if not _exact(r, "ours") or r["ours_keep"] != r["keep"]]
    for name, sub in (("set 1", [r for r in rows if r["set"] != "licenses_real"]), ("licenses_real", real)):
        total = _score(sub, "ours")
        keeps = sum(r["keep"] for r in sub)
        amb = sum(r["keep"] and AMBIGUOUS in r["ours"] for r in sub)
        report.targets[f"{name}: 0 wrong keeps"] = total["wrong_keeps"] == 0
        report.targets[f"{name}: wrong drops <= {MAX_WRONG_DROP:.0%} of the label's keeps"] = \
            total["wrong_drop_rate"] <= MAX_WRONG_DROP
        report.targets[f"{name}: < 5% of permissive repositories dropped as ambiguous"] = amb < 0.05 * keeps
    report.targets[f"licensee key accuracy >= {TARGET}"] = lic_acc >= TARGET
    report.notes.append(f"index load/build {build_s:.1f} s (cached under CIDERMILL_CACHE after the first build)")
    report.notes.append(f"detection time: ours {ours_s:.2f} s" + (f", askalono {peer_s:.2f} s" if peer else "")
                        + f" for {len(rows)} repositories")
    report.notes.append("constructed cases by pattern: " + ", ".join(
        f"{p}={sum(r['pattern'] == p for r in rows)}" for p in dict.fromkeys(r["pattern"] for r in rows
                                                                               if r["set"] == "constructed")))
    report.notes.append("licenses_real: the code's label is the repository's except d2l (its note: the code is "
                        "MIT-0, the book CC BY-SA); per-file labels differ from the repository's for 14 files "
                        "(evals/data/_license_real.py FILE_LABELS), 4 vendored files are left out")
    return report


def _known(lic_root: Path) -> set[str]:
    return {p.stem for p in (lic_root / "licensee" / "vendor" / "choosealicense.com" / "_licenses").glob("*.txt")}


__all__ = ["run", "add_arguments", "licensee_fixtures", "licensee_key", "code_licensed_repos", "same_expression",
           "parse_expression", "normalize", "detect", "decide", "all_cases", "real_cases"]
