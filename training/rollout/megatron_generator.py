"""Batched generation from a megatron-core GPTModel with its static KV cache (`StaticInferenceContext`).

Prompts of different lengths are left-padded to a common length and the pads are masked as keys in every
attention call (an explicit [B, 1, sq, sk] boolean mask, True = masked, the convention of megatron's local
`DotProductAttention`). megatron's static context applies RoPE by cache offset, so a left-padded prompt sits
at shifted absolute positions; RoPE attention scores depend only on the distance between query and key, so
the result equals running the prompt alone (the test checks tokens and log-probs against a full forward
pass of each sequence by itself).

Every step feeds one token per row; rows that have finished keep feeding their last token (ignored) until the
whole micro-batch is done. With `use_cache=False` each step recomputes the whole padded sequence (no
inference context): the reference the benchmark compares the cache against.

TP > 1 works through megatron's `runtime_gather_output` (untested here). Transformer Engine attention
ignores the mask tensor, so a TE model is refused for prompts of different lengths (equal lengths need no
padding); the GPU rollout path is vLLM (vllm_backend.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from ..config import ConfigError
from .sampling import next_tokens

FINISH_REASONS = ("eos", "stop", "length")


@dataclass
class Rollout:
    """One sampled response.

    `logprobs[t]` is log π(response_ids[t] | prefix) from the model's raw logits (temperature 1, no top-p):
    what RL losses need. `sampling_logprobs[t]` is the log-probability under the distribution the token was
    drawn from (temperature + top-p), 0.0 for greedy. The eos token or the matched stop sequence is part of
    `response_ids` (its log-prob matters to RL); `text_ids()` drops it.
    """

    index: int  # position in the `prompts` list given to generate()
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    sampling_logprobs: list[float]
    finish_reason: str  # "eos" | "stop" | "length"
    stop_len: int = 0  # tokens at the end of response_ids that are the eos / matched stop sequence
    meta: dict = field(default_factory=dict)

    def text_ids(self) -> list[int]:
        return self.response_ids[: len(self.response_ids) - self.stop_len]


@dataclass(frozen=True, kw_only=True)
class GenerateConfig:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    max_batch_size: int = 64
    use_cache: bool = True

    def __post_init__(self):
        if self.max_new_tokens <= 0:
            raise ConfigError(f"max_new_tokens must be > 0; got {self.max_new_tokens} in rollout.generate")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0 (0 = greedy); got {self.temperature} in rollout.generate")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1]; got {self.top_p} in rollout.generate")
        if self.max_batch_size <= 0:
            raise ConfigError(f"max_batch_size must be > 0; got {self.max_batch_size} in rollout.generate")


def rollout_seed(seed: int, index: int) -> int:
    """The sampling seed of prompt `index`: independent of batching, distinct per index."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:8], "little") & (2**63 - 1)


def _device(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def generate(model, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
             top_p: float = 1.0, stop: list[list[int]] | None = None, seed: int = 0, eos_id: int | None = None,
             max_batch_size: int = 64, use_cache: bool = True) -> list[Rollout]:
    """Sample one response per prompt (repeat a prompt to get n samples). Deterministic given `seed`:
    row i draws from its own generator seeded by rollout_seed(seed, i). Returns rollouts in prompt order.

    stop: token-id sequences; generation of a row ends when its response ends with one of them.
    eos_id: generation of a row ends when it samples this id. Either way the ending tokens stay in
    response_ids (`stop_len` says how many)."""
    cfg = GenerateConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed,
                         max_batch_size=max_batch_size, use_cache=use_cache)
    stops = [list(map(int, s)) for s in (stop or [])]
    if any(not s for s in stops):
        raise ConfigError("stop sequences must be non-empty token-id lists in rollout.generate")
    for i, p in enumerate(prompts):
        if not p:
            raise ConfigError(f"prompt {i} is empty; a rollout needs at least one prompt token")
    if len({len(p) for p in prompts}) > 1 and _ignores_padding_masks(model):
        raise ConfigError("rollout.generate: this model's core attention (Transformer Engine) ignores the explicit "
                          "padding mask that prompts of different lengths need; load the policy with local "
                          "kernels (load_policy), give equal-length prompts, or use the vLLM backend")
    was_training = model.training
    model.eval()
    try:
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # similar lengths share a batch
        out: list[Rollout | None] = [None] * len(prompts)
        for b in range(0, len(order), cfg.max_batch_size):
            idx = order[b: b + cfg.max_batch_size]
            for r in _generate_batch(model, [list(map(int, prompts[i])) for i in idx], idx, cfg, stops, eos_id):
                out[r.index] = r
        return out  # type: ignore[return-value]
    finally:
        model.train(was_training)


