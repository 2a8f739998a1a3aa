"""`make gpu-check`: every GPU path of the project in one command, each step in its own process with its own
time cap, a pass / fail / skipped line per step, one JSON and one Markdown table at the end.

    python benchmarks/gpu_check.py [--out DIR] [--steps pretrain,resume] [--budget 450] [--quick] [--dry]

Steps, in order (benchmarks/gpu_check_train.py, gpu_check_serve.py):
  env       torch / CUDA / Transformer Engine / vLLM / megatron-core versions, the GPU, its memory and bf16 peak
  pretrain  afm-on-device (or the largest that fits, said so) at sequence 2048 on the byte-level C4 mixture:
            bf16, TE kernels when present, distributed optimizer, selective recompute; tokens/s/GPU, MFU
  resume    dist-checkpoint save, resume in a fresh process: the next losses equal an uninterrupted run's
  sft       packed SFT (PackedSeqParams on TE, the block-diagonal mask otherwise): packed loss = unpacked mean
  post      reward model and DPO for a few bf16 steps from a short SFT
  rollouts  one MDLOO iteration; vLLM generation, weight refresh and tokens/s against the megatron generator
  eval      `eval model` through vLLM and the HF backend on ARC-Easy and PIQA items: equal scores
  quantize  palettize + recovery LoRA on the GPU: held-out losses equal the CPU run's
  semantic  the opt-in page-safety stage's MiniLM on the GPU: scores equal the CPU's, pages/s (gpu_check_data.py)

Where CUDA is absent every step still runs its setup (imports of the GPU-path functions, configs built and
validated, FLOP and memory arithmetic) and says `skipped: no GPU` for the rest, in seconds; CI runs it so
(tests/training/test_gpu_check.py). `--dry` (CPU) goes further: the GPU work of the training steps (pretrain,
resume, sft, post, and the megatron halves of rollouts and eval) runs on the CPU at the `tiny` width for a few
steps, so their own code, not only their setup, is exercised by CI (the semantic step compares the CPU with
itself on four pages); vLLM and the GPU-vs-CPU quantize run stay `skipped`. Dry numbers prove wiring, not speed.
Where CUDA is present each step runs in a child process (a hang or a CUDA
crash ends that step only) and the run stops starting steps when the total budget is spent.

Results: `<out>/gpu_check.json`, `<out>/gpu_check.md` (the table for the README), `<out>/gpu_check.log` (every
step's output); `<out>` is --out, else $OUT, else data/reports/gpu-check.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check_common import REPO, Ctx, Report, say, write_json  # noqa: E402

# name, module, title, time cap (s) on one H100. The caps add up to more than the budget: each step gets what
# is left when it starts, at most its cap.
STEPS = (
    ("env", "gpu_check", "environment", 60),
    ("pretrain", "gpu_check_train", "pretraining: afm-on-device, bf16, distributed optimizer", 150),
    ("resume", "gpu_check_train", "dist-checkpoint save and resume in a fresh process", 120),
    ("sft", "gpu_check_train", "packed SFT through PackedSeqParams", 75),
    ("post", "gpu_check_train", "reward model and DPO in bf16", 100),
    ("rollouts", "gpu_check_serve", "rollouts: MDLOO update, vLLM refresh and tokens/s", 120),
    ("eval", "gpu_check_serve", "eval model: vLLM vs HF backend", 90),
    ("quantize", "gpu_check_serve", "palettize + recovery LoRA, GPU vs CPU", 100),
    ("semantic", "gpu_check_data", "web_safety_semantic_v1 (MiniLM): GPU vs CPU scores, pages/s", 60),
)
# steps run by other steps in a fresh process (not listed in the table)
HELPERS = {"resume-continue": "gpu_check_train", "quantize-cpu": "gpu_check_serve"}
MIN_STEP_SECONDS = 20  # a step is not started with less than this left
DEFAULT_BUDGET = 450  # seconds: ~7.5 minutes, so one device call of 10 minutes holds start-up and a margin


# ---- step 1: the environment ----------------------------------------------------------------------------------

def _version(module: str, *, load: bool = True) -> str | None:
    """The module's version; None when absent. `load`: import it (a package that is installed but broken, e.g.
    built for another CUDA, says so); else read the installed distribution's metadata only (fast, for CPU CI)."""
    if not load:
        from importlib import metadata, util

        try:
            if util.find_spec(module) is None:
                return None
        except ModuleNotFoundError:
            return None
        try:
            return metadata.version(module.replace(".", "-").replace("_", "-"))
        except metadata.PackageNotFoundError:
            return "present"
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - absent, or present and broken: both are facts to report
        return None if isinstance(exc, ModuleNotFoundError) else f"broken ({type(exc).__name__}: {exc})"
    return str(getattr(mod, "__version__", "present"))


