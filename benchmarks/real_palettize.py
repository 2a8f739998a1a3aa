"""Palettization of the real base (SmolLM2-135M-Instruct, imported; its dequantised Q4_1 weights are the
"float" model) at 4 / 3.6 / 3 / 2 bits per weight, ours beside coremltools' PostTrainingPalettizer at the same
per-layer bits; then the accuracy-recovery LoRA on the 3.6-bpw model, and adapters swapped at run time.

    nice -n 10 .venv/bin/python benchmarks/real_palettize.py --work out/realbase [--valid 32 --items 100 ...]

Text: the bundled C4 sample (data/samples/c4, 300 documents) split 50/50 by document (seeded) into a training
half (calibration windows for the sensitivities and the activation statistics, and the LoRA's training
windows) and a held-out half; plus Wikipedia (../shared/data/web_text/llamafactory_demo/wiki_demo.txt), held
out, another domain. Windows: documents tokenized with the model's tokenizer, joined with its end-of-document
id, cut into `--seq` tokens. Held-out figures: cross-entropy (nats/token) and perplexity on `--valid`
windows of each held-out text, ARC-Easy and PIQA accuracy (`--items` each, ../shared/data/benchmarks, scored
by evals.model's log-likelihood code: acc / acc_norm).

Rows: float; per target: ours (k-means weighted by calibration activations: the CLI default), ours plain
k-means, coremltools (per_grouped_channel, same group size, the SAME per-layer bits via module_name_configs,
on the HF export; its weights are read back into the megatron model through the importer's conversion). The
embedding is int8 per row in every quantized row (ours for both). Bits per weight over the linear layers,
fp16 LUTs counted. The mixed allocation (3.6 / 3.0) is ours: greedy by each layer's measured sensitivity.
Recovery: a rank-16 LoRA (SVD init from W - W_hat) on every linear layer of the 3.6-bpw model (ours),
`--lora-steps` steps on training-half windows; share of the gap closed = (quant - adapted) / (quant - float),
per held-out text; control: the same LoRA training on the float model (how much is continued training on C4).
`--recovery-loss ce,kl`: one LoRA per objective, the same steps, windows, rank and learning rate: "ce" the
next-token cross-entropy on the C4 windows, "kl" KL(float || palettized + LoRA) per token on the same windows
(`kl:T:w`: temperature T, w x CE mixed in; kl = kl:1:0); each row also gives the held-out KL to the float
model (nats/token), before and after. `--dev`: for choosing such settings, the figures come from `--valid`
windows of the C4 training half that follow the LoRA's training windows; the held-out texts are not measured.
Swap: two adapters (the recovery one, and one trained on the float model's residual-free init for fewer
steps) attached / detached / re-attached on the running palettized model; each attach must give that
adapter's own logits (max abs diff against the logits computed when it was first attached).

Each method palettizes the whole model once per bit width (4, 2); the mixed plans are per-layer picks from
those (`compose`), and the results are cached under <work>/palettize (a rerun resumes after them). Smaller
runs: `--targets 4,2` (no sensitivities, LoRA or swap), `--top-layers N` (palettize only the top N layers: a
partial-model figure), `--task-rows ""` (no ARC-Easy / PIQA), `--control-steps 0`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import random
import time
from pathlib import Path

import torch

from real_common import REPO, SHARED, Clock, base_checkpoint, load_line, setup_threads, split


def windows(texts: list[str], tokenizer, *, seq: int, n: int) -> list[dict]:
    """Up to n batches of 4 windows of seq+1 tokens (tokens, labels, loss_mask, position_ids)."""
    ids: list[int] = []
    for t in texts:
        ids += tokenizer.encode(t) + [tokenizer.eod_id]
    rows = [ids[i: i + seq + 1] for i in range(0, len(ids) - seq - 1, seq + 1)][:n]
    out = []
    for at in range(0, len(rows), 4):
        chunk = torch.tensor(rows[at: at + 4])
        out.append({"tokens": chunk[:, :-1], "labels": chunk[:, 1:], "loss_mask": torch.ones(len(chunk), seq),
                    "position_ids": torch.arange(seq)[None].expand(len(chunk), seq)})
    return out


def compose(at: dict[int, dict], plan: dict[str, int]) -> dict:
    """The state of a mixed plan from whole-model results at each bit width (`at[bits]`): every layer is
    quantized on its own (its own seeded k-means), so this equals quantizing with the plan directly
    (tests/training/test_real_benchmarks.py checks it for ours)."""
    out = dict(at[max(at)])
    out.update({k: at[b][k] for k, b in plan.items()})
    return out


def cached(path: Path, make) -> tuple[dict, float]:
    """`make()` once per work folder (the whole-model palettizations take most of a run on a shared CPU):
    (the result, the seconds it took when made; read back from the file on a rerun)."""
    if path.exists():
        saved = torch.load(path)
        return saved["result"], saved["seconds"]
    t0 = time.perf_counter()
    result = make()
    seconds = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"result": result, "seconds": seconds}, path.with_suffix(".partial"))
    path.with_suffix(".partial").rename(path)
    return result, seconds


def hf_names(name: str) -> list[str]:
    i, kind = name.split(".")[2], name.split(".")[-2]
    base = f"model.layers.{i}."
    return {"linear_qkv": [base + f"self_attn.{p}_proj" for p in "qkv"], "linear_proj": [base + "self_attn.o_proj"],
            "linear_fc1": [base + "mlp.gate_proj", base + "mlp.up_proj"],
            "linear_fc2": [base + "mlp.down_proj"]}[kind]


def coremltools_state(hf_dir: Path, plan: dict, group_size: int, shape, embedding_from: dict) -> dict:
    """coremltools' palettization of the HF export at the plan's per-layer bits, as a megatron state dict."""
    import transformers
    from coremltools.optimize.torch.palettization import (ModulePostTrainingPalettizerConfig,
                                                          PostTrainingPalettizer, PostTrainingPalettizerConfig)

    from training.hf_import import megatron_state

    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    names = set(hf.state_dict())
    module_cfg = {m: ModulePostTrainingPalettizerConfig(n_bits=plan[k], granularity="per_grouped_channel",
                                                        group_size=group_size) for k in plan for m in hf_names(k)}
    hf = PostTrainingPalettizer(hf, PostTrainingPalettizerConfig(module_name_configs=module_cfg)).compress()
    state = {k: v.detach() for k, v in hf.state_dict().items() if k in names}
    out = megatron_state(state, shape)
    for k in ("embedding.word_embeddings.weight",):  # the same int8 embedding as ours
        out[k] = embedding_from[k]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="out/realbase")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--calib", type=int, default=4, help="calibration windows")
    ap.add_argument("--valid", type=int, default=24, help="held-out windows per text")
    ap.add_argument("--items", type=int, default=60, help="ARC-Easy and PIQA items each")
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--lora-steps", type=int, default=30)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--lora-lr", type=float, default=1e-3)
    ap.add_argument("--plain", action="store_true", help="also the plain (unweighted) k-means rows")
    ap.add_argument("--targets", default="4,3.6,3.0,2", help="bpw targets: 4 and 2 uniform, others mixed 4/2; "
                    "the recovery LoRA and the swap need 3.6")
    ap.add_argument("--top-layers", type=int, default=0,
                    help="palettize only the top N transformer layers (the rest stay float); 0: all")
    ap.add_argument("--weighting", choices=("activations", "none"), default="activations",
                    help="ours' k-means weights: calibration activations (the CLI default) or none")
    ap.add_argument("--task-rows", default="4,3.6,3.0,2", help="targets whose rows get ARC-Easy / PIQA")
    ap.add_argument("--recovery-loss", default="ce", help="recovery LoRA objectives, comma-separated: ce, kl, "
                    "or kl:T:w (KL at temperature T mixed with w x CE; kl = kl:1:0)")
    ap.add_argument("--dev", action="store_true", help="for choices: measure on --valid dev windows of the C4 "
                    "training half (after the LoRA's windows) instead of the held-out texts (not measured)")
    ap.add_argument("--control-steps", type=int, default=None,
                    help="steps of the same LoRA training on the float model (default --lora-steps; 0: none)")
    args = ap.parse_args()
    args.task_rows = [t.strip() for t in args.task_rows.split(",") if t.strip()]
    args.recovery_loss = [t.strip() for t in args.recovery_loss.split(",") if t.strip()]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    mixed = [t for t in targets if t not in ("4", "2")]
    widths = (4, 2) if mixed or "2" in targets else (4,)
    setup_threads()
    logging.getLogger("coremltools").setLevel(logging.WARNING)

    from evals.model.backends import MegatronLM
    from evals.model.loglik import items_for, score_items
    from training import checkpoint as ckpt
    from training.adapters.lora import AdapterHost, LoraConfig
    from training.adapters.recovery import RecoveryConfig, mean_kl, recovered_share, train_recovery
    from training.chat import load_tokenizer
    from training.export_hf import export_hf, tokenizer_spec
    from training.model import get_shape
    from training.quantize.evalset import mean_loss
    from training.quantize.palettize import (EMBEDDING, allocate_bits, input_energy, int8_rows, is_palettized,
                                             layer_bpw, palettize_state)
    from training.trainer import load_model

    work = Path(args.work)
    out = work / "palettize"
    clock = Clock()
    print(f"start: {load_line()}", flush=True)
    base = base_checkpoint(work)
    info = ckpt.open_checkpoint(base)
    shape = get_shape(**info.manifest["model_shape"])
    tok = load_tokenizer(tokenizer_spec(info))
    with gzip.open(REPO / "data/samples/c4/c4_demo.jsonl.gz", "rt") as f:
        c4 = [json.loads(line)["text"] for line in f]
    halves = split(c4, {"train": 0.5, "held-out": 0.5}, seed=0)
    wiki = [line for line in (SHARED / "web_text/llamafactory_demo/wiki_demo.txt").read_text().splitlines() if line]
    random.Random(0).shuffle(wiki)
    n_train = args.calib + 4 * args.lora_steps
    if args.dev and args.calib % 4:
        raise SystemExit("--dev needs --calib a multiple of 4 (the dev windows follow the training batches)")
    train_w = windows(halves["train"], tok, seq=args.seq, n=n_train + (args.valid if args.dev else 0))
    train_w, dev_w = train_w[: -(-n_train // 4)], train_w[-(-n_train // 4):]
    calib, lora_batches = train_w[: max(1, args.calib // 4)], train_w[max(1, args.calib // 4):]
    held = {"C4 dev": dev_w} if args.dev else {"C4": windows(halves["held-out"], tok, seq=args.seq, n=args.valid),
                                               "Wikipedia": windows(wiki, tok, seq=args.seq, n=args.valid)}
    items = {t: items_for(t, SHARED / "benchmarks", args.items) for t in ("arc_easy", "piqa")}

    lm = MegatronLM(base, max_length=2048)  # the evaluation model (SDPA attention); variants loaded into it
    model, _ = load_model(base, seq_length=args.seq)  # the calibration / LoRA model (stock layers)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
    names = [k for k, v in state.items() if is_palettized(k, v)
             and (not args.top_layers or int(k.split(".")[2]) >= shape.num_layers - args.top_layers)]
    sizes = {k: tuple(state[k].shape) for k in names}
    gs = args.group_size

    def figures(variant_state, *, tasks: bool = True) -> dict:
        ckpt.load_state_dict_(lm.model, variant_state)
        ckpt.load_state_dict_(model, variant_state)
        row = {f"{name} CE": mean_loss(model, batches) for name, batches in held.items()}
        for t, its in items.items() if tasks else ():
            m, _ = score_items(lm, its)
            row[t], row[t + " norm"] = m["acc"], m["acc_norm"]
        return row

    rows = {"float": {"bpw": 32.0, **figures(state, tasks=bool(args.task_rows))}}
    clock.mark("float")
    print(f"float: {rows['float']} ({clock.marks['float']:.0f} s)", flush=True)
    # Every layer is palettized on its own (its own k-means, same seed, same column weights), so a mixed plan
    # is exactly the per-layer pick from the all-4-bit and the all-2-bit results: each method runs twice,
    # not once per plan (the same holds for coremltools, whose k-means is per module).
    energy = input_energy(model, names, calib) if args.weighting == "activations" else None
    # what the whole-model results depend on (besides the base)
    tag = f"g{gs}-calib{args.calib}x{args.seq}" if energy else f"g{gs}-plain"
    ours_at, t_ours = cached(out / f"ours-{tag}-{'+'.join(map(str, widths))}bit.pt", lambda: {
        b: palettize_state(state, {k: b for k in names}, group_size=gs, col_weights=energy).state for b in widths})
    print(f"ours, every layer at 4 and at 2 bits: {t_ours:.0f} s", flush=True)
    clock.mark("ours 4+2 bit")
    # sensitivity of each layer: the calibration loss increase when that layer alone takes ours' 2-bit weights
    def sensitivities() -> dict:
        base_calib = mean_loss(model, calib)
        params = dict(model.named_parameters())
        sens = {}
        with torch.no_grad():
            for k in names:
                params[k].copy_(ours_at[2][k])
                sens[k] = mean_loss(model, calib) - base_calib
                params[k].copy_(state[k])
        return sens

    sens = cached(out / f"sensitivities-{tag}-top{args.top_layers}.pt", sensitivities)[0] if mixed else {}
    clock.mark("sensitivities")
    took = clock.marks["sensitivities"] - clock.marks["ours 4+2 bit"]
    print(f"sensitivities of {len(names)} layers: {took:.0f} s", flush=True)
    qe, scale = int8_rows(state[EMBEDDING])
    int8_state = {**state, EMBEDDING: qe.float() * scale[:, None]}
    plans = {t: {k: int(t) for k in names} if t in ("4", "2") else
             allocate_bits(sizes, sens, target=float(t), bits=(4, 2), group_size=gs) for t in targets}
    hf_dir = export_hf(base, out / "hf-float")
    cml_at, t_cml = cached(out / f"coremltools-g{gs}-{'+'.join(map(str, widths))}bit.pt", lambda: {
        b: coremltools_state(hf_dir, {k: b for k in names}, gs, shape, int8_state) for b in widths})
    print(f"coremltools, every layer at 4 and at 2 bits: {t_cml:.0f} s", flush=True)
    clock.mark("coremltools 4+2 bit")
    plain_at = {b: palettize_state(state, {k: b for k in names}, group_size=gs).state for b in widths} \
        if args.plain else None
    n_total = sum(state[k].numel() for k in names)
    quantized = {}
    for label, plan in plans.items():
        bpw = sum(layer_bpw(sizes[k], plan[k], gs) * state[k].numel() for k in names) / n_total
        quantized[label] = compose(ours_at, plan)
        rows[f"{label} ours"] = {"bpw": bpw, **figures(quantized[label], tasks=label in args.task_rows)}
        if plain_at:
            rows[f"{label} ours plain"] = {"bpw": bpw, **figures(compose(plain_at, plan), tasks=False)}
        rows[f"{label} coremltools"] = {"bpw": bpw, **figures(compose(cml_at, plan), tasks=label in args.task_rows)}
        clock.mark(label)
        print(f"{label}: " + "; ".join(f"{k}: {v}" for k, v in rows.items() if k.startswith(label + " ")), flush=True)
    print(f"palettization time, all layers at {widths} bits: ours {t_ours:.0f} s, coremltools {t_cml:.0f} s "
          f"(ratio {t_cml / t_ours:.2f}; coremltools' includes loading the HF export twice)", flush=True)

    def main_table():
        print(f"\nSmolLM2-135M-Instruct (imported Q4_1 GGUF, dequantised = float); {len(names)} linear layers, "
              f"{n_total:,} weights; group size {gs}; calibration {sum(len(b['tokens']) for b in calib)} x {args.seq} "
              f"tokens (C4 train half); held-out {args.valid} x {args.seq} tokens per text; ARC-Easy / PIQA "
              f"{args.items} items each")
        cols = [f"{name} CE" for name in held] + ["arc_easy", "arc_easy norm", "piqa", "piqa norm"]
        print("| model | bpw (linear) | " + " | ".join(cols) + f" | {cols[0][:-3]} gap to float |")
        print("|---|---|" + "---|" * (len(cols) + 1))
        for label, r in rows.items():
            gap = r[cols[0]] - rows["float"][cols[0]]
            print(f"| {label} | {r['bpw']:.3f} | " + " | ".join(
                "-" if c not in r else f"{r[c]:.4f}" if "CE" in c else f"{r[c]:.3f}" for c in cols)
                  + f" | {gap:+.4f} |")

    def save(**extra):
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps({"args": vars(args), "rows": rows, "timings": clock.marks,
                                                     **extra}, indent=1))

    if "3.6" not in quantized:  # no recovery LoRA / swap without the 3.6-bpw model
        main_table()
        print(f"timings (s): {json.dumps({k: round(v) for k, v in clock.marks.items()})}; end: {load_line()}")
        save()
        return 0

    # recovery LoRA on the 3.6-bpw model (ours), and its control on the float model
    q36 = quantized["3.6"]
    # every linear layer gets an adapter; with --top-layers the float ones have a zero residual, so a zero
    # (and, with A = B = 0, frozen) adapter: the recovery acts on the palettized layers only
    residual = {k: state[k] - q36[k] for k, v in state.items() if is_palettized(k, v)}
    # the teacher of the "kl" objective and of the held-out KL figures: the evaluation model holding the float
    # weights (its logits are the float model's; no third copy of the model in memory)
    ckpt.load_state_dict_(lm.model, state)
    lm.model.eval()
    ckpt.load_state_dict_(model, q36)
    kl_quant = {name: mean_kl(model, lm.model, batches) for name, batches in held.items()}
    recovered, kl_recovered, losses, adapters = {}, {}, {}, {}
    for objective in args.recovery_loss:
        kind, *knobs = objective.split(":")
        knobs = dict(zip(("kl_temperature", "ce_weight"), map(float, knobs)))
        rec_cfg = RecoveryConfig(lora=LoraConfig(rank=args.lora_rank, init="svd"), steps=args.lora_steps, batch=4,
                                 lr=args.lora_lr, loss=kind, **knobs)
        ckpt.load_state_dict_(model, q36)
        adapters[objective], host, losses[objective] = train_recovery(
            model, lora_batches, rec_cfg, residual=residual, teacher=lm.model, log=None)
        recovered[objective] = {name: mean_loss(model, batches) for name, batches in held.items()}
        kl_recovered[objective] = {name: mean_kl(model, lm.model, batches) for name, batches in held.items()}
        host.detach()
        clock.mark(f"recovery lora {objective}")
        print(f"recovery LoRA ({objective}): held-out CE {recovered[objective]}, KL to float "
              f"{kl_recovered[objective]} (before: {kl_quant}); {clock.marks[f'recovery lora {objective}']:.0f} s",
              flush=True)
    adapter = adapters[args.recovery_loss[0]]
    lm_host = AdapterHost(lm.model)
    rec_items = {}
    for objective in args.recovery_loss if "3.6" in args.task_rows else ():
        ckpt.load_state_dict_(lm.model, q36)
        lm_host.attach(adapters[objective])
        rec_items[objective] = {t: score_items(lm, its)[0] for t, its in items.items()}
        lm_host.detach()
    ckpt.load_state_dict_(model, state)
    control_steps = args.lora_steps if args.control_steps is None else args.control_steps
    # with --control-steps 0 the float-model adapter gets 2 steps: only the swap check uses it
    control_adapter, chost, _ = train_recovery(model, lora_batches, RecoveryConfig(
        lora=LoraConfig(rank=args.lora_rank, init="zero"), steps=control_steps or 2, batch=4, lr=args.lora_lr),
        log=None)
    control = {name: mean_loss(model, batches) for name, batches in held.items()} if control_steps else {}
    chost.detach()
    clock.mark("control lora")

    # run-time swap on the palettized evaluation model: each attach gives that adapter's own logits
    ckpt.load_state_dict_(lm.model, q36)
    probe = next(iter(held.values()))[0]["tokens"][:2]
    pos = torch.arange(probe.shape[1])[None].expand_as(probe)

    def logits():
        with torch.no_grad():
            return lm.model(probe, pos, None)

    base_logits = logits()
    lm_host.attach(adapter)
    first_a = logits()
    lm_host.detach()
    lm_host.attach(control_adapter)
    first_b = logits()
    t0 = time.perf_counter()
    lm_host.detach()
    lm_host.attach(adapter)
    swap_s = time.perf_counter() - t0
    again_a = logits()
    lm_host.detach()
    again_base = logits()
    lm_host.attach(control_adapter)
    again_b = logits()
    lm_host.detach()

    main_table()
    print(f"\nrecovery LoRA (rank {args.lora_rank}, SVD init, {args.lora_steps} steps x 4 windows, lr {args.lora_lr}) "
          f"on the 3.6-bpw model (ours); objective ce: next-token CE on C4 windows, kl: KL(float || student) on "
          f"the same windows (T = 1); KL columns: held-out KL to the float model, nats/token:")
    print("| objective | held-out text | float | 3.6 bpw | 3.6 bpw + LoRA | gap closed | KL before | KL after "
          "| float + CE LoRA training (control) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for objective in args.recovery_loss:
        for name in held:
            f_, q_, a_ = rows["float"][f"{name} CE"], rows["3.6 ours"][f"{name} CE"], recovered[objective][name]
            share = recovered_share(float_loss=f_, quant_loss=q_, adapted_loss=a_)
            print(f"| {objective} | {name} | {f_:.4f} | {q_:.4f} | {a_:.4f} | {share:.1%} | {kl_quant[name]:.4f} | "
                  f"{kl_recovered[objective][name]:.4f} | {control.get(name, float('nan')):.4f} |")
    for objective, its in rec_items.items():
        print(f"3.6 bpw + LoRA ({objective}): " + ", ".join(f"{t} acc {m['acc']:.3f} acc_norm {m['acc_norm']:.3f}"
                                                           for t, m in its.items()))
    diff = lambda a, b: float((a - b).abs().max())  # noqa: E731
    print(f"\nswap on the running 3.6-bpw model: recovery adapter re-attached vs its first attach max |diff| "
          f"{diff(again_a, first_a):.2e}; control adapter {diff(again_b, first_b):.2e}; base after detach "
          f"{diff(again_base, base_logits):.2e}; the two adapters differ by {diff(first_a, first_b):.3f}; "
          f"one detach + attach {swap_s * 1e3:.0f} ms")
    print(f"timings (s): {json.dumps({k: round(v) for k, v in clock.marks.items()})}; end: {load_line()}")
    save(recovered=recovered, control=control, lora_losses=losses, kl_quant=kl_quant, kl_recovered=kl_recovered)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
