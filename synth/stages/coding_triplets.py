"""coding_triplets_v1: questions -> (question, tests, solution) triplets validated by execution.

Per question: unit tests (the asserts of `test_samples` replies, merged; contradictory ones dropped)
and `n_solutions` candidate solutions are generated; every
candidate runs against every test in the sandbox (one sandbox run per candidate, a verdict per
test); the candidate with the most passes is kept; the row survives when it has at least
`min_tests` tests and its best candidate passes at least `min_pass_rate` of them. Dropped rows say
why (`no_valid_tests`, `too_few_tests`, `no_valid_solution`, `below_threshold`, `llm_error`), and
the stage's counters give the judgements' verdicts and pass counts, so pass rates can be reported
whatever they are. Every row records the isolation it was judged under (`sandbox_isolation`);
`rlimits` (no namespaces) only with `allow_weak_isolation: true`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from manifests.config import require
from corpus.registry import register
from corpus.stage import Mapper, StageResult, drop_by_reason, evidence, with_columns
from synth.backends import SamplingParams
from synth.sandbox import Sandbox, SandboxLimits
from synth.generation.llm import get_backend

from synth.coding.prompts import SOLUTION, TESTS, parse_solution, parse_tests

NEW_COLUMNS = pa.schema([
    ("tests", pa.list_(pa.string())), ("solution", pa.string()), ("n_tests", pa.int32()),
    ("n_candidates", pa.int32()), ("n_valid_candidates", pa.int32()), ("candidate_passes", pa.list_(pa.int32())),
    ("best_passes", pa.int32()), ("pass_rate", pa.float64()), ("best_verdict", pa.string()),
    ("tests_provenance", pa.string()), ("solution_provenance", pa.string()), ("sandbox_isolation", pa.string()),
])


@dataclass(frozen=True, kw_only=True)
class TripletsConfig:
    backend: dict = field(default_factory=lambda: {"kind": "cpu"})
    n_tests: int = 5                 # asked for; the parsed count may be lower
    test_samples: int = 1            # test replies sampled per question; their asserts are merged
    min_tests: int = 2
    n_solutions: int = 4             # candidates per question
    min_pass_rate: float = 1.0       # the best candidate must pass this share of the tests
    tests_max_tokens: int = 200
    solution_max_tokens: int = 256
    tests_temperature: float = 0.2
    solution_temperature: float = 0.8
    seed: int = 0
    workers: int = 2                 # sandboxes at once
    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_mib: int = 512
    per_test_seconds: float = 2.0
    isolation: str = "auto"          # auto | bwrap | unshare | rlimits
    allow_weak_isolation: bool = False   # rlimits only (no namespaces) must be asked for

    def __post_init__(self):
        require(self.n_tests >= 1, f"n_tests must be >= 1; got {self.n_tests}")
        require(1 <= self.min_tests <= self.n_tests, f"need 1 <= min_tests <= n_tests; got {self.min_tests}")
        require(self.n_solutions >= 1, f"n_solutions must be >= 1; got {self.n_solutions}")
        require(self.test_samples >= 1, f"test_samples must be >= 1; got {self.test_samples}")
        require(0 <= self.min_pass_rate <= 1, f"min_pass_rate must be in [0, 1]; got {self.min_pass_rate}")
        require(self.workers >= 1, f"workers must be >= 1; got {self.workers}")
        require(self.isolation in ("auto", "bwrap", "unshare", "rlimits"),
                f"isolation must be auto, bwrap, unshare or rlimits; got {self.isolation!r}")
        require(self.isolation != "rlimits" or self.allow_weak_isolation,
                "isolation 'rlimits' (no namespaces) needs allow_weak_isolation: true")

    def limits(self) -> SandboxLimits:
        return SandboxLimits(cpu_seconds=self.cpu_seconds, wall_seconds=self.wall_seconds,
                             memory_bytes=self.memory_mib * 1024**2)


@register
class CodingTriplets(Mapper):
    name = "coding_triplets_v1"
    Config = TripletsConfig

    rejects_show_input = False  # the rejects keep the generated tests and candidates

    def transform(self, table: pa.Table) -> tuple[pa.Table, pa.Array, dict[str, int]]:
        out, reasons, _, counters = self.judge(table)
        return out, reasons, counters

    def apply(self, table: pa.Table) -> StageResult:
        """As `Mapper.apply`, with each drop's evidence in `drop_detail` (see `judge`)."""
        out, reasons, found, counters = self.judge(table)
        result = drop_by_reason(self.name, out, reasons, details=evidence(found))
        result.stats.counters.update(counters)
        return result

    def judge(self, table: pa.Table) -> tuple[pa.Table, pa.Array, list[dict | None], dict[str, int]]:
        """(rows with the new columns, reasons, evidence, counters). The evidence of a drop: the backend's
        error; the parsed test count and the minimum; each candidate's parse error; or the best candidate's
        passes and pass rate against the minimum, with its first failing test and the failure."""
        c = self.config
        rows = table.select(["question", "signature", "entry_point"]).to_pylist()
        backend = get_backend(c.backend)
        tp = SamplingParams(max_tokens=c.tests_max_tokens, temperature=c.tests_temperature, seed=c.seed,
                            n=c.test_samples)
        sp = SamplingParams(max_tokens=c.solution_max_tokens, temperature=c.solution_temperature, seed=c.seed,
                            n=c.n_solutions)
        requests = ([TESTS.request(tp, n_tests=c.n_tests, **r) for r in rows]
                    + [SOLUTION.request(sp, **r) for r in rows])
        responses = backend.generate(requests)
        test_resp, sol_resp = responses[:len(rows)], responses[len(rows):]

        # Parse, then run every valid candidate of every question in one pool.
        tests_of, sols_of, reasons, found = [], [], [], []
        for r, tr, sr in zip(rows, test_resp, sol_resp):
            replies = "\n".join(comp.text for comp in tr.completions)
            tests, why = ([], "llm_error") if tr.error or sr.error else \
                parse_tests(replies, entry_point=r["entry_point"], max_tests=c.n_tests)
            parsed = [parse_solution(comp.text, entry_point=r["entry_point"]) for comp in sr.completions]
            sols = [code for code, _ in parsed]
            if why is None and len(tests) < c.min_tests:
                why = "too_few_tests"
            if why is None and not any(sols):
                why = "no_valid_solution"
            found.append({"llm_error": {"error": tr.error or sr.error},
                          "no_valid_tests": {"n_tests": 0, "reply": replies[:120]},
                          "too_few_tests": {"n_tests": len(tests), "min": c.min_tests},
                          "no_valid_solution": {"candidates": [err for _, err in parsed]}}.get(why))
            tests_of.append(tests)
            sols_of.append(sols)
            reasons.append(why)
        jobs = [(q, k) for q, why in enumerate(reasons) if why is None for k, s in enumerate(sols_of[q]) if s]
        counters: Counter = Counter()
        with Sandbox(c.limits(), isolation_level=c.isolation, allow_weak_isolation=c.allow_weak_isolation,
                     max_workers=c.workers) as sandbox:
            isolation = sandbox.level
            results = sandbox.judge_many([{"solution": sols_of[q][k], "tests": tests_of[q],
                                           "entry_points": [rows[q]["entry_point"]],
                                           "timeout_s": c.per_test_seconds} for q, k in jobs])
        counters[f"sandbox_isolation_{isolation}"] = len(rows)
        passes: dict[tuple[int, int], int] = {}
        verdicts: dict[tuple[int, int], str] = {}
        failures: dict[tuple[int, int], tuple] = {}  # each candidate's first failing test and why it failed
        for (q, k), res in zip(jobs, results):
            passes[(q, k)], verdicts[(q, k)] = res.n_passed, res.verdict
            failed = next((t for t in res.tests if not t.passed), None)
            failures[(q, k)] = (failed.source if failed else None, (failed.reason if failed else "") or res.reason)
            counters[f"sandbox_{res.verdict}"] += 1
            counters[f"decided_by_{res.decided_by.replace(' ', '_')}"] += 1   # parent | tests_process
            counters["test_executions"] += res.n_tests
            counters["tests_passed"] += res.n_passed

        cols: dict[str, list] = {f.name: [] for f in NEW_COLUMNS}
        for q, r in enumerate(rows):
            cand = [passes.get((q, k), 0) for k in range(len(sols_of[q]))]
            best = max(range(len(cand)), key=lambda k: (cand[k], bool(sols_of[q][k])), default=None)
            n_tests = len(tests_of[q])
            rate = (cand[best] / n_tests) if best is not None and n_tests else 0.0
            if reasons[q] is None and rate < c.min_pass_rate:
                reasons[q] = "below_threshold"
                test, why = failures.get((q, best), (None, ""))
                found[q] = {"best_passes": cand[best], "n_tests": n_tests, "pass_rate": rate, "min": c.min_pass_rate,
                            "verdict": verdicts.get((q, best)), "failed_test": test[:100] if test else None,
                            "failure": why[:100] or None}
            counters["candidates"] += len(sols_of[q])
            counters["valid_candidates"] += sum(1 for s in sols_of[q] if s)
            cols["tests"].append(tests_of[q])
            cols["solution"].append(sols_of[q][best] if best is not None and sols_of[q][best] else None)
            cols["n_tests"].append(n_tests)
            cols["n_candidates"].append(len(sols_of[q]))
            cols["n_valid_candidates"].append(sum(1 for s in sols_of[q] if s))
            cols["candidate_passes"].append(cand)
            cols["best_passes"].append(cand[best] if best is not None else 0)
            cols["pass_rate"].append(rate)
            cols["best_verdict"].append(verdicts.get((q, best)) if best is not None else None)
            cols["tests_provenance"].append(json.dumps(test_resp[q].provenance(), sort_keys=True))
            cols["solution_provenance"].append(json.dumps(sol_resp[q].provenance(), sort_keys=True))
            cols["sandbox_isolation"].append(isolation)
        out = with_columns(table, {f.name: pa.array(cols[f.name], f.type) for f in NEW_COLUMNS})
        return out, pa.array(reasons, pa.string()), found, dict(counters)
