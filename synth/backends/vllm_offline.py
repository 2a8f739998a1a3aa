"""vLLM offline batch inference (GPU machines; `pip install vllm` brings its own CUDA torch, so it
is an optional extra and not installed by `make`).

    backend = VLLMBackend(model="/models/Qwen2.5-7B-Instruct", tensor_parallel_size=1,
                          engine_kwargs={"gpu_memory_utilization": 0.9})

The whole batch goes to `LLM.chat` at once with one `SamplingParams` per request (vLLM schedules
it with continuous batching); per-request seeds make sampling reproducible. Log-probabilities are
the sampled tokens' (vLLM's `logprobs=0`).
"""

from __future__ import annotations

from typing import Any, Sequence

from manifests.errors import ConfigError

from .base import Backend, ChatRequest, Completion, apply_stop


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, *, model: str, tensor_parallel_size: int = 1, dtype: str = "auto", seed: int = 0,
                 max_model_len: int | None = None, engine_kwargs: dict[str, Any] | None = None, cache=None):
        super().__init__(model=model, cache=cache)
        if not vllm_available():
            raise ConfigError("the vllm backend needs the optional `vllm` package (GPU machines): pip install vllm")
        self._engine_args = {"model": model, "tensor_parallel_size": tensor_parallel_size, "dtype": dtype,
                             "seed": seed, **({"max_model_len": max_model_len} if max_model_len else {}),
                             **(engine_kwargs or {})}
        self._llm = None

    def llm(self):
        if self._llm is None:
            from vllm import LLM   # heavy: CUDA init, weights onto the GPU

            self._llm = LLM(**self._engine_args)
        return self._llm

    def _complete(self, requests: Sequence[ChatRequest]) -> list[list[Completion] | Exception]:
        from vllm import SamplingParams as VSampling

        params = [VSampling(n=r.params.n, temperature=r.params.temperature, top_p=r.params.top_p,
                            max_tokens=r.params.max_tokens, seed=r.params.seed, stop=list(r.params.stop) or None,
                            logprobs=0 if r.params.logprobs else None) for r in requests]
        try:
            outputs = self.llm().chat([list(r.messages) for r in requests], sampling_params=params, use_tqdm=False)
        except ValueError as exc:   # e.g. one prompt over max_model_len: retry one by one to isolate it
            if len(requests) == 1:
                return [exc]
            return [res for r in requests for res in self._complete([r])]
        results: list[list[Completion] | Exception] = []
        for req, out in zip(requests, outputs):
            comps = []
            for o in out.outputs:
                text, cut = apply_stop(o.text, req.params.stop)
                lps = None
                if req.params.logprobs and o.logprobs:
                    lps = [float(step[tok].logprob) for tok, step in zip(o.token_ids, o.logprobs)]
                comps.append(Completion(text=text, finish_reason="stop" if cut else (o.finish_reason or "stop"),
                                        n_prompt_tokens=len(out.prompt_token_ids or []),
                                        n_completion_tokens=len(o.token_ids), token_logprobs=lps))
            results.append(comps)
        return results
