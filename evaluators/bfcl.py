"""``bfcl_ast`` and ``bfcl_state``: BFCL v4's checks, written for maslab from BFCL's published
rules (its checker was the reference, not the source).

``bfcl_ast`` (single turn) reads the answer's calls (a JSON array of ``{"name", "arguments"}``,
or a Python-syntax list of calls, read with :mod:`ast` and never run) and checks them against
the possible answers: the right functions; every required parameter given and none the
function lacks or the answer leaves out; each value of the schema's type (an int passes for a
number, inside arrays too; a value of the possible answers' own type, when that differs from the
schema's, passes as BFCL's "variable"); each value among the possible answers, strings (and the
strings in lists and objects) compared after BFCL's normalisation (lower case, without spaces
and ``,./-_*^``, single quotes as double); an optional parameter may be left out when ``""`` is
among its possible answers. Parallel categories match calls to answers in any order; irrelevance
is right when no call is made (an answer without readable calls counts as none), live_relevance
when at least one is. Choices where BFCL's rules leave one: a function name may be given with
``_`` for ``.`` (as BFCL allows models whose APIs forbid dots) when that names one function
only; parallel calls are matched by a full search for a one-to-one matching, where BFCL's
matcher is greedy (they differ only when one call fits several answers).

``bfcl_state`` (multi turn) replays the answer's calls, turn by turn, on a fresh environment
and the ground truth's calls on another, each built from the task as the run builds it. A turn
whose ground truth makes calls passes when the agents called something, every class's public
attributes equal the ground truth's (BFCL's state check) and every ground-truth call's result
is among the results of the agents' calls so far, this turn's and earlier ones' (BFCL's response
check: a result already fetched need not be fetched again). A turn whose ground truth makes no
call (miss_func before the function is added, miss_param without the value) passes when the
agents made none. The task passes when every turn does; ``details`` hold the per-turn verdicts,
the count of calls that undid a solved turn (:data:`~maslab.bench.evaluation.CHANGED_AFTER_SOLVED`:
after some call of a turn the state and results were the ground truth's, and a later call of the
same turn moved the state away from it) and, for a failure, the first failing turn, why, and the
first differing attribute with both values (truncated).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from maslab.bench.evaluation import (
    CHANGED_AFTER_SOLVED,
    Evaluator,
    Score,
    gold_of,
    register_evaluator,
)
from maslab.benchmarks.bfcl.calls import Call, parse_call, read_answer, read_turns
from maslab.benchmarks.bfcl.environment import BFCLEnvironment
from maslab.core.context import Context
from maslab.core.environment import ToolError
from maslab.core.task import Task

_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
_IGNORED = re.compile(r"[ ,./\-_*^]")
_SHOWN = 240  # characters of a value a state difference shows, around where the two differ
_BEFORE = 80  # of them, before the first character that differs
_Difference = tuple[str, str, Any, Any]  # class, attribute, the agents' value, the truth's


@register_evaluator("bfcl_ast")
class BFCLAstEvaluator(Evaluator):
    """BFCL's AST check of single-turn function calls against the possible answers."""

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        gold = gold_of(task)
        order = {tool["name"]: list(tool["parameters"]["properties"]) for tool in task.tools}
        calls = read_answer(answer, order)
        check = task.metadata["check"]
        if check in ("irrelevance", "relevance"):
            made = len(calls or [])
            correct = (made == 0) == (check == "irrelevance")
            shown = json.dumps([call.as_json() for call in calls or []])
            why = f"{made} calls made" if check == "irrelevance" else "no call made"
            return Score.graded(correct, shown, gold, "" if correct else why)
        if calls is None:
            return Score.unparsable("no calls found")
        shown = json.dumps([call.as_json() for call in calls], ensure_ascii=False)
        problem = check_calls(task.tools, calls, json.loads(gold))
        return Score.graded(problem is None, shown, gold, problem or "")


def check_calls(
    tools: Sequence[Mapping[str, Any]], calls: list[Call], possible: list[dict[str, Any]]
) -> str | None:
    """Why ``calls`` do not answer (in any order) the ``possible`` answers; None if they do."""
    specs = {tool["name"]: tool for tool in tools}
    calls = [Call(_tool_name(call.name, specs), call.arguments) for call in calls]
    if len(calls) != len(possible):
        return f"expected {len(possible)} calls, got {len(calls)}"
    fits = [[check_call(specs, call, answer) for call in calls] for answer in possible]
    matched: dict[int, int] = {}  # call -> answer

    def place(answer: int, seen: set[int]) -> bool:
        for index, problem in enumerate(fits[answer]):
            if problem is None and index not in seen:
                seen.add(index)
                if index not in matched or place(matched[index], seen):
                    matched[index] = answer
                    return True
        return False

    for answer, problems in enumerate(fits):
        if not place(answer, set()):
            reason = (
                next(p for p in problems if p is not None)
                if len(calls) == 1
                else (
                    f"no call matches expected call {answer + 1} ({next(iter(possible[answer]))})"
                )
            )
            return reason
    return None


