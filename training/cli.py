"""`cidermill train ...`: pretraining stages, distillation, pruning, checkpoints. Thin: parse, call, print.

Under torchrun every rank runs the same command (`torchrun --nproc-per-node 8 -m manifests.main train pretrain
configs/train/afm-on-device-core.yaml`); only rank 0 prints.
"""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="pretraining, distillation, pruning, post-training")
    tsub = p.add_subparsers(dest="train_cmd", required=True)

    pre = tsub.add_parser("pretrain", help="train one stage from a run config (YAML)")
    _common(pre)
    pre.add_argument("--resume", help="'auto' (newest checkpoint under out_dir) or a checkpoint directory")
    pre.set_defaults(func=cmd_pretrain)

    st = tsub.add_parser("stages", help="core -> continued -> context-lengthening, each from the previous checkpoint")
    st.add_argument("configs", nargs="+", help="one run config per stage, in order")
    st.add_argument("--init-from", help="checkpoint to start the first stage from (e.g. a pruned model)")
    st.add_argument("--root", help="data root for mixture references (overrides data.root)")
    st.set_defaults(func=cmd_stages)

    dis = tsub.add_parser("distill", help="train with targets 0.1·label + 0.9·teacher top-1")
    _common(dis)
    g = dis.add_mutually_exclusive_group()
    g.add_argument("--teacher", help="teacher checkpoint (online top-1)")
    g.add_argument("--teacher-top1", help="precomputed top-1 ids (prefix from `train precompute-top1`)")
    dis.add_argument("--teacher-weight", type=float, default=0.9)
    dis.set_defaults(func=cmd_distill)

    pc = tsub.add_parser("precompute-top1", help="write the teacher's top-1 ids for a run's training samples")
    _common(pc)
    pc.add_argument("--teacher", required=True, help="teacher checkpoint")
    pc.add_argument("--out", required=True, help="output prefix (.bin/.idx/.top1.json)")
    pc.set_defaults(func=cmd_precompute)

    pr = tsub.add_parser("prune", help="learn Soft-Top-K FFN masks on the config's mixture, write a pruned checkpoint")
    _common(pr)
    pr.add_argument("--source", required=True, help="checkpoint of the trained model to prune")
    pr.add_argument("--target-ffn", type=int, required=True, help="FFN width of the pruned model")
    pr.add_argument("--mask-steps", type=int, default=100)
    pr.add_argument("--mask-lr", type=float, default=0.05)
    pr.add_argument("--out", required=True, help="checkpoint directory to write")
    pr.set_defaults(func=cmd_prune)

    pl = tsub.add_parser("plan", help="per-GPU memory of a run config: weights, grads, optimizer state, "
                                      "activations, teacher; the largest micro-batch that fits")
    pl.add_argument("config", help="run config YAML (configs/train/*.yaml)")
    pl.add_argument("--gpus", type=int, required=True, help="number of GPUs (tensor x data parallel)")
    pl.add_argument("--gpu-mem", default="80GiB", help="memory per GPU (e.g. 80GiB, 141GB)")
    pl.add_argument("--seq-length", type=int, help="when neither the config nor its mixture gives it")
    pl.add_argument("--micro-batch", type=int, help="override the config's micro_batch")
    pl.add_argument("--root", help="data root for mixture references (overrides data.root)")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    pl.add_argument("--mfu", type=float, default=0.4, help="post-training configs: the MFU the throughput "
                                                           "projection assumes")
    _set_option(pl)
    pl.set_defaults(func=cmd_plan)

    for method, text in (("sft", "supervised fine-tuning on conversations (chat template, loss mask, packing)"),
                         ("rm", "reward model: soft-label Bradley-Terry + grading heads, from an SFT checkpoint"),
                         ("dpo", "DPO or IPO (dpo.loss) against cached reference log-probs")):
        pt = tsub.add_parser(method, help=text)
        pt.add_argument("config", help="post-training run config YAML (configs/train/post/*-%s.yaml)" % method)
        pt.add_argument("--steps", type=int, help="override steps")
        pt.add_argument("--out-dir", help="override out_dir")
        pt.add_argument("--init-from", help="override init_from (checkpoint)")
        pt.add_argument("--resume", help="'auto' (newest checkpoint under out_dir) or a checkpoint directory")
        _set_option(pt)
        if method == "sft":
            pt.add_argument("--audit", action="store_true",
                            help="print packed samples with masked spans marked [[...]], then stop")
            pt.add_argument("--audit-packs", type=int, default=1)
            pt.add_argument("--adapter-init", help="recovery adapter: train only a copy of it (LoRA) on the frozen "
                                                   "base its manifest names (the palettized model)")
        pt.set_defaults(func=cmd_post, method=method)

    md = tsub.add_parser("mdloo", help="MDLOO online RL: n responses per prompt, leave-one-out advantage of a "
                                       "KL-penalised rule reward, mirror-descent policy updates")
    md.add_argument("config", help="MDLOO run config YAML (configs/train/post/*-mdloo.yaml)")
    md.add_argument("--steps", type=int, help="override the number of MDLOO iterations")
    md.add_argument("--out-dir", help="override out_dir")
    md.add_argument("--init-from", help="override init_from (the SFT checkpoint)")
    md.add_argument("--resume", help="'auto' (newest checkpoint under out_dir) or a checkpoint directory")
    md.set_defaults(func=cmd_mdloo)

    it = tsub.add_parser("itec", help="iTeC: a committee samples, the RM + rule rewards rank, best -> RS data, "
                                      "best/worst -> pairs, one catalog version per round (training/itec.py)")
    it.add_argument("config", help="iTeC config YAML (configs/train/post/*-itec.yaml)")
    it.add_argument("--rounds", type=int, help="override rounds")
    it.add_argument("--out-dir", help="override out_dir")
    it.add_argument("--root", help="override root (the catalog the rounds are published to)")
    it.set_defaults(func=cmd_itec)

    show = tsub.add_parser("show", help="print a checkpoint's manifest")
    show.add_argument("checkpoint")
    show.set_defaults(func=cmd_show)

    ver = tsub.add_parser("verify", help="check every file of a checkpoint against its manifest (size, sha256)")
    ver.add_argument("checkpoint", help="checkpoint directory (or a run directory: its newest checkpoint)")
    ver.set_defaults(func=cmd_verify)

    seal = tsub.add_parser("seal", help="hash the files of a checkpoint written before file hashes (format 1) "
                                        "as they are now, so it loads; only for checkpoints you trust")
    seal.add_argument("checkpoint", help="checkpoint directory")
    seal.set_defaults(func=cmd_seal)

    shapes = tsub.add_parser("shapes", help="list named model shapes with parameter counts")
    shapes.set_defaults(func=cmd_shapes)

    tiny = tsub.add_parser("tiny-mixtures", help="publish byte-level tiny-core/continued/context mixtures "
                                                 "from the bundled C4 sample (CPU runs of configs/train/tiny-*)")
    tiny.add_argument("--root", default="data/root")
    tiny.set_defaults(func=cmd_tiny_mixtures)

    ehf = tsub.add_parser("export-hf", help="write a transformers model folder (Qwen3 layout: config, "
                                            "safetensors, tokenizer) from a checkpoint")
    ehf.add_argument("checkpoint", help="checkpoint directory (or a run directory: its newest checkpoint)")
    ehf.add_argument("--out", required=True, help="folder to write")
    ehf.set_defaults(func=cmd_export_hf)


