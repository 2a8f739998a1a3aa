"""`cidermill train mdloo CONFIG`: MDLOO iterations with rollouts and updates decoupled.

A producer (a thread, with its own copy of the policy: the role a vLLM engine plays on GPU) samples n
responses per prompt, scores them with the rule reward and runs the frozen reference over them; a consumer
(the learner) takes scored batches from a bounded queue, computes π_θk's log-probs, the KL-penalised
rewards and leave-one-out advantages, and runs the mirror-descent inner steps (training.mdloo). After each
iteration the learner publishes its weights as a new policy version.

Staleness is bounded and deterministic: the batch of iteration b is always sampled by policy version
max(0, b − max_staleness) (version v = the weights after v iterations), so with max_staleness 1 the
rollouts of iteration k+1 are produced from the policy of iteration k while the learner updates on
iteration k's batch, and a resumed run samples exactly what an uninterrupted one would (sampling is seeded
per iteration; the checkpoint keeps the policy versions the producer still needs). max_staleness 0 runs
producer and learner in turn in one thread, on-policy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from manifests.errors import ConfigError, RecordError

from . import checkpoint as ckpt
from . import parallel
from .chat import chat_format, load_tokenizer
from .losses import cross_entropies
from .mdloo import exact_token_kl, leave_one_out_advantage, mirror_descent_loss, penalised_rewards
from .post_loop import build_gpt, data_id, read_records, split_and_weight, tokenizer_of
from .run_dir import identity as run_identity
from .run_dir import open_run
from .rl_tasks import answer_reward, record_prompt

FULL_LOGITS_LIMIT = 50_000_000  # send/keep [N, L, V] log-softmaxes only below this many elements


# ---- batches --------------------------------------------------------------------------------------------------

@dataclass
class Scored:
    """One iteration's rollouts, scored by the producer."""
    iteration: int
    version: int  # policy version that sampled them
    tokens: torch.Tensor  # [N, L] prompt + response, right-padded
    labels: torch.Tensor  # [N, L] tokens shifted left
    mask: torch.Tensor  # [N, L] 1 where the label is a response token
    behaviour_logp: torch.Tensor  # [N, L] sampler's log-prob of each response label (0 elsewhere)
    ref_logp: torch.Tensor  # [N, L] frozen reference's log-probs of the labels
    ref_logsoftmax: torch.Tensor | None  # [N, L, V] for the exact KL monitor (small vocabularies only)
    task_rewards: torch.Tensor  # [N]
    texts: list[str]
    seconds: float


def sequences(prompts: list, responses: list, behaviour: list, pad_id: int) -> tuple[torch.Tensor, ...]:
    """tokens/labels/mask/behaviour log-probs [N, L] of prompt+response, the response labels marked."""
    n_max = max(len(p) + len(r) for p, r in zip(prompts, responses)) - 1
    tokens = torch.full((len(prompts), n_max), pad_id, dtype=torch.long)
    labels = torch.full_like(tokens, pad_id)
    mask = torch.zeros(tokens.shape, dtype=torch.float32)
    blogp = torch.zeros(tokens.shape, dtype=torch.float32)
    for i, (p, r, lp) in enumerate(zip(prompts, responses, behaviour)):
        ids = list(p) + list(r)
        n = len(ids) - 1
        tokens[i, :n] = torch.tensor(ids[:-1])
        labels[i, :n] = torch.tensor(ids[1:])
        mask[i, len(p) - 1: n] = 1.0
        blogp[i, len(p) - 1: n] = torch.tensor([float(x) for x in lp], dtype=torch.float32)
    return tokens, labels, mask, blogp


def token_logps(model, tokens: torch.Tensor, labels: torch.Tensor, *, full: bool = False, temperature: float = 1.0):
    """log π(label) per position [N, L] (and the full log-softmax [N, L, V] if `full`). With a sampling
    temperature T > 0 the policy is softmax(logits / T): the distribution the responses were drawn from."""
    pos = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0).expand_as(tokens)
    logits = model(tokens, pos, None)
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    (ce,) = cross_entropies(logits, [labels])
    return -ce, (torch.log_softmax(logits.float(), dim=-1) if full else None)


# ---- policy versions and the producer ---------------------------------------------------------------------------

