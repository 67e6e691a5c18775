"""BFCL v4, the Berkeley Function Calling Leaderboard: ``bfcl_single`` and ``bfcl_multi_turn``.

Patil, Mao, Yan, Ji, Suresh, Stoica, Gonzalez. "The Berkeley Function Calling Leaderboard
(BFCL): From Tool Use to Agentic Evaluation of Large Language Models". ICML 2025. Data and
environments: the PyPI package ``bfcl-eval`` 2026.3.23 (Apache-2.0), pinned by sha256. Its wheel
is fetched once into the data cache (``maslab data fetch bfcl``; offline, ``maslab data import
bfcl WHEEL``) and read from there as a zip archive, never installed (:mod:`.wheel`); nothing of
it is copied into maslab.

``bfcl_single`` (``--bench-option category=...``, default ``simple``): each record's question
with its functions as :attr:`Task.tools <maslab.core.task.Task.tools>` (BFCL's docs translated to
JSON schema, :mod:`.schema`); the answer is the calls to make, scored by ``bfcl_ast``.
Categories: ``simple`` (BFCL's simple_python), ``multiple``, ``parallel``,
``parallel_multiple``, ``live_simple``, ``live_multiple``, ``live_parallel``,
``live_parallel_multiple``, ``irrelevance`` and ``live_irrelevance`` (right when no call is
made), ``live_relevance`` (right when at least one call is made: BFCL ships no answer for it).

``bfcl_multi_turn`` (``category``: ``base``, ``long_context``, ``miss_func``, ``miss_param``):
an episode of user turns (:attr:`Task.turns <maslab.core.task.Task.turns>`) against a fresh
:class:`~.environment.BFCLEnvironment` per sample (the benchmark's ``environment`` hook); the
answer is every call made, turn by turn, replayed and scored by ``bfcl_state``. The functions
are all those of the task's classes, as in BFCL's own pipeline (a record's
``excluded_function`` list, unused there, is unused here); miss_func's held-out functions are
offered from the turn the data adds them.

Scoring (the rules and the choices taken where BFCL's leave one): ``maslab.evaluators.bfcl``.
Five live tasks (live_simple 106-63-0 and 112-68-0, live_multiple 507-149-4, 862-181-3 and
964-207-0) cannot be passed by any answer, under BFCL's checker as under ``bfcl_ast``: a
required parameter with no possible value, or a possible answer naming a parameter the function
lacks. They are kept, so that scores stay comparable with BFCL's.

A question of several messages (a system prompt, an earlier exchange: live categories) is
rendered as a transcript, one ``Role: text`` paragraph per message; a single user message is
its text. A multi-turn turn with no message is ``""``.

Left out: ``simple_java`` and ``simple_javascript`` (BFCL asks for every argument as Java or
JavaScript source text and scores it by converting that text with language-specific parsers, a
different answer contract from JSON arguments); ``memory`` and ``web_search`` (agentic
categories needing a memory backend with its embedding models, or live web search: not
offline); ``format_sensitivity`` (a study of prompt formats for prompting models, not a
function-calling test of its own).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from maslab.bench.benchmark import Benchmark, register_benchmark
from maslab.bench.data import Record
from maslab.core.environment import Environment
from maslab.core.task import Task
from maslab.plugin_config import PluginConfig

from .environment import BFCLEnvironment, class_specs
from .schema import function_spec
from .wheel import read_jsonl, wheel_path

SingleCategory = Literal[
    "simple",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
]
MultiTurnCategory = Literal["base", "long_context", "miss_func", "miss_param"]
# category -> (BFCL's file stem, how bfcl_ast checks it)
SINGLE = {
    "simple": ("simple_python", "simple"),
    "multiple": ("multiple", "multiple"),
    "parallel": ("parallel", "parallel"),
    "parallel_multiple": ("parallel_multiple", "parallel"),
    "live_simple": ("live_simple", "simple"),
    "live_multiple": ("live_multiple", "multiple"),
    "live_parallel": ("live_parallel", "parallel"),
    "live_parallel_multiple": ("live_parallel_multiple", "parallel"),
    "irrelevance": ("irrelevance", "irrelevance"),
    "live_irrelevance": ("live_irrelevance", "irrelevance"),
    "live_relevance": ("live_relevance", "relevance"),
}

SINGLE_INSTRUCTION = (
    'Give your final answer as a JSON array of the calls to make, each {"name": ..., '
    '"arguments": {...}}, in order; [] if none of the functions fits the request.'
)
MULTI_TURN_INSTRUCTION = (
    "Carry out each request by calling the functions; when a request cannot be done with them, "
    "or a value it needs is missing, say so instead of calling."
)

__all__ = ["BFCLEnvironment", "BFCLMultiTurn", "BFCLSingle", "render_messages"]


def render_messages(messages: list[dict[str, Any]]) -> str:
    """One turn's messages as the question's text: a lone user message as it is, more as a
    transcript (``System: ...``, ``User: ...``, ``Assistant: ...``); none is ``""``."""
    if len(messages) == 1 and messages[0]["role"] == "user":
        return str(messages[0]["content"])
    return "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages)


def _with_answers(stem: str) -> list[Record]:
    """BFCL's records of ``stem`` with their possible answers (``ground_truth``), if any."""
    records = read_jsonl(f"BFCL_v4_{stem}.json")
    if stem in ("irrelevance", "live_irrelevance", "live_relevance"):
        return records
    answers = {
        row["id"]: row["ground_truth"] for row in read_jsonl(f"possible_answer/BFCL_v4_{stem}.json")
    }
    return [{**record, "ground_truth": answers[record["id"]]} for record in records]


