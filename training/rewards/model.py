"""The reward model as a scorer: an RM checkpoint (training/reward.py) scores (prompt, response) as it was
trained, one sequence per row, the scalar head at the last real token; the response is rendered with the chat
format and its end marker exactly as in RM training (training.prefs.tokenize_response)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch


class RewardModelScorer:
    def __init__(self, checkpoint: str | Path, *, micro_batch: int = 8):
        from .. import parallel
        from ..chat import load_tokenizer
        from ..checkpoint import open_checkpoint
        from ..reward import load_reward_model

        self.checkpoint = open_checkpoint(checkpoint).directory
        self.model, self.cfg = load_reward_model(str(checkpoint))
        self.tokenizer = load_tokenizer(self.cfg.tokenizer)
        self.micro_batch, self.device = micro_batch, parallel.device()
        self.calls = 0  # forward passes run: a cached rerun must leave this at 0

    @torch.no_grad()
    def score(self, items: Sequence[tuple[list[dict], str]]) -> list[float]:
        """items: (prompt messages, response text without the end marker) -> one scalar reward each."""
        from ..packing import _assemble, collate
        from ..prefs import tokenize_response

        out: list[float] = []
        seq = self.cfg.seq_length
        for at in range(0, len(items), self.micro_batch):
            chunk = items[at: at + self.micro_batch]
            packs = []
            for messages, response in chunk:
                t = tokenize_response(list(messages), response, self.tokenizer, budget=seq + 1)
                packs.append(_assemble([(0, t.ids, t.trainable)], seq, self.tokenizer.pad_id))
            batch = collate(packs)
            batch["last_index"] = torch.tensor([sum(p.lengths) - 1 for p in packs])
            rewards, _ = self.model({k: v.to(self.device) for k, v in batch.items()})
            self.calls += 1
            out += rewards.float().tolist()
        return out
