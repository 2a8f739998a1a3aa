"""Language-model backends for evaluation: two calls, both batched.

    loglikelihood([(context, continuation), ...]) -> [(sum log p(continuation | context), is_greedy), ...]
    generate([prompt, ...], max_new_tokens=, stop=) -> [completion text, ...]   (greedy)

- `MegatronLM`: a cidermill checkpoint, run directly with megatron-core and the checkpoint's own tokenizer
  (from its mixture manifest). Log-likelihood requests are sorted by length and packed into batches under a
  token budget (right padding is harmless under causal attention); generation uses megatron-core's static
  KV cache (`StaticInferenceContext`).
- `HFLM`: a transformers folder (e.g. `train export-hf` output), same batching; generation by `generate`.
- `OpenAIServerLM`: any OpenAI-compatible server through synth's backend (generation only: chat servers
  do not return prompt log-probs).
- `VLLMLM`: vLLM on GPU (lazy import; prompt log-probs for log-likelihood).

Tokenizing a pair follows the usual convention (the one lm-evaluation-harness uses, so scores compare):
trailing spaces of the context move to the continuation, the whole string is encoded, and the
continuation's tokens are the whole encoding past the context's own encoding.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from manifests.errors import ConfigError


class LM(ABC):
    name: str = "lm"
    max_length: int = 4096

    @abstractmethod
    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]: ...

    @abstractmethod
    def generate(self, prompts: Sequence[str], *, max_new_tokens: int = 256, stop: Sequence[str] = (),
                 temperature: float = 0.0, seed: int = 0) -> list[str]:
        """Greedy when temperature == 0; else sampled (seeded: same seed, same prompts -> same texts)."""

    def describe(self) -> dict:
        return {"backend": self.name}


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    return text if cut < 0 else text[:cut]


def check_generation_room(lm: LM, max_new_tokens: int) -> None:
    """A generation of `max_new_tokens` needs room for a prompt inside `max_length` (else the prompt was sliced
    from a negative offset: garbage in, scores out)."""
    if max_new_tokens >= lm.max_length:
        raise ConfigError(f"--max-length {lm.max_length} leaves no room for a prompt before {max_new_tokens} new "
                          f"tokens; give --max-length above {max_new_tokens}")


class _TokenLM(LM):
    """Shared by the backends that own a tokenizer and a forward pass: batching and scoring."""

    eod_id: int = 0
    token_budget: int = 4096  # tokens per forward batch (B x longest sequence); 4096 beat 2048 and 16384 on CPU
    attention_budget: int = 1 << 23  # B x S^2: the local attention materialises [B, heads, S, S] scores

    @abstractmethod
    def encode(self, text: str) -> list[int]: ...

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    @abstractmethod
    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, S] -> logits [B, S, V] (fp32)."""

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        n_spaces = len(context) - len(context.rstrip(" "))
        if n_spaces:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        if not context:
            return [self.eod_id], self.encode(continuation)
        whole, ctx = self.encode(context + continuation), self.encode(context)
        return whole[: len(ctx)], whole[len(ctx):]

    @torch.no_grad()
    def loglikelihood(self, requests):
        """Requests whose model inputs are identical (multiple choice with one-token answers, " A".." D")
        share one row of the forward pass; rows are sorted by length and packed under the token budget and
        an attention budget (B x S^2 scores)."""
        rows: dict[tuple, list] = {}  # input ids -> [(request index, continuation ids)]
        for i, (context, continuation) in enumerate(requests):
            ctx, cont = self.encode_pair(context, continuation)
            if not cont:
                raise ValueError(f"loglikelihood request {i}: empty continuation after tokenizing {continuation!r}")
            if len(cont) > self.max_length:  # the scored span would be cut, and its score taken from elsewhere
                raise ConfigError(f"loglikelihood request {i}: the continuation is {len(cont)} tokens, more than "
                                  f"--max-length {self.max_length}; raise --max-length")
            whole = (ctx + cont)[-(self.max_length + 1):]
            rows.setdefault(tuple(whole[:-1]), []).append((i, cont))
        items = sorted(rows.items(), key=lambda it: -len(it[0]))  # longest first: memory trouble shows early
        out: list[tuple[float, bool] | None] = [None] * len(requests)
        start = 0
        while start < len(items):
            longest = len(items[start][0])
            size = max(1, min(len(items) - start, self.token_budget // max(longest, 1),
                              self.attention_budget // max(longest * longest, 1)))
            batch = items[start: start + size]
            tokens = torch.full((len(batch), longest), self.eod_id, dtype=torch.long)
            for row, (inp, _) in enumerate(batch):
                tokens[row, : len(inp)] = torch.tensor(inp)
            logits = self.logits(tokens)  # [B, S, V]
            for row, (inp, conts) in enumerate(batch):
                longest_cont = max(len(c) for _, c in conts)
                # log-softmax only where continuations are scored (the vocabulary is 49k at full size)
                tail = F.log_softmax(logits[row, len(inp) - longest_cont: len(inp)].float(), dim=-1).cpu()
                for i, cont in conts:
                    n = len(cont)
                    lp = tail[longest_cont - n:]  # [n, V]
                    target = torch.tensor(cont)
                    out[i] = (float(lp.gather(-1, target[:, None]).sum()), bool((lp.argmax(-1) == target).all()))
            start += size
        return out  # type: ignore[return-value]


class MegatronLM(_TokenLM):
    """A cidermill checkpoint (or run directory) evaluated with megatron-core directly, TP=1, on this
    machine's device (CPU here, GPU where present)."""

    name = "megatron"

    def __init__(self, checkpoint: str | Path, *, max_length: int = 4096, token_budget: int = 4096,
                 sdpa: bool = True):
        from training import parallel
        from training.checkpoint import checkpoint_tokenizer as checkpoint_tokenizer_entry
        from training.checkpoint import open_checkpoint
        from training.trainer import load_model

        self.info = open_checkpoint(checkpoint)
        kernels = self.info.manifest.get("kernels", "local")
        parallel.setup(parallel.ParallelConfig(kernels=kernels))
        # local layers: swap in fused SDPA core attention (training/model/sdpa.py); TE layers are fused already
        self.sdpa = sdpa and kernels == "local"
        if self.sdpa:
            from training.model.sdpa import build_eval_model

            self.model = build_eval_model(self.info, seq_length=max_length)
        else:
            self.model, _ = load_model(self.info.directory, seq_length=max_length, parallel_output=False)
        self.model.eval()
        self.device = parallel.device()
        self.max_length, self.token_budget = max_length, token_budget
        entry = checkpoint_tokenizer_entry(self.info)
        self.tokenizer = tokenizer_of_entry(entry)
        self.eod_id = int(entry.get("eod_id") or 0)

    def describe(self) -> dict:
        from training.checkpoint import weights_id

        m = self.info.manifest
        return {"backend": self.name, "checkpoint": str(self.info.directory), "weights_id": weights_id(self.info),
                "run": m.get("run"),
                "stage": m.get("stage"), "step": m.get("step"), "tokens_seen": m.get("tokens_seen"),
                "data": m["data"].get("source_id"), "eval_loss": _held_out_loss(m),
                "core_attention": "sdpa" if self.sdpa else "megatron"}

    def encode(self, text):
        return self.tokenizer.encode(text)

    def decode(self, ids):
        return self.tokenizer.decode(ids)

    def logits(self, tokens):
        tokens = tokens.to(self.device)
        pos = torch.arange(tokens.shape[1], device=self.device)[None].expand_as(tokens)
        return self.model(tokens, pos, None)

    @torch.no_grad()
    def generate(self, prompts, *, max_new_tokens=256, stop=(), temperature=0.0, seed=0):
        """Greedy (or sampled at `temperature`) with megatron-core's static KV cache. A batch shares one cache offset, so prompts of
        different lengths are handled by prefilling the shortest and feeding the rest of each longer prompt
        token by token (forced) until it ends; batches are formed from prompts of similar length."""
        from megatron.core.inference.contexts import StaticInferenceContext

        check_generation_room(self, max_new_tokens)
        encoded = [self.encode(p)[-(self.max_length - max_new_tokens):] for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
        out: list[str] = [""] * len(prompts)
        batch_size = max(1, self.token_budget // max(1, max(map(len, encoded), default=1) + max_new_tokens))
        gen_rng = torch.Generator(device=self.device).manual_seed(seed)
        for b in range(0, len(order), batch_size):
            idx = order[b: b + batch_size]
            seqs = [encoded[i] for i in idx]
            shortest, longest = min(map(len, seqs)), max(map(len, seqs))
            ctx = StaticInferenceContext(len(idx), longest + max_new_tokens)
            tokens = torch.tensor([s[:shortest] for s in seqs], device=self.device)
            pos = torch.arange(shortest, device=self.device)[None].expand_as(tokens)
            logits = self.model(tokens, pos, None, inference_context=ctx, runtime_gather_output=True)
            ctx.sequence_len_offset += shortest
            gen: list[list[int]] = [[] for _ in idx]
            done = [False] * len(idx)
            for t in range(shortest, longest + max_new_tokens):
                if temperature > 0:
                    probs = torch.softmax(logits[:, -1].float() / temperature, dim=-1)
                    nxt = torch.multinomial(probs, 1, generator=gen_rng)[:, 0].tolist()
                else:
                    nxt = logits[:, -1].argmax(-1).tolist()
                step = []
                for row, s in enumerate(seqs):
                    if t < len(s):  # still inside this prompt: feed its next token
                        step.append(s[t])
                        continue
                    if not done[row]:
                        gen[row].append(nxt[row])
                        done[row] = nxt[row] == self.eod_id or len(gen[row]) >= max_new_tokens or \
                            (bool(stop) and any(x in self.decode(gen[row][-64:]) for x in stop))
                    step.append(nxt[row])
                if all(done):
                    break
                tok = torch.tensor(step, device=self.device)[:, None]
                logits = self.model(tok, torch.full_like(tok, ctx.sequence_len_offset), None,
                                    inference_context=ctx, runtime_gather_output=True)
                ctx.sequence_len_offset += 1
            for row, i in enumerate(idx):
                ids = [x for x in gen[row] if x != self.eod_id]
                out[i] = cut_at_stop(self.decode(ids), stop)
        return out


def _held_out_loss(manifest: dict):
    """The last held-out loss a checkpoint recorded: a number (pretraining) or a figures dict (post-training)."""
    last = (manifest.get("eval") or [[None, None]])[-1][1]
    return last.get("loss") if isinstance(last, dict) else last


class HFLM(_TokenLM):
    """A transformers causal LM folder (the `train export-hf` output, or any local model folder)."""

    name = "hf"

    def __init__(self, path: str | Path, *, max_length: int = 4096, token_budget: int = 4096, device=None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = str(path)
        self.tok = AutoTokenizer.from_pretrained(self.path)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32).eval()
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device)
        self.max_length, self.token_budget = max_length, token_budget
        eos = self.tok.eos_token_id
        self.eod_id = int(eos if eos is not None else 0)

    def describe(self) -> dict:
        return {"backend": self.name, "path": self.path}

    def encode(self, text):
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=True)

    def logits(self, tokens):
        return self.model(tokens.to(self.device)).logits

    @torch.no_grad()
    def generate(self, prompts, *, max_new_tokens=256, stop=(), temperature=0.0, seed=0):
        check_generation_room(self, max_new_tokens)
        out = []
        torch.manual_seed(seed)
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature > 0 else \
            {"do_sample": False}
        for p in prompts:  # one at a time: no padding semantics to get wrong
            ids = torch.tensor([self.encode(p)[-(self.max_length - max_new_tokens):]], device=self.device)
            gen = self.model.generate(ids, max_new_tokens=max_new_tokens, pad_token_id=self.eod_id,
                                      eos_token_id=self.eod_id, **sampling)
            out.append(cut_at_stop(self.decode(gen[0, ids.shape[1]:].tolist()), stop))
        return out


class OpenAIServerLM(LM):
    """Generation through an OpenAI-compatible server (synth.backends.openai_server); each prompt is one
    user message. Log-likelihood tasks need a backend with prompt log-probs and are refused here."""

    name = "openai"

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, backend=None):
        if backend is None:
            from synth.backends.openai_server import OpenAIServerBackend

            backend = OpenAIServerBackend(base_url=base_url, model=model, api_key=api_key)
        self.backend = backend

    def describe(self) -> dict:
        return {"backend": self.name, **self.backend.describe()}

    def loglikelihood(self, requests):
        raise ConfigError("the openai backend cannot score log-likelihood tasks (chat servers return no "
                          "prompt log-probs); use --backend megatron, hf or vllm for them")

    def generate(self, prompts, *, max_new_tokens=256, stop=(), temperature=0.0, seed=0):
        from synth.backends.base import ChatRequest, SamplingParams

        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature, seed=seed, stop=tuple(stop))
        responses = self.backend.generate([ChatRequest.user(p, params=params, template_id="eval-model")
                                           for p in prompts])
        return [cut_at_stop(r.text, stop) for r in responses]