@register_benchmark("bfcl_single")
class BFCLSingle(Benchmark):
    """BFCL v4 single-turn function calling (AST-checked), one category per run."""

    domain = "tools"
    evaluator = "bfcl_ast"
    instruction = SINGLE_INSTRUCTION
    fields = ("id", "question", "function")
    id_field = "id"

    class Config(PluginConfig):
        category: SingleCategory = Field("simple", description="which BFCL v4 category")

    config: Config

    def packaged_records(self, split: str) -> list[Record]:
        return _with_answers(SINGLE[self.config.category][0])

    def packaged_source(self, split: str) -> str:
        return f"BFCL v4 {SINGLE[self.config.category][0]} in {wheel_path()}"

    def to_task(self, record: Record, index: int, split: str) -> Task:
        check = SINGLE[self.config.category][1]
        if check in ("irrelevance", "relevance"):
            gold = "[]" if check == "irrelevance" else "null"
        else:
            gold = json.dumps(record["ground_truth"], ensure_ascii=False)
        return self.task(
            self.task_id(record, index, split),
            render_messages(record["question"][0]),
            gold=gold,
            tools=tuple(function_spec(doc) for doc in record["function"]),
            metadata={"category": self.config.category, "check": check},
        )


@register_benchmark("bfcl_multi_turn")
class BFCLMultiTurn(Benchmark):
    """BFCL v4 multi-turn tool use in executable environments, scored by their end states."""

    domain = "tools"
    evaluator = "bfcl_state"
    instruction = MULTI_TURN_INSTRUCTION
    fields = ("id", "question", "involved_classes", "initial_config")
    id_field = "id"

    class Config(PluginConfig):
        category: MultiTurnCategory = Field("base", description="which BFCL v4 category")

    config: Config

    def packaged_records(self, split: str) -> list[Record]:
        return _with_answers(f"multi_turn_{self.config.category}")

    def packaged_source(self, split: str) -> str:
        return f"BFCL v4 multi_turn_{self.config.category} in {wheel_path()}"

    def to_task(self, record: Record, index: int, split: str) -> Task:
        first, *rest = (render_messages(turn) if turn else "" for turn in record["question"])
        held_out = {
            str(turn): list(names) for turn, names in record.get("missed_function", {}).items()
        }
        late = {name for names in held_out.values() for name in names}
        classes = list(record["involved_classes"])
        tools = [spec for c in classes for spec in class_specs(c) if spec["name"] not in late]
        return self.task(
            self.task_id(record, index, split),
            first,
            gold=json.dumps(record["ground_truth"], ensure_ascii=False),
            turns=tuple(rest),
            tools=tuple(tools),
            metadata={
                "category": self.config.category,
                "classes": classes,
                "initial_config": record["initial_config"],
                "long_context": self.config.category == "long_context",
                "held_out": held_out,
            },
        )

    def environment(self, task: Task) -> Environment:
        return BFCLEnvironment.for_task(task)