def _ignores_padding_masks(model) -> bool:
    """Transformer Engine attention takes its mask type from the layer spec (causal; no_mask when decoding),
    not from the mask tensor, so left padding would be attended to."""
    return any(type(m).__name__.startswith("TE") and "Attention" in type(m).__name__ for m in model.modules())


def _forward(model, tokens, mask, ctx):
    # position ids only feed learned absolute embeddings; this GPT uses RoPE, which reads the cache offset
    pos = torch.zeros_like(tokens)
    if ctx is None:
        return model(tokens, pos, mask, runtime_gather_output=True)
    logits = model(tokens, pos, mask, inference_context=ctx, runtime_gather_output=True)
    ctx.sequence_len_offset += tokens.shape[1]
    return logits


def _generate_batch(model, seqs: list[list[int]], idx: list[int], cfg: GenerateConfig, stops, eos_id):
    dev = _device(model)
    n, width = len(seqs), max(map(len, seqs))
    total = width + cfg.max_new_tokens
    pad_id = 0
    tokens = torch.full((n, width), pad_id, dtype=torch.long, device=dev)
    is_pad = torch.ones((n, total), dtype=torch.bool, device=dev)  # key is padding (masked)
    for r, s in enumerate(seqs):
        tokens[r, width - len(s):] = torch.tensor(s, device=dev)
        is_pad[r, width - len(s):] = False
    causal = torch.triu(torch.ones(total, total, dtype=torch.bool, device=dev), diagonal=1)
    # a pad query keeps its own key, so no attention row is fully masked (fused kernels return NaN for one,
    # and a NaN in a pad's value would reach real rows as 0 * NaN); no real query ever sees a pad key
    own = torch.eye(width, dtype=torch.bool, device=dev)
    gens = None
    if cfg.temperature > 0:
        gens = [torch.Generator(device=dev).manual_seed(rollout_seed(cfg.seed, i)) for i in idx]

    ctx = None
    if cfg.use_cache:
        from megatron.core.inference.contexts import StaticInferenceContext

        ctx = StaticInferenceContext(n, total)
    mask = (causal[None, None, :width, :width] | is_pad[:, None, None, :width]) & ~own
    logits = _forward(model, tokens, mask, ctx)[:, -1]

    resp: list[list[int]] = [[] for _ in seqs]
    lp: list[list[float]] = [[] for _ in seqs]
    slp: list[list[float]] = [[] for _ in seqs]
    finish: list[str | None] = [None] * n
    stop_len = [0] * n
    for t in range(cfg.max_new_tokens):
        nxt, logp, logq = next_tokens(logits, temperature=cfg.temperature, top_p=cfg.top_p, generators=gens)
        nxt_l, logp_l, logq_l = nxt.tolist(), logp.tolist(), logq.tolist()
        for r in range(n):
            if finish[r] is not None:
                continue
            resp[r].append(nxt_l[r])
            lp[r].append(logp_l[r])
            slp[r].append(logq_l[r])
            if eos_id is not None and nxt_l[r] == eos_id:
                finish[r], stop_len[r] = "eos", 1
            else:
                hit = next((s for s in stops if resp[r][-len(s):] == s), None)
                if hit is not None:
                    finish[r], stop_len[r] = "stop", len(hit)
                elif len(resp[r]) >= cfg.max_new_tokens:
                    finish[r] = "length"
        if all(f is not None for f in finish) or t == cfg.max_new_tokens - 1:
            break
        cur = width + t + 1  # sequence length after appending this step's tokens
        if ctx is not None:
            mask = is_pad[:, None, None, :cur]
            logits = _forward(model, nxt[:, None], mask, ctx)[:, -1]
        else:
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            mask = (causal[None, None, :cur, :cur] | is_pad[:, None, None, :cur]) & ~torch.eye(cur, dtype=torch.bool,
                                                                                               device=dev)
            logits = _forward(model, tokens, mask, None)[:, -1]
    return [Rollout(index=i, prompt_ids=seqs[r], response_ids=resp[r], logprobs=lp[r], sampling_logprobs=slp[r],
                    finish_reason=finish[r] or "length", stop_len=stop_len[r]) for r, i in enumerate(idx)]
