"""Query features (:mod:`maslab.kit.features`), by hand: what graph_grpo, g_designer and
masrouter condition their policies on."""

from __future__ import annotations

import pytest

from maslab.core.task import Task
from maslab.kit.features import QUERY_FEATURES, query_features

TASK = Task(id="t", question="What is 6 * 7?")


def test_the_five_base_features_by_hand():
    assert QUERY_FEATURES == ("short", "long", "numbers", "code", "choice")
    assert query_features(TASK) == (1.0, 0.0, 0.2, 0.0, 0.0)
    long = Task(id="l", question="x" * 700 + " 1 2 3 4 5 6 7 8 9 10 11 12.5")
    assert query_features(long) == (0.0, 1.0, 1.0, 0.0, 0.0)
    code = Task(id="c", question="def f(x):\n    return x" + " " * 300, answer_type="code")
    assert query_features(code) == (0.0, 0.0, 0.0, 1.0, 0.0)
    marked = Task(id="k", question="Write a python function that doubles x.")
    assert query_features(marked)[3] == 1.0  # code words, whatever the answer type
    choice = Task(id="m", question="Which is red?", choices=("sky", "blood"), answer_type="choice")
    assert query_features(choice)[3:] == (0.0, 1.0)


def test_hashed_words_are_shares_by_crc32_bucket_the_same_on_every_run():
    words = query_features(Task(id="w", question="apple apple pear"), 8)[5:]
    assert len(words) == 8 and sum(words) == pytest.approx(1.0)
    assert sorted(words)[-2:] == pytest.approx([1 / 3, 2 / 3])  # pear, apple
    # CRC-32, not Python's salted hash(): these buckets are fixed on every machine and run
    assert words[0] == pytest.approx(2 / 3) and words[5] == pytest.approx(1 / 3)
    assert query_features(Task(id="e", question=""), 3) == (1.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0)
