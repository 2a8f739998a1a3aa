"""Reliability under ordinary misuse (issue 14): concurrent identical runs, kill -9 at random
points, a full disk at random points. Prints one line per scenario: tries and failures. The trainer's
cases (kill -9 during checkpoint saves, two runs into one folder: issue 45) are in reliability_training.py.

    .venv/bin/python benchmarks/reliability.py [--tries 10] [--seed 0]
        [--only concurrent,kill,disk,train-kill,train-concurrent]

The pipeline is the bundled C4 sample (data/samples/c4) split into 6 JSONL files through
normalize -> text_length -> exact_dedup (two passes, rejects on), local executor, 2 workers,
run through the real CLI in subprocesses. A clean run first gives the reference version id.

- concurrent: 2 identical runs started together into one root. Broken = a run exits non-zero,
  more or fewer than one version, a version or its rejects failing `verify`, a wrong version id,
  staging or temp files left behind.
- kill: the run is sent SIGKILL (the run's process only, as an OOM killer would) at a uniformly
  random time over the length of a run. Then: processes of its session still alive after 5 s
  (orphans), whether anything in the root changed after that, and a rerun: rows lost or
  duplicated against the reference, and a version id different from it.
- disk: the data root is a tmpfs of random size (between 0 and what a run needs), in a private
  mount namespace (`unshare -rm`, root or unprivileged user namespaces needed), so writes get a
  real ENOSPC. Partial = a version visible in the catalog that fails `verify`, rejects visible
  without their version, temp files left, an error longer than one line, or a version published
  while the run exited non-zero. After each try the tmpfs is made large enough and the run
  repeated: it must finish with the reference version id (resume after a full disk).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from manifests import Catalog  # noqa: E402

PY = sys.executable


def make_config(work: Path, root: Path) -> Path:
    folder = work / "in"
    if not folder.exists():
        folder.mkdir(parents=True)
        with gzip.open(REPO / "data/samples/c4/c4_demo.jsonl.gz", "rt", encoding="utf-8") as f:
            docs = [json.loads(line) for line in f]
        docs += docs[:30]  # some exact duplicates for the global stage to find
        for i in range(6):
            (folder / f"part-{i}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[i::6]))
    cfg = {
        "name": "rel",
        "input": {"format": "jsonl", "paths": [str(folder / "*.jsonl")]},
        "output": {"root": str(root), "row_group_rows": 64, "shard_target_bytes": "64KiB"},
        "executor": {"kind": "local", "workers": 2, "batch_rows": 40},
        "stages": [{"normalize_text_v1": {}}, {"text_length_v1": {"min_chars": 200, "min_words": 50}},
                   {"exact_dedup_v1": {}}],
    }
    path = work / f"p-{abs(hash(str(root)))}.yaml"
    import yaml

    path.write_text(yaml.safe_dump(cfg))
    return path


def cli(config: Path) -> list[str]:
    return [PY, "-m", "manifests.main", "corpus", "run", str(config), "--no-progress"]


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def check_root(root: Path, ref_id: str | None) -> list[str]:
    """Problems a reader of `root` would meet: what `ls` shows must verify; nothing half-done."""
    problems = []
    cat = Catalog(str(root))
    entries = cat.versions()
    for e in entries:
        v = cat.resolve(f"{e.name}@{e.version_id}")
        bad = v.verify()
        if bad:
            problems.append(f"{e.name}@{e.version_id[:12]} fails verify: {bad[0].reason}")
    names = {e.name for e in entries}
    if "rel.rejects" in names and "rel" not in names:
        problems.append("rejects visible without their version")
    if ref_id and "rel" in names and {e.version_id for e in entries if e.name == "rel"} != {ref_id}:
        problems.append("unexpected version id")
    tmp = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if ".tmp-" in f]
    if tmp:
        problems.append(f"{len(tmp)} temp files left, e.g. {tmp[0]}")
    return problems


def reference(work: Path) -> tuple[str, list[str], float]:
    root = work / "ref"
    t0 = time.perf_counter()
    out = subprocess.run(cli(make_config(work, root)), env=ENV, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr
    v = Catalog(str(root)).resolve("rel")
    ids = v.read(columns=["id"]).column("id").to_pylist()
    return v.version_id, ids, seconds


def concurrent(work: Path, tries: int, ref_id: str, rng: random.Random) -> tuple[int, list[str]]:
    broken, notes = 0, []
    for t in range(tries):
        root = work / f"conc-{t}"
        config = make_config(work, root)
        procs = [subprocess.Popen(cli(config), env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
        outs = [p.communicate() for p in procs]
        problems = [f"exit {p.returncode}: {err.strip().splitlines()[-1:]}" for p, (_, err) in zip(procs, outs)
                    if p.returncode != 0]
        problems += check_root(root, ref_id)
        if len(Catalog(str(root)).versions("rel")) != 1:
            problems.append("not exactly one version")
        staging = root / ".staging"
        if staging.exists() and any(staging.iterdir()):
            problems.append("staging left behind")
        if problems:
            broken += 1
            notes.append(f"try {t}: {problems}")
        shutil.rmtree(root, ignore_errors=True)
    return broken, notes


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def _snapshot(root: Path) -> dict:
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
            for d, _, fs in os.walk(root) for f in fs if not f.endswith(".lock")}


def kill(work: Path, tries: int, ref_id: str, ref_ids: list[str], run_s: float,
         rng: random.Random) -> dict:
    res = {"orphans": 0, "writes_after_kill": 0, "lost": 0, "duplicated": 0, "wrong_id": 0, "failed_rerun": 0,
           "killed_mid_run": 0}
    notes = []
    for t in range(tries):
        root = work / f"kill-{t}"
        config = make_config(work, root)
        proc = subprocess.Popen(cli(config), env=ENV, cwd=REPO, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, run_s))
        finished = proc.poll() is not None
        if not finished:
            os.kill(proc.pid, signal.SIGKILL)
            res["killed_mid_run"] += 1
        proc.wait()
        deadline = time.time() + 5
        while time.time() < deadline and _session_pids(proc.pid):
            time.sleep(0.1)
        left = _session_pids(proc.pid)
        if left:
            res["orphans"] += 1
            notes.append(f"try {t}: orphans {left}")
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        before = _snapshot(root)
        time.sleep(1.0)
        if _snapshot(root) != before:
            res["writes_after_kill"] += 1
        problems = check_root(root, ref_id)
        if problems:
            notes.append(f"try {t} after kill: {problems}")
        out = subprocess.run(cli(config), env=ENV, cwd=REPO, capture_output=True, text=True)
        if out.returncode != 0:
            res["failed_rerun"] += 1
            notes.append(f"try {t}: rerun exit {out.returncode}: {out.stderr.strip()[-300:]}")
            continue
        v = Catalog(str(root)).resolve("rel")
        ids = v.read(columns=["id"]).column("id").to_pylist()
        res["lost"] += len(set(ref_ids) - set(ids))
        res["duplicated"] += len(ids) - len(set(ids))
        res["wrong_id"] += v.version_id != ref_id
        shutil.rmtree(root, ignore_errors=True)
    res["notes"] = notes
    return res


INSPECT = """
import json, sys
sys.path.insert(0, {repo!r})
sys.path.insert(0, {bench!r})
from reliability import check_root
from manifests import Catalog
root = {root!r}
print(json.dumps({{"problems": check_root(__import__('pathlib').Path(root), None),
                  "versions": sorted(e.name for e in Catalog(root).versions())}}))
