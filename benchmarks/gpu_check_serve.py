"""gpu-check steps 6-8: rollouts (MDLOO update, vLLM weight refresh, tokens/s against the megatron
generator), `eval model` through vLLM against the HF backend, palettization + recovery LoRA on the GPU
against the CPU. Each is `setup_<step>` (no CUDA needed) and `run_<step>` (GPU); see benchmarks/gpu_check.py."""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from gpu_check_common import (REPO, ON_DEVICE, ROLLOUT, SMALL, SMALL_BYTES, TINY, Ctx, Report, byte_mixture,
                              finite, pretrain_raw, quiet, say)

# in a CPU dry run (benchmarks/gpu_check.py --dry) the megatron halves of `rollouts` and `eval` run at the tiny
# width; the vLLM halves and the GPU-vs-CPU quantize run need a GPU
DRY_rollouts = DRY_eval = True

GiB = 1024 ** 3


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ---- step 6: rollouts --------------------------------------------------------------------------------------------

ROLLOUT_BATCH, ROLLOUT_NEW = 64, 128
DRY_BATCH, DRY_NEW = 8, 16


def setup_rollouts(ctx: Ctx, rep: Report) -> dict:
    from training.chat import ByteTokenizer
    from training.flops import flops_per_token
    from training.mdloo_config import from_raw
    from training.mdloo_demo import configs
    from training.model import get_shape
    from training.post_config import from_dict
    from training.prompt_sets import gsm8k_prompts
    from training.rl_loop import train_mdloo  # noqa: F401
    from training.rollout import generate, load_policy  # noqa: F401
    from training.rollout.policy import chat_prompt_ids
    from training.rollout.score import response_logprobs  # noqa: F401
    from training.rollout.vllm_backend import VLLMRollouts, WeightSync, export_policy  # noqa: F401

    out = ctx.work / "runs" / "gpu-check-mdloo"
    if ctx.dry:  # one short iteration: 4 prompts x 4 answers, one inner step
        sft_raw, rl_raw = configs(out, sft_steps=2, iterations=1, prompts_per_iteration=4, responses_per_prompt=4,
                                  inner_steps=1, eval_prompts=4)
        rl_raw.update(global_batch=16, micro_batch=16)
    else:
        sft_raw, rl_raw = configs(out, sft_steps=10 if ctx.quick else 20, iterations=1)
    small = ctx.shape(SMALL_BYTES)  # head dim 128: one that every vLLM attention backend takes
    sft_raw.update(model=small, name="gpu-check-mdloo-sft")
    rl_raw.update(model=small, name="gpu-check-mdloo")
    sft, rl = from_dict(sft_raw, where="gpu-check rollouts sft"), from_raw(rl_raw, where="gpu-check rollouts mdloo")
    batch, new = (DRY_BATCH, DRY_NEW) if ctx.dry else (ROLLOUT_BATCH, ROLLOUT_NEW)
    prompts = [chat_prompt_ids(r["messages"], ByteTokenizer()) for r in gsm8k_prompts(limit=batch)]
    shape = get_shape(ON_DEVICE, **(TINY if ctx.dry else ROLLOUT))
    # decoding reads every weight once per step: that bounds tokens/s from above at the GPU's bandwidth
    fp32_bytes = shape.parameter_count()["total"] * 4
    rep.number("rollout_shape", f"afm-on-device at width {shape.hidden_size} x {shape.num_layers} of 26 layers "
                                f"({shape.parameter_count()['total'] / 1e6:.1f}M parameters)")
    rep.number("rollout_work", f"{len(prompts)} GSM8K chat prompts of {min(map(len, prompts))}-"
                               f"{max(map(len, prompts))} byte tokens, {new} new tokens each, greedy")
    rep.number("forward_GFLOP_per_token", round(flops_per_token(shape, 512, training=False) / 1e9, 2))
    rep.number("fp32_weights_GiB_read_per_decode_step", round(fp32_bytes / GiB, 2))
    return {"sft": sft, "rl": rl, "prompts": prompts, "shape": shape, "new": new}


def _agreement(a: list[list[int]], b: list[list[int]]) -> float:
    return sum(x == y for x, y in zip(a, b)) / max(len(a), 1)


