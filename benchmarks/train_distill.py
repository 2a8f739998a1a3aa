"""Distillation ablation at tiny scale (AFM report 3.2.1): teacher weight 0.1 / 0.5 / 0.9 x teacher quality,
against the same student trained without distillation. Byte-level tiny-core mixture (bundled C4), same seed,
same steps for every student; held-out cross-entropy of the true labels and next-token accuracy.

    .venv/bin/python benchmarks/train_distill.py [--student-steps 80] [--teacher-steps 100,400]

The teachers are `tiny-teacher` (FFN 512) trained for each of --teacher-steps; the students `tiny-student`
(FFN 128), each from random initialisation. Prints one line per run and the difference to no distillation.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.byte_mixture import bundled_c4_texts, publish_tiny_mixtures  # noqa: E402
from training.config import from_dict  # noqa: E402
from training.trainer import train  # noqa: E402


def cfg(root: str, name: str, shape: str, steps: int, **extra):
    return from_dict({
        "name": name, "model": {"shape": shape, "vocab_size": 256},
        "data": {"mixture": "tiny-core", "root": root, "valid_samples": 64},
        "optim": {"name": "afm_rmsprop", "peak_lr": 0.03, "warmup_steps": 5, "mup_base_width": 64},
        "global_batch": 16, "micro_batch": 16, "steps": steps, "seed": 7,
        "out_dir": f"{root}/runs/{name}", "log_every": 0, **extra})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--student-steps", type=int, default=80)
    ap.add_argument("--teacher-steps", default="100,400")
    ap.add_argument("--weights", default="0.1,0.5,0.9")
    args = ap.parse_args()
    quiet = lambda *_: None  # noqa: E731
    with tempfile.TemporaryDirectory() as root:
        publish_tiny_mixtures(root, bundled_c4_texts())
        plain = train(cfg(root, "plain", "tiny-student", args.student_steps), log=quiet)
        print(f"no distillation: held-out CE {plain.eval_loss:.4f}, accuracy {plain.eval_accuracy:.4f} "
              f"({args.student_steps} steps)")
        for t_steps in (int(x) for x in args.teacher_steps.split(",")):
            teacher = train(cfg(root, f"teacher-{t_steps}", "tiny-teacher", t_steps), log=quiet)
            print(f"teacher trained {t_steps} steps: held-out CE {teacher.eval_loss:.4f}, "
                  f"accuracy {teacher.eval_accuracy:.4f}")
            for w in (float(x) for x in args.weights.split(",")):
                r = train(cfg(root, f"d-{t_steps}-{w}", "tiny-student", args.student_steps,
                              distill={"teacher": str(teacher.checkpoint), "teacher_weight": w}), log=quiet)
                print(f"  teacher weight {w}: held-out CE {r.eval_loss:.4f} ({r.eval_loss - plain.eval_loss:+.4f} "
                      f"vs none), accuracy {r.eval_accuracy:.4f} ({r.eval_accuracy - plain.eval_accuracy:+.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