def _common(p) -> None:
    p.add_argument("config", help="run config YAML (configs/train/*.yaml)")
    p.add_argument("--steps", type=int, help="override steps")
    p.add_argument("--out-dir", help="override out_dir")
    p.add_argument("--root", help="data root for mixture references (overrides data.root)")
    p.add_argument("--mixture", help="mixture NAME[@id] or mixture.json to read instead of the config's data")
    _set_option(p)


def _set_option(p) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override any config key, validated like the YAML (repeatable): --set optim.lr=1e-3")


def _sets(args) -> dict:
    from manifests.overrides import parse_assignment

    return dict(parse_assignment(a) for a in getattr(args, "set", None) or [])


def _overrides(args, *keys: str) -> dict:
    """`--set KEY=VALUE` pairs, then the dedicated flags (`--steps`, `--out-dir`, ...) given: one mapping,
    so a key named both ways is not passed twice (that was a TypeError); the flag wins."""
    out = _sets(args)
    out.update({k: getattr(args, k) for k in keys if getattr(args, k, None) is not None})
    return out


def _load(args, path=None):
    import dataclasses

    from .config import load_config, with_

    cfg = load_config(path or args.config, **_overrides(args, "steps", "out_dir"))
    if getattr(args, "root", None):
        cfg = with_(cfg, data=dataclasses.replace(cfg.data, root=args.root))
    if getattr(args, "mixture", None):
        cfg = with_(cfg, data=dataclasses.replace(cfg.data, mixture=args.mixture, blend=()))
    return cfg


