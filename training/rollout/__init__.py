"""Rollouts for post-training (issue 20): batched generation from the megatron policy with a KV cache
(`generate`), and a vLLM backend over the Hugging Face export for GPU machines (`vllm_backend`)."""

from .megatron_generator import FINISH_REASONS, GenerateConfig, Rollout, generate, rollout_seed
from .policy import load_policy

__all__ = ["FINISH_REASONS", "GenerateConfig", "Rollout", "generate", "load_policy", "rollout_seed"]