def _tool_name(name: str, specs: Mapping[str, Any]) -> str:
    """``name``, or the one function it names with ``_`` for ``.``."""
    if name in specs:
        return name
    dotted = [tool for tool in specs if tool.replace(".", "_") == name]
    return dotted[0] if len(dotted) == 1 else name


def check_call(
    specs: Mapping[str, Mapping[str, Any]], call: Call, answer: Mapping[str, Any]
) -> str | None:
    """Why ``call`` is not the possible answer ``{function: {parameter: [options]}}``."""
    function, options = next(iter(answer.items()))
    if call.name != function:
        return f"called {call.name}, expected {function}"
    schema = specs[function]["parameters"]
    for name in schema.get("required", []):
        if name not in call.arguments:
            return f"{function}: missing required parameter {name!r}"
    for name, value in call.arguments.items():
        if name not in schema["properties"] or name not in options:
            return f"{function}: unexpected parameter {name!r}"
        problem = _check_value(value, schema["properties"][name], options[name])
        if problem:
            return f"{function}: parameter {name!r}: {problem}"
    for name, allowed in options.items():
        if name not in call.arguments and "" not in allowed:
            return f"{function}: missing parameter {name!r}"
    return None


def _check_value(value: Any, schema: Mapping[str, Any], options: list[Any]) -> str | None:
    expected = _TYPES[schema["type"]]
    if expected is float and type(value) is int:
        value = float(value)
    given = [option for option in options if option != ""]
    variable = bool(given) and type(given[0]) is not expected
    if variable and type(value) is type(given[0]):
        return None if value in options else f"{value!r} is not among {options}"
    if type(value) is not expected:
        return f"expected {schema['type']}, got {type(value).__name__} {value!r}"
    items = schema.get("items", {}).get("type")
    if isinstance(value, list) and items:
        # an item passes as the schema's type or as the possible answers' items are (BFCL's rule)
        kinds = {type(o[0]) for o in given if isinstance(o, list) and o} | {_TYPES[items]}
        if not all(any(_is(item, kind) for kind in kinds) for item in value):
            return f"expected an array of {items}, got {value!r}"
    if isinstance(value, dict):
        fits = any(_dict_fits(value, option) for option in given if isinstance(option, dict))
    elif isinstance(value, list) and items == "object":
        fits = any(_dicts_fit(value, option) for option in given if isinstance(option, list))
    elif isinstance(value, str):
        fits = _normal(value) in [_normal(option) for option in given if isinstance(option, str)]
    elif isinstance(value, list):
        fits = _normal(value) in [_normal(option) for option in given if isinstance(option, list)]
    else:
        fits = value in given
    return None if fits else f"{value!r} is not among {options}"


def _is(value: Any, expected: type) -> bool:
    return type(value) is expected or (expected is float and type(value) is int)


def _normal(value: Any) -> Any:
    """BFCL's string normalisation, on a string or the strings of a list."""
    if isinstance(value, str):
        return _IGNORED.sub("", value).lower().replace("'", '"')
    if isinstance(value, list):
        return [_normal(item) if isinstance(item, str) else item for item in value]
    return value


def _dict_fits(value: Mapping[str, Any], option: Mapping[str, list[Any]]) -> bool:
    """An object against one possible object, whose keys hold lists of possible values."""
    for key, item in value.items():
        if key not in option or _normal(item) not in [_normal(o) for o in option[key]]:
            return False
    return all(key in value or "" in allowed for key, allowed in option.items())


def _dicts_fit(value: list[Any], option: list[Any]) -> bool:
    return len(value) == len(option) and all(
        isinstance(item, dict) and _dict_fits(item, want)
        for item, want in zip(value, option, strict=True)
    )


# -- multi turn ------------------------------------------------------------------------------------


@register_evaluator("bfcl_state")
class BFCLStateEvaluator(Evaluator):
    """BFCL's multi-turn check: the calls replayed turn by turn, states and results compared."""

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        gold = gold_of(task)
        turns = read_turns(answer)
        expected = len(json.loads(gold))
        if turns is None:
            return Score.unparsable("no per-turn list of calls found")
        if len(turns) > expected:
            return Score.unparsable(f"{len(turns)} turns of calls for {expected} turns")
        shown = json.dumps([[c.as_json() for c in turn] for turn in turns], ensure_ascii=False)
        details = replay(task, turns + [[] for _ in range(expected - len(turns))])
        correct = all(details["turns"])
        explanation = "" if correct else f"turn {details['first_failed_turn']}: {details['reason']}"
        return Score(
            value=float(correct),
            correct=correct,
            extracted=shown,
            explanation=explanation,
            details=details,
        )


