"""`names.parse_source`: ast.parse serialised, with one retry on CPython 3.11's spurious AST depth SystemError."""

import ast

import pytest

from synth.sandbox import names


def test_parse_source_retries_the_spurious_depth_error_once(monkeypatch):
    real, calls = ast.parse, []

    def flaky(source, mode="exec"):
        calls.append(source)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=135, after=32)")
        return real(source, mode=mode)

    monkeypatch.setattr(ast, "parse", flaky)
    tree = names.parse_source("assert f(1) == 2")
    assert isinstance(tree.body[0], ast.Assert) and calls == ["assert f(1) == 2"] * 2


def test_parse_source_passes_other_errors_through(monkeypatch):
    with pytest.raises(SyntaxError):
        names.parse_source("def (")
    assert names.parse("def (").body == []  # the lenient reader keeps its empty module
    monkeypatch.setattr(ast, "parse", lambda source, mode="exec": (_ for _ in ()).throw(SystemError("other")))
    with pytest.raises(SystemError, match="other"):
        names.parse_source("x = 1")
    monkeypatch.undo()
    assert isinstance(names.parse_source("1 + 2", mode="eval"), ast.Expression)