"""


def disk(work: Path, tries: int, ref_id: str, need_kib: int, rng: random.Random) -> dict:
    if shutil.which("unshare") is None:
        return {"skipped": "no unshare(1)"}
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {work}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return {"skipped": f"cannot mount a tmpfs in a user namespace ({probe.stderr.strip()})"}
    res = {"enospc_hit": 0, "partial_versions": 0, "temp_files": 0, "multi_line_errors": 0,
           "published_but_failed": 0, "failed_resume": 0, "notes": []}
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    for t in range(tries):
        size = rng.randint(8, need_kib)
        root = mnt / "root"
        config = make_config(work, root)
        inspect = INSPECT.format(repo=str(REPO), bench=str(REPO / "benchmarks"), root=str(root))
        (work / "rel_inspect.py").write_text(inspect)
        run = " ".join(cli(config))
        script = (f"mount -t tmpfs -o size={size}k tmpfs {mnt} || exit 99; "
                  f"{run} > {work}/out1 2> {work}/err1; echo $? > {work}/rc1; "
                  f"{PY} {work}/rel_inspect.py > {work}/inspect1 2> {work}/inspect1.err; "
                  f"mount -o remount,size={need_kib * 4}k {mnt}; "
                  f"{run} > {work}/out2 2> {work}/err2; echo $? > {work}/rc2; "
                  f"{PY} -c \"import sys; sys.path.insert(0, '{REPO}'); from manifests import Catalog; "
                  f"print(Catalog('{root}').resolve('rel').version_id)\" > {work}/id2 2>/dev/null")
        done = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=ENV, cwd=REPO, capture_output=True,
                              text=True)
        if done.returncode == 99:
            return {"skipped": f"mount failed: {done.stderr.strip()}"}
        rc1 = int((work / "rc1").read_text())
        err1 = (work / "err1").read_text().strip()
        try:
            state = json.loads((work / "inspect1").read_text())
        except ValueError:
            raise SystemExit(f"inspector failed: {(work / 'inspect1.err').read_text()[-2000:]}") from None
        hit = rc1 != 0
        res["enospc_hit"] += hit
        if state["problems"]:
            res["partial_versions"] += any("verify" in p or "without" in p for p in state["problems"])
            res["temp_files"] += any("temp files" in p for p in state["problems"])
            res["notes"].append(f"try {t} ({size} KiB): {state['problems']}")
        if hit:
            lines = [line for line in err1.splitlines() if not line.startswith(("WARNING", "waiting"))]
            if len(lines) != 1:
                res["multi_line_errors"] += 1
                res["notes"].append(f"try {t} ({size} KiB): error of {len(lines)} lines: {err1[-400:]}")
            if "rel" in state["versions"]:
                res["published_but_failed"] += 1
        rc2 = int((work / "rc2").read_text())
        id2 = (work / "id2").read_text().strip()
        if rc2 != 0 or id2 != ref_id:
            res["failed_resume"] += 1
            res["notes"].append(f"try {t}: resume exit {rc2}, id {id2[:12]}: {(work / 'err2').read_text()[-300:]}")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="concurrent,kill,disk,train-kill,train-concurrent")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="cidermill-rel-") as tmp:
        work = Path(tmp)
        ref_id, ref_ids, run_s = reference(work)
        need_kib = sum(f.stat().st_size for f in (work / "ref").rglob("*") if f.is_file()) // 1024 * 3
        print(f"reference: rel@{ref_id[:12]}, {len(ref_ids)} rows, one run {run_s:.1f} s, "
              f"root {need_kib // 3} KiB", flush=True)
        failed = False
        if "concurrent" in only:
            broken, notes = concurrent(work, args.tries, ref_id, rng)
            print(f"concurrent identical runs (2 at once): {args.tries} tries, {broken} broken", flush=True)
            for n in notes:
                print("  ", n)
            failed |= broken > 0
        if "kill" in only:
            r = kill(work, args.tries, ref_id, ref_ids, run_s, rng)
            print(f"kill -9 at random points: {args.tries} tries ({r['killed_mid_run']} killed mid-run), "
                  f"{r['lost']} rows lost, {r['duplicated']} duplicated, {r['orphans']} with orphans, "
                  f"{r['writes_after_kill']} with writes after the kill, {r['wrong_id']} wrong ids, "
                  f"{r['failed_rerun']} failed reruns", flush=True)
            for n in r["notes"]:
                print("  ", n)
            failed |= any(r[k] for k in ("lost", "duplicated", "orphans", "writes_after_kill", "wrong_id",
                                         "failed_rerun"))
        if "disk" in only:
            r = disk(work, args.tries, ref_id, need_kib, rng)
            if "skipped" in r:
                print(f"disk full: skipped ({r['skipped']})")
            else:
                print(f"disk full at random points: {args.tries} tries ({r['enospc_hit']} hit ENOSPC), "
                      f"{r['partial_versions']} partial versions, {r['temp_files']} with temp files, "
                      f"{r['published_but_failed']} published-but-failed, {r['multi_line_errors']} multi-line "
                      f"errors, {r['failed_resume']} failed resumes", flush=True)
                for n in r["notes"]:
                    print("  ", n)
                failed |= any(r[k] for k in ("partial_versions", "temp_files", "published_but_failed",
                                             "multi_line_errors", "failed_resume"))
    trainer = {s[len("train-"):] for s in only if s.startswith("train-")}
    if trainer:  # the trainer's cases (issue 45) live in their own module
        from reliability_training import run as run_trainer

        failed |= run_trainer(args.tries, args.seed, trainer)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
