"""Parsers of model replies: what is kept from real-looking SmolLM2 output, and the drop reasons."""

from __future__ import annotations

from synth.coding.prompts import QUESTION, SOLUTION, TESTS, clean_question, parse_solution, parse_tests
from synth.backends import SamplingParams


def test_templates_are_versioned_and_render_their_fields():
    req = SOLUTION.request(SamplingParams(), question="Q?", signature="f(x: int) -> int", entry_point="f")
    assert (req.template_id, req.template_version) == ("coding_solution", "v1")
    assert "`f(x: int) -> int`" in req.messages[-1]["content"] and req.messages[0]["role"] == "system"
    assert {QUESTION.id, TESTS.id, SOLUTION.id} == {"coding_question", "coding_tests", "coding_solution"}


def test_question_is_cut_before_code_and_solution_and_names_the_function():
    reply = ("Question: Given a list of numbers, return the largest one. For [3, 9, 2] return 9.\n\n"
             "Solution:\n```python\ndef max_of_list(nums):\n    return max(nums)\n```")
    q, why = clean_question(reply, signature="max_of_list(nums: list[int]) -> int", entry_point="max_of_list")
    assert why is None
    assert q == ("Given a list of numbers, return the largest one. For [3, 9, 2] return 9.\n\n"
                 "Implement `max_of_list(nums: list[int]) -> int`.")
    assert clean_question("Output:\n```python\ndef f(): pass\n```", signature="f()", entry_point="f") == \
        (None, "question_too_short")


def test_solution_needs_code_that_parses_and_defines_the_entry_point():
    ok = "Sure!\n```python\nimport math\n\ndef area(r):\n    return math.pi * r * r\n```\nDone."
    assert parse_solution(ok, entry_point="area") == ("import math\n\ndef area(r):\n    return math.pi * r * r", None)
    assert parse_solution("```python\ndef area(r:\n```", entry_point="area") == (None, "syntax_error")
    assert parse_solution("```python\ndef other(r):\n    return r\n```", entry_point="area") == \
        (None, "entry_point_missing")
    assert parse_solution("I cannot do that.", entry_point="area") == (None, "no_code")
    # A reply cut by max_tokens inside its code block still yields the code written so far.
    assert parse_solution("```python\ndef area(r):\n    return r * r\n", entry_point="area")[1] is None


def test_tests_keep_valid_asserts_and_drop_contradictions():
    reply = ("```python\ndef is_palindrome(s):\n    return s == s[::-1]\n\n"
             "assert is_palindrome('aba') == True\n"
             "assert is_palindrome('Able') == False\n"
             "assert is_palindrome('Able') == True\n"       # contradicts the line above: both go
             "assert is_palindrome('x')\n"
             "assert is_palindrome('aba') == True\n"        # duplicate
             "assert other('x') == 1\n"                     # does not call the entry point
             "assert is_palindrome('abc' == False\n"       # does not parse
             "```\nMore tests:\n```python\n"
             "def helper(s):\n    assert is_palindrome(s) == True\n"   # free name `s`: NameError
             "    assert is_palindrome('abba') == True\n"   # indented but self-contained: kept
             "assert is_palindrome('ab') == is_palindrome('ab')\n"    # checks nothing
             "assert is_palindrome('') == True\n```")      # a second code block counts too
    tests, why = parse_tests(reply, entry_point="is_palindrome", max_tests=5)
    assert why is None and tests == ["assert is_palindrome('aba') == True", "assert is_palindrome('x')",
                                     "assert is_palindrome('abba') == True", "assert is_palindrome('') == True"]
    assert parse_tests("no code here", entry_point="f", max_tests=3) == ([], "no_valid_tests")
