"""The coding-triplet pipeline in one call: topics -> questions -> dedup -> decontam -> triplets,
written as a dataset version (plus a rejects version) with every stage's statistics.

The same stages run from a YAML pipeline (`coding_questions_v1`, ...); this helper is for the demo,
the CLI and tests, where the seed table is small and in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from corpus.stage import Stage
from manifests import Catalog
from manifests.manifest import StageStats
from synth.generation import runner

from synth.stages.coding_questions import CodingDecontam, CodingQuestionDedup, CodingQuestions
from synth.stages.coding_triplets import CodingTriplets


def coding_stages(backend: dict, *, questions_per_topic: int = 2, n_tests: int = 5, min_tests: int = 2,
                  n_solutions: int = 4, min_pass_rate: float = 1.0, max_tokens: int = 200, seed: int = 0,
                  workers: int = 2, test_samples: int = 1, tests_temperature: float = 0.2,
                  isolation: str = "auto", allow_weak_isolation: bool = False) -> list[Stage]:
    return [
        CodingQuestions({"backend": backend, "questions_per_topic": questions_per_topic,
                         "max_tokens": min(max_tokens, 160), "seed": seed}),
        CodingQuestionDedup({}),
        CodingDecontam({}),
        CodingTriplets({"backend": backend, "n_tests": n_tests, "min_tests": min_tests, "n_solutions": n_solutions,
                        "min_pass_rate": min_pass_rate, "tests_max_tokens": max_tokens, "test_samples": test_samples,
                        "tests_temperature": tests_temperature,
                        "solution_max_tokens": max_tokens, "seed": seed, "workers": workers,
                        "isolation": isolation, "allow_weak_isolation": allow_weak_isolation}),
    ]


@dataclass
class CodingRun:
    table: pa.Table                 # the kept triplets
    rejects: list[pa.Table]         # per stage that dropped rows
    stats: list[StageStats]


def run_stages(seeds: pa.Table, stages: list[Stage]) -> CodingRun:
    table, stats, rejects = runner.run_stages(seeds, stages)
    return CodingRun(table, rejects, stats)


def pass_rate_summary(run: CodingRun) -> dict:
    """The honest numbers: how many were generated, kept at each step, and how candidates did."""
    by = {s.name: s for s in run.stats}
    trip = by.get("coding_triplets_v1")
    counters = dict(trip.counters) if trip else {}
    execs = counters.get("test_executions", 0)
    return {
        "topics": by["coding_questions_v1"].rows_in if "coding_questions_v1" in by else 0,
        "questions_generated": by["coding_questions_v1"].rows_out if "coding_questions_v1" in by else 0,
        "questions_after_dedup": by["coding_question_dedup_v1"].rows_out if "coding_question_dedup_v1" in by else 0,
        "questions_after_decontam": by["coding_decontam_v1"].rows_out if "coding_decontam_v1" in by else 0,
        "triplets_kept": run.table.num_rows,
        "dropped": {s.name: dict(s.dropped) for s in run.stats if s.dropped},
        "candidate_solutions": counters.get("candidates", 0),
        "valid_candidate_solutions": counters.get("valid_candidates", 0),
        "sandbox_verdicts": {k.removeprefix("sandbox_"): v for k, v in counters.items()
                             if k.startswith("sandbox_") and not k.startswith("sandbox_isolation_")},
        # bwrap / unshare, or rlimits (no namespaces: only with allow_weak_isolation) -- also on every row
        "sandbox_isolation": sorted(k.removeprefix("sandbox_isolation_") for k in counters
                                    if k.startswith("sandbox_isolation_")),
        "test_executions": execs,
        "test_pass_rate": (counters.get("tests_passed", 0) / execs) if execs else None,
    }


def write_run(catalog: Catalog, run: CodingRun, *, name: str = "synth_coding_triplets",
              stages: list[Stage]) -> tuple:
    """Publish the triplets (and rejects, when any) with the stages and their statistics."""
    summary = pass_rate_summary(run)
    kept, rej = runner.publish_run(catalog, name, run.table, stages, run.stats, run.rejects,
                                   extra={"pass_rates": summary}, rejects_name=f"{name}_rejects",
                                   rejects_view=_as_strings)
    return kept, rej, summary


def _as_strings(t: pa.Table) -> pa.Table:
    """Rejects from different stages have different columns; keep what explains the drop (missing
    columns become nulls when the stages' rejects are concatenated)."""
    keep = [c for c in ("id", "source", "topic", "entry_point", "question", "tests", "solution", "candidate_passes",
                        "pass_rate", "drop_reason", "drop_stage") if c in t.column_names]
    return t.select(keep)
