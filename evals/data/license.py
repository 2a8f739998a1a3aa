"""`cidermill eval data license`: repository license detection against two labelled sets.

1. licensee's spec fixtures (64 projects with an expected license key, fixtures.yml). licensee
   knows the 47 choosealicense.com licenses; its `other` means "a license file, but not one of
   those 47 as a whole" (modified texts, several licenses, unknown ones), so a detection maps to
   `other` when it is `unknown`, compound (`A AND B`) or outside that set; `no-license` and an
   empty key both mean "no license information" (our status `none`). `-only` ids compare to
   licensee's bare GPL-family keys (`gpl-2.0`), which name the text, not the "or later" option.
2. code_licensed (10 real repositories, 128 files, license known from each repository): each
   repository is rebuilt from its manifest (files at their paths + its license file) and must
   get exactly the manifest's SPDX expression (OR/AND operands compared as sets).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from corpus.code.license import detect_repository, parse_expression
from corpus.code.license_index import load_index
from corpus.code.language import language_of
from evals.shared import shared_data

from ..report import EvalReport

NAME = "license"
HELP = "license detection accuracy: licensee fixtures + code_licensed repositories"
TARGET = 0.95


def add_arguments(parser) -> None:
    parser.add_argument("--licenses", help="folder of the license data (default ../shared/data/licenses)")
    parser.add_argument("--code-licensed", help="folder of code_licensed (default ../shared/data/code_licensed)")


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


def same_expression(a: str, b: str) -> bool:
    def canon(node):
        if isinstance(node, str):
            return node
        op, items = node
        return (op, frozenset(canon(i) for i in items)) if op != "WITH" else (op, tuple(canon(i) for i in items))
    return canon(parse_expression(a)) == canon(parse_expression(b))


def _detect(files: dict[str, bytes], sources: list[str] | None = None):
    text = {p: b.decode("utf-8", "replace") for p, b in files.items()}
    if sources is None:
        sources = [p for p in text if language_of(p, text[p][:200]) is not None]
    return detect_repository(list(text), text.__getitem__, source_paths=sorted(sources))


def run(args) -> EvalReport:
    lic_root = Path(args.licenses) if getattr(args, "licenses", None) else shared_data("licenses")
    code_root = Path(args.code_licensed) if getattr(args, "code_licensed", None) else shared_data("code_licensed")
    start = time.perf_counter()
    load_index(lic_root)
    build_s = time.perf_counter() - start
    known = {p.stem for p in (lic_root / "licensee" / "vendor" / "choosealicense.com" / "_licenses").glob("*.txt")}
    rows, misses = [], []
    start = time.perf_counter()
    for name, files, want in licensee_fixtures(lic_root):
        det = _detect(files)
        got = licensee_key(det, known)
        if got != want:
            misses.append({"set": "licensee", "case": name, "expected": want, "detected": det.expression})
        rows.append(got == want)
    licensee_s = time.perf_counter() - start
    repo_ok = []
    for repo, (files, sources, want) in sorted(code_licensed_repos(code_root).items()):
        det = _detect(files, sources)
        ok = same_expression(det.expression, want)
        repo_ok.append(ok)
        if not ok:
            misses.append({"set": "code_licensed", "case": repo, "expected": want, "detected": det.expression})
    acc = sum(rows) / len(rows)
    report = EvalReport(NAME)
    report.tables["accuracy"] = [
        {"set": "licensee fixtures", "cases": len(rows), "correct": sum(rows), "accuracy": acc,
         "seconds": licensee_s},
        {"set": "code_licensed repos", "cases": len(repo_ok), "correct": sum(repo_ok),
         "accuracy": sum(repo_ok) / len(repo_ok), "seconds": None},
    ]
    report.tables["misses"] = misses
    report.targets[f"licensee accuracy >= {TARGET}"] = acc >= TARGET
    report.targets["code_licensed all correct"] = all(repo_ok)
    report.notes.append(f"index load/build {build_s:.1f} s (cached under CIDERMILL_CACHE after the first build)")
    return report