class VLLMLM(LM):  # pragma: no cover - GPU only
    """vLLM offline engine over a transformers folder (the HF export). Imported lazily; GPU machines only."""

    name = "vllm"

    def __init__(self, path: str | Path, *, max_length: int = 4096):
        try:
            from vllm import LLM
        except ImportError:
            raise ConfigError("--backend vllm needs the vllm package (GPU machines; pip install vllm)") from None
        self.llm, self.path, self.max_length = LLM(model=str(path), max_model_len=max_length), str(path), max_length
        self.tok = self.llm.get_tokenizer()

    def loglikelihood(self, requests):
        from vllm import SamplingParams, TokensPrompt

        prompts, spans = [], []
        for context, continuation in requests:
            ctx = self.tok(context, add_special_tokens=False)["input_ids"]
            whole = self.tok(context + continuation, add_special_tokens=False)["input_ids"]
            prompts.append(TokensPrompt(prompt_token_ids=whole))
            spans.append((len(ctx), whole))
        outs = self.llm.generate(prompts, SamplingParams(max_tokens=1, prompt_logprobs=1))
        result = []
        for (n_ctx, whole), o in zip(spans, outs):
            total, greedy = 0.0, True
            for pos in range(max(n_ctx, 1), len(whole)):
                entry = o.prompt_logprobs[pos]
                total += entry[whole[pos]].logprob
                greedy &= max(entry.values(), key=lambda lp: lp.logprob) is entry[whole[pos]]
            result.append((total, greedy))
        return result

    def generate(self, prompts, *, max_new_tokens=256, stop=(), temperature=0.0, seed=0):
        from vllm import SamplingParams

        outs = self.llm.generate(list(prompts), SamplingParams(max_tokens=max_new_tokens, temperature=temperature,
                                                               seed=seed, stop=list(stop) or None))
        return [o.outputs[0].text for o in outs]


