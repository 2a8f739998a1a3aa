"""The second development set of `eval data license`: 53 real repositories (../shared/data/licenses_real).

Each repository's files are scored as the repos reader and `code_license_v1` see them. Labels come from
labels.json (its own labelling rules, SOURCE.txt). Written here, by reading the repositories:
- KINDS: the hard-case kinds each repository is an example of (from its `hard_case` note), for the
  per-kind breakdown. A repository can be several kinds.
- CODE_LABELS: where labels.json's own note says the code's license differs from the repository's
  label (d2l: the book is CC BY-SA, its code MIT-0).
- FILE_LABELS: the license decision of a source file where it differs from its repository's label,
  with the reason read from the file and the repository's statements (SPDX headers in REUSE and
  Uniswap-style repositories, folders a root LICENSE gives another license). Every other source file
  is expected to follow its repository's label. Files whose license the sample cannot tell (vendored
  code whose license file is not in the sample) are left out, with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

KINDS = {
    "REUSE / per-file SPDX": ["KDE__extra-cmake-modules", "fsfe__reuse-example", "KDE__kcoreaddons", "curl__curl",
                              "Uniswap__v3-core"],
    "AND/OR in package metadata": ["pypa__packaging", "dateutil__dateutil", "sindresorhus__type-fest",
                                   "digitalbazaar__forge", "cure53__DOMPurify", "kriszyp__json-schema",
                                   "oracle__python-oracledb", "briansmith__ring", "dtolnay__unicode-ident",
                                   "nodeca__pako", "numpy__numpy", "magento__magento-coding-standard"],
    "statement-only LICENSE": ["pypa__packaging", "eclipse__mosquitto", "briansmith__ring", "lz4__lz4",
                               "tukaani-project__xz", "timescale__timescaledb", "freetype__freetype",
                               "psycopg__psycopg2"],
    "several texts / preface in one file": ["dateutil__dateutil", "digitalbazaar__forge", "kriszyp__json-schema",
                                            "Mbed-TLS__mbedtls", "oracle__python-oracledb", "nothings__stb",
                                            "libwww-perl__libwww-perl", "AbsInt__CompCert"],
    "Perl": ["libwww-perl__libwww-perl", "mojolicious__mojo"],
    "code vs weights/docs/fonts": ["THUDM__ChatGLM-6B", "deepseek-ai__DeepSeek-V3", "facebookresearch__sam2",
                                   "d2l-ai__d2l-en", "ProgrammeVitam__vitam", "facebookresearch__DiT",
                                   "meta-llama__llama3"],
    "vendored / bundled": ["astropy__astropy", "micropython__micropython", "facebookresearch__sam2", "numpy__numpy",
                           "redis__redis", "elastic__fleet-server", "facebook__rocksdb"],
    "license by folder": ["lz4__lz4", "tukaani-project__xz", "timescale__timescaledb", "growthbook__growthbook",
                          "AbsInt__CompCert"],
    "dual across files": ["facebook__zstd", "facebook__rocksdb", "cure53__DOMPurify", "pjreddie__darknet"],
    "source-available / non-commercial": ["Uniswap__v3-core", "redis__redis", "elastic__fleet-server",
                                          "timescale__timescaledb", "AbsInt__CompCert", "facebookresearch__DiT",
                                          "getify__You-Dont-Know-JS", "meta-llama__llama3", "growthbook__growthbook"],
    "permissive, not listed": ["dtolnay__unicode-ident", "nodeca__pako", "curl__curl", "dromara__hutool", "rupa__z",
                               "douglascrockford__JSON-js", "freetype__freetype", "numpy__numpy"],
    "non-English texts": ["THUDM__ChatGLM-6B", "dromara__hutool", "ProgrammeVitam__vitam"],
    "README / metadata only, or none": ["karpathy__build-nanogpt", "nestjs__typescript-starter",
                                        "douglascrockford__JSON-js", "karpathy__pytorch-normalizing-flows"],
    "names and ids": ["landley__toybox", "jakartaee__jaxb-api", "weavejester__compojure", "psycopg__psycopg2",
                      "pjreddie__darknet", "mojolicious__mojo"],
}

# the code's license where labels.json's note says it is not the repository's label
CODE_LABELS = {"d2l-ai__d2l-en": ("MIT-0", "note: 'the .py code (d2l/) alone is MIT-0'; the book text is CC BY-SA")}

# (repository, source file) -> (keep?, why); others follow the repository's (code) label
FILE_LABELS = {
    ("KDE__extra-cmake-modules", "toolchain/generate-fastlane-metadata.py"):
        (False, "SPDX GPL-2.0-or-later; the note: a per-file filter should drop it"),
    ("tukaani-project__xz", "lib/getopt-pfx-core.h"): (False, "SPDX LGPL-2.1-or-later; COPYING: getopt_long is LGPL"),
    ("tukaani-project__xz", "src/liblzma/lz/lz_encoder_mf.c"): (True, "SPDX 0BSD; COPYING: liblzma is 0BSD"),
    ("tukaani-project__xz", "src/liblzma/lzma/fastpos_table.c"): (True, "SPDX 0BSD; COPYING: liblzma is 0BSD"),
    ("Uniswap__v3-core", "contracts/libraries/FullMath.sol"): (True, "SPDX MIT; README: FullMath.sol is MIT"),
    ("lz4__lz4", "lib/lz4file.c"): (True, "root LICENSE: files in lib/ are BSD-2-Clause; header BSD 2-Clause"),
    ("lz4__lz4", "contrib/gen_manual/gen_manual.cpp"):
        (True, "header states BSD 2-Clause; root LICENSE: GPL 'unless explicitly stated otherwise'"),
    ("timescale__timescaledb", "src/custom_type_cache.c"):
        (True, "root LICENSE: outside tsl/ Apache-2.0; header 'licensed under the Apache License 2.0'"),
    ("growthbook__growthbook", "packages/back-end/src/jobs/updateLicense.ts"):
        (True, "root LICENSE: content outside the enterprise directories is MIT"),
    ("growthbook__growthbook", "packages/back-end/src/scim/users/createUser.ts"):
        (True, "root LICENSE: content outside the enterprise directories is MIT"),
    ("growthbook__growthbook", "packages/back-end/src/api/visual-changesets/getVisualChangeset.ts"):
        (True, "root LICENSE: content outside the enterprise directories is MIT"),
    ("AbsInt__CompCert", "runtime/aarch64/sysdeps.h"): (True, "LICENSE: runtime/ is BSD 3-clause"),
    ("AbsInt__CompCert", "runtime/c/i64.h"): (True, "LICENSE: runtime/ is BSD 3-clause"),
    ("AbsInt__CompCert", "runtime/c/i64_sar.c"): (True, "LICENSE: runtime/ is BSD 3-clause"),
}
FILES_LEFT_OUT = {
    ("redis__redis", "deps/fpconv/fpconv_dtoa.h"): "vendored (Boost notice), its license file not in the sample",
    ("redis__redis", "deps/jemalloc/src/ckh.c"): "vendored jemalloc, its license file not in the sample",
    ("redis__redis", "deps/jemalloc/include/jemalloc/internal/jemalloc_internal_externs.h"):
        "vendored jemalloc, its license file not in the sample",
    ("mojolicious__mojo", "lib/Mojolicious/resources/public/mojo/highlight.js/highlight.min.js"):
        "vendored highlight.js (BSD-3-Clause header) inside an Artistic-2.0 repository",
}


def kinds_of(key: str) -> list[str]:
    return [kind for kind, keys in KINDS.items() if key in keys]


def real_repos(root: Path) -> list[dict]:
    """Rows {case, files, sources, label, code_label, accept_also, no_spdx, kinds, file_labels} of the set."""
    labels = json.loads((root / "labels.json").read_text())
    out = []
    for r in labels["repos"]:
        folder = root / r["key"]
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        code_label = CODE_LABELS.get(r["key"], (r["label"], ""))[0]
        file_labels = {f: FILE_LABELS.get((r["key"], f)) for f in r["source_files"]
                       if (r["key"], f) not in FILES_LEFT_OUT}
        out.append({"case": r["key"], "files": files, "sources": r["source_files"], "label": r["label"],
                    "code_label": code_label, "accept_also": r.get("accept_also", []),
                    "no_spdx": bool(r.get("no_spdx_id")), "kinds": kinds_of(r["key"]), "file_labels": file_labels,
                    "allow_list": labels["allow_list"]})
    return out