def _log(line: str) -> None:
    from .parallel import is_main

    if is_main():
        print(line, flush=True)


def cmd_pretrain(args) -> int:
    from .trainer import train

    result = train(_load(args), resume=args.resume, log=_log)
    _log(f"checkpoint {result.checkpoint}")
    return 0


def cmd_stages(args) -> int:
    from .stages import run_stages

    results = run_stages([_load(args, p) for p in args.configs], init_from=args.init_from, log=_log)
    for r in results:
        _log(f"{r.run_dir}: first loss {r.losses[0]:.4f} last {r.losses[-1]:.4f} held-out {r.eval_loss:.4f}")
    return 0


def cmd_distill(args) -> int:
    from .config import DistillConfig, with_
    from .trainer import train

    cfg = _load(args)
    if args.teacher or args.teacher_top1:
        cfg = with_(cfg, distill=DistillConfig(teacher=args.teacher, teacher_top1=args.teacher_top1,
                                               teacher_weight=args.teacher_weight))
    if cfg.distill is None:
        from manifests.errors import ConfigError

        raise ConfigError("distill: give --teacher or --teacher-top1, or a `distill:` section in the config")
    result = train(cfg, log=_log)
    _log(f"checkpoint {result.checkpoint}")
    return 0


def cmd_precompute(args) -> int:
    from .distill import precompute_top1

    prefix = precompute_top1(_load(args), teacher=args.teacher, prefix=args.out)
    _log(f"top-1 ids at {prefix}.bin/.idx")
    return 0


def cmd_prune(args) -> int:
    from .prune import prune

    prune(_load(args), source=args.source, target_ffn=args.target_ffn, steps=args.mask_steps,
          out_dir=args.out, lr=args.mask_lr, log=_log)
    return 0


def cmd_plan(args) -> int:
    from .config import read_yaml
    from manifests.config import parse_size

    from .memory import plan_for_config

    from manifests.config import require_number

    gpu_bytes = parse_size(args.gpu_mem, key="--gpu-mem", where="the command line")
    require_number(args.gpus, "--gpus", where="train plan", ge=1, integer=True)
    require_number(args.mfu, "--mfu", where="train plan", gt=0, le=1)

    if "method" in read_yaml(args.config, {}):  # a post-training config (sft | rm | dpo)
        from .post_config import load_config
        from .post_plan import plan_post

        plan = plan_post(load_config(args.config, **_sets(args)), gpus=args.gpus, gpu_bytes=gpu_bytes,
                         micro_batch=args.micro_batch, mfu=args.mfu)
        print(json.dumps(plan.to_dict(), indent=2) if args.json else plan.table())
        return 0 if plan.fits else 1
    plan = plan_for_config(_load(args), gpus=args.gpus, gpu_bytes=gpu_bytes,
                           seq_length=args.seq_length, micro_batch=args.micro_batch)
    print(json.dumps(plan.to_dict(), indent=2) if args.json else plan.table())
    return 0 if plan.fits else 1


