"""Rebuild evals/data/math_pages (real math / non-math documentation pages) from Debian .deb files.

The page list, the labels and the reasons are in evals/data/math_pages/labels.tsv (written by hand:
each page was read and labelled). This script only re-extracts the listed pages from the packages
named there, checks each package's version, and writes

- evals/data/math_pages/pages.jsonl.zst: one JSON object per page {id, package, split, label, html};
- evals/data/math_pages/LICENSE: the packages' Debian copyright files (all permissive: BSD-2/3-Clause,
  MIT/Expat, Apache-2.0, PSF-2.0, public domain; qutip's documentation CC-BY-3.0).

    apt-get download $(python -m evals.data.build_math_pages --list-packages)
    python -m evals.data.build_math_pages --debs DIR

The packages (31, Debian 12): scipy, mpmath, pandas, django, astropy, scikit-learn, lmfit, qutip,
sasmodels, pint, scikit-image, sqlalchemy, h5py, pymatgen docs (dev); sympy, statsmodels,
commons-math3, python3.11, flask, pywt, patsy, bumps, dipy, nibabel, xarray, werkzeug,
requests, pyfftw, pytables, basix, nlopt docs (held-out). How the pages were drawn is in
math_pages/SOURCE.txt; `--sample` prints a package's random draw (the first step of that selection).

The data ships in the repository (about 2 MB) because CI has no Debian mirror; this script says how
it was made. No NAME: not an evaluation (evals/cli.py skips it).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import subprocess
import tempfile
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent / "math_pages"
LABELS = HERE / "labels.tsv"


def read_labels(path: Path = LABELS) -> list[dict]:
    """labels.tsv rows: id, package, version, path, split, label (1, 0 or 'ambiguous'), reason."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        for n, rec in enumerate(csv.reader((line for line in f if not line.startswith("#")), delimiter="\t"), 2):
            if len(rec) != 7:
                raise ValueError(f"{path}: record {n}: expected 7 tab-separated fields, got {len(rec)}")
            row = dict(zip(("id", "package", "version", "path", "split", "label", "reason"), rec))
            if row["label"] not in ("0", "1", "ambiguous") or row["split"] not in ("dev", "heldout"):
                raise ValueError(f"{path}: record {n} ({row['id']}): label must be 0/1/ambiguous and split "
                                 f"dev/heldout; got {row['label']!r}, {row['split']!r}")
            rows.append(row)
    return rows


def _field(deb: Path, name: str) -> str:
    return subprocess.check_output(["dpkg-deb", "-f", str(deb), name], text=True).strip()


def build(debs: Path, out: Path = HERE) -> int:
    rows = read_labels()
    packages = {r["package"]: r["version"] for r in rows}
    found = {_field(d, "Package"): d for d in sorted(debs.glob("*.deb"))}
    missing = sorted(set(packages) - set(found))
    if missing:
        raise SystemExit(f"no .deb for {', '.join(missing)} in {debs} (apt-get download them)")
    licenses = []
    with tempfile.TemporaryDirectory() as tmp:
        for pkg, version in sorted(packages.items()):
            if _field(found[pkg], "Version") != version:
                raise SystemExit(f"{found[pkg]}: version {_field(found[pkg], 'Version')}, labels.tsv has {version}")
            subprocess.run(["dpkg-deb", "-x", str(found[pkg]), f"{tmp}/{pkg}"], check=True)
            copyright_file = Path(tmp, pkg, "usr/share/doc", pkg, "copyright")
            licenses.append(f"===== {pkg} {version}: /usr/share/doc/{pkg}/copyright =====\n"
                            + copyright_file.read_text(encoding="utf-8"))
        cctx = zstandard.ZstdCompressor(level=19)
        with open(out / "pages.jsonl.zst", "wb") as raw, cctx.stream_writer(raw) as f:
            for r in rows:
                html = Path(tmp, r["package"], r["path"].lstrip("/")).read_bytes().decode("utf-8")
                rec = {"id": r["id"], "package": r["package"], "split": r["split"], "label": r["label"], "html": html}
                f.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
    (out / "LICENSE").write_text("Licenses of the pages in pages.jsonl.zst, as their Debian packages state them.\n\n"
                                 + "\n\n".join(licenses), encoding="utf-8")
    return len(rows)


# index, search, source-listing and static pages are not drawn; mkdocs sites (nlopt) keep their pages in
# */index.html, so there only the site's own index, search and 404 pages are left out
_NOT_DRAWN = re.compile(r"(genindex|search|py-modindex|modindex|/_modules/|/_sources/|/_static/|/index\.html$|index_TOC)")
_NOT_DRAWN_MKDOCS = re.compile(r"(search|404|/site/index\.html$)")


def sample(debs: Path, package: str, n: int, subdir: str = "", *, seed: int = 25,
           exclude: set[str] = frozenset()) -> list[str]:
    """`n` HTML pages of `package` drawn at random (seed 25) among its pages (those directly in `subdir`
    when given, e.g. `html/modules/`), paths as in the package: the random draws SOURCE.txt describes."""
    deb = next((d for d in sorted(debs.glob("*.deb")) if _field(d, "Package") == package), None)
    if deb is None:
        raise SystemExit(f"no .deb for {package} in {debs} (apt-get download it)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        root = Path(tmp)
        skip = _NOT_DRAWN_MKDOCS if any(root.rglob("site/*/index.html")) else _NOT_DRAWN
        pages = sorted(p for p in root.rglob("*.html") if p.is_file() and not p.is_symlink() and not skip.search(str(p)))
        pages = ["/" + str(p.relative_to(root)) for p in pages]
    under = re.compile("/" + re.escape(subdir) + r"[^/]+$") if subdir else None
    pages = [p for p in pages if p not in exclude and (under is None or under.search(p))]
    random.Random(seed).shuffle(pages)
    return pages[:n]


def load_pages(path: Path = HERE / "pages.jsonl.zst") -> list[dict]:
    """The shipped pages with their labels (label 'ambiguous' included: callers leave it out of P/R)."""
    with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as f:
        data = f.read().decode("utf-8")
    return [json.loads(line) for line in data.splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.data.build_math_pages")
    parser.add_argument("--debs", type=Path, help="folder holding the packages' .deb files")
    parser.add_argument("--list-packages", action="store_true", help="print the packages labels.tsv names")
    parser.add_argument("--sample", nargs=3, metavar=("PACKAGE", "N", "SUBDIR"),
                        help="print N random HTML pages (seed 25) of PACKAGE (from --debs) directly in SUBDIR, e.g. html/modules/ ('' for all)")
    args = parser.parse_args(argv)
    if args.list_packages:
        print(" ".join(sorted({r["package"] for r in read_labels()})))
        return 0
    if not args.debs:
        parser.error("--debs is required")
    if args.sample:
        for path in sample(args.debs, args.sample[0], int(args.sample[1]), args.sample[2]):
            print(path)
        return 0
    print(f"wrote {build(args.debs)} pages to {HERE / 'pages.jsonl.zst'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
