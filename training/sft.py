"""Supervised fine-tuning: conversations -> our chat template -> packed sequences -> masked cross-entropy.

The loss of a micro-batch is the mean cross-entropy over the positions that carry loss (assistant turn
bodies by default), over all conversations packed into it: the same number as running each conversation
alone and averaging over all their loss tokens. A conversation with no loss token is refused when it is
tokenized, and a micro-batch whose mask is all zero is refused here, so a silent all-zero mask cannot train.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from manifests.errors import ConfigError, RecordError

from . import parallel
from .chat import chat_format, load_tokenizer, record_messages, tokenize
from .losses import cross_entropies
from .packing import collate, describe, pack, uses_thd
from .post_loop import build_gpt, data_id, forward, open_post_run, read_records, run_loop, split_and_weight


def sft_loss(logits: torch.Tensor, labels: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean token cross-entropy over loss_mask; raises on an all-zero mask instead of returning 0."""
    count = loss_mask.sum()
    if float(count) == 0:
        raise RecordError("SFT batch", "-", "all-zero loss mask: no token would be trained on "
                          "(check template.loss_on and that conversations have assistant turns)")
    (ce,) = cross_entropies(logits, [labels])
    return (ce * loss_mask).sum() / count


@dataclass
class SFTData:
    train: list  # Pack
    valid: list  # Pack
    counters: dict
    data_id: str
    tokenizer: object


def load_conversations(cfg, tokenizer, *, log=print) -> tuple[list, list, dict]:
    """Tokenized (train, held-out) conversations; records that cannot be used are counted by reason, and a
    source with none usable is an error naming the file."""
    per_source, counters = [], {"records": 0, "no_loss_token": 0, "kto_label_false": 0, "truncated": 0}
    for src in cfg.data.sources:
        if src.dataset:  # a tokenized SFT version in the catalog (published on first use)
            from .sft_data import read_sft_version, tokenize_sft_version

            version = tokenize_sft_version(cfg.data.root, src.dataset, tokenizer, cfg.template, log=log)
            items = read_sft_version(version)[: src.max_records]
            counters["records"] += len(items)
            counters.setdefault("versions", []).append(f"{version.name}@{version.version_id}")
            per_source.append(items)
            continue
        records = read_records(src.path)[: src.max_records]
        items = []
        for i, rec in enumerate(records):
            where = f"{src.path} record {i}"
            counters["records"] += 1
            if rec.get("label") is False:  # KTO-style undesirable response: not an SFT target
                counters["kto_label_false"] += 1
                continue
            messages, tools = record_messages(rec, where=where)
            try:
                tok = tokenize(messages, tokenizer, cfg.template, tools=tools, where=where)
            except RecordError:
                counters["no_loss_token"] += 1
                continue
            counters["truncated"] += tok.truncated
            items.append(tok)
        if not items:
            raise RecordError(src.path, "-", f"no usable conversation in {len(records)} records")
        per_source.append(items)
    train, valid = split_and_weight(per_source, cfg)
    return train, valid, counters


def prepare(cfg, *, log=print) -> SFTData:
    tokenizer = load_tokenizer(cfg.tokenizer)
    if tokenizer.vocab_size > cfg.model.vocab_size:
        raise ConfigError(f"{cfg.name}: tokenizer vocabulary {tokenizer.vocab_size} > model.vocab_size "
                          f"{cfg.model.vocab_size}")
    train, valid, counters = load_conversations(cfg, tokenizer, log=log)
    train_packs, c1 = pack(train, cfg.seq_length, pad_id=tokenizer.pad_id)
    valid_packs, _ = pack(valid[: cfg.valid_max], cfg.seq_length, pad_id=tokenizer.pad_id)
    counters.update({f"pack_{k}": v for k, v in c1.items()}, train_packs=len(train_packs),
                    valid_packs=len(valid_packs))
    for split, packs, items in (("training", train_packs, train), ("held-out", valid_packs, valid)):
        if not packs:  # every conversation lost its trained tokens to the cut: nothing to train or measure on
            raise ConfigError(f"{cfg.name}: no {split} conversation keeps a loss token within seq_length "
                              f"{cfg.seq_length} ({len(items)} conversations, {c1['dropped_no_loss_after_cut']} of the "
                              "training ones cut before their first trained token); raise seq_length or shorten the "
                              "prompts (template.max_length)")
    return SFTData(train_packs, valid_packs, counters, data_id(cfg), tokenizer)


