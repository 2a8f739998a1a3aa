"""Distillation and structural pruning at tiny scale, against the same student trained without them.

The teacher mirrors the report's 6.4B model at CPU size (`tiny-teacher`: 128 wide, 3 layers, FFN 512); the
student mirrors AFM-on-device (`tiny-student`: the same with FFN 128). All runs: same mixture (tiny-core,
byte-level C4), same seeds, same number of steps, held-out loss on the mixture's held-out documents.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from training import parallel
from training.checkpoint import load_state_dict_, open_checkpoint
from training.config import DistillConfig
from training.distill import precompute_top1
from training.model import build_model, get_shape
from training.prune import FFNMasks, pruned_state_dict, prune, soft_top_k
from training.trainer import train

from .helpers import quiet, tiny_cfg

TEACHER_STEPS, STUDENT_STEPS = 400, 80


@pytest.fixture(scope="session")
def teacher(byte_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    return train(tiny_cfg(byte_root, out, name="teacher", shape="tiny-teacher", steps=TEACHER_STEPS), log=quiet)


@pytest.fixture(scope="session")
def plain_student(byte_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    return train(tiny_cfg(byte_root, out, name="student", shape="tiny-student", steps=STUDENT_STEPS), log=quiet)


def student_cfg(byte_root, out, **extra):
    return tiny_cfg(byte_root, out, **{"name": "student", "shape": "tiny-student", "steps": STUDENT_STEPS, **extra})


def test_soft_top_k_is_a_differentiable_k_subset():
    scores = torch.tensor([3.0, -1.0, 0.5, 2.0, -2.0, 0.0], requires_grad=True)
    lam = soft_top_k(scores, 2, eps=0.5)
    assert float(lam.sum().detach()) == pytest.approx(2.0, abs=1e-4)
    assert torch.all((lam > 0) & (lam < 1))
    assert lam.detach().argsort(descending=True)[:2].tolist() == [0, 3]
    lam[2].backward()  # raising one unit's mask must come at the others' expense (the sum is fixed)
    assert scores.grad[2] > 0 and torch.all(scores.grad[[0, 1, 3, 4, 5]] <= 0)
    hard = soft_top_k(scores.detach(), 2, eps=1e-3)
    assert hard.round().tolist() == [1, 0, 0, 1, 0, 0]


def test_pruned_model_computes_what_the_masked_model_computed():
    parallel.setup(parallel.ParallelConfig(), seed=11)
    teacher = build_model(get_shape("tiny-teacher"), seq_length=16)
    ffn = get_shape("tiny-teacher").ffn_hidden_size
    # 128 units score in [1, 3], the rest in [-3, -1]: with ε = 0.01 the mask is binary to float precision
    scores = [torch.cat([torch.linspace(1, 3, 128), torch.linspace(-3, -1, ffn - 128)])[torch.randperm(ffn)]
              for _ in teacher.decoder.layers]
    masks = FFNMasks(teacher, 128, init_scores=scores)
    masks.eps = 0.01
    tokens = torch.randint(0, 512, (2, 16))
    pos = torch.arange(16).expand(2, 16)
    with torch.no_grad():
        masked = teacher(tokens, pos, None)
        state = pruned_state_dict(teacher, masks)
    masks.remove()
    student = build_model(get_shape("tiny-teacher").with_(ffn_hidden_size=128), seq_length=16)
    load_state_dict_(student, state)
    with torch.no_grad():
        np.testing.assert_allclose(student(tokens, pos, None).numpy(), masked.numpy(), atol=1e-5)


@pytest.mark.slow
def test_pruned_initialisation_beats_random_initialisation(byte_root, tmp_path, teacher, plain_student):
    pruned_dir = prune(tiny_cfg(byte_root, tmp_path / "mask", shape="tiny-teacher", steps=40),
                       source=teacher.checkpoint, target_ffn=128, steps=40, out_dir=tmp_path / "pruned", log=quiet)
    m = open_checkpoint(pruned_dir).manifest
    assert m["model_shape"]["ffn_hidden_size"] == 128 and m["pruned_from"]["ffn_hidden_size"] == 512
    student = train(student_cfg(byte_root, tmp_path / "run", init_from=str(pruned_dir)), log=quiet)
    print(f"\nheld-out loss after {STUDENT_STEPS} steps: pruned init {student.eval_loss:.4f} "
          f"(at start {student.eval_history[0][1]:.4f}), random init {plain_student.eval_loss:.4f}; "
          f"teacher {teacher.eval_loss:.4f}")
    assert student.eval_loss < plain_student.eval_loss - 0.3


@pytest.mark.slow
def test_distillation_against_the_same_student_without_it(byte_root, tmp_path, teacher, plain_student):
    report = train(student_cfg(byte_root, tmp_path / "d09", distill={"teacher": str(teacher.checkpoint)}),
                   log=quiet)  # the report's 0.9 on the teacher's top-1
    light = train(student_cfg(byte_root, tmp_path / "d01",
                              distill={"teacher": str(teacher.checkpoint), "teacher_weight": 0.1}), log=quiet)
    print(f"\nafter {STUDENT_STEPS} steps, held-out loss / next-token accuracy: no distillation "
          f"{plain_student.eval_loss:.4f} / {plain_student.eval_accuracy:.4f}; teacher weight 0.9 "
          f"{report.eval_loss:.4f} / {report.eval_accuracy:.4f}; teacher weight 0.1 "
          f"{light.eval_loss:.4f} / {light.eval_accuracy:.4f}; teacher {teacher.eval_loss:.4f} / "
          f"{teacher.eval_accuracy:.4f}")
    # Hard top-1 targets sharpen the student: its argmax improves, while the cross-entropy of the true
    # labels pays -log(1 - w) on every token where the teacher's top-1 is wrong (w = teacher weight).
    assert report.eval_accuracy > plain_student.eval_accuracy
    # at this scale the report's 0.9 loses held-out cross-entropy (benchmarks/train_distill.py: +0.58 nats)
    assert report.eval_loss > plain_student.eval_loss
    assert light.eval_loss < plain_student.eval_loss
    assert light.eval_accuracy > plain_student.eval_accuracy


def test_precomputed_top1_gives_the_online_run(byte_root, tmp_path, teacher):
    cfg = student_cfg(byte_root, tmp_path / "pre", steps=6, batch=8)
    prefix = precompute_top1(cfg, teacher=str(teacher.checkpoint), prefix=tmp_path / "top1" / "ids")
    online = train(student_cfg(byte_root, tmp_path / "on", steps=6, batch=8,
                               distill={"teacher": str(teacher.checkpoint)}), log=quiet)
    offline = train(student_cfg(byte_root, tmp_path / "off", steps=6, batch=8,
                                distill={"teacher_top1": prefix}), log=quiet)
    assert offline.losses == online.losses


def test_mask_learning_in_micro_batches_matches_one_batch(byte_root, tmp_path):
    from training.data import blend_from_mixture, build_splits
    from training.prune import learn_masks

    parallel.setup(parallel.ParallelConfig(), seed=5)
    blend = blend_from_mixture("tiny-core", root=str(byte_root))
    splits = build_splits(blend, seq_length=64, seed=1, n_train=24, n_valid=4, cache_dir=tmp_path / "cache")
    scores = {}
    for micro in (8, 2):
        parallel.seed_everything(5)
        model = build_model(get_shape("tiny-teacher"), seq_length=64)
        masks = learn_masks(model, splits, k=128, steps=3, global_batch=8, micro_batch=micro, log=None)
        scores[micro] = [s.detach().clone() for s in masks.scores]
        masks.remove()
    for whole, parts in zip(scores[8], scores[2]):
        assert not torch.equal(whole, torch.zeros_like(whole))
        torch.testing.assert_close(parts, whole, rtol=1e-4, atol=1e-5)


def test_prune_accepts_a_tensor_parallel_config(byte_root, tmp_path):
    src = train(tiny_cfg(byte_root, tmp_path / "src", shape="tiny-teacher", steps=2, batch=4), log=quiet)
    lines = []
    cfg = tiny_cfg(byte_root, tmp_path / "mask", shape="tiny-teacher", steps=2, batch=4, micro_batch=2,
                   parallel={"tensor_parallel": 2})  # the teacher's own config sets TP 2 at full size
    out = prune(cfg, source=src.checkpoint, target_ffn=128, steps=2, out_dir=tmp_path / "pruned", log=lines.append)
    assert any("tensor_parallel 2 -> 1" in line for line in lines)
    assert open_checkpoint(out).manifest["model_shape"]["ffn_hidden_size"] == 128


@pytest.mark.slow  # two processes under torchrun
def test_precompute_top1_sharded_over_ranks_gives_the_same_ids(byte_root, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from training.teacher import TeacherLabels
    from training.plan import plan_run

    from .test_parallel_cpu import free_port

    src = train(tiny_cfg(byte_root, tmp_path / "t", shape="tiny-teacher", steps=2, batch=4), log=quiet)
    raw = {"name": "student", "model": {"shape": "tiny-student", "vocab_size": 256},
           "data": {"mixture": "tiny-core", "root": str(byte_root), "valid_samples": 8},
           "global_batch": 8, "micro_batch": 4, "steps": 3, "seed": 7, "log_every": 0,
           "out_dir": str(tmp_path / "pc")}
    path = tmp_path / "student.yaml"
    path.write_text(json.dumps(raw))
    cfg = student_cfg(byte_root, tmp_path / "pc1", steps=3, batch=8)
    one = precompute_top1(cfg, teacher=str(src.checkpoint), prefix=tmp_path / "one" / "ids")
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), "-m", "manifests.main", "train", "precompute-top1", str(path), "--teacher",
                           str(src.checkpoint), "--out", str(tmp_path / "two" / "ids")], cwd=repo,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads((tmp_path / "two" / "ids.top1.json").read_text())
    assert [(s["first"], s["count"]) for s in facts["shards"]] == [(0, 12), (12, 12)]
    plan = plan_run(cfg)
    a = TeacherLabels.from_config(DistillConfig(teacher_top1=one), plan=plan, global_batch=8)
    b = TeacherLabels.from_config(DistillConfig(teacher_top1=str(tmp_path / "two" / "ids")), plan=plan,
                                  global_batch=8)
    for i in range(24):
        assert np.array_equal(np.asarray(a._row(i)), np.asarray(b._row(i)))
