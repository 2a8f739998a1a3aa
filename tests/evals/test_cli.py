"""The eval CLI builds with every evaluation module registered (a helper module in evals/data without NAME
once broke every `cidermill` command)."""

from __future__ import annotations

import pytest

from manifests.main import main


@pytest.mark.parametrize("argv", [["eval", "data", "entailment", "--help"], ["eval", "data", "safety", "--help"],
                                  ["eval", "data", "entailment_style", "--help"],
                                  ["eval", "model", "--help"]])
def test_eval_commands_parse(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "usage: cidermill eval" in capsys.readouterr().out
