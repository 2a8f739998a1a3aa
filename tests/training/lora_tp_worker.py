"""Run under `torchrun --nproc-per-node 2` (gloo, CPU) by test_lora_tp.py: a tiny model at tensor parallel 2
with a LoRA adapter attached by hooks, against the same model with each rank's shard of the adapter merged
into its weight shard. Writes both full-vocabulary logits (rank 0) to the path given."""

import sys

import torch

from training import checkpoint as ckpt
from training import parallel
from training.adapters.lora import AdapterHost, LoraConfig, merged_state, new_adapter
from training.model import build_model, get_shape

out = sys.argv[1]
parallel.setup(parallel.ParallelConfig(tensor_parallel=2), seed=3)
shape = get_shape("tiny", vocab_size=256)
model = build_model(shape, seq_length=32, parallel_output=False).eval()
base = {k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
adapter = new_adapter(model, LoraConfig(rank=4), seed=1)  # same seed on both ranks: replicated A/B agree
gen = torch.Generator().manual_seed(9)
with torch.no_grad():
    for p in adapter.B.values():
        p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
tokens = torch.randint(256, (2, 32), generator=torch.Generator().manual_seed(5))
pos = torch.arange(32)[None].expand(2, 32)
host = AdapterHost(model)
host.attach(adapter)
with torch.no_grad():
    hooked = model(tokens, pos, None)
    host.detach()
    plain = model(tokens, pos, None)
    ckpt.load_state_dict_(model, merged_state(base, adapter))
    merged = model(tokens, pos, None)
if torch.distributed.get_rank() == 0:
    torch.save({"hooked": hooked, "merged": merged, "plain": plain,
                "shapes": {k: list(v.shape) for k, v in adapter.A.items()}}, out)
