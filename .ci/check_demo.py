"""Assert that `make demo` did real work in a copy with no ../shared: read the demo's manifests.

    python .ci/check_demo.py DATA_ROOT

- the license filter dropped code files by license (`license:<expr>` reasons);
- the math signals counted math symbols (Unicode or LaTeX commands), and the math filter kept pages;
- decontamination loaded every benchmark shipped with cidermill (each from the bundle, with items),
  in the web demo (the default set) and the code demo (HumanEval, MBPP).
Exits 1 naming every failed check.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.decontam.benchmarks import DEFAULT_BENCHMARKS  # noqa: E402
from manifests import Catalog  # noqa: E402


def stats(manifest, name):
    found = [s for s in manifest.stats if s.name == name]
    return found[0] if found else None


def stage_desc(manifest, name):
    found = [s for s in manifest.pipeline.stages if s["name"] == name] if manifest.pipeline else []
    return found[0] if found else None


def check(root: str) -> list[str]:
    cat = Catalog(root)
    failures: list[str] = []

    def expect(ok: bool, what: str) -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            failures.append(what)

    code = cat.resolve("code-files").manifest
    lic = stats(code, "code_license_v1")
    by_license = {k: v for k, v in (lic.dropped if lic else {}).items()
                  if k.startswith("license:") and k != "license:unknown"}  # a detected license, not a missing one
    expect(bool(by_license), f"code_license_v1 dropped files by license: {by_license}")
    expect(lic is not None and lic.rows_out > 0, f"code_license_v1 kept permissive files ({lic.rows_out if lic else 0})")

    math = cat.resolve("math-pages").manifest
    sig = stats(math, "math_signals_v1")
    counters = sig.counters if sig else {}
    # The symbol table has Unicode symbols and LaTeX command words; the demo's math pages are TeX-sourced
    # (MathJax/KaTeX/MathML converted to LaTeX in the page text), so their symbols arrive as LaTeX commands.
    n_symbols = counters.get("symbols", 0) + counters.get("latex", 0)
    expect(n_symbols > 0 and counters.get("rows_with_latex", 0) + counters.get("rows_with_symbols", 0) > 0,
           f"math_signals_v1 counted math symbols: {counters.get('symbols')} Unicode, {counters.get('latex')} LaTeX "
           f"commands in {counters.get('rows_with_latex')} pages")
    filt = stats(math, "math_filter_v1")
    expect(filt is not None and filt.rows_out > 0 and filt.dropped.get("no_math", 0) > 0,
           f"math_filter_v1 kept math pages and dropped others: {filt.rows_out if filt else 0} kept, "
           f"{filt.dropped if filt else {}}")

    for name, wanted in (("web", DEFAULT_BENCHMARKS), ("code-files", ["humaneval", "mbpp"])):
        m = cat.resolve(name).manifest
        desc = stage_desc(m, "decontaminate_v1") or {}
        data = desc.get("data", {})
        loaded = sorted(b for b, d in data.items() if d.get("source") == "bundled" and d.get("items", 0) > 0)
        expect(loaded == sorted(wanted), f"{name}: decontaminate_v1 loaded every bundled benchmark "
                                         f"({len(loaded)}/{len(wanted)}: {', '.join(loaded)})")
        expect(stats(m, "decontaminate_v1") is not None, f"{name}: decontaminate_v1 ran")
    return failures


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    failed = check(sys.argv[1])
    print(f"\n{len(failed)} check(s) failed" if failed else "\nall demo checks passed")
    sys.exit(1 if failed else 0)
