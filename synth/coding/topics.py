"""The 71 seed programming topics for interview-style questions (our own list).

Each topic names the function the question must ask for, with its signature: the question, the
tests and the candidate solutions are all generated against that one entry point, so a test can
call a solution without guessing names.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

# (topic, signature)
TOPICS: list[tuple[str, str]] = [
    ("reversing a string", "reverse_string(s: str) -> str"),
    ("checking whether a string is a palindrome", "is_palindrome(s: str) -> bool"),
    ("counting vowels in a string", "count_vowels(s: str) -> int"),
    ("finding the largest number in a list", "max_of_list(nums: list[int]) -> int"),
    ("summing the even numbers of a list", "sum_evens(nums: list[int]) -> int"),
    ("computing a factorial", "factorial(n: int) -> int"),
    ("the n-th Fibonacci number", "fibonacci(n: int) -> int"),
    ("testing whether a number is prime", "is_prime(n: int) -> bool"),
    ("greatest common divisor", "gcd(a: int, b: int) -> int"),
    ("least common multiple", "lcm(a: int, b: int) -> int"),
    ("removing duplicates from a list while keeping order", "dedupe(items: list[int]) -> list[int]"),
    ("counting word frequencies", "word_counts(text: str) -> dict[str, int]"),
    ("checking whether two strings are anagrams", "are_anagrams(a: str, b: str) -> bool"),
    ("binary search in a sorted list", "binary_search(nums: list[int], target: int) -> int"),
    ("merging two sorted lists", "merge_sorted(a: list[int], b: list[int]) -> list[int]"),
    ("flattening a nested list", "flatten(nested: list) -> list"),
    ("rotating a list by k positions", "rotate_list(nums: list[int], k: int) -> list[int]"),
    ("finding the second largest distinct number", "second_largest(nums: list[int]) -> int"),
    ("balanced parentheses", "is_balanced(s: str) -> bool"),
    ("converting a decimal number to binary", "to_binary(n: int) -> str"),
    ("summing the digits of a number", "digit_sum(n: int) -> int"),
    ("reversing the digits of an integer", "reverse_digits(n: int) -> int"),
    ("two numbers that add up to a target", "two_sum(nums: list[int], target: int) -> list[int]"),
    ("the longest common prefix of strings", "common_prefix(words: list[str]) -> str"),
    ("capitalizing every word", "title_case(s: str) -> str"),
    ("run-length encoding a string", "run_length_encode(s: str) -> str"),
    ("counting occurrences of a character", "count_char(s: str, c: str) -> int"),
    ("the length of the last word in a sentence", "last_word_length(s: str) -> int"),
    ("matrix transpose", "transpose(matrix: list[list[int]]) -> list[list[int]]"),
    ("the sum of a matrix's diagonal", "diagonal_sum(matrix: list[list[int]]) -> int"),
    ("Roman numeral to integer", "roman_to_int(s: str) -> int"),
    ("integer to Roman numeral", "int_to_roman(n: int) -> str"),
    ("checking for a leap year", "is_leap_year(year: int) -> bool"),
    ("Celsius to Fahrenheit conversion", "celsius_to_fahrenheit(c: float) -> float"),
    ("the missing number in 0..n", "missing_number(nums: list[int]) -> int"),
    ("moving zeros to the end of a list", "move_zeros(nums: list[int]) -> list[int]"),
    ("the intersection of two lists", "intersection(a: list[int], b: list[int]) -> list[int]"),
    ("the maximum subarray sum", "max_subarray_sum(nums: list[int]) -> int"),
    ("counting set bits in an integer", "count_bits(n: int) -> int"),
    ("checking whether a number is a power of two", "is_power_of_two(n: int) -> bool"),
    ("FizzBuzz", "fizzbuzz(n: int) -> list[str]"),
    ("the first non-repeating character", "first_unique_char(s: str) -> str"),
    ("chunking a list into groups of size k", "chunk(items: list[int], k: int) -> list[list[int]]"),
    ("the running (prefix) sum of a list", "running_sum(nums: list[int]) -> list[int]"),
    ("the product of a list except each index", "product_except_self(nums: list[int]) -> list[int]"),
    ("finding the mode of a list", "mode(nums: list[int]) -> int"),
    ("the median of a list", "median(nums: list[float]) -> float"),
    ("the average of a list", "average(nums: list[float]) -> float"),
    ("checking whether a list is sorted", "is_sorted(nums: list[int]) -> bool"),
    ("counting words in a sentence", "word_count(s: str) -> int"),
    ("removing whitespace from a string", "strip_spaces(s: str) -> str"),
    ("Caesar cipher encryption", "caesar_encrypt(s: str, shift: int) -> str"),
    ("the number of days in a month", "days_in_month(year: int, month: int) -> int"),
    ("the n-th triangular number", "triangular(n: int) -> int"),
    ("checking for an Armstrong number", "is_armstrong(n: int) -> bool"),
    ("checking for a perfect number", "is_perfect(n: int) -> bool"),
    ("the prime factors of a number", "prime_factors(n: int) -> list[int]"),
    ("all primes below n", "primes_below(n: int) -> list[int]"),
    ("Pascal's triangle row", "pascal_row(n: int) -> list[int]"),
    ("the longest word in a sentence", "longest_word(s: str) -> str"),
    ("reversing the order of words", "reverse_words(s: str) -> str"),
    ("grouping anagrams", "group_anagrams(words: list[str]) -> list[list[str]]"),
    ("the index of the first occurrence of a substring", "find_substring(s: str, sub: str) -> int"),
    ("the Hamming distance between two strings", "hamming_distance(a: str, b: str) -> int"),
    ("climbing stairs with 1 or 2 steps", "climb_stairs(n: int) -> int"),
    ("the minimum number of coins for an amount", "min_coins(coins: list[int], amount: int) -> int"),
    ("the longest increasing subsequence length", "lis_length(nums: list[int]) -> int"),
    ("the edit distance between two strings", "edit_distance(a: str, b: str) -> int"),
    ("checking whether a string has all unique characters", "all_unique(s: str) -> bool"),
    ("converting snake_case to camelCase", "snake_to_camel(s: str) -> str"),
    ("the dot product of two vectors", "dot_product(a: list[float], b: list[float]) -> float"),
]
assert len(TOPICS) == 71, len(TOPICS)


def entry_point(signature: str) -> str:
    return signature.split("(", 1)[0].strip()


def topics_table(limit: int | None = None) -> pa.Table:
    """The seed table: id, source, topic, signature, entry_point."""
    rows = TOPICS[:limit] if limit else TOPICS
    return pa.table({
        "id": [hashlib.sha1(f"coding-topic:{t}".encode()).hexdigest()[:16] for t, _ in rows],
        "source": ["synth/coding/topics.py"] * len(rows),
        "topic": [t for t, _ in rows],
        "signature": [s for _, s in rows],
        "entry_point": [entry_point(s) for _, s in rows],
    })