def setup_env(ctx: Ctx, rep: Report) -> dict:
    import torch

    from training.flops import peak_tflops

    versions = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                "megatron.core": _version("megatron.core"),  # imported by every step: always loaded
                **{m: _version(m, load=ctx.cuda)
                   for m in ("transformer_engine", "vllm", "transformers", "safetensors")}}
    rep.number("versions", versions)
    rep.check("megatron-core imports", bool(versions["megatron.core"]) and "broken" not in versions["megatron.core"],
              str(versions["megatron.core"]))
    if not ctx.te:
        rep.note("Transformer Engine is not installed: training runs megatron-core's local kernels (attention "
                 "materialises the [b, heads, s, s] scores; packed SFT uses the explicit mask, not THD)")
    if not ctx.vllm:
        rep.note("vLLM is not installed: the vLLM parts of `rollouts` and `eval` are skipped")
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        peak, source = peak_tflops(ctx.gpu_name)
        rep.number("gpu", {"name": ctx.gpu_name, "memory_GiB": round(props.total_memory / 2**30, 1),
                           "multiprocessors": props.multi_processor_count,
                           "capability": f"{props.major}.{props.minor}", "count": torch.cuda.device_count(),
                           "bf16_peak_TFLOPs": peak, "peak_source": source})
    return {}


def run_env(ctx: Ctx, rep: Report, state: dict) -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    tflops = 20 * 2 * 4096 ** 3 / (time.perf_counter() - t0) / 1e12
    rep.number("matmul_bf16_TFLOPs_4096", round(tflops, 1))
    rep.check("bf16 matmul on the GPU", tflops > 0, f"{tflops:.0f} TFLOP/s on 4096^3 (random data, 20 products)")


# ---- one step in this process ---------------------------------------------------------------------------------

def _functions(name: str, module: str):
    mod = sys.modules[__name__] if module == "gpu_check" else importlib.import_module(module)
    key = name.replace("-", "_")
    return (getattr(mod, f"setup_{key}"), getattr(mod, f"run_{key}"), getattr(mod, f"RUN_ON_CPU_{key}", False),
            getattr(mod, f"DRY_{key}", False))


def run_here(name: str, module: str, ctx: Ctx) -> dict:
    """setup, then run where CUDA is (or where the step runs on the CPU by design); the step's verdict."""
    rep = Report()
    t0 = time.perf_counter()
    setup, run, on_cpu, dry_ok = _functions(name, module)
    status, reason = "pass", ""
    try:
        state = setup(ctx, rep)
    except Exception as exc:  # noqa: BLE001 - a step's failure is its result, the next step still runs
        traceback.print_exc()
        state, status, reason = None, "fail", f"setup: {type(exc).__name__}: {exc}"
    if status == "pass" and not (ctx.cuda or on_cpu or (ctx.dry and dry_ok)):
        status, reason = "skipped", "no GPU (setup checked)" + ("; no CPU dry run of this step" if ctx.dry else "")
    elif status == "pass":
        try:
            if ctx.cuda:
                import torch

                torch.cuda.reset_peak_memory_stats()
            run(ctx, rep, state)
            if ctx.cuda:  # what the step's GPU work held at its peak, against the plan the step recorded
                rep.number("peak_memory_GiB", round(torch.cuda.max_memory_allocated() / 2**30, 2))
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            status, reason = "fail", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    failed = [c for c in rep.checks if c["status"] == "fail"]
    if status in ("pass", "skipped") and failed:  # a failed setup check fails the step on a CPU too
        status, reason = "fail", f"{failed[0]['name']}: {failed[0]['detail']}"
    if status == "pass":
        skipped = [c["name"] for c in rep.checks if c["status"] == "skipped"]
        reason = f"skipped parts: {', '.join(skipped)}" if skipped else ""
    return {"name": name, "status": status, "reason": reason, "seconds": round(time.perf_counter() - t0, 1),
            **rep.to_dict()}


