"""The parts of the real-base benchmarks (benchmarks/real_*.py) that their figures rest on, at tiny sizes:
a mixed palettization plan composed from whole-model 4-bit and 2-bit results equals palettizing with the plan
directly (real_palettize.py runs each method twice instead of once per plan); MDLOO's micro-batch divides its
global batch (a 48-response batch failed the trainer's check with micro-batch 32); the sums' splits are
disjoint and a range too small for them is refused; the shared data folder follows CIDERMILL_SHARED_DATA as the
tests' does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import real_mdloo  # noqa: E402
import real_palettize  # noqa: E402

from training.quantize.palettize import palettize_state  # noqa: E402


def test_mixed_plan_composed_from_whole_model_results_equals_direct_palettization():
    g = torch.Generator().manual_seed(3)
    names = [f"decoder.layers.{i}.mlp.linear_fc{j}.weight" for i in range(2) for j in (1, 2)]
    state = {n: torch.randn(32, 24, generator=g) for n in names}
    state["embedding.word_embeddings.weight"] = torch.randn(50, 24, generator=g)
    energy = {n: torch.rand(24, generator=g) + 0.1 for n in names}
    plan = {names[0]: 2, names[1]: 4, names[2]: 4, names[3]: 2}
    at = {b: palettize_state(state, {n: b for n in names}, group_size=16, col_weights=energy).state for b in (4, 2)}
    direct = palettize_state(state, plan, group_size=16, col_weights=energy).state
    composed = real_palettize.compose(at, plan)
    assert set(composed) == set(direct)
    for k in direct:
        assert torch.equal(composed[k], direct[k]), k
    # and the plan matters: the 2-bit layers differ from their 4-bit version
    assert not torch.equal(composed[names[0]], at[4][names[0]])


@pytest.mark.parametrize("global_batch,expected", [(48, 24), (64, 32), (32, 32), (7, 7), (96, 32), (60, 30)])
def test_micro_batch_divides_the_global_batch(global_batch, expected):
    assert real_mdloo.micro_batch_for(global_batch) == expected


def test_sums_are_disjoint_and_a_small_range_is_refused():
    pairs = real_mdloo.sums(400, seed=0, max_addend=19)
    assert len(set(pairs)) == 400 and all(0 <= a <= 19 and 0 <= b <= 19 for a, b in pairs)
    with pytest.raises(SystemExit, match="0..19 give only 400"):
        real_mdloo.sums(401, seed=0, max_addend=19)


def test_shared_data_follows_the_environment_variable(tmp_path):
    code = "import sys; sys.path.insert(0, 'benchmarks'); import real_common; print(real_common.SHARED)"
    env = {**os.environ, "CIDERMILL_SHARED_DATA": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path)


def test_whole_model_results_are_made_once_per_work_folder(tmp_path):
    calls = []

    def make():
        calls.append(1)
        return {4: {"w": torch.arange(3.0)}}

    first, seconds = real_palettize.cached(tmp_path / "ours.pt", make)
    again, seconds_again = real_palettize.cached(tmp_path / "ours.pt", make)
    assert calls == [1] and seconds_again == seconds
    assert torch.equal(again[4]["w"], first[4]["w"])
    assert not (tmp_path / "ours.partial").exists()
