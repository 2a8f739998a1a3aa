"""Bad seed files end in one RecordError naming the file, the record and the reason (not a TypeError or a raw
JSON traceback from the error path itself)."""

from __future__ import annotations

import pytest

from manifests.errors import RecordError
from synth.math.seeds import load_gsm8k, load_math_format
from synth.tools.schema import parse_tools
from synth.tools.seeds import load_glaive


def test_math_seed_files(tmp_path):
    gsm = tmp_path / "train.jsonl"
    gsm.write_text('{"question": "1+1?", "answer": "2\\n#### 2"}\n{"question": "q", "answer": "no final"}\n')
    with pytest.raises(RecordError, match=r"train.jsonl \[line 2\]: GSM8K answer has no '#### N' final line"):
        load_gsm8k(gsm)
    gsm.write_text('{"question": "1+1?", "answer": "2\\n#### 2"}\n{"question": \n')
    with pytest.raises(RecordError, match=r"train.jsonl \[line 2\]: not JSON"):
        load_gsm8k(gsm)
    gsm.write_text('{"question": 3, "answer": "#### 2"}\n')
    with pytest.raises(RecordError, match=r"\[line 1\]: needs string fields question, answer"):
        load_gsm8k(gsm)
    math = tmp_path / "math.jsonl"
    math.write_text('{"problem": "p", "solution": "no box"}\n')
    with pytest.raises(RecordError, match=r"math.jsonl \[line 1\]: solution has no \\boxed\{\} final answer"):
        load_math_format(math)


def test_tool_seed_files(tmp_path):
    bad = tmp_path / "glaive.json"
    bad.write_text("[{")
    with pytest.raises(RecordError, match=r"glaive.json \[-\]: not a JSON list of dialogues"):
        load_glaive(bad)
    bad.write_text('[{"tools": "[]"}]')
    with pytest.raises(RecordError, match=r"glaive.json \[record 0\]: no `conversations`"):
        load_glaive(bad)
    with pytest.raises(RecordError, match=r"row 3 \[tools\]: not valid JSON"):
        parse_tools("[{", where="row 3")
    with pytest.raises(RecordError, match=r"row 3 \[tools\]: a tool without a name"):
        parse_tools([{"description": "x"}], where="row 3")