class WeightStore:
    """Published policy versions (CPU state dicts); the producer waits for the version it must sample with."""

    def __init__(self, keep: int):
        self._cv = threading.Condition()
        self._weights: dict[int, dict] = {}
        self.keep = keep
        self.closed = False

    def publish(self, version: int, state: dict) -> None:
        with self._cv:
            self._weights[version] = {k: v.detach().to("cpu", copy=True) for k, v in state.items()
                                      if torch.is_tensor(v)}
            for old in [v for v in self._weights if v <= version - self.keep]:
                del self._weights[old]
            self._cv.notify_all()

    def wait(self, version: int) -> dict | None:
        with self._cv:
            while version not in self._weights and not self.closed:
                self._cv.wait()
            return self._weights.get(version)

    def versions(self) -> dict[int, dict]:
        with self._cv:
            return dict(self._weights)

    def close(self) -> None:
        with self._cv:
            self.closed = True
            self._cv.notify_all()


class Producer:
    """Samples, scores and runs the reference for one iteration's prompts."""

    def __init__(self, run, reference, tokenizer, prompts: list, generate_fn, *, sampler_model):
        self.run, self.reference, self.tok = run, reference, tokenizer
        self.prompts, self.generate = prompts, generate_fn
        self.sampler_model = sampler_model  # a separate copy (asynchronous) or the learner itself (in turn)

    def prompts_for(self, iteration: int) -> list:
        p = self.run.mdloo.prompts_per_iteration
        return [self.prompts[(iteration * p + i) % len(self.prompts)] for i in range(p)]

    @torch.no_grad()
    def produce(self, iteration: int, version: int, weights: dict | None) -> Scored:
        t0 = time.perf_counter()
        m = self.run.mdloo
        policy = self.sampler_model
        if weights is not None:
            ckpt.load_state_dict_(policy, weights, strict=False)
        was_training = policy.training
        policy.eval()
        prompts = [p for p in self.prompts_for(iteration) for _ in range(m.responses_per_prompt)]
        rollouts = sample(self.generate, policy, [list(p.ids) for p in prompts], m, self.tok,
                          seed=self.run.post.seed * 100_003 + iteration)
        policy.train(was_training)
        responses = [r[0] for r in rollouts]
        texts = [self.tok.decode(r) for r in responses]
        rewards = torch.tensor([answer_reward(t, p.answer) for t, p in zip(texts, prompts)])
        tokens, labels, mask, blogp = sequences([p.ids for p in prompts], responses, [r[1] for r in rollouts],
                                                self.tok.pad_id)
        dev = parallel.device()
        full = (tokens.numel() * self.run.post.model.vocab_size <= FULL_LOGITS_LIMIT
                and self.run.post.parallel.tensor_parallel == 1)  # a vocabulary shard is not a distribution
        ref_logp, ref_full = token_logps(self.reference, tokens.to(dev), labels.to(dev), full=full,
                                         temperature=m.temperature)
        return Scored(iteration, version, tokens, labels, mask, blogp, ref_logp.cpu(),
                      None if ref_full is None else ref_full.cpu(), rewards, texts, time.perf_counter() - t0)


def stop_ids(stop: tuple[str, ...], tokenizer) -> list[list[int]]:
    """The configured stop strings and the chat format's end marker (`<|im_end|>` for a ChatML tokenizer),
    each once, as token ids."""
    marker = chat_format(tokenizer).end_marker
    return [tokenizer.encode(s) for s in dict.fromkeys((*stop, marker))]


def sample(generate_fn, model, prompt_ids: list[list[int]], m, tokenizer, *, seed: int) -> list[tuple[list, list]]:
    """(response ids, the log-probs they were sampled with) per prompt from the rollout generator
    (training.rollout.generate: the ids include the matched stop sequence, whose tokens are trained on)."""
    outs = generate_fn(model, prompt_ids, max_new_tokens=m.max_new_tokens, temperature=m.temperature,
                       top_p=m.top_p, stop=stop_ids(m.stop, tokenizer), seed=seed,
                       eos_id=tokenizer.eod_id)
    result = []
    for o in outs:
        ids = [int(x) for x in o.response_ids]
        lps = [float(x) for x in o.sampling_logprobs]
        if len(ids) != len(lps):
            raise ConfigError(f"rollout generator returned {len(ids)} response ids and {len(lps)} log-probs")
        result.append((ids, lps))
    return result


def default_generate():
    from .rollout import generate  # the batched KV-cache generator (issue 20, item 1)

    return generate


# ---- the learner ------------------------------------------------------------------------------------------------

@dataclass
class MDLOOResult:
    run_dir: Path
    checkpoint: Path | None = None
    history: list[dict] = field(default_factory=list)  # one row per iteration
    held_out: list[tuple[int, dict]] = field(default_factory=list)  # (iteration, greedy accuracy figures)
    plot: Path | None = None
    seconds: float = 0.0


