"""LoRA under tensor parallelism 2 (CPU, gloo, torchrun): the hooks (column-parallel: A replicated, B split;
row-parallel: A split, A·x all-reduced, B replicated) give the logits of the model with each rank's adapter
shard merged into its weight shard."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from .test_parallel_cpu import REPO, free_port


@pytest.mark.slow
def test_lora_hooks_at_tensor_parallel_2_equal_merged_shards(tmp_path):
    out = tmp_path / "logits.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
           str(free_port()), str(REPO / "tests" / "training" / "lora_tp_worker.py"), str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(out)
    # each rank holds half of a row-parallel layer's input columns in A, all of a column-parallel layer's
    assert got["shapes"]["decoder/layers/0/self_attention/linear_proj"] == [4, 32]
    assert got["shapes"]["decoder/layers/0/self_attention/linear_qkv"] == [4, 64]
    assert float((got["hooked"] - got["plain"]).abs().max()) > 1e-2  # the adapter changes the output
    torch.testing.assert_close(got["hooked"], got["merged"], atol=2e-5, rtol=1e-5)
