"""Benchmarks: the :class:`Benchmark` base, its answer-type bases and its registry.

A benchmark names its tasks' source (a Hub dataset, a packaged file, a generator), turns each
raw record into a :class:`Task` with a normalised gold answer, and names its default
evaluator. Where the records come from, and how they are checked, is :mod:`maslab.bench.data`.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar

from maslab import defaults
from maslab.bench.data import (
    HubSource,
    Record,
    check_fields,
    dataset_hash,
    make_tasks,
    resolve_source,
)
from maslab.core.answers import AnswerType, normalize_answer
from maslab.core.context import derive_seed
from maslab.core.environment import Environment
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.plugin_config import PluginConfig, Settings
from maslab.registry import Registry

LETTERS = string.ascii_uppercase
# Options whose meaning depends on where the other options are.
_ABOVE = re.compile(
    r"\b(?:all|none|any|each|neither|both) of (?:the )?(?:above|following|these|options|choices)\b",
    re.IGNORECASE,
)
_LETTER_REFERENCE = re.compile(
    r"(?<!\w)\(?[A-J]\)?\s*(?:,|&|and|or|nor)\s*\(?[A-J]\)?(?!\w)"  # "A and B", "(A), (C)"
    r"|(?i:\b(?:both|either|neither)\s+\(?[a-j]\)?\s*(?:,|&|and|or|nor)\s*\(?[a-j]\)?(?!\w))"
    r"|(?i:^\W*[a-j]\W*(?:(?:,|&|and|or)\W*[a-j]\W*)+$)"  # an option that is only "a and c"
)

# One answer-format instruction per answer type, shown to every method alike.
NUMBER_INSTRUCTION = "Give your final answer as a number in the form \\boxed{N}."
MATH_INSTRUCTION = "Give your final answer in simplest exact form as \\boxed{ANSWER}."
CHOICE_INSTRUCTION = "Give your final answer as the letter of one option in the form \\boxed{X}."
CODE_INSTRUCTION = (
    "Give your final answer as one complete Python program, with its imports and the full "
    "function definition, in a single ```python code block."
)

__all__ = [
    "CHOICE_INSTRUCTION",
    "CODE_INSTRUCTION",
    "LETTERS",
    "MATH_INSTRUCTION",
    "NUMBER_INSTRUCTION",
    "Benchmark",
    "ChoiceBenchmark",
    "CodeBenchmark",
    "HubSource",
    "MathBenchmark",
    "NumberBenchmark",
    "answer_index",
    "choice_order",
    "get_benchmark",
    "list_benchmarks",
    "number_gold",
    "register_benchmark",
]


class Benchmark:
    r"""A named set of tasks and how to score them.

    A subclass registers under a name, sets the class variables (``domain``, ``answer_type``,
    ``instruction``: the one answer-format sentence every method is shown, ``evaluator``: the
    default scorer, ``fields``: what each raw record must hold, ``splits``) and implements
    :meth:`to_task`, which turns one raw record into a :class:`Task` with a normalised gold
    (:func:`number_gold`; :meth:`choice_task` letters and shuffles the options). The bases
    :class:`NumberBenchmark`, :class:`MathBenchmark`, :class:`ChoiceBenchmark` and
    :class:`CodeBenchmark` set the answer type, instruction and evaluator for their kind of
    answer. The data comes from a file the user names, the user cache, the benchmark's own
    :meth:`packaged_records` or its Hugging Face ``hub`` (:mod:`maslab.bench.data`).

    A benchmark with options (a generator's size, difficulty, seed) declares them as its
    ``Config``, a :class:`~maslab.plugin_config.PluginConfig` with a default and a description
    for each; the constructor takes a mapping, a ``Config`` or keywords (``Arith(difficulty=4)``,
    ``--bench-option difficulty=4``), checks them and keeps them as ``self.config``; a bad one is
    a one-line :class:`ConfigError`. The run's manifest records them all, defaults included, as
    ``benchmark_options`` (``self.options``). A run-time handle is no option: see
    :class:`~maslab.plugin_config.PluginConfig`.

    Example::

        from typing import Any

        from pydantic import Field

        from maslab import Benchmark, Task
        from maslab.bench.benchmark import register_benchmark
        from maslab.plugin_config import PluginConfig


        @register_benchmark("capitals")
        class Capitals(Benchmark):
            domain = "knowledge"
            evaluator = "exact"  # the default scorer; a run may name another
            instruction = "Give your final answer as one word in the form \\boxed{ANSWER}."
            fields = ("country", "capital")  # a record without one is a one-line error
            # on the Hub instead: hub = HubSource("org/capitals", splits={"test": "train"})

            class Config(PluginConfig):  # --bench-option lowercase=true; unknown keys are errors
                lowercase: bool = Field(False, description="gold answers in lower case")

            config: Config

            def packaged_records(self, split: str) -> list[dict[str, Any]]:  # split: one of splits
                return [
                    {"country": "France", "capital": "Paris"},
                    {"country": "Peru", "capital": "Lima"},
                ]

            def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
                task_id = self.task_id(record, index, split)  # test-0, test-1, ...
                question = f"What is the capital of {record['country']}?"
                gold = record["capital"].lower() if self.config.lowercase else record["capital"]
                return self.task(task_id, question, gold=gold)


        tasks = Capitals().load(limit=1)  # load(data="capitals.jsonl") reads a local file first
        assert [(t.id, t.gold) for t in tasks] == [("test-0", "Paris")]
        assert Capitals(lowercase=True).load(limit=1)[0].gold == "paris"
        assert tasks[0].prompt().endswith("in the form \\boxed{ANSWER}.")
    """

    name: ClassVar[str] = ""
    domain: ClassVar[str] = ""  # math, science, knowledge, medicine, code, reasoning, fairness
    answer_type: ClassVar[AnswerType] = "text"
    evaluator: ClassVar[str] = "exact"
    instruction: ClassVar[str] = ""
    splits: ClassVar[tuple[str, ...]] = (defaults.SPLIT,)  # default: the keys of ``hub.splits``
    fields: ClassVar[tuple[str, ...]] = ()
    id_field: ClassVar[str | None] = None  # the dataset's own id, if it has one
    hub: ClassVar[HubSource | None] = None
    shuffle_choices: ClassVar[bool] = False
    Config: ClassVar[type[PluginConfig]] = PluginConfig
    config: PluginConfig
    """The checked options, a ``Config``: a benchmark narrows the type with ``config: Config``."""
    options: dict[str, Any]
    """The options as JSON data (``config`` dumped): what the run's manifest records."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hub is not None and "splits" not in cls.__dict__:
            cls.splits = tuple(cls.hub.splits)

    def __init__(self, config: Settings = None, **options: Any) -> None:
        """Check the options against ``Config``; a bad one is a one-line :class:`ConfigError`.

        Args:
            config: Options as a mapping or a ``Config``; None keeps the defaults.
            **options: Options as keywords, over ``config``.
        """
        what = f"{self.name or type(self).__name__} options"
        self.config = self.Config.build(config, options, what=what, example=type(self).__name__)
        self.options = self.config.model_dump(mode="json")

    # -- per benchmark ---------------------------------------------------------------------------

    def to_task(self, record: Record, index: int, split: str) -> Task:
        """The task for one raw record (``index`` is its position in the source)."""
        raise NotImplementedError

    def keep(self, record: Record) -> bool:
        """False for records the benchmark leaves out (say, multi-answer items)."""
        return True

    def environment(self, task: Task) -> Environment | None:
        """A fresh environment for one sample of ``task`` (its functions bound to their own
        state), or None: the task needs none (most benchmarks)."""
        return None

    def packaged_records(self, split: str) -> list[Record] | None:
        """Records shipped with or generated by the benchmark; None if it has none."""
        return None

    def packaged_source(self, split: str) -> str:
        return f"packaged {self.name} {split} data"

    # -- loading ---------------------------------------------------------------------------------

    def load(
        self,
        split: str = defaults.SPLIT,
        *,
        limit: int | None = None,
        seed: int | None = None,
        data: str | Path | None = None,
    ) -> list[Task]:
        """The tasks of ``split``, read from the first source that has it
        (:mod:`maslab.bench.data`).

        Args:
            split: Which split.
            limit: Keep the first ``limit`` tasks (after shuffling); None keeps all.
            seed: Shuffle the tasks with this seed first; None keeps the source order.
                Ids are fixed before shuffling, so a task keeps its id in every order.
            data: A local file to read instead (.json, .jsonl, .jsonl.gz, .parquet).
        """
        if limit is not None and limit < 0:
            raise ConfigError(f"limit must be 0 or more, got {limit}")
        where, read = resolve_source(self, split, data)
        tasks = make_tasks(self, check_fields(self, read(), where), split, where)
        if seed is not None:
            random.Random(seed).shuffle(tasks)
        return tasks if limit is None else tasks[:limit]

    def records(self, split: str = defaults.SPLIT, data: str | Path | None = None) -> list[Record]:
        """Raw records of ``split`` from the resolved source, checked for required fields."""
        where, read = resolve_source(self, split, data)
        return check_fields(self, read(), where)

    def source(self, split: str = defaults.SPLIT, data: str | Path | None = None) -> str:
        """Where the data of ``split`` comes from, for people (a path, a package, the Hub)."""
        return resolve_source(self, split, data)[0]

    dataset_hash = staticmethod(dataset_hash)  # what the run manifest records

    # -- helpers for loaders ---------------------------------------------------------------------

    def task_id(self, record: Record, index: int, split: str) -> str:
        """The dataset's own id when it has one, else ``<split>-<index>``."""
        own = record.get(self.id_field) if self.id_field else None
        return str(own).strip() if own not in (None, "") else f"{split}-{index}"

    def task(self, task_id: str, question: str, gold: str | None, **fields: Any) -> Task:
        """A task with this benchmark's answer type and instruction (``fields`` may override)."""
        base = {"answer_type": self.answer_type, "instruction": self.instruction}
        return Task(id=task_id, question=question.strip(), gold=gold, **{**base, **fields})

    def choice_task(
        self,
        task_id: str,
        question: str,
        options: Sequence[Any],
        answer: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> Task:
        """A multiple-choice task whose gold is the letter of ``options[answer]``.

        With ``shuffle_choices`` the options are put in an order drawn from the benchmark name
        and task id, so every run, method and machine sees the same order (see
        :func:`choice_order` for options that refer to other options).

        Args:
            task_id: The task's id (:meth:`task_id`).
            question: The question, without the options.
            options: The option texts in the source's order.
            answer: The position of the correct option in ``options``.
            metadata: Kept on the task, with the source's letter as ``source_answer``.
        """
        if not 0 <= answer < len(options) <= len(LETTERS):
            raise ValueError(f"answer {answer} is not one of {len(options)} options")
        texts = [str(option).strip() for option in options]
        order = list(range(len(texts)))
        if self.shuffle_choices:
            order = choice_order(texts, random.Random(derive_seed("choices", self.name, task_id)))
        return self.task(
            task_id,
            question,
            LETTERS[order.index(answer)],
            choices=tuple(texts[i] for i in order),
            metadata={**(metadata or {}), "source_answer": LETTERS[answer]},
        )


class NumberBenchmark(Benchmark):
    """Answers are single numbers, scored numerically.

    By default the question is ``fields[0]`` and the gold is the number in ``fields[1]``.
    """

    answer_type: ClassVar[AnswerType] = "number"
    evaluator: ClassVar[str] = "numeric"
    instruction: ClassVar[str] = NUMBER_INSTRUCTION

    def to_task(self, record: Record, index: int, split: str) -> Task:
        question, gold = self.fields[:2]
        return self.task(
            self.task_id(record, index, split), record[question], number_gold(record[gold])
        )


class MathBenchmark(Benchmark):
    """Answers are mathematical expressions, scored for equivalence."""

    domain: ClassVar[str] = "math"
    answer_type: ClassVar[AnswerType] = "math"
    evaluator: ClassVar[str] = "math"
    instruction: ClassVar[str] = MATH_INSTRUCTION


class ChoiceBenchmark(Benchmark):
    """Multiple choice: options lettered A, B, ... in a per-task shuffled order."""

    answer_type: ClassVar[AnswerType] = "choice"
    evaluator: ClassVar[str] = "choice"
    instruction: ClassVar[str] = CHOICE_INSTRUCTION
    shuffle_choices: ClassVar[bool] = True


class CodeBenchmark(Benchmark):
    """Answers are Python programs, scored by running the task's tests."""

    domain: ClassVar[str] = "code"
    answer_type: ClassVar[AnswerType] = "code"
    evaluator: ClassVar[str] = "code"
    instruction: ClassVar[str] = CODE_INSTRUCTION


# -- value helpers ---------------------------------------------------------------------------------


def number_gold(value: object) -> str:
    """Canonical text of a numeric answer: ``3.0`` -> "3", "1,234" -> "1234", 1e+16 -> digits."""
    text = str(value).strip().replace(",", "")
    try:
        number = Decimal(text)
    except InvalidOperation:
        return normalize_answer(text, "number")
    if not number.is_finite():
        raise ValueError(f"answer {value!r} is not a finite number")
    return normalize_answer(format(number, "f"), "number")


def choice_order(options: Sequence[str], rng: random.Random) -> list[int]:
    """A shuffled order of option positions that keeps options' references to each other true.

    "All/None of the above" options go last, after the shuffled rest; if an option names others
    by letter ("Both A and B"), the source order is kept.
    """
    if any(_LETTER_REFERENCE.search(option) for option in options):
        return list(range(len(options)))
    pinned = [i for i, option in enumerate(options) if _ABOVE.search(option)]
    free = [i for i in range(len(options)) if i not in pinned]
    rng.shuffle(free)
    return free + pinned


def answer_index(value: object, count: int) -> int:
    """Position of the correct option from an int index, a digit string or a letter."""
    if isinstance(value, str):
        text = value.strip().strip("()").strip()
        if text.isdigit():
            value = int(text)
        elif len(text) == 1 and text.upper() in LETTERS:
            value = LETTERS.index(text.upper())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise ValueError(f"answer {value!r} does not name one of {count} options")
    return value


_BENCHMARKS: Registry[type[Benchmark]] = Registry("benchmark", "maslab.benchmarks")
register_benchmark = _BENCHMARKS.register
get_benchmark = _BENCHMARKS.get
list_benchmarks = _BENCHMARKS.names