@torch.no_grad()
def evaluate(model, packs, micro_batch: int, *, thd: bool = False) -> dict:
    model.eval()
    total = count = 0.0
    dev = parallel.device()
    for at in range(0, len(packs), micro_batch):
        batch = {k: v.to(dev) for k, v in collate(packs[at: at + micro_batch], thd=thd).items()}
        (ce,) = cross_entropies(forward(model, batch), [batch["labels"]])
        total += float((ce * batch["loss_mask"]).sum())
        count += float(batch["loss_mask"].sum())
    model.train()
    return {"loss": total / max(count, 1.0), "loss_tokens": int(count)}


def audit(cfg, *, n: int = 1, out=print) -> None:
    """Print `n` training packs (those holding the most conversations first) with masked spans marked."""
    data = prepare(cfg)
    out(f"[{cfg.name}] {data.counters}")
    for p in sorted(data.train, key=lambda p: -len(p.lengths))[:n]:
        out(describe(p, data.tokenizer.decode))


def train_sft(cfg, *, resume: str | None = None, stop_after: int | None = None, log=print):
    parallel.setup(cfg.parallel, seed=cfg.seed)
    data = prepare(cfg, log=log)
    log(f"[{cfg.name}] {data.counters['pack_conversations']} conversations in {len(data.train)} packs of "
        f"{cfg.seq_length} ({data.counters['pack_cut_to_seq_length']} cut); {len(data.valid)} held-out packs")
    if cfg.adapter_init:  # a task adapter from the recovery adapter, on its frozen (palettized) base
        from .adapters.feature import feature_model

        model, base = feature_model(cfg.adapter_init, seq_length=cfg.seq_length, model_shape=cfg.model)
        log(f"[{cfg.name}] LoRA-only training from adapter {cfg.adapter_init} on the frozen base {base}")
    else:
        model = build_gpt(cfg, init_from=cfg.init_from)
    dev = parallel.device()
    thd = uses_thd(cfg.parallel)
    start = evaluate(model, data.valid, cfg.micro_batch, thd=thd)

    def micro_batch_at(indices):
        return {k: v.to(dev) for k, v in collate([data.train[i] for i in indices], thd=thd).items()}

    def loss_fn(m, batch):
        return sft_loss(forward(m, batch), batch["labels"], batch["loss_mask"]), {}

    directory = open_post_run(cfg, data=data.data_id, resume=resume)  # held until the task adapter is written
    try:
        result = run_loop(cfg, model, n_items=len(data.train), micro_batch_at=micro_batch_at, loss_fn=loss_fn,
                          evaluate=lambda: evaluate(model, data.valid, cfg.micro_batch, thd=thd), data=data.data_id,
                          resume=resume, stop_after=stop_after, log=log, directory=directory,
                          extra_manifest={"template": chat_format(data.tokenizer).name,
                                          "held_out_start": start, "data_counters": data.counters})
        result.evals.insert(0, (0, start))
        if cfg.adapter_init:
            from .adapters.feature import save_feature_adapter

            result.adapter = save_feature_adapter(
                model, Path(cfg.out_dir) / "adapter", base=base, adapter_init=cfg.adapter_init,
                extra={"task": cfg.name, "method": "sft", "steps": cfg.steps, "data": data.data_id,
                       "held_out_loss": [start["loss"], result.evals[-1][1]["loss"]]})
            log(f"[{cfg.name}] task adapter written to {result.adapter}")
    finally:
        directory.close()
    return result
