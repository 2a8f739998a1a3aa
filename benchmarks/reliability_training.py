"""Reliability of the trainer under ordinary misuse (issue 45): kill -9 while a rerun writes its
checkpoints, and two runs started together into one folder. Run through the real CLI in subprocesses on
the tiny byte-level core mixture (CPU); one line per scenario. Called by benchmarks/reliability.py
(`--only train-kill,train-concurrent`) or alone:

    .venv/bin/python benchmarks/reliability_training.py [--tries 6] [--seed 0] [--only kill,concurrent]

A clean run first gives the reference: its final weights (CPU runs are deterministic).

- kill: a finished run's folder is rerun with the same config from scratch (it rewrites every checkpoint,
  one per step), and the rerun is sent SIGKILL at a uniformly random time over the length of a run. Then:
  every checkpoint the folder shows must verify (sizes and sha256 against its manifest) and load; then
  `--resume auto` must finish with exactly the reference weights. Broken = a visible checkpoint that fails,
  a failed resume, other final weights.
- concurrent: two runs of different configs (another learning rate) started together into one folder.
  Exactly one must finish (exit 0); the other must stop with one `error:` line: the lock's ("another run is
  writing", when they overlap) or the run identity's ("holds checkpoints of another run", when it starts
  after the first saved). The folder's final checkpoint must verify and hold the winner's reference weights.
  (Before issue 45 both exited 0 and the folder held a mix of the two runs' checkpoints.)
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(REPO), "CIDERMILL_TORCH_THREADS": "1"}
STEPS = 12


def train_cmd(root: Path, out: Path, *extra: str) -> list[str]:
    return [PY, "-m", "manifests.main", "train", "pretrain", str(REPO / "configs/train/tiny-core.yaml"),
            "--root", str(root), "--out-dir", str(out), "--set", f"steps={STEPS}", "--set", "save_every=1",
            "--set", "log_every=0", "--set", "data.valid_samples=16", *extra]


def final_weights(out: Path):
    """(problems, state dict of the newest checkpoint) after checking every visible checkpoint."""
    from training import checkpoint as ckpt

    problems = []
    for path in ckpt.checkpoints(out):
        try:
            bad = ckpt.verify(ckpt.open_checkpoint(path))
        except Exception as exc:  # noqa: BLE001 - any reason a reader cannot open it is a problem
            bad = [f"{type(exc).__name__}: {exc}"]
        problems += [f"{path.name}: {b}" for b in bad]
    found = ckpt.checkpoints(out)
    if not found:
        return problems, None
    import torch

    return problems, torch.load(found[-1] / "model.pt", map_location="cpu", weights_only=True)


def same(a, b) -> bool:
    import torch

    if a is None or b is None or a.keys() != b.keys():
        return False
    return all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)


OTHER_LR = ("--set", "optim.peak_lr=0.01")  # the second run of the concurrent case: another config


def reference(work: Path) -> tuple[dict, dict, float]:
    """The final weights of the default run and of the other-rate run, and the seconds one run takes."""
    root = work / "root"
    subprocess.run([PY, "-m", "manifests.main", "train", "tiny-mixtures", "--root", str(root)], env=ENV,
                   check=True, capture_output=True)
    out = []
    for name, extra in (("ref", ()), ("ref-other", OTHER_LR)):
        start = time.perf_counter()
        subprocess.run(train_cmd(root, work / name, *extra), env=ENV, check=True, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        problems, weights = final_weights(work / name)
        if problems or weights is None:
            raise SystemExit(f"reference run {name} is broken: {problems}")
        out.append(weights)
    return out[0], out[1], seconds


def kill(work: Path, tries: int, ref, run_s: float, rng: random.Random) -> dict:
    res = {"broken_checkpoints": 0, "failed_resume": 0, "wrong_weights": 0, "killed_mid_run": 0, "notes": []}
    root = work / "root"
    for t in range(tries):
        out = work / f"kill-{t}"
        subprocess.run(train_cmd(root, out), env=ENV, check=True, capture_output=True)  # a finished run
        proc = subprocess.Popen(train_cmd(root, out), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0, run_s))
        if proc.poll() is None:
            res["killed_mid_run"] += 1
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        problems, _ = final_weights(out)
        if problems:
            res["broken_checkpoints"] += 1
            res["notes"].append(f"try {t}: {problems[:3]}")
        done = subprocess.run(train_cmd(root, out, "--resume", "auto"), env=ENV, capture_output=True, text=True)
        if done.returncode != 0:
            res["failed_resume"] += 1
            res["notes"].append(f"try {t}: resume exit {done.returncode}: {done.stderr.strip()[-300:]}")
            continue
        problems, weights = final_weights(out)
        if problems or not same(weights, ref):
            res["wrong_weights"] += 1
            res["notes"].append(f"try {t}: after resume {problems[:3] or 'weights differ from the reference'}")
    return res


def concurrent(work: Path, tries: int, refs: tuple[dict, dict], rng: random.Random) -> dict:
    res = {"broken": 0, "overlapped": 0, "notes": []}
    root = work / "root"
    for t in range(tries):
        out = work / f"conc-{t}"
        procs = [subprocess.Popen(train_cmd(root, out, *extra), env=ENV, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for extra in ((), OTHER_LR)]
        codes, errs = [], []
        for p in procs:
            _, err = p.communicate()
            codes.append(p.returncode)
            errs.append(err)
        problems, weights = final_weights(out)
        winners = [i for i, c in enumerate(codes) if c == 0]
        lines = [line for c, e in zip(codes, errs) if c != 0 for line in e.splitlines() if line.startswith("error:")]
        res["overlapped"] += any("another run is writing" in line for line in lines)
        ok = (len(winners) == 1 and len(lines) == 1 and not problems and same(weights, refs[winners[0]])
              and ("another run is writing" in lines[0] or "holds checkpoints of another run" in lines[0]))
        if not ok:
            res["broken"] += 1
            res["notes"].append(f"try {t}: exits {codes}, refusal {lines[:2]}, {problems[:2]}, weights of the "
                                f"winner: {'equal' if winners and same(weights, refs[winners[0]]) else 'differ'}")
    return res


def run(tries: int, seed: int, only: set[str]) -> bool:
    """Run the scenarios in `only` ({"kill", "concurrent"}); print one line each; True when any broke."""
    rng = random.Random(seed)
    failed = False
    with tempfile.TemporaryDirectory(prefix="cidermill-rel-train-") as tmp:
        work = Path(tmp)
        ref, ref_other, run_s = reference(work)
        print(f"trainer reference: tiny-core {STEPS} steps, a checkpoint per step, one run {run_s:.1f} s "
              "(process start included)", flush=True)
        if "kill" in only:
            r = kill(work, tries, ref, run_s, rng)
            print(f"trainer kill -9 during a rerun's saves: {tries} tries ({r['killed_mid_run']} killed mid-run), "
                  f"{r['broken_checkpoints']} with a broken visible checkpoint, {r['failed_resume']} failed "
                  f"resumes, {r['wrong_weights']} with other final weights", flush=True)
            for n in r["notes"]:
                print("  ", n)
            failed |= any(r[k] for k in ("broken_checkpoints", "failed_resume", "wrong_weights"))
        if "concurrent" in only:
            r = concurrent(work, tries, (ref, ref_other), rng)
            print(f"trainer: 2 runs (another learning rate) started together into one folder: {tries} tries "
                  f"({r['overlapped']} refused by the lock, the rest by the run identity), {r['broken']} broken",
                  flush=True)
            for n in r["notes"]:
                print("  ", n)
            failed |= r["broken"] > 0
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="kill,concurrent")
    args = ap.parse_args(argv)
    return 1 if run(args.tries, args.seed, set(args.only.split(","))) else 0


if __name__ == "__main__":
    sys.exit(main())
