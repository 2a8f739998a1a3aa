"""gpu-check steps 2-5: pretraining throughput and MFU, dist-checkpoint resume, packed SFT, reward model and
DPO. Each is `setup_<step>` (no CUDA needed: imports, configs, arithmetic) and `run_<step>` (the GPU work);
see benchmarks/gpu_check.py."""

from __future__ import annotations

import gc
import statistics
from pathlib import Path

from gpu_check_common import SMALL, Ctx, Report, byte_mixture, finite, post_raw, pretrain_raw, say

# steps whose GPU work also runs in a CPU dry run (benchmarks/gpu_check.py --dry), at tiny shapes
DRY_pretrain = DRY_resume = DRY_resume_continue = DRY_sft = DRY_post = True

GiB = 1024 ** 3
PLAN_GPU_BYTES = 80 * GiB  # what the plan is checked against on a machine without a GPU (an H100)


def _free_gpu() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ---- step 2: pretraining ----------------------------------------------------------------------------------------

PRETRAIN_SEQ = 2048
PRETRAIN_BATCH = (8, 2)  # global batch, micro-batch: 4 micro-batches of 4,096 tokens per step
DRY_SEQ = 64  # a CPU dry run's sequence length


def setup_pretrain(ctx: Ctx, rep: Report) -> dict:
    # the GPU path of the trainer, imported so that a renamed function fails here, on any machine
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig  # noqa: F401
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec  # noqa: F401
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer  # noqa: F401
    from megatron.core.transformer.module import Float16Module  # noqa: F401

    from training import trainer
    from training.config import from_dict
    from training.flops import flops_per_token, peak_tflops
    from training.gpu_optim import MegatronAFM, wrap_for_gpu  # noqa: F401
    from training.memory import plan_for_config
    from training.plan import plan_run

    assert callable(trainer._save) and callable(trainer.train)
    seq = DRY_SEQ if ctx.dry else PRETRAIN_SEQ
    steps = 8 if ctx.dry else 12 if ctx.quick else 30
    gb, mb = PRETRAIN_BATCH
    mixture, root = byte_mixture(ctx, seq_length=seq, sequences=steps * gb + 64)
    budget = ctx.gpu_bytes or PLAN_GPU_BYTES
    cfg = mem = None
    # the on-device shape, else the deepest that the plan fits on one GPU; a dry run: the tiny width only
    for layers in [0] if ctx.dry else range(26, 0, -1):
        model = ctx.shape({} if layers in (0, 26) else {"num_layers": layers})
        cfg = from_dict(pretrain_raw(ctx, name="gpu-check-pretrain", mixture=mixture, root=root, steps=steps,
                                     global_batch=gb, micro_batch=mb, model=model), where="gpu-check pretrain")
        mem = plan_for_config(cfg, gpus=1, gpu_bytes=budget, seq_length=seq)
        if mem.fits:
            break
    shape = cfg.model
    label = "afm-on-device" if shape.num_layers == 26 else f"afm-on-device at {shape.num_layers} of 26 layers"
    rep.number("shape", f"afm-on-device at the tiny width (dry), sequence {seq}" if ctx.dry else label)
    if shape.num_layers != 26 and not ctx.dry:
        rep.note(f"afm-on-device does not fit one GPU of {budget / GiB:.0f} GiB by the memory plan; training "
                 f"{shape.num_layers} of its 26 layers")
    plan = plan_run(cfg)
    rep.check("the mixture gives the sequence length", plan.seq_length == seq, f"{plan.seq_length}")
    rep.check("memory plan fits one GPU", mem.fits, f"{mem.total / GiB:.1f} of {budget / GiB:.0f} GiB "
              f"({'this GPU' if ctx.gpu_bytes else 'an 80 GiB H100: no GPU here'}); largest micro-batch "
              f"{mem.largest_micro_batch}")
    per_token = flops_per_token(shape, seq)
    peak, source = peak_tflops(ctx.gpu_name or "NVIDIA H100 80GB HBM3")
    rep.number("parameters", shape.parameter_count()["total"])
    rep.number("model_GFLOP_per_token", round(per_token / 1e9, 2))
    rep.number("planned_memory_GiB", round(mem.total / GiB, 2))
    rep.number("bf16_peak_TFLOPs", peak)
    rep.number("kernels", cfg.parallel.kernels)
    if peak:  # what 45% MFU means in tokens/s on this GPU (an H100 where there is none)
        rep.number("tokens_per_s_at_45pct_mfu", round(0.45 * peak * 1e12 / per_token))
    return {"cfg": cfg, "mem": mem, "seq": seq, "peak": peak if ctx.cuda else None, "peak_source": source}


