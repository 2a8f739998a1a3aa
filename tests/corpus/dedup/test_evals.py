"""The dedup and decontam evaluations run end to end on a small sample and meet their targets."""

from __future__ import annotations

import argparse

from evals.data import decontam, dedup


def test_dedup_eval_meets_targets_on_a_small_sample():
    report = dedup.run(argparse.Namespace(originals=15, seed=1, config="{}"))
    assert report.passed, report.to_text()
    summary = report.tables["summary"][0]
    assert summary["planted_copies"] == 15 * len(dedup.RATES) and summary["real_docs_dropped"] == 0


def test_decontam_eval_meets_targets_on_two_benchmarks():
    args = argparse.Namespace(per_benchmark=5, seed=1, benchmarks_dir=None,  # the shipped copies
                              config='{"benchmarks": ["gsm8k", "mbpp"]}')
    report = decontam.run(args)
    assert report.passed, report.to_text()
    assert report.tables["summary"][0]["false_drops"] == 0