def spawn(name: str, work: Path, *, timeout: float, quick: bool = False, dry: bool = False,
          env: dict | None = None, log=None) -> dict:
    """Run step `name` in a child process (its own session, so a timeout kills what it started too)."""
    module = dict((s[0], s[1]) for s in STEPS).get(name) or HELPERS[name]
    result = work / f".result-{name}.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--work", str(work),
           "--result", str(result)] + (["--quick"] if quick else []) + (["--dry"] if dry else [])
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env,
                            start_new_session=True, cwd=str(REPO))
    lines: list[str] = []
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    lines = (out or "").splitlines()
    if log is not None:
        log.write(f"===== {name} ({module}) =====\n" + "\n".join(lines) + "\n")
        log.flush()
    seconds = round(time.perf_counter() - t0, 1)
    if timed_out:
        return {"name": name, "status": "timeout", "reason": f"over its {timeout:.0f} s cap; killed",
                "seconds": seconds, "checks": [], "numbers": {}, "notes": lines[-3:]}
    if result.exists():
        body = json.loads(result.read_text())
        body["seconds"] = seconds
        return body
    tail = next((ln for ln in reversed(lines) if ln.strip()), "")
    return {"name": name, "status": "fail", "reason": f"the process ended with code {proc.returncode} and no "
            f"result (a crash); last line: {tail[:300]}", "seconds": seconds, "checks": [], "numbers": {},
            "notes": []}


# ---- the report -----------------------------------------------------------------------------------------------

# numbers that have their own column; the rest of a step's headline numbers go to the "numbers" column
COLUMNS = ("tokens_per_s_per_gpu", "mfu", "planned_memory_GiB", "peak_memory_GiB")
HEADLINE = ("shape", "mfu_goal_met", "loss_first_last", "max_loss_diff", "packed_vs_unpacked_rel_diff",
            "megatron_tokens_per_s", "vllm_tokens_per_s", "vllm_speedup", "scores", "loss_diff_gpu_cpu",
            "matmul_bf16_TFLOPs_4096", "gpu")


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def headline(step: dict) -> str:
    """The numbers worth a table cell, besides those with a column."""
    n = step.get("numbers", {})
    parts = []
    for k in HEADLINE:
        if n.get(k) is not None:
            v = n[k]
            v = f"{v['name']}, {v['memory_GiB']} GiB" if k == "gpu" else _cell(v)
            parts.append(f"{k} {v}")
    return "; ".join(parts)


def columns(step: dict) -> list[str]:
    """tokens/s per GPU, MFU (training/flops.py), memory planned / measured (GiB); "-" where a step has none
    (on a CPU: MFU and measured GPU memory always)."""
    n = step.get("numbers", {})
    tps = n.get("tokens_per_s_per_gpu", n.get("vllm_tokens_per_s", n.get("megatron_tokens_per_s")))
    mfu = n.get("mfu")
    memory = f"{_cell(n.get('planned_memory_GiB'))} / {_cell(n.get('peak_memory_GiB'))}"
    return [_cell(tps), "-" if mfu is None else f"{mfu:.1%}", memory]


