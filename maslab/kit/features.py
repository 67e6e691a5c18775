"""Cheap features of a query for the policies that learned methods condition on (graph_grpo's
edge policy, g_designer's graph generator, masrouter's cascade): deterministic, from the task
alone, no model and nothing downloaded, each in [0, 1]; they stand in for the sentence
embeddings of the papers.

:data:`QUERY_FEATURES` in order: the question shorter than 200 characters, longer than 600
(flags), how many numbers it holds (/ 10, at most 1), a code flag (a code task, or code words),
a multiple-choice flag (a choice task, or options); then, with ``hashed_words`` = k, k shares of
its lower-case words by bucket (CRC-32 of the word modulo k: the same on every machine and run,
unlike Python's salted ``hash``).
"""

from __future__ import annotations

import re
import zlib

from maslab.core.task import Task

QUERY_FEATURES = ("short", "long", "numbers", "code", "choice")
SHORT, LONG = 200, 600  # question length buckets, in characters
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CODE = re.compile(r"\bdef |\breturn\b|```|\bfunction\b|\bpython\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


def query_features(task: Task, hashed_words: int = 0) -> tuple[float, ...]:
    """The features of ``task``'s question (see the module): 5 + ``hashed_words`` numbers."""
    text = task.question
    base = (
        float(len(text) < SHORT),
        float(len(text) > LONG),
        min(len(_NUMBER.findall(text)) / 10, 1.0),
        float(task.answer_type == "code" or bool(_CODE.search(text))),
        float(task.answer_type == "choice" or bool(task.choices)),
    )
    if not hashed_words:
        return base
    words = _WORD.findall(text.lower())
    buckets = [0] * hashed_words
    for word in words:
        buckets[zlib.crc32(word.encode()) % hashed_words] += 1
    return (*base, *(count / max(len(words), 1) for count in buckets))