def cmd_show(args) -> int:
    from .checkpoint import open_checkpoint

    manifest = dict(open_checkpoint(args.checkpoint).manifest)
    manifest.pop("config", None)
    print(json.dumps(manifest, indent=2))
    return 0


def cmd_verify(args) -> int:
    from .checkpoint import open_checkpoint, verify

    info = open_checkpoint(args.checkpoint)
    problems = verify(info)
    for p in problems:
        print(f"{info.directory}: {p}")
    if not problems:
        print(f"{info.directory}: {len(info.manifest['files'])} files intact")
    return 1 if problems else 0


def cmd_seal(args) -> int:
    from .checkpoint import seal

    print(f"sealed {seal(args.checkpoint)} (format 2: its files are hashed as they are now)")
    return 0


def cmd_shapes(args) -> int:
    from .model.shapes import SHAPES

    print(f"{'shape':18} {'layers':>6} {'width':>6} {'heads':>5} {'kv':>3} {'ffn':>6} {'vocab':>6} {'params':>10}")
    for s in SHAPES.values():
        n = s.parameter_count()["total"]
        size = f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.2f}M"
        print(f"{s.name:18} {s.num_layers:6} {s.hidden_size:6} {s.num_attention_heads:5} {s.num_query_groups:3} "
              f"{s.ffn_hidden_size:6} {s.vocab_size:6} {size:>10}")
    return 0


def cmd_tiny_mixtures(args) -> int:
    from .byte_mixture import bundled_c4_texts, publish_tiny_mixtures

    for name in publish_tiny_mixtures(args.root, bundled_c4_texts()):
        print(f"published mixture {name} under {args.root}")
    return 0


def cmd_export_hf(args) -> int:
    from .export_hf import export_hf

    print(f"exported {args.checkpoint} to {export_hf(args.checkpoint, args.out)} (Qwen3ForCausalLM)")
    return 0


def cmd_post(args) -> int:
    from manifests.errors import ConfigError

    from .post_config import load_config

    cfg = load_config(args.config, **_overrides(args, "steps", "out_dir", "init_from", "adapter_init"))
    if cfg.method != args.method:
        raise ConfigError(f"{args.config}: method is {cfg.method!r}; run `cidermill train {cfg.method}`")
    if args.method == "sft":
        from .sft import audit, train_sft

        if args.audit:
            audit(cfg, n=args.audit_packs)
            return 0
        result = train_sft(cfg, resume=args.resume, log=_log)
    elif args.method == "rm":
        from .reward import train_rm

        result = train_rm(cfg, resume=args.resume, log=_log)
    else:
        from .dpo import train_dpo

        result = train_dpo(cfg, resume=args.resume, log=_log)
    _log(f"checkpoint {result.checkpoint}")
    return 0


def cmd_mdloo(args) -> int:
    from .mdloo_config import load_config
    from .rl_loop import train_mdloo

    run = load_config(args.config, steps=args.steps, out_dir=args.out_dir, init_from=args.init_from)
    result = train_mdloo(run, resume=args.resume, log=_log)
    _log(f"checkpoint {result.checkpoint}; reward curve {result.plot}")
    return 0


def cmd_itec(args) -> int:
    from .itec import run_itec
    from .itec_config import load_config

    cfg = load_config(args.config, rounds=args.rounds, out_dir=args.out_dir, root=args.root)
    result = run_itec(cfg, log=_log)
    for r in result.rounds:
        _log(f"round {r.round}: mean reward {r.mean_reward:.4f}, best per prompt {r.mean_best_reward:.4f} -> "
             f"{r.version} (RS {r.rs_path}, pairs {r.pairs_path})")
    _log(f"model calls {result.model_calls.total} ({result.model_calls})")
    return 0
