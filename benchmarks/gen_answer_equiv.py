"""Math answer equivalence: ours (synth.math.answers) vs the peer most pipelines start from, exact
string match after stripping spaces and `$`, on the 500 real MATH-500 problems: each solution's
\\boxed{} answer against the dataset's `answer` field (all 500 pairs are equal by construction),
plus 500 reformatted copies and 2,000 pairs of different problems' answers (mostly unequal).
Prints agreement with the truth and pairs/s for both, and the ratios."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.math.answers import answers_equal, last_boxed, normalize  # noqa: E402
from evals.shared import shared_root as shared_data  # noqa: E402


def naive_equal(a: str, b: str) -> bool:
    return a.replace(" ", "").strip("$") == b.replace(" ", "").strip("$")


def main() -> None:
    rows = [json.loads(x) for x in (shared_data() / "benchmarks/math_eval_harness/math_oai/test.jsonl").open()]
    pairs = [(last_boxed(r["solution"]), r["answer"], True) for r in rows]
    pairs += [("$" + r["answer"].replace("\\frac", "\\dfrac") + "$", r["answer"], True) for r in rows]
    rng = random.Random(0)
    answers = [r["answer"] for r in rows]
    for _ in range(2000):
        a, b = rng.sample(answers, 2)
        pairs.append((a, b, normalize(a) == normalize(b)))  # truth for unrelated pairs: same normalised text
    for name, fn in (("ours", answers_equal), ("peer: exact match", naive_equal)):
        start = time.perf_counter()
        got = [fn(a, b) for a, b, _ in pairs]
        dt = time.perf_counter() - start
        eq = [g for g, (_, _, t) in zip(got, pairs) if t]
        ne = [g for g, (_, _, t) in zip(got, pairs) if not t]
        print(f"{name:18s} equal pairs recognised {sum(eq) / len(eq):.3f}  unequal kept apart "
              f"{1 - sum(ne) / len(ne):.3f}  {len(pairs) / dt:,.0f} pairs/s")
        if name == "ours":
            ours = (sum(eq) / len(eq), len(pairs) / dt)
        else:
            print(f"ratio ours/peer: recall x{ours[0] / (sum(eq) / len(eq)):.2f}, speed x{ours[1] / (len(pairs) / dt):.3f}")


if __name__ == "__main__":
    main()
