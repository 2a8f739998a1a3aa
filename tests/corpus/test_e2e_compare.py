"""The end-to-end comparison (benchmarks/e2e_compare.py) names a drop of ours by the stage's family and the
reason its rejects give, whatever the stage's version, so a new safety or PII version needs no new rule."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from e2e_compare import our_only_rule  # noqa: E402


def test_any_version_of_a_known_stage_is_named_by_its_reason_and_category():
    detail = json.dumps({"reason": "model_harassment", "score": 0.93, "category": "harassment", "host": "a.example"})
    assert our_only_rule("web_safety_filter_v3", "model_harassment", detail) == (
        "ours web_safety_filter_v3 (model_harassment; category=harassment): FineWeb's pipeline has no safety filter")
    assert our_only_rule("web_safety_filter_v7", "safety:self_harm", "") == (
        "ours web_safety_filter_v7 (safety:self_harm): FineWeb's pipeline has no safety filter")
    assert "unexplained" not in our_only_rule("pii_v9", "card", "not json")


def test_a_stage_without_a_named_rule_is_unexplained():
    assert our_only_rule("some_new_filter_v1", "too_blue", "{}") == "ours some_new_filter_v1 (too_blue) (unexplained)"
