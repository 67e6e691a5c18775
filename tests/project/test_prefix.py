"""Prefix reuse over a sample's prompts (perf/prefix.py, perf-only), on hand-computed cases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "perf"))
from prefix import PrefixReuse, common_prefix, prefix_reuse, reused_prefixes, serialize

SYSTEM = {"role": "system", "content": "Be brief."}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_a_chat_is_serialized_as_role_and_content_lines_in_order():
    assert serialize([SYSTEM, user("2+2?")]) == "system: Be brief.\nuser: 2+2?\n"
    assert serialize([{"role": "assistant", "content": None}]) == "assistant: \n"
    assert serialize([]) == ""


@pytest.mark.parametrize(
    ("a", "b", "n"),
    [("", "", 0), ("abc", "", 0), ("abc", "abd", 2), ("abc", "abcdef", 3), ("xbc", "abc", 0)],
)
def test_common_prefix(a, b, n):
    assert common_prefix(a, b) == n == common_prefix(b, a)


def test_each_prompt_reuses_its_longest_prefix_with_any_earlier_prompt():
    # "abcd" shares 3 with "abcx" (not 2 with "abzz"); the first prompt reuses nothing, a repeat
    # reuses itself whole, and a prompt is never compared with a later one
    assert reused_prefixes(["abzz", "abcx", "abcd", "abcd", "q", "abzq"]) == [0, 2, 3, 4, 0, 3]


def test_reuse_of_a_growing_conversation():
    first = [SYSTEM, user("Q")]  # "system: Be brief.\nuser: Q\n": 26 characters
    second = [*first, {"role": "assistant", "content": "A"}, user("Again")]  # 26 + 13 + 12
    other = [{"role": "system", "content": "Be long."}, user("Q")]  # shares "system: Be "
    reuse = prefix_reuse([first, second, other])
    assert reuse == PrefixReuse(requests=3, chars=26 + 51 + 25, reused_chars=26 + 11)
    assert reuse.share == pytest.approx(37 / 102)


def test_tokens_are_counted_when_asked_and_totals_add_up():
    words = prefix_reuse([[user("one two")], [user("one two three")]], lambda s: len(s.split()))
    # "user: one two\n" is 3 words, the second prompt 4; they share "user: one two" (13, 3 words)
    assert (words.tokens, words.reused_tokens, words.token_share) == (7, 3, 3 / 7)
    total = words + PrefixReuse(1, 10, 5)
    assert (total.requests, total.chars, total.reused_chars, total.tokens) == (3, 44, 13 + 5, 7)
    assert PrefixReuse(0, 0, 0).share == 0.0 == PrefixReuse(0, 0, 0).token_share