def checkpoint_tokenizer(info):
    """The checkpoint's tokenizer as an object with encode/decode: the one it recorded and carries
    (training/checkpoint.py), UTF-8 bytes or the tokenizer file copied into the checkpoint."""
    from training.checkpoint import checkpoint_tokenizer as entry

    return tokenizer_of_entry(entry(info))


def tokenizer_of_entry(tok: dict):
    if tok.get("kind") == "bytes":
        return ByteTokenizer(eod_id=int(tok.get("eod_id") or 0))
    from corpus.mix.tokenizer.artifact import load_tokenizer

    return load_tokenizer(tok["model_file"])


class ByteTokenizer:
    """training/byte_mixture.py's tokenization: one token per UTF-8 byte, NUL (the end-of-document id) dropped."""

    def __init__(self, *, eod_id: int = 0):
        self.eod_id = eod_id

    def encode(self, text: str) -> list[int]:
        return [b for b in text.encode("utf-8") if b != self.eod_id]

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")


def load_lm(spec: str, *, backend: str = "auto", max_length: int = 4096, base_url: str | None = None,
            model: str | None = None) -> LM:
    """`spec` is a checkpoint directory (megatron), a transformers folder (hf/vllm), or a model name for
    --backend openai. `auto`: a folder with checkpoint.json (or step-* checkpoints) -> megatron; with
    config.json -> hf."""
    if backend == "openai":
        if not base_url:
            raise ConfigError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        return OpenAIServerLM(base_url=base_url, model=model or spec)
    path = Path(spec)
    if backend == "auto":
        if (path / "checkpoint.json").exists() or any(path.glob("step-*/checkpoint.json")):
            backend = "megatron"
        elif (path / "config.json").exists():
            backend = "hf"
        else:
            raise ConfigError(f"{spec}: neither a cidermill checkpoint (checkpoint.json) nor a transformers folder "
                              "(config.json); pass --backend openai with --base-url for a server")
    if backend == "megatron":
        return MegatronLM(path, max_length=max_length)
    if backend == "hf":
        return HFLM(path, max_length=max_length)
    if backend == "vllm":
        return VLLMLM(path, max_length=max_length)
    raise ConfigError(f"unknown backend {backend!r}; use auto, megatron, hf, openai or vllm")


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else math.nan
