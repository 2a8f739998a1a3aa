"""Post-training data parallelism on CPU: 2 ranks on gloo (torch.multiprocessing) give the 1-rank run on the
same global batch: per-step losses, global gradient norms and the weights after the run."""

from __future__ import annotations

import json
import socket

import pytest
import torch.multiprocessing as mp

from .post_dp_worker import run
from .test_sft import REPO

KTO = str(REPO / "data/samples/preference/llamafactory/kto_en_demo.json.gz")
ALPACA = str(REPO / "data/samples/preference/alpaca_eval/fusechat_weighted.json.gz")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _raw(method, out, micro):
    raw = {"name": f"dp-{method}", "method": method, "model": {"shape": "tiny", "vocab_size": 256},
           "tokenizer": "bytes", "seq_length": 192, "global_batch": 8, "micro_batch": micro, "steps": 3,
           "seed": 5, "log_every": 0, "out_dir": str(out),
           "optim": {"name": "afm_rmsprop", "peak_lr": 0.01, "warmup_steps": 1, "mup_base_width": 64}}
    if method == "sft":
        raw["data"] = {"sources": [{"path": KTO, "max_records": 80}], "valid_fraction": 0.1}
    else:
        raw["data"] = {"sources": [{"path": ALPACA, "format": "alpaca_eval", "max_records": 60}],
                       "valid_fraction": 0.2}
        raw["rm"] = {"pooling": "mean"}
    return raw


def _spawn(method, tmp_path, world, micro) -> dict:
    out = tmp_path / f"{method}-{world}.json"
    mp.spawn(run, args=(world, _port(), method, _raw(method, tmp_path / f"{method}-{world}", micro), str(out)),
             nprocs=world, join=True)
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sft", "rm"])
def test_two_data_parallel_ranks_equal_one(tmp_path, method):
    one = _spawn(method, tmp_path, 1, 2)  # 4 micro-batches of 2 on one rank
    two = _spawn(method, tmp_path, 2, 2)  # 2 micro-batches of 2 on each of 2 ranks
    assert len(one["losses"]) == 3
    assert two["losses"] == pytest.approx(one["losses"], abs=1e-5)
    assert two["grad_norms"] == pytest.approx(one["grad_norms"], rel=1e-5)
    assert set(two["weights"]) == set(one["weights"])
    for k in one["weights"]:
        assert two["weights"][k] == pytest.approx(one["weights"][k], abs=1e-5), k
    # and the steps did something: the loss of step 3 differs from step 1's
    assert one["losses"][2] != one["losses"][0]
