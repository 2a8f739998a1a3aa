"""Tool-call validation throughput: ours (synth.tools.validate: schema converted once, compiled
validator cached per tool) vs the peer, `jsonschema.validate` called per call (what a script does
by default), on the real BFCL v4 ground-truth calls. Both give the same verdicts; prints calls/s
and the ratio."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jsonschema  # noqa: E402

from evals.data.toolcall import CATEGORIES, load_bfcl  # noqa: E402
from evals.shared import shared_root as shared_data  # noqa: E402
from synth.tools.ast_check import first_choice  # noqa: E402
from synth.tools.schema import arguments_schema  # noqa: E402
from synth.tools.validate import validate_call  # noqa: E402


def peer_valid(call: dict, functions: list[dict]) -> bool:
    tool = next((f for f in functions if f["name"] == call["name"]), None)
    if tool is None:
        return False
    try:
        jsonschema.validate(call["arguments"], arguments_schema(tool))
        return True
    except jsonschema.ValidationError:
        return False


def main() -> None:
    folder = shared_data() / "function_calling" / "bfcl_v4"
    items = [(first_choice(t), fns) for c in CATEGORIES for fns, truths in load_bfcl(folder, c) for t in truths]
    items = items * 3
    start = time.perf_counter()
    ours = [validate_call(c, f) is None for c, f in items]
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    peer = [peer_valid(c, f) for c, f in items]
    t_peer = time.perf_counter() - start
    assert ours == peer, "verdicts differ"
    print(f"calls: {len(items)} (BFCL v4 ground truths x3), valid {sum(ours)}")
    print(f"ours  {len(items) / t_ours:10,.0f} calls/s")
    print(f"peer  {len(items) / t_peer:10,.0f} calls/s  (jsonschema.validate per call)")
    print(f"ratio ours/peer: x{t_peer / t_ours:.1f}")


if __name__ == "__main__":
    main()