def _timed(fn, repeat: int = 2) -> tuple[float, object]:
    """Median wall seconds of `repeat` calls after one warm-up call (CUDA graphs, autotuning, allocator)."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    out = fn()
    times = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run_rollouts(ctx: Ctx, rep: Report, st: dict) -> None:
    from training import checkpoint as ckpt
    from training.rl_loop import train_mdloo
    from training.sft import train_sft

    sft = train_sft(st["sft"], log=quiet)
    result = train_mdloo(st["rl"], log=say)
    row = result.history[-1]
    rep.check("one MDLOO iteration", finite([row["loss_last"], row["reward"], row["kl_ref"]]),
              f"reward {row['reward']:.3f}, KL(ref) {row['kl_ref']:.4f}, last inner loss {row['loss_last']:.4f}")
    rep.check("MDLOO checkpoint verifies", not ckpt.verify(ckpt.open_checkpoint(result.checkpoint)))
    if ctx.vllm:
        _vllm_refresh(ctx, rep, st, sft.checkpoint, result.checkpoint)
    else:
        rep.skip("vLLM generation from the exported policy and refresh after the MDLOO update",
                 "vllm is not installed")
    _free_gpu()
    _throughput(ctx, rep, st)


def _vllm_refresh(ctx: Ctx, rep: Report, st: dict, before: Path, after: Path) -> None:
    """vLLM greedy answers from the SFT policy, then `refresh` to the MDLOO checkpoint: the engine's log-probs
    of its own answers must be those of the new weights (megatron, teacher-forced), not the old ones."""
    import torch

    from training.rl_loop import load_prompts
    from training.rollout import load_policy
    from training.rollout.score import response_logprobs
    from training.rollout.vllm_backend import VLLMRollouts

    rl = st["rl"]
    old = load_policy(before, max_length=rl.post.seq_length)
    prompts = [list(p.ids) for p in load_prompts(rl, old.tokenizer)[1][:32]]
    stop = old.stop_sequences()
    engine = VLLMRollouts(before, work_dir=ctx.work / "vllm-policy", max_model_len=512, gpu_memory_utilization=0.25)
    gen = dict(max_new_tokens=rl.mdloo.max_new_tokens, temperature=0.0, stop=stop, eos_id=old.eos_id)
    first = engine.generate(prompts, **gen)
    from training.rollout import generate

    mine = generate(old.model, prompts, **gen)
    rep.number("vllm_vs_megatron_greedy_agreement", _agreement([r.response_ids for r in first],
                                                               [r.response_ids for r in mine]))
    changed = engine.refresh(after)
    second = engine.generate(prompts, **gen)
    new = load_policy(after, max_length=rl.post.seq_length)
    pairs = [(p, r.response_ids) for p, r in zip(prompts, second) if r.response_ids]
    vllm_lp = torch.tensor([x for r in second if r.response_ids for x in r.logprobs])
    to_new = torch.cat(response_logprobs(new.model, pairs)).cpu()
    to_old = torch.cat(response_logprobs(old.model, pairs)).cpu()
    d_new, d_old = float((vllm_lp - to_new).abs().mean()), float((vllm_lp - to_old).abs().mean())
    rep.number("refresh_logprob_diff_new_old", [round(d_new, 5), round(d_old, 5)])
    rep.check("vLLM refresh loads the MDLOO update", changed and d_new < d_old and d_new < 0.05,
              f"mean |log-prob diff| to the new weights {d_new:.4f}, to the old {d_old:.4f} (bf16 engine)")
    del engine
    _free_gpu()


def _throughput(ctx: Ctx, rep: Report, st: dict) -> None:
    """Random weights at the rollout shape (speed does not depend on what a model learned), the same prompts,
    every row running all ROLLOUT_NEW tokens (no end token)."""
    from dataclasses import asdict

    from training import checkpoint as ckpt
    from training import parallel
    from training.model import build_model
    from training.rollout import generate, load_policy

    prompts, shape, new = st["prompts"], st["shape"], st["new"]
    seq = max(map(len, prompts)) + new
    parallel.setup(parallel.ParallelConfig(), seed=3)
    model = build_model(shape, seq_length=seq)
    path = ctx.work / "runs" / "gpu-check-rollout-policy"
    ckpt.save(path, model=model, manifest={
        "run": "gpu-check", "stage": "bench", "step": 0, "model_shape": asdict(shape), "rotary_base": 500_000,
        "kernels": "local", "config": {"tokenizer": "bytes"}, "data": {"seq_length": seq},
        "tokenizer": {"name": "utf8-bytes", "kind": "bytes", "vocab_size": 256, "eod_id": 0}},
        tokenizer=({"name": "utf8-bytes", "kind": "bytes", "vocab_size": 256, "eod_id": 0}, None))
    del model
    _free_gpu()
    policy = load_policy(path, max_length=seq)  # fp32, fused SDPA core attention: what the MDLOO producer runs
    n_tokens = len(prompts) * new
    t_meg, meg = _timed(lambda: generate(policy.model, prompts, max_new_tokens=new, temperature=0.0))
    rep.number("megatron_tokens_per_s", round(n_tokens / t_meg))
    rep.check("megatron KV-cache generator", all(len(r.response_ids) == new for r in meg),
              f"{n_tokens / t_meg:,.0f} tokens/s ({len(prompts)} x {new} tokens in {t_meg:.2f} s, fp32)")
    del policy
    _free_gpu()
    if not ctx.vllm:
        rep.skip("vLLM tokens/s against the megatron generator", "vllm is not installed")
        return
    from training.rollout.vllm_backend import VLLMRollouts

    engine = VLLMRollouts(path, work_dir=ctx.work / "vllm-bench", max_model_len=seq + 16,
                          gpu_memory_utilization=0.4)
    t_v, outs = _timed(lambda: engine.generate(prompts, max_new_tokens=new, temperature=0.0))
    speedup = t_meg / t_v
    rep.number("vllm_tokens_per_s", round(n_tokens / t_v))
    rep.number("vllm_speedup", round(speedup, 2))
    rep.check("vLLM generates every token", all(len(r.response_ids) == new for r in outs))
    rep.note(f"vLLM {n_tokens / t_v:,.0f} tokens/s = {speedup:.1f}x the megatron generator (goal 10x; vLLM bf16, "
             "megatron fp32 as the producer runs it)")
    del engine


# ---- step 7: eval model through vLLM and HF ---------------------------------------------------------------------

EVAL_TASKS, EVAL_LIMIT = ("arc_easy", "piqa"), 8
EVAL_DATA = REPO / "data" / "samples" / "eval_benchmarks" / "benchmarks"  # ships with the repository
NEAR_TIE = 0.05  # nats: items whose best two choices are closer than this under fp32 HF may flip in bf16


def setup_eval(ctx: Ctx, rep: Report) -> dict:
    from evals.model.backends import HFLM, VLLMLM, MegatronLM, load_lm  # noqa: F401
    from evals.model.loglik import items_for
    from evals.model.runner import evaluate  # noqa: F401
    from training.config import from_dict
    from training.export_hf import export_hf  # noqa: F401

    for task in EVAL_TASKS:
        items = items_for(task, EVAL_DATA, EVAL_LIMIT)
        rep.check(f"{task}: {EVAL_LIMIT} items from the bundled benchmark sample", len(items) == EVAL_LIMIT,
                  f"{len(items)}")
    mixture, root = byte_mixture(ctx, seq_length=512, sequences=8 * 20 + 64)
    cfg = from_dict(pretrain_raw(ctx, name="gpu-check-eval-base", mixture=mixture, root=root,
                                 steps=4 if ctx.dry else 6 if ctx.quick else 20,
                                 global_batch=8, micro_batch=4, model=ctx.shape(SMALL)),
                    where="gpu-check eval")
    return {"cfg": cfg}


def _scores(lm) -> dict:
    from evals.model.runner import evaluate

    res = evaluate(lm, list(EVAL_TASKS), limit=EVAL_LIMIT, data_dir=str(EVAL_DATA), log=say)
    return {t: res["tasks"][t] for t in EVAL_TASKS}


def _compare(ref: dict, other: dict) -> tuple[bool, str, float]:
    """Per item: the prediction equals the reference's wherever the reference's best two choices are more
    than NEAR_TIE apart; returns (equal, detail, max |log-likelihood diff|)."""
    agree = total = ties = 0
    worst = 0.0
    for task in EVAL_TASKS:
        for a, b in zip(ref[task]["samples"], other[task]["samples"]):
            worst = max(worst, max(abs(x - y) for x, y in zip(a["loglik"], b["loglik"])))
            top = sorted(a["loglik"], reverse=True)
            if top[0] - top[1] < NEAR_TIE:
                ties += 1
                continue
            total += 1
            agree += a["pred"] == b["pred"]
    return agree == total, f"{agree}/{total} predictions equal ({ties} near-tie items left out)", worst


def run_eval(ctx: Ctx, rep: Report, st: dict) -> None:
    from evals.model.backends import HFLM, VLLMLM, MegatronLM
    from training import trainer
    from training.export_hf import export_hf

    base = trainer.train(st["cfg"], log=quiet)
    hf_dir = export_hf(base.checkpoint, ctx.work / "exports" / "gpu-check-eval-hf")
    hf = _scores(HFLM(hf_dir))
    rep.number("scores", {t: hf[t]["metrics"] for t in EVAL_TASKS})
    _free_gpu()
    meg = _scores(MegatronLM(base.checkpoint))
    ok, detail, worst = _compare(hf, meg)
    rep.check("megatron backend = HF backend (fp32)", ok and worst < 1e-2,
              f"{detail}; max |loglik diff| {worst:.2g}")
    if not ctx.vllm:
        rep.skip("eval model through vLLM, scores equal to the HF backend's", "vllm is not installed")
        return
    _free_gpu()
    vl = _scores(VLLMLM(hf_dir, max_length=2048))
    ok, detail, worst = _compare(hf, vl)
    rep.number("vllm_max_loglik_diff", worst)
    rep.check("vLLM backend = HF backend", ok, f"{detail}; max |loglik diff| {worst:.3g}")


# ---- step 8: palettization + recovery LoRA, GPU against CPU -----------------------------------------------------

TOLERANCE = 2e-3  # nats: fp32 GPU and CPU matmuls sum in different orders over 30 adapter steps


def setup_quantize(ctx: Ctx, rep: Report) -> dict:
    from training.adapters.recovery import RecoveryConfig, recovered_share, train_recovery  # noqa: F401
    from training.quantize import demo
    from training.quantize.palettize import PalettizeConfig, load_palettized, palettize_checkpoint  # noqa: F401

    PalettizeConfig(bpw=3.6)
    assert callable(demo.run)
    return {}


RUN_ON_CPU_quantize_cpu = True  # the reference half runs on the CPU by design


def setup_quantize_cpu(ctx: Ctx, rep: Report) -> dict:
    return {}


def run_quantize_cpu(ctx: Ctx, rep: Report, st: dict) -> None:
    """The quantize demo on the CPU (its base trained here too: 150 tiny steps)."""
    from training.quantize import demo

    rep.numbers.update(demo.run(str(ctx.work / "quantize-cpu"), task_steps=0, log=say))


def run_quantize(ctx: Ctx, rep: Report, st: dict) -> None:
    from gpu_check import spawn
    from training import checkpoint as ckpt
    from training.quantize import demo

    cpu = spawn("quantize-cpu", ctx.work, timeout=150, env={"CUDA_VISIBLE_DEVICES": ""})
    if cpu.get("status") != "pass":
        rep.check("CPU reference run", False, f"{cpu.get('status')}: {cpu.get('reason')}")
        return
    # the GPU run starts from the very checkpoint the CPU run trained (the demo looks for demo-tiny-core first)
    base = ckpt.latest(ctx.work / "quantize-cpu" / ".runs" / "demo-quantize-base")
    target = ctx.work / "quantize-gpu" / ".runs" / "demo-tiny-core" / base.directory.name
    shutil.copytree(base.directory, target, dirs_exist_ok=True)
    gpu = demo.run(str(ctx.work / "quantize-gpu"), task_steps=0, log=say)
    ref = cpu["numbers"]
    diffs = {k: abs(gpu[k] - ref[k]) for k in ("float", "quantized", "adapted")}
    rep.number("loss_diff_gpu_cpu", max(diffs.values()))
    rep.number("held_out_gpu", {k: round(gpu[k], 5) for k in ("float", "quantized", "adapted", "bpw")})
    rep.number("held_out_cpu", {k: round(ref[k], 5) for k in ("float", "quantized", "adapted", "bpw")})
    rep.check("palettized bits per weight equal", gpu["bpw"] == ref["bpw"], f"{gpu['bpw']:.4f} vs {ref['bpw']:.4f}")
    rep.check("held-out losses equal the CPU run's", all(d <= TOLERANCE for d in diffs.values()),
              ", ".join(f"{k} {d:.2g}" for k, d in diffs.items()) + f" (tolerance {TOLERANCE})")