def gold_turns(task: Task, environment: BFCLEnvironment) -> list[list[Call]]:
    """The ground truth's calls of a ``bfcl_multi_turn`` task, turn by turn."""
    order = environment.parameter_order()
    return [[parse_call(text, order) for text in turn] for turn in json.loads(gold_of(task))]


def replay(task: Task, turns: list[list[Call]]) -> dict[str, Any]:
    """Per-turn verdicts of the agents' calls against the ground truth's (see the module), and
    the calls that undid a turn already solved (:data:`CHANGED_AFTER_SOLVED`)."""
    agents, truth = BFCLEnvironment.for_task(task), BFCLEnvironment.for_task(task)
    verdicts: list[bool] = []
    failure: dict[str, Any] = {}
    results_so_far: list[str] = []
    undoing = 0
    for turn, (calls, expected) in enumerate(zip(turns, gold_turns(task, truth), strict=True)):
        agents.functions(turn)
        truth.functions(turn)
        wanted = [_run(truth, call) for call in expected]
        solved = at_solution = False
        for call in calls:
            results_so_far.append(_run(agents, call))
            if expected:
                now = _at_solution(agents, truth, wanted, results_so_far)
                undoing += solved and at_solution and not now
                solved, at_solution = solved or now, now
        reason, difference = _turn_problem(agents, truth, calls, expected, wanted, results_so_far)
        verdicts.append(reason is None)
        if reason is not None and not failure:
            failure = {"first_failed_turn": turn, "reason": reason}
            if difference:
                failure["difference"] = difference
    return {"turns": verdicts, CHANGED_AFTER_SOLVED: undoing, **failure}


def _at_solution(
    agents: BFCLEnvironment, truth: BFCLEnvironment, wanted: list[str], results: list[str]
) -> bool:
    """Whether the agents' state is the ground truth's and its results are among theirs."""
    same = next(_differences(agents, truth), None) is None
    return same and not Counter(wanted) - Counter(results)


def _turn_problem(
    agents: BFCLEnvironment,
    truth: BFCLEnvironment,
    calls: list[Call],
    expected: list[Call],
    wanted: list[str],
    results_so_far: list[str],
) -> tuple[str | None, dict[str, Any] | None]:
    """Why a turn fails (and the state difference, if that is why); (None, None) if it passes."""
    if not expected:
        return (f"{len(calls)} calls where none should be made" if calls else None), None
    if not calls:
        return "no call made", None
    difference = state_difference(agents, truth)
    if difference:
        return f"{difference['class']}.{difference['attribute']} differs", difference
    missing = Counter(wanted) - Counter(results_so_far)
    if missing:
        first = next(iter(missing))
        return f"no call returned {first[:_SHOWN]!r}", None
    return None, None


def _run(environment: BFCLEnvironment, call: Call) -> str:
    try:
        return environment.execute(call.name, call.arguments)
    except ToolError as exc:
        return f"Error: {exc}"


def _differences(agents: BFCLEnvironment, truth: BFCLEnvironment) -> Iterator[_Difference]:
    """The public attributes whose values differ between the two, class by class."""
    for class_name, instance in truth.instances.items():
        mine = agents.instances[class_name]
        for attribute, value in vars(instance).items():
            if not attribute.startswith("_") and getattr(mine, attribute, None) != value:
                yield class_name, attribute, getattr(mine, attribute, None), value


def state_difference(agents: BFCLEnvironment, truth: BFCLEnvironment) -> dict[str, Any] | None:
    """The first public attribute whose value differs between the two, or None."""
    for class_name, attribute, mine, value in _differences(agents, truth):
        model, expected = around_difference(repr(mine), repr(value))
        return {"class": class_name, "attribute": attribute, "model": model, "expected": expected}
    return None


def around_difference(a: str, b: str) -> tuple[str, str]:
    """``a`` and ``b`` cut to the same window of :data:`_SHOWN` characters around the first one
    where they differ (a long tree's values often agree for pages before that), "…" marking a
    cut."""
    pairs = enumerate(zip(a, b, strict=False))  # the shorter one's length at most
    first = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    start = max(0, first - _BEFORE)

    def window(text: str) -> str:
        shown = text[start : start + _SHOWN]
        return ("…" if start else "") + shown + ("…" if start + _SHOWN < len(text) else "")

    return window(a), window(b)