def load_prompts(run, tokenizer) -> tuple[list, list]:
    per_source = []
    for src in run.post.data.sources:
        records = read_records(src.path)[: src.max_records]
        items = [record_prompt(r, tokenizer, where=f"{src.path} record {i}") for i, r in enumerate(records)]
        for i, p in enumerate(items):
            if len(p.ids) + run.mdloo.max_new_tokens > run.post.seq_length:
                raise RecordError(src.path, f"record {i}", f"prompt of {len(p.ids)} tokens + max_new_tokens "
                                  f"{run.mdloo.max_new_tokens} exceeds seq_length {run.post.seq_length}")
        if not items:
            raise ConfigError(f"{src.path}: no prompt records")
        per_source.append(items)
    return split_and_weight(per_source, run.post)


@torch.no_grad()
def held_out_accuracy(generate_fn, model, prompts: list, run, tokenizer) -> dict:
    """Greedy (temperature 0) answers to held-out prompts, checked by the rule reward."""
    greedy = dataclasses.replace(run.mdloo, temperature=0.0, top_p=1.0)
    was = model.training
    model.eval()
    outs = sample(generate_fn, model, [list(p.ids) for p in prompts], greedy, tokenizer, seed=run.post.seed)
    model.train(was)
    hits = [answer_reward(tokenizer.decode(ids), p.answer) for (ids, _), p in zip(outs, prompts)]
    return {"accuracy": float(np.mean(hits)), "prompts": len(prompts)}


def _chunks(n: int, size: int):
    for at in range(0, n, size):
        yield slice(at, min(n, at + size))


def update(run, model, optimizer, schedule, batch: Scored, *, step0: int, log=print) -> dict:
    """One MDLOO iteration on a scored batch: π_θk log-probs, KL-penalised rewards, leave-one-out advantages,
    then `inner_steps` optimizer steps on the mirror-descent objective. Returns the iteration's figures."""
    from .trainer import optimizer_step

    m, dev = run.mdloo, parallel.device()
    tokens, labels, mask = batch.tokens.to(dev), batch.labels.to(dev), batch.mask.to(dev)
    full = m.trust_kl == "full" or batch.ref_logsoftmax is not None
    n_all, micro = len(tokens), run.post.micro_batch
    with torch.no_grad():
        parts = [token_logps(model, tokens[s], labels[s], full=full, temperature=m.temperature)
                 for s in _chunks(n_all, micro)]
        logp_k = torch.cat([p[0] for p in parts])
        logp_k_full = torch.cat([p[1] for p in parts]) if full else None
    rewards, kl_seq = penalised_rewards(batch.task_rewards.to(dev), logp_k, batch.ref_logp.to(dev), mask,
                                        beta=m.kl_coef, estimator=m.kl_estimator)
    adv = leave_one_out_advantage(rewards.view(-1, m.responses_per_prompt)).reshape(-1)
    behaviour = batch.behaviour_logp.to(dev) if m.staleness_correction else None
    figures = {}
    for inner in range(m.inner_steps):
        schedule.apply(optimizer, step0 + inner)
        optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {"loss": 0.0}
        for s in _chunks(n_all, micro):
            logp, logp_full = token_logps(model, tokens[s], labels[s], full=m.trust_kl == "full",
                                          temperature=m.temperature)
            loss, figs = mirror_descent_loss(
                logp, logp_k[s], adv[s], mask[s], gamma=m.trust_region, ratio=m.ratio, trust_kl=m.trust_kl,
                logp_full=logp_full, logp_k_full=None if logp_k_full is None else logp_k_full[s],
                behaviour_logp=None if behaviour is None else behaviour[s])
            share = (s.stop - s.start) / n_all
            (loss * share).backward()
            sums["loss"] += float(loss.detach()) * share
            for k, v in figs.items():
                sums[k] = max(sums.get(k, v), v) if k == "ratio_max" else sums.get(k, 0.0) + v * share
        if not optimizer_step(model, optimizer, run.post.optim):
            log(f"[{run.name}] iteration {batch.iteration + 1} inner step {inner + 1}: gradient norm >= drop_norm; "
                "step skipped")
        figures = sums
    n_tok = mask.sum(dim=-1).clamp(min=1)
    row = {"iteration": batch.iteration + 1, "reward": float(batch.task_rewards.mean()),
           "penalised_reward": float(rewards.mean()), "kl_ref": float(kl_seq.mean()),
           "response_tokens": float(mask.sum(dim=-1).mean()), "staleness": batch.iteration - batch.version,
           "trust_kl_last": figures["trust_kl"], "ratio_max_last": figures["ratio_max"],
           "loss_last": figures["loss"], "rollout_seconds": batch.seconds,
           "informative_prompts": float((batch.task_rewards.view(-1, m.responses_per_prompt).std(dim=1) > 0)
                                        .float().mean())}
    if batch.ref_logsoftmax is not None:  # log_softmax of a log-softmax is itself
        exact = exact_token_kl(logp_k_full, batch.ref_logsoftmax.to(dev))
        row["kl_ref_exact_per_token"] = float(((exact * mask).sum(dim=-1) / n_tok).mean())
    return row


