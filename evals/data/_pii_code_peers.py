"""Runs a peer credential scanner over a folder of files and writes {file name: [1-based lines hit]}
as JSON. Standalone (no project imports), so it runs in whatever Python holds the peer:

    python evals/data/_pii_code_peers.py credsweeper|detect-secrets FOLDER OUT.json

- credsweeper: Samsung's CredSweeper (PyPI `credsweeper`) with its default configuration and the ML
  model inside the wheel, one job, through its command line (as CredData's benchmark runs it).
- detect-secrets: Yelp's detect-secrets (PyPI) with its default plugins and filters, file by file
  through its Python API (`SecretsCollection.scan_file`).

Prints one JSON line: tool, files, seconds and cpu_seconds (the scan alone: process start and model
load excluded; CredSweeper's command line includes its start, measured apart on an empty folder and
subtracted). CPU seconds are the steadier figure on a shared machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


CPU_SECONDS = None  # CPU time of the scan itself (user + system), steadier than wall time on a shared machine


def _child_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def credsweeper(folder: Path) -> tuple[dict, float]:
    exe = Path(sys.executable).with_name("credsweeper")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        empty = Path(tmp) / "empty"
        empty.mkdir()
        start, cpu = time.perf_counter(), _child_cpu()  # start-up and model load: a run on an empty folder
        subprocess.run([str(exe), "--path", str(empty), "--save-json", str(Path(tmp) / "e.json"), "--jobs", "1"],
                       check=True, capture_output=True)
        overhead, cpu_overhead = time.perf_counter() - start, _child_cpu() - cpu
        start, cpu = time.perf_counter(), _child_cpu()
        done = subprocess.run([str(exe), "--path", str(folder), "--save-json", str(out), "--jobs", "1"],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start - overhead
        global CPU_SECONDS
        CPU_SECONDS = _child_cpu() - cpu - cpu_overhead
        if done.returncode:
            sys.exit(f"credsweeper failed: {done.stderr[-2000:]}")
        hits: dict[str, set] = {}
        for cred in json.loads(out.read_text()):
            for ld in cred["line_data_list"]:
                hits.setdefault(Path(ld["path"]).name, set()).add(int(ld["line_num"]))
    return {k: sorted(v) for k, v in hits.items()}, seconds


def detect_secrets(folder: Path) -> tuple[dict, float]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    hits: dict[str, set] = {}
    global CPU_SECONDS
    with default_settings():
        start, cpu = time.perf_counter(), time.process_time()
        for p in sorted(folder.iterdir()):
            collection = SecretsCollection()
            collection.scan_file(str(p))
            for _, secret in collection:
                hits.setdefault(p.name, set()).add(int(secret.line_number))
        seconds = time.perf_counter() - start
        CPU_SECONDS = time.process_time() - cpu
    return {k: sorted(v) for k, v in hits.items()}, seconds


def main(tool: str, folder: str, dst: str) -> None:
    run = {"credsweeper": credsweeper, "detect-secrets": detect_secrets}[tool]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    hits, seconds = run(Path(folder))
    Path(dst).write_text(json.dumps(hits))
    print(json.dumps({"tool": tool, "files": len(list(Path(folder).iterdir())), "seconds": seconds,
                      "cpu_seconds": CPU_SECONDS}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