def markdown(body: dict) -> str:
    env = next((s for s in body["steps"] if s["name"] == "env"), {}).get("numbers", {})
    gpu = env.get("gpu") or {}
    v = env.get("versions") or {}
    mode = " (CPU dry run at tiny shapes: wiring, not speed)" if body.get("dry") else ""
    lines = [f"GPU check on {gpu.get('name', 'no GPU')} ({gpu.get('memory_GiB', '-')} GiB){mode}, torch "
             f"{v.get('torch')} (CUDA {v.get('cuda')}), megatron-core {v.get('megatron.core')}, Transformer Engine "
             f"{v.get('transformer_engine') or 'absent'}, vLLM {v.get('vllm') or 'absent'}; {body['wall_s']:.0f} s of "
             f"a {body['budget_s']:.0f} s budget ({body['started_at']})", "",
             "| step | result | s | tokens/s/GPU | MFU | memory GiB plan / measured | numbers | detail |",
             "|---|---|---|---|---|---|---|---|"]
    for s in body["steps"]:
        cells = [s["name"], s["status"], _cell(s["seconds"]), *columns(s), headline(s), s.get("reason") or ""]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def default_out() -> Path:
    return Path(os.environ["OUT"]) if os.environ.get("OUT") else REPO / "data" / "reports" / "gpu-check"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="folder for gpu_check.json/.md/.log (default $OUT, else data/reports/gpu-check)")
    ap.add_argument("--steps", help="comma-separated subset, in the fixed order (default: all)")
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET, help="total seconds; no step starts after")
    ap.add_argument("--work", help="scratch folder (default: a new temporary folder)")
    ap.add_argument("--quick", action="store_true", help="fewer training steps (a rerun in a short window)")
    ap.add_argument("--dry", action="store_true", help="no GPU: run the training steps' GPU work on the CPU at "
                    "tiny shapes (what CI runs); ignored where CUDA is")
    ap.add_argument("--isolate", choices=["auto", "always", "never"], default="auto",
                    help="a child process per step: auto = where CUDA is")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:  # one step, in this process, its verdict written to --result
        ctx = Ctx.detect(Path(args.work), quick=args.quick, dry=args.dry)
        module = dict((s[0], s[1]) for s in STEPS).get(args.child) or HELPERS[args.child]
        write_json(Path(args.result), run_here(args.child, module, ctx))
        return 0

    names = [s[0] for s in STEPS]
    wanted = names if not args.steps else [n.strip() for n in args.steps.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        ap.error(f"unknown steps {unknown}; known: {', '.join(names)}")
    if args.budget < MIN_STEP_SECONDS:
        ap.error(f"--budget must be >= {MIN_STEP_SECONDS} seconds")
    out = Path(args.out) if args.out else default_out()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="cidermill-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    ctx = Ctx.detect(work, quick=args.quick, dry=args.dry)
    if ctx.cuda and ctx.dry:
        say("gpu-check: --dry is for machines without a GPU; CUDA is here, so the full check runs")
        ctx.dry = False
    isolate = args.isolate == "always" or (args.isolate == "auto" and ctx.cuda)
    start, started_at = time.perf_counter(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    mode = "GPU " + str(ctx.gpu_name) if ctx.cuda else "no GPU: " + ("CPU dry run at tiny shapes" if ctx.dry
                                                                        else "setup only")
    say(f"gpu-check: {mode}; budget {args.budget:.0f} s; "
        f"work {work}; results in {out}")
    results = []
    with open(out / "gpu_check.log", "w") as log:
        for i, (name, module, title, cap) in enumerate(STEPS):
            if name not in wanted:
                continue
            left = args.budget - (time.perf_counter() - start)
            say(f"[{i + 1}/{len(STEPS)}] {name}: {title}")
            if left < MIN_STEP_SECONDS:
                res = {"name": name, "status": "skipped", "reason": f"out of time ({left:.0f} s of the budget left)",
                       "seconds": 0, "checks": [], "numbers": {}, "notes": []}
            elif isolate:
                res = spawn(name, work, timeout=min(cap, left), quick=args.quick, dry=args.dry, log=log)
            else:
                res = run_here(name, module, ctx)
            res["title"], res["cap_s"] = title, cap
            results.append(res)
            say(f"    -> {res['status']}{': ' + res['reason'] if res.get('reason') else ''} ({res['seconds']} s)")
    body = {"schema": 1, "started_at": started_at, "budget_s": args.budget, "quick": args.quick, "dry": ctx.dry,
            "wall_s": round(time.perf_counter() - start, 1), "isolated": isolate, "steps": results}
    write_json(out / "gpu_check.json", body)
    table = markdown(body)
    (out / "gpu_check.md").write_text(table)
    say("\n" + table)
    bad = [r["name"] for r in results if r["status"] in ("fail", "timeout")]
    say(f"gpu-check: {len(results) - len(bad)} of {len(results)} steps without failure"
        + (f"; failed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