def run_id(run) -> str:
    h = hashlib.sha256(json.dumps([data_id(run.post), asdict(run.mdloo)], sort_keys=True).encode())
    return "mdloo-" + h.hexdigest()[:16]


def train_mdloo(run, *, resume: str | None = None, stop_after: int | None = None, generate_fn=None,
                log=print) -> MDLOOResult:
    import torch.distributed as dist

    from .optim import build_optimizer

    post, m = run.post, run.mdloo
    parallel.setup(post.parallel, seed=post.seed)
    if dist.is_initialized() and dist.get_world_size() > post.parallel.tensor_parallel:
        raise ConfigError(f"{run.name}: MDLOO has no data parallelism yet; run with as many ranks as "
                          f"parallel.tensor_parallel ({post.parallel.tensor_parallel})")
    if m.trust_kl == "full" and post.parallel.tensor_parallel > 1:
        raise ConfigError(f"{run.name}: mdloo.trust_kl 'full' needs the whole vocabulary on one rank; use 'sampled'")
    generate_fn = generate_fn or default_generate()
    tokenizer = load_tokenizer(post.tokenizer)
    train, valid = load_prompts(run, tokenizer)
    valid = valid[: m.eval_prompts]
    ident = run_id(run)
    post_cfg = run.to_dict()
    init = ckpt.open_checkpoint(post.init_from) if post.init_from else None
    full_identity = run_identity(post_cfg, data=data_id(post), tokenizer=tokenizer_of(post)[0],
                                 init_weights=ckpt.weights_id(init) if init else None,
                                 drop=("data", "init_from", "tokenizer", "mdloo.plot"))
    directory = open_run(post.out_dir, full_identity, resume=resume, name=run.name)
    try:
        reference_path = m.reference or post.init_from
        model = build_gpt(post, init_from=post.init_from)
        reference = build_gpt(post, init_from=reference_path)
        reference.eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        optimizer = build_optimizer(model, post.optim)
        schedule = post.optim.schedule(post.steps * m.inner_steps)
        run_dir = Path(post.out_dir)
        result = MDLOOResult(run_dir=run_dir)
        store = WeightStore(keep=m.max_staleness + 2)
        start = 0
        info = directory.resume_from  # of this run only (run_dir.open_run checked its identity)
        if info is not None:
            ckpt.load_weights(info, model)
            ckpt.load_training_state(info, optimizer)
            start = info.step
            result.history = list(info.manifest["history"])
            result.held_out = [tuple(x) for x in info.manifest["held_out"]]
            for v in info.manifest["policy_versions"]:
                store.publish(v, ckpt.load_file(info, f"policy-v{v:07d}.pt"))
            log(f"[{run.name}] resumed from {info.directory} at iteration {start}")
        else:
            result.held_out.append((0, held_out_accuracy(generate_fn, model, valid, run, tokenizer)))
            log(f"[{run.name}] {len(train)} training and {len(valid)} held-out prompts; held-out greedy accuracy "
                f"{result.held_out[0][1]['accuracy']:.3f}")
        store.publish(start, model.state_dict())
        end = min(post.steps, stop_after) if stop_after else post.steps
        asynchronous = m.max_staleness > 0
        sampler = model
        if asynchronous:  # the producer's own copy of the policy (a vLLM engine's role on GPU)
            sampler = build_gpt(post)
            ckpt.load_state_dict_(sampler, model.state_dict())
        producer = Producer(run, reference, tokenizer, train, generate_fn, sampler_model=sampler)
        q: queue.Queue = queue.Queue(maxsize=max(1, m.max_staleness))
        stop = threading.Event()

        def version_for(b: int) -> int:
            return max(0, b - m.max_staleness)

        def produce_all():
            try:
                for b in range(start, end):
                    weights = store.wait(version_for(b))
                    if weights is None or stop.is_set():
                        return
                    item = producer.produce(b, version_for(b), weights)
                    while not stop.is_set():
                        try:
                            q.put(item, timeout=0.1)
                            break
                        except queue.Full:
                            continue
            except BaseException as exc:  # handed to the learner, which re-raises it
                try:
                    q.put(exc, timeout=5)
                except queue.Full:  # the learner has stopped already
                    pass

        thread = threading.Thread(target=produce_all, name="mdloo-producer", daemon=True) if asynchronous else None
        t0 = time.perf_counter()
        model.train()
        try:
            if thread is not None:
                thread.start()
            for k in range(start, end):
                if thread is not None:
                    batch = q.get()
                    if isinstance(batch, BaseException):
                        raise batch
                else:
                    batch = producer.produce(k, k, None)
                if batch.iteration != k or k - batch.version > m.max_staleness:
                    raise RuntimeError(f"producer handed iteration {batch.iteration} (version {batch.version}) "
                                       f"to learner iteration {k}")
                t1 = time.perf_counter()
                row = update(run, model, optimizer, schedule, batch, step0=k * m.inner_steps, log=log)
                row["update_seconds"] = time.perf_counter() - t1
                result.history.append(row)
                store.publish(k + 1, model.state_dict())
                if post.log_every and ((k + 1) % post.log_every == 0 or k + 1 == end):
                    extra = f" exact KL/token {row['kl_ref_exact_per_token']:.4f}" if "kl_ref_exact_per_token" in row else ""
                    log(f"[{run.name}] iteration {k + 1}/{post.steps} reward {row['reward']:.3f} KL(ref) "
                        f"{row['kl_ref']:.4f}{extra} trust KL {row['trust_kl_last']:.4f} staleness {row['staleness']}")
                if post.save_every and (k + 1) % post.save_every == 0 and k + 1 != end:
                    _save(run, ident, directory, model, optimizer, k + 1, result, store)
        finally:
            stop.set()
            store.close()
            if thread is not None:
                thread.join(timeout=60)
        result.seconds = time.perf_counter() - t0
        result.held_out.append((end, held_out_accuracy(generate_fn, model, valid, run, tokenizer)))
        log(f"[{run.name}] held-out greedy accuracy {result.held_out[0][1]['accuracy']:.3f} -> "
            f"{result.held_out[-1][1]['accuracy']:.3f} after {end} iterations ({result.seconds:.1f} s)")
        result.checkpoint = _save(run, ident, directory, model, optimizer, end, result, store)
        result.plot = plot_curve(result.history, Path(m.plot) if m.plot else run_dir / "reward-curve.png",
                                 title=run.name)
        return result
    finally:
        directory.close()