def run_pretrain(ctx: Ctx, rep: Report, st: dict) -> None:
    import torch

    from training import trainer
    from training.flops import mfu

    cfg, seq = st["cfg"], st["seq"]
    # The run's last checkpoint would be ~40 GB at this shape (bf16 weights, fp32 main weights and AFM state),
    # minutes of writing and hashing: `resume` checks the same saving code at a smaller shape instead.
    save = trainer._save
    if not ctx.dry:
        trainer._save = lambda run, plan, step, result, steps: Path(run.cfg.out_dir)
    try:
        result = trainer.train(cfg, log=say)
    finally:
        trainer._save = save
    losses, secs = result.losses, result.step_seconds
    warm = min(5, max(1, len(secs) // 4))  # the first steps include cuBLAS/TE autotuning and allocator growth
    step_s = statistics.mean(secs[warm:])
    tokens = cfg.global_batch * seq
    tps = tokens / step_s
    value = mfu(cfg.model, seq, tps, st["peak"])  # None on a CPU: no peak to divide by
    rep.number("step_seconds", round(step_s, 4))
    rep.number("tokens_per_s_per_gpu", round(tps))
    rep.number("mfu", value)
    rep.number("mfu_goal_met", None if value is None else value >= 0.45)
    rep.number("loss_first_last", [round(losses[0], 3), round(losses[-1], 3)])
    rep.number("held_out_loss", round(result.eval_loss, 4))
    rep.check("losses finite", finite(losses), f"{len(losses)} steps, {result.skipped_steps} skipped")
    head, tail = statistics.mean(losses[:3]), statistics.mean(losses[-3:])
    rep.check("the loss falls", tail < head - 0.1, f"mean of the first 3 steps {head:.3f}, of the last 3 {tail:.3f}")
    if ctx.cuda:
        peak_mem = torch.cuda.max_memory_allocated()
        rep.check("memory within the plan", peak_mem <= st["mem"].total,
                  f"peak allocated {peak_mem / GiB:.1f} GiB, plan {st['mem'].total / GiB:.1f} GiB (with its reserve)")
    else:
        rep.skip("memory within the plan", "no GPU to measure")
    if value is not None:
        rep.note(f"MFU {value:.1%} over steps {warm + 1}-{len(secs)} ({st['peak_source']}); goal 45% on H100")


# ---- step 3: dist-checkpoint save and resume --------------------------------------------------------------------

RESUME_SEQ, RESUME_STEPS, RESUME_AT = 512, 12, 6


def _resume_cfgs(ctx: Ctx):
    from training.config import from_dict

    steps = 4 if ctx.dry else 8 if ctx.quick else RESUME_STEPS
    mixture, root = byte_mixture(ctx, seq_length=DRY_SEQ if ctx.dry else RESUME_SEQ, sequences=steps * 8 + 64)
    model = ctx.shape(SMALL)
    # deterministic: torch deterministic algorithms, megatron's deterministic mode (see training/parallel.py)
    return [from_dict(pretrain_raw(ctx, name=name, mixture=mixture, root=root, steps=steps, global_batch=8,
                                   micro_batch=4, model=model, deterministic=True), where="gpu-check resume")
            for name in ("gpu-check-uninterrupted", "gpu-check-resumed")]


def setup_resume(ctx: Ctx, rep: Report) -> dict:
    from megatron.core import dist_checkpointing

    from training import checkpoint as ckpt

    assert callable(dist_checkpointing.save) and callable(dist_checkpointing.load) and callable(ckpt.verify)
    full, part = _resume_cfgs(ctx)
    m = full.model
    rep.number("shape", f"afm-on-device reduced to width {m.hidden_size} x {m.num_layers} layers "
                        f"({m.parameter_count()['total'] / 1e6:.1f}M parameters), sequence "
                        f"{DRY_SEQ if ctx.dry else RESUME_SEQ}")
    return {"full": full, "part": part}


def run_resume(ctx: Ctx, rep: Report, st: dict) -> None:
    import json

    from gpu_check import spawn
    from training import checkpoint as ckpt
    from training import trainer

    full, part = st["full"], st["part"]
    at = full.steps // 2
    a = trainer.train(full, log=say)
    _free_gpu()
    b = trainer.train(part, stop_after=at, log=say)
    info = ckpt.open_checkpoint(b.checkpoint)
    want_format = "dist_checkpointing" if ctx.cuda else "state_dict"  # the CPU writes a plain state dict
    rep.check(f"checkpoint is {want_format}", info.manifest.get("weights") == want_format,
              str(info.manifest.get("weights")))
    problems = ckpt.verify(info)
    rep.check("checkpoint verifies (sizes and sha256 of every file)", not problems, "; ".join(problems[:3]))
    child = spawn("resume-continue", ctx.work, timeout=120, quick=ctx.quick, dry=ctx.dry)
    say("  (resumed process) " + json.dumps({k: child.get(k) for k in ("status", "reason", "seconds")}))
    resumed = child.get("numbers", {}).get("losses")
    if child.get("status") != "pass" or not resumed:
        rep.check("resume in a fresh process", False, f"{child.get('status')}: {child.get('reason')}")
        return
    want = a.losses[at:]
    diff = max(abs(x - y) for x, y in zip(resumed, want)) if len(resumed) == len(want) else float("inf")
    rep.number("max_loss_diff", diff)
    rep.number("bit_exact", resumed == want)
    rep.number("losses_uninterrupted", [round(x, 5) for x in want])
    rep.number("losses_resumed", [round(x, 5) for x in resumed])
    rep.check("losses after the resume equal the uninterrupted run's", diff <= 1e-4 * max(abs(x) for x in want),
              f"steps {at + 1}-{full.steps}: max |diff| {diff:.3g} (bit-exact: {resumed == want})")
    held = child["numbers"].get("held_out_loss")
    rep.check("final held-out loss equal", held is not None and abs(held - a.eval_loss) <= 1e-4 * abs(a.eval_loss),
              f"{held} vs {a.eval_loss}")


def setup_resume_continue(ctx: Ctx, rep: Report) -> dict:
    return {"part": _resume_cfgs(ctx)[1]}


def run_resume_continue(ctx: Ctx, rep: Report, st: dict) -> None:
    from training import trainer

    result = trainer.train(st["part"], resume="auto", log=say)
    rep.number("losses", result.losses)
    rep.number("held_out_loss", result.eval_loss)
    rep.check("resumed", finite(result.losses), f"{len(result.losses)} steps")


# ---- step 4: packed SFT ------------------------------------------------------------------------------------------

def setup_sft(ctx: Ctx, rep: Report) -> dict:
    from megatron.core.packed_seq_params import PackedSeqParams

    from training.packing import collate, packed_seq_params, uses_thd  # noqa: F401
    from training.post_config import from_dict
    from training.post_loop import forward  # noqa: F401
    from training.post_plan import plan_post
    from training.sft import load_conversations, prepare, sft_loss, train_sft  # noqa: F401

    steps = 2 if ctx.dry else 4 if ctx.quick else 8
    cfg = from_dict(post_raw(ctx, "sft", name="gpu-check-sft", steps=steps), where="gpu-check sft")
    data = prepare(cfg, log=say)
    multi = [p for p in data.train if len(p.lengths) > 1]
    rep.check("packs hold several conversations", bool(multi), f"{len(multi)} of {len(data.train)} packs")
    thd = collate(multi[:2], thd=True)
    params = packed_seq_params(thd["cu_seqlens"])
    cu = thd["cu_seqlens"].tolist()
    rep.check("THD batch: PackedSeqParams over the flattened micro-batch",
              isinstance(params, PackedSeqParams) and params.qkv_format == "thd" and cu[0] == 0
              and cu[-1] == thd["tokens"].numel() and all(b > a for a, b in zip(cu, cu[1:])),
              f"{len(cu) - 1} segments over {thd['tokens'].numel()} positions")
    plan = plan_post(cfg, gpus=1, gpu_bytes=ctx.gpu_bytes or PLAN_GPU_BYTES)
    rep.check("memory plan fits", plan.fits, f"{plan.total / GiB:.1f} GiB")
    rep.number("planned_memory_GiB", round(plan.total / GiB, 2))
    rep.number("route", "THD (PackedSeqParams, Transformer Engine)" if ctx.te else
               "explicit block-diagonal mask (local kernels: no Transformer Engine)")
    return {"cfg": cfg, "data": data, "pack": multi[0]}


def run_sft(ctx: Ctx, rep: Report, st: dict) -> None:
    import torch

    from training import parallel
    from training.chat import load_tokenizer
    from training.losses import cross_entropies
    from training.model import build_model
    from training.packing import collate, pack, uses_thd
    from training.post_loop import forward
    from training.sft import load_conversations, sft_loss, train_sft

    cfg = st["cfg"]
    parallel.setup(cfg.parallel, seed=cfg.seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 arithmetic for an equality check
    thd = uses_thd(cfg.parallel)
    rep.check("the THD route is taken exactly when Transformer Engine is there", thd == ctx.te, f"thd={thd}")
    model = build_model(cfg.model, seq_length=cfg.seq_length, rotary_base=cfg.rotary_base,
                        kernels=cfg.parallel.kernels).eval()  # fp32
    train, _, _ = load_conversations(cfg, load_tokenizer(cfg.tokenizer), log=say)
    packed_pack = st["pack"]
    dev = parallel.device()
    with torch.no_grad():
        b = {k: v.to(dev) for k, v in collate([packed_pack], thd=thd).items()}
        packed = float(sft_loss(forward(model, b), b["labels"], b["loss_mask"]))
        total = count = 0.0
        for i in packed_pack.sources:  # each conversation alone, in a pack of its own
            alone, _ = pack([train[i]], cfg.seq_length)
            b = {k: v.to(dev) for k, v in collate(alone, thd=thd).items()}
            (ce,) = cross_entropies(forward(model, b), [b["labels"]])
            total += float((ce * b["loss_mask"]).sum())
            count += float(b["loss_mask"].sum())
    unpacked = total / count
    rel = abs(packed - unpacked) / abs(unpacked)
    rep.number("packed_vs_unpacked_rel_diff", rel)
    rep.check("packed loss = token-weighted mean of the conversations alone (fp32)", rel <= 1e-4,
              f"{packed:.6f} vs {unpacked:.6f} over {len(packed_pack.sources)} conversations")
    del model
    _free_gpu()
    result = train_sft(cfg, log=say)  # bf16, distributed optimizer
    start, end = result.evals[0][1]["loss"], result.evals[-1][1]["loss"]
    rep.number("loss_first_last", [round(result.losses[0], 3), round(result.losses[-1], 3)])
    rep.number("held_out_start_end", [round(start, 4), round(end, 4)])
    rep.check("bf16 SFT: losses finite and the held-out loss falls", finite(result.losses) and end < start,
              f"held-out {start:.4f} -> {end:.4f} in {cfg.steps} steps")


# ---- step 5: reward model and DPO -------------------------------------------------------------------------------

def setup_post(ctx: Ctx, rep: Report) -> dict:
    from training.chat import load_tokenizer
    from training.dpo import reference_logps, train_dpo  # noqa: F401
    from training.post_config import from_dict
    from training.post_plan import plan_post
    from training.prefs import load_pairs
    from training.reward import RewardModel, load_reward_model, train_rm  # noqa: F401

    assert callable(RewardModel.sharded_state_dict)
    steps = 2 if ctx.dry else 3 if ctx.quick else 6
    sft = from_dict(post_raw(ctx, "sft", name="gpu-check-post-sft", steps=2 if ctx.dry else 4),
                    where="gpu-check post")
    rm = from_dict(post_raw(ctx, "rm", name="gpu-check-rm", steps=steps, init_from=sft.out_dir), where="gpu-check rm")
    dpo = from_dict(post_raw(ctx, "dpo", name="gpu-check-dpo", steps=steps, init_from=sft.out_dir),
                    where="gpu-check dpo")
    for cfg in (rm, dpo):
        train, valid, counters = load_pairs(cfg, load_tokenizer(cfg.tokenizer))
        rep.check(f"{cfg.method} pairs", len(train) > cfg.global_batch and len(valid) > 0,
                  f"{len(train)} training, {len(valid)} held-out")
        plan = plan_post(cfg, gpus=1, gpu_bytes=ctx.gpu_bytes or PLAN_GPU_BYTES)
        rep.check(f"{cfg.method} memory plan fits", plan.fits, f"{plan.total / GiB:.1f} GiB")
        # the step's measured peak covers both runs, so the larger plan is the one to hold it against
        rep.number("planned_memory_GiB", max(round(plan.total / GiB, 2), rep.numbers.get("planned_memory_GiB", 0)))
    rep.number("grading_heads", [list(h) for h in rm.rm.grading_heads])
    return {"sft": sft, "rm": rm, "dpo": dpo}


def run_post(ctx: Ctx, rep: Report, st: dict) -> None:
    import torch

    from training import checkpoint as ckpt
    from training import parallel
    from training.chat import load_tokenizer
    from training.dpo import train_dpo
    from training.prefs import load_pairs, pair_batch
    from training.reward import load_reward_model, train_rm
    from training.sft import train_sft

    train_sft(st["sft"], log=say)
    _free_gpu()
    rm = train_rm(st["rm"], log=say)
    figures = rm.evals[-1][1]
    rep.number("rm_held_out_accuracy", figures.get("accuracy"))
    rep.check("reward model: bf16 losses finite", finite(rm.losses), f"{len(rm.losses)} steps")
    problems = ckpt.verify(ckpt.open_checkpoint(rm.checkpoint))
    rep.check("reward-model checkpoint (GPT + heads, dist_checkpointing) verifies", not problems, "; ".join(problems))
    _free_gpu()
    model, cfg = load_reward_model(str(rm.checkpoint))  # the heads come back through sharded_state_dict
    tok = load_tokenizer(cfg.tokenizer)
    _, valid, _ = load_pairs(cfg, tok)
    with torch.no_grad():
        b = {k: v.to(parallel.device()) for k, v in pair_batch(valid[:4], cfg.seq_length, tok.pad_id).items()}
        rewards, _ = model(b)
    rep.check("reward model reloads and scores", finite(rewards.tolist()), f"{[round(x, 4) for x in rewards.tolist()]}")
    del model
    _free_gpu()
    dpo = train_dpo(st["dpo"], log=say)
    before, after = dpo.evals[0][1], dpo.evals[-1][1]
    rep.number("dpo_margin_before_after", [round(before["reward_margin"], 5), round(after["reward_margin"], 5)])
    rep.number("loss_first_last", [round(dpo.losses[0], 4), round(dpo.losses[-1], 4)])
    rep.check("DPO: bf16 losses finite, reference log-probs cached", finite(dpo.losses)
              and getattr(dpo, "reference_cache", None) == "miss",
              f"reference cache {getattr(dpo, 'reference_cache', None)}")
    problems = ckpt.verify(ckpt.open_checkpoint(dpo.checkpoint))
    rep.check("DPO checkpoint verifies", not problems, "; ".join(problems))
