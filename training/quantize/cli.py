"""`cidermill quantize ...`: palettize a checkpoint. Thin: parse, call, print."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("quantize", help="palettization (k-means LUTs, mixed 2/4-bit) and recovery adapters")
    qsub = p.add_subparsers(dest="quantize_cmd", required=True)
    pal = qsub.add_parser("palettize", help="k-means LUT palettization of a checkpoint to a target bits/weight")
    pal.add_argument("checkpoint", help="checkpoint directory (or a run directory: its newest checkpoint)")
    pal.add_argument("--bpw", type=float, default=3.6, help="target bits per weight over the linear layers")
    pal.add_argument("--group-size", type=int, default=16, help="output channels sharing one lookup table")
    pal.add_argument("--seed", type=int, default=0, help="k-means++ seed")
    pal.add_argument("--calib-samples", type=int, default=16, help="training-split samples for sensitivity")
    pal.add_argument("--weighting", choices=["none", "activations", "gradients"], default="activations",
                     help="activations: k-means weighted by the calibration batches' squared inputs; "
                          "gradients: by each weight's mean squared gradient (diagonal Fisher)")
    pal.add_argument("--calib-text", help="calibration documents (JSONL/JSON records with `text`, .gz ok) for a "
                                          "checkpoint without a training blend, e.g. an import-hf checkpoint")
    pal.add_argument("--seq-length", type=int, help="sequence length of --calib-text samples (default 256)")
    pal.add_argument("--out", required=True, help="directory to write")
    pal.set_defaults(func=cmd_palettize)
    add_adapter_commands(qsub)


def cmd_palettize(args) -> int:
    from .palettize import PalettizeConfig, palettize_checkpoint

    palettize_checkpoint(args.checkpoint, args.out, PalettizeConfig(
        bpw=args.bpw, group_size=args.group_size, seed=args.seed, calib_samples=args.calib_samples,
        weighting=args.weighting), calib_text=args.calib_text, seq_length=args.seq_length)
    return 0


def add_adapter_commands(qsub) -> None:
    rec = qsub.add_parser("recover", help="train an accuracy-recovery LoRA on a palettized model (base frozen)")
    rec.add_argument("palettized", help="directory written by `quantize palettize`")
    rec.add_argument("--rank", type=int, default=16)
    rec.add_argument("--init", choices=["zero", "svd"], default="svd", help="svd: from W - W_hat of the source")
    rec.add_argument("--steps", type=int, default=40)
    rec.add_argument("--batch", type=int, default=16)
    rec.add_argument("--lr", type=float, default=3e-3)
    rec.add_argument("--loss", default="ce", help="ce: next-token cross-entropy on the training text; kl: "
                     "distillation, KL(float teacher || palettized + adapter) per token on the same windows")
    rec.add_argument("--kl-temperature", type=float, default=1.0, help="--loss kl: softmax temperature")
    rec.add_argument("--ce-weight", type=float, default=0.0,
                     help="--loss kl: loss = (1 - w) KL + w CE, w in [0, 1]")
    rec.add_argument("--teacher", help="--loss kl: the float checkpoint the palettized model was made from "
                                       "(default: the one its manifest names; another one is refused)")
    rec.add_argument("--out", required=True, help="adapter directory to write")
    rec.set_defaults(func=cmd_recover)

    ehf = qsub.add_parser("export-hf", help="HF (Qwen3) folder of a palettized model, weights dequantized")
    ehf.add_argument("palettized", help="directory written by `quantize palettize`")
    ehf.add_argument("--out", required=True)
    ehf.set_defaults(func=cmd_export_hf)

    exp = qsub.add_parser("export-adapter", help="write an adapter in PEFT format next to the HF export of the "
                                                 "base it was trained on (checked by hash)")
    exp.add_argument("adapter", help="adapter directory (adapter.json + adapter.safetensors)")
    exp.add_argument("--hf", required=True, help="the HF export of the adapter's base: `quantize export-hf PAL` for "
                                                 "an adapter trained on a palettized model (recovery and task "
                                                 "adapters), `train export-hf CKPT` for one trained on a checkpoint")
    exp.add_argument("--name", help="subfolder under HF/adapters (default: the adapter folder's name)")
    exp.set_defaults(func=cmd_export_adapter)


def cmd_export_hf(args) -> int:
    from .palettize import export_hf_dequantized

    print(f"exported {args.palettized} (dequantized) to {export_hf_dequantized(args.palettized, args.out)}")
    return 0


def cmd_recover(args) -> int:
    from manifests.errors import ConfigError

    from .. import parallel
    from ..adapters.lora import LoraConfig
    from ..adapters.recovery import RecoveryConfig, check_teacher, train_batches, train_recovery
    from ..adapters.store import base_id, save_adapter
    from ..trainer import load_model
    from .palettize import dequantized_state, load_palettized

    config = RecoveryConfig(lora=LoraConfig(rank=args.rank, init=args.init), steps=args.steps, batch=args.batch,
                            lr=args.lr, loss=args.loss, kl_temperature=args.kl_temperature,
                            ce_weight=args.ce_weight)  # checked before any work
    if args.teacher and config.loss != "kl":
        raise ConfigError("--teacher applies to --loss kl only in quantize recover")
    parallel.setup(parallel.ParallelConfig())
    model, manifest = load_palettized(args.palettized)
    teacher_dir = check_teacher(args.palettized, manifest, args.teacher) if config.loss == "kl" else None
    residual = source = None
    if args.init == "svd" or teacher_dir:
        source, _ = load_model(teacher_dir or manifest["source_checkpoint"],
                               seq_length=int(manifest["data"]["seq_length"]))
    if args.init == "svd":
        deq = dequantized_state(args.palettized)
        w = source.state_dict()  # on the GPU where there is one; the dequantized weights are on the CPU
        residual = {k: w[k].detach().cpu() - v for k, v in deq.items() if ".linear_" in k}
    from pathlib import Path

    batches = train_batches(manifest, n=args.batch * args.steps, batch=args.batch,
                            cache_dir=Path(args.out) / ".data-cache")
    adapter, host, losses = train_recovery(model, batches, config, residual=residual,
                                           teacher=source if teacher_dir else None)
    host.detach()
    objective = {"loss": config.loss} if config.loss == "ce" else {
        "loss": "kl", "kl_temperature": config.kl_temperature, "ce_weight": config.ce_weight,
        "teacher": base_id(teacher_dir)}
    save_adapter(args.out, adapter, base=base_id(args.palettized),
                 extra={"steps": args.steps, "lr": args.lr, "data": manifest["data"]["source_id"],
                        "train_losses": losses, **objective})
    print(f"adapter written to {args.out}")
    return 0


def cmd_export_adapter(args) -> int:
    import json
    from pathlib import Path

    from ..adapters.store import check_export_base, export_peft, load_adapter

    hf = Path(args.hf)
    adapter = load_adapter(args.adapter)
    check_export_base(adapter.meta["base"], hf, adapter=args.adapter)
    config = json.loads((hf / "config.json").read_text())
    shape = {"num_attention_heads": config["num_attention_heads"], "num_query_groups": config["num_key_value_heads"],
             "head_dim": config["head_dim"], "ffn_hidden_size": config["intermediate_size"]}
    out = export_peft(adapter, shape, hf / "adapters" / (args.name or Path(args.adapter).name),
                      base_model=str(hf.resolve()))
    print(f"PEFT adapter written to {out}")
    return 0