def _save(run, ident, run_dir, model, optimizer, iteration: int, result: MDLOOResult, store: WeightStore) -> Path:
    """Weights + optimizer + the policy versions the producer of later iterations still samples with."""
    m = run.mdloo
    need = sorted({max(0, b - m.max_staleness) for b in range(iteration, iteration + m.max_staleness)} - {iteration})
    versions = store.versions()
    manifest = {
        "run": run.name, "stage": "post-mdloo", "method": "mdloo", "step": iteration, "steps_total": run.post.steps,
        "run_id": ident, "data": {"source_id": data_id(run.post), "sources": [asdict(s) for s in run.post.data.sources]},
        "reference": run.mdloo.reference or run.post.init_from, "init_from": run.post.init_from,
        "seed": run.post.seed, "model_shape": asdict(run.post.model), "rotary_base": run.post.rotary_base,
        "kernels": run.post.parallel.kernels, "config": run.to_dict(), "history": result.history,
        "held_out": [list(x) for x in result.held_out], "policy_versions": need, "identity": run_dir.identity,
    }
    return ckpt.save(Path(run.post.out_dir) / f"step-{iteration:07d}", model=model, optimizer=optimizer,
                     manifest=manifest, tokenizer=tokenizer_of(run.post),
                     files={f"policy-v{v:07d}.pt": versions[v] for v in need})


def plot_curve(history: list[dict], path: Path, *, title: str = "MDLOO") -> Path:
    """PNG: mean task reward per iteration (left axis) and the KL estimate to the reference (right axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = [h["iteration"] for h in history]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(it, [h["reward"] for h in history], "o-", color="tab:blue", label="mean reward (sampled)")
    ax.set_xlabel("MDLOO iteration")
    ax.set_ylabel("mean reward", color="tab:blue")
    ax.set_ylim(-0.02, 1.02)
    ax2 = ax.twinx()
    key = "kl_ref_exact_per_token" if history and "kl_ref_exact_per_token" in history[0] else "kl_ref"
    ax2.plot(it, [h[key] for h in history], "s--", color="tab:red", label=key)
    ax2.set_ylabel("KL to reference" + (" per token" if key != "kl_ref" else " per response"), color="tab:red")
    ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
