"""License detection: files/s and accuracy, ours vs askalono (pyaskalono) vs a plain keyword-regex baseline;
then whole repositories per second, ours (the reader's license inputs -> the repository decision and its
per-file rules, as code_license_v1 runs them) vs askalono file by file, on the licensee fixtures and on the
hard real repositories of ../shared/data/licenses_real (several texts per file, statements, REUSE).

Same data for all: the license files of the licensee fixtures (file-level: each file's expected
key is its fixture's, files of multi-license fixtures are skipped). askalono's Python binding
reloads its embedded license store on every call, which dominates its time; that is the library
as shipped, so it is what is measured. Run: .venv/bin/python benchmarks/code_license.py [--peer-files N]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.code.license import is_license_file  # noqa: E402
from corpus.code.license_index import load_index  # noqa: E402
from corpus.code.license_match import match_text  # noqa: E402
from evals.shared import shared_data  # noqa: E402
from evals.data.license import licensee_fixtures  # noqa: E402

# The "grep for the license name" approach many pipelines start with.
KEYWORDS = [
    (r"GNU AFFERO GENERAL PUBLIC LICENSE", "agpl-3.0"), (r"GNU LESSER GENERAL PUBLIC LICENSE\s+Version 3", "lgpl-3.0"),
    (r"GNU LESSER GENERAL PUBLIC LICENSE\s+Version 2\.1", "lgpl-2.1"),
    (r"GNU GENERAL PUBLIC LICENSE\s+Version 3", "gpl-3.0"), (r"GNU GENERAL PUBLIC LICENSE\s+Version 2", "gpl-2.0"),
    (r"Mozilla Public License,? Version 2\.0", "mpl-2.0"), (r"Apache License,?\s+Version 2\.0", "apache-2.0"),
    (r"Eclipse Public License - v 1\.0", "epl-1.0"), (r"European Union Public Licen[cs]e", "eupl-1.2"),
    (r"Boost Software License", "bsl-1.0"), (r"This is free and unencumbered software", "unlicense"),
    (r"CC0 1\.0", "cc0-1.0"), (r"Attribution-ShareAlike 4\.0", "cc-by-sa-4.0"), (r"Attribution 4\.0", "cc-by-4.0"),
    (r"GNU Free Documentation License", "gfdl-1.3"), (r"The Artistic License 2\.0", "artistic-2.0"),
    (r"Neither the name", "bsd-3-clause"), (r"Redistribution and use in source and binary", "bsd-2-clause"),
    (r"Permission is hereby granted, free of charge", "mit"), (r"VIM LICENSE", "vim"),
]
KEYWORDS = [(re.compile(p, re.IGNORECASE), k) for p, k in KEYWORDS]


def regex_baseline(text: str) -> str | None:
    return next((k for p, k in KEYWORDS if p.search(text)), None)


def to_key(expr: str | None) -> str | None:
    if not expr:
        return None
    return expr.lower().removesuffix("-only").removesuffix("-or-later") if " " not in expr else "other"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer-files", type=int, default=25, help="files given to askalono (0.8 s per call)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = shared_data("licenses")
    start = time.perf_counter()
    index = load_index()
    print(f"index load: {time.perf_counter() - start:.2f} s (first build ~25 s, then cached)")
    files = []
    for _, fx_files, want in licensee_fixtures(root):
        lic = [p for p in fx_files if is_license_file(p)]
        if len(lic) == 1 and want not in (None, "other"):
            files.append((fx_files[lic[0]].decode("utf-8", "replace"), want))
    print(f"{len(files)} single-license files from the licensee fixtures")

    def run(name, fn, items, repeat):
        start = time.perf_counter()
        for _ in range(repeat):
            out = [fn(t) for t, _ in items]
        secs = (time.perf_counter() - start) / repeat
        acc = sum(o == w for o, (_, w) in zip(out, items)) / len(items)
        print(f"{name:<28} {len(items) / secs:10.1f} files/s   accuracy {acc:.3f} on {len(items)} files")
        return len(items) / secs

    ours = run("cidermill (Dice + phrases)", lambda t: to_key(getattr(match_text(t, index=index), "expression", None)),
               files, args.repeat)
    base = run("keyword regex baseline", regex_baseline, files, args.repeat)
    try:
        import askalono
    except ImportError:
        print("askalono: not installed (pip install pyaskalono); skipped")
        peer = None
    else:
        def ask(t):
            try:
                return to_key(askalono.identify(t).name)
            except Exception:  # raises when nothing matches
                return None
        subset = files[: max(args.peer_files, 1)]
        peer = run("askalono (pyaskalono)", ask, subset, 1)
        run("cidermill on that subset", lambda t: to_key(getattr(match_text(t, index=index), "expression", None)),
            subset, args.repeat)
    print(f"ratio ours/regex: {ours / base:.2f}x" + (f"   ours/askalono: {ours / peer:.1f}x" if peer else ""))
    if peer:
        repo_level([files for _, files, _ in licensee_fixtures(root)], args.peer_files, "licensee fixtures")
        from evals.data._license_real import real_repos

        real = [r["files"] for r in real_repos(shared_data("licenses_real", "repos"))]
        repo_level(real, args.peer_files, "licenses_real (hard cases)")


def repo_level(all_repos: list[dict], n_repos: int, what: str) -> None:
    """Whole repositories: our decision (files, metadata, README, combination, per-file rules) vs askalono
    on each root license file, AND-ed (evals/data/license.py); the same repositories for both."""
    from evals.data.license import askalono_expression, detect

    repos = all_repos[: max(n_repos, 1)]
    start = time.perf_counter()
    for files in repos:
        detect(files)
    ours = len(repos) / (time.perf_counter() - start)
    start = time.perf_counter()
    for files in repos:
        askalono_expression(files)
    peer = len(repos) / (time.perf_counter() - start)
    print(f"repositories ({what}): cidermill {ours:.1f} repos/s, askalono {peer:.1f} repos/s on {len(repos)} "
          f"repos; ours/askalono: {ours / peer:.1f}x")


if __name__ == "__main__":
    main()
