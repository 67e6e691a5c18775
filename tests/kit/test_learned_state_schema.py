"""A learned state is declared by its method as a schema (``Method.LearnedState``) and turned
to and from JSON by the base class alone: a saved state that does not fit the schema
(``learned_state.json`` tampered with or damaged), or that the method rejects (learned for
another config), is a one-line error naming the file, never a traceback nor a run without what
was learned; every method's errors are worded alike."""

from __future__ import annotations

import copy
import json
import math
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import Method, MethodState, get_method, list_methods
from maslab.errors import ConfigError
from maslab.llm.types import ChatRequest
from maslab.methods.adas import ArchivedAgent, seed_agent
from maslab.methods.aflow import Workflow, seed_workflow
from maslab.plugins import origin
from maslab.testing import ScriptedModel

TASKS = get_benchmark("arith")().load("dev")[:2]
SOURCE = "run/learned_state.json"
RELEARN = "; delete it to optimise again"
SAVED_BEFORE = Path(__file__).parents[1] / "fixtures" / "learned_states.json"
"""Each method's state as maslab wrote it before states were typed (its hand-written dicts)."""

OPTIMISED: dict[str, dict[str, Any]] = {  # small configs whose optimize runs offline
    "gptswarm": {"agents": 3, "iterations": 2, "batch_size": 2},
    "graph_grpo": {"agent_roles": ("Math Solver", "Inspector"), "rounds": 1, "group_size": 2},
    "maas": {"layers": 2, "epochs": 1, "samples": 2},
    "dylan": {"pool": ["Economist", "Doctor", "Lawyer"], "team_size": 2},
    "goagent": {"selector": "learned", "rounds": 1, "train_epochs": 1, "max_groups": 2},
    "masrouter": {"epochs": 1, "batch_size": 2},
    "agentprune": {"agents": 3, "iterations": 2, "batch_size": 2},
    "agentdropout": {"agents": 3, "node_dropout": 0.34, "node_iterations": 1,
                     "node_batch_size": 2, "edge_iterations": 1, "edge_batch_size": 2},
    "g_designer": {"agents": 3, "iterations": 2, "batch_size": 2},
}  # fmt: skip
NUMBER_AT: dict[str, tuple[str | int, ...]] = {  # where each state holds a number
    "aflow": ("workflows", 1, "score"),
    "gptswarm": ("accuracy", 0),
    "graph_grpo": ("policy", "logits", 0),
    "maas": ("mean_reward", 0),
    "dylan": ("pool_importance", "Doctor"),
    "adas": ("archive", 0, "fitness"),
    "goagent": ("domains", "math word problems", "choices", "logits", 0, 0),
    "masrouter": ("mean_reward", 0),
    "agentprune": ("accuracy", 0),
    "agentdropout": ("edge_accuracy", 0),
    "g_designer": ("spatial", "logits", 0),
}
TYPED_FROM_THE_START = {"masrouter", "agentprune", "agentdropout", "g_designer"}
"""Methods that learned after states were typed: no state of theirs was ever saved untyped."""


def half_right(request: ChatRequest) -> str:
    """The gold of the task the request is about for about half the requests, else 0."""
    text = "\n".join(str(m["content"]) for m in request.messages)
    task = next((t for t in TASKS if t.question in text), TASKS[0])
    right = zlib.crc32(text.encode()) % 2 == 0
    return f"The answer is \\boxed{{{task.gold if right else 0}}}."


async def learned(name: str, config: Mapping[str, Any]) -> Method:
    """A ``name`` method (with ``config``) that has learned: by its own ``optimize`` on a
    scripted model, or, for the methods whose search runs code in the sandbox, by setting
    what that search finds."""
    method = get_method(name)(**config)
    if name == "aflow":
        child = "async def workflow(task):\n    return await answer(task)\n"
        method.tree = [
            seed_workflow().model_copy(update={"score": 0.5}),
            Workflow(id=1, parent=0, round=1, modification="answer", code=child, score=1.0),
        ]
        method.stopped = "converged"
    elif name == "adas":
        method.archive = [
            seed_agent("cot").model_copy(update={"fitness": 0.5}),
            ArchivedAgent(
                name="broken", thought="idea", code="def forward(:", generation=1,
                fitness=0.0, error="SyntaxError: invalid syntax", debugs=3,
            ),
        ]  # fmt: skip
    else:
        await method.optimize(TASKS, Context(ScriptedModel(half_right), seed=3))
    return method


def json_state(method: Method) -> dict[str, Any]:
    """The method's learned state as it comes back from ``learned_state.json``."""
    state = method.dump_learned_state()
    assert state is not None
    return json.loads(json.dumps(state))


LEARNERS = [(name, OPTIMISED.get(name, {})) for name in NUMBER_AT] + [
    ("goagent", {"selector": "llm"})  # nothing to train: a state with no policy, not null
]


@pytest.mark.parametrize(("name", "config"), LEARNERS, ids=[*NUMBER_AT, "goagent-llm-selector"])
async def test_its_own_learned_state_fits_its_schema_and_loads(name, config):
    method = await learned(name, config)
    schema = type(method).LearnedState
    assert schema is not None and isinstance(method.learned_state(), schema)
    state = json_state(method)
    again = get_method(name)(**config)
    assert again.learned_state() is None
    again.restore_learned_state(state, SOURCE)
    assert isinstance(again.learned_state(), schema)
    assert again.learned_state() == method.learned_state()
    assert again.dump_learned_state() == state


def test_every_bundled_method_that_learns_is_checked_here():
    bundled = [name for name in list_methods() if origin(get_method(name)) == "bundled"]
    assert {name for name in bundled if get_method(name).learns()} == set(NUMBER_AT)


@pytest.mark.parametrize("name", sorted(set(NUMBER_AT) - TYPED_FROM_THE_START))
def test_a_state_saved_before_states_were_typed_still_loads(name):
    saved = json.loads(SAVED_BEFORE.read_text())[name]
    method = get_method(name)(**OPTIMISED.get(name, {}))
    method.restore_learned_state(saved, SOURCE)
    assert method.dump_learned_state() == saved


def put(state: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """A copy of ``state`` with ``value`` at ``path``."""
    changed = copy.deepcopy(state)
    *parents, last = path
    node = changed
    for key in parents:
        node = node[key]
    node[last] = value
    return changed


def without_first_key(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in list(state.items())[1:]}


TAMPERINGS: dict[str, Callable[[str, dict[str, Any]], Any]] = {
    "a list": lambda name, state: list(state.values()),
    "null": lambda name, state: None,
    "a missing key": lambda name, state: without_first_key(state),
    "an unknown key": lambda name, state: {**state, "extra": 1},
    "a number as text": lambda name, state: put(state, NUMBER_AT[name], "0.5"),
    "a NaN": lambda name, state: put(state, NUMBER_AT[name], math.nan),
    "a bool for a number": lambda name, state: put(state, NUMBER_AT[name], True),
}


@pytest.mark.parametrize("tampering", TAMPERINGS)
@pytest.mark.parametrize("name", NUMBER_AT)
async def test_a_tampered_learned_state_is_a_one_line_error(name, tampering):
    config = OPTIMISED.get(name, {})
    state = TAMPERINGS[tampering](name, json_state(await learned(name, config)))
    fresh = get_method(name)(**config)
    with pytest.raises(ConfigError) as error:
        fresh.restore_learned_state(state, SOURCE)
    message = str(error.value)
    assert message.startswith(f"{SOURCE}: invalid {name} learned state: ")
    assert message.endswith(RELEARN) and "\n" not in message
    assert fresh.learned_state() is None  # nothing was loaded


REJECTIONS: dict[str, tuple[dict[str, Any], str]] = {  # a config the state was not learned for
    "gptswarm": ({"agents": 4}, "its edges are not those of 4 agents"),
    "graph_grpo": (
        {"agent_roles": ("Math Solver", "Inspector", "Critic")},
        "trained for other agents or features (edges [('agent_1', 'agent_2')]) than this "
        "config's 3 agents",
    ),
    "maas": ({"layers": 3}, "its layers or operators differ from this config's"),
    "dylan": (
        {"pool": ["Programmer", "Doctor"], "team_size": 1},
        "its team has roles not in this config's pool: ['Economist']",
    ),
    "agentprune": ({"agents": 4}, "its edges are not those of 4 agents"),
    "agentdropout": ({"agents": 4}, "its node logits are not those of 4 agents over 2 rounds"),
    "g_designer": ({"agents": 3, "hash_buckets": 4}, "its edges take 13 query features, not 9"),
    "masrouter": (
        {"max_agents": 4},
        "its agents stage chooses among ['1', '2', '3', '4', '5', '6'] on 20 features; this "
        "config's: ['1', '2', '3', '4'] on 20",
    ),
}


@pytest.mark.parametrize("name", REJECTIONS)
async def test_a_state_learned_for_another_config_is_a_one_line_error(name):
    state = json_state(await learned(name, OPTIMISED[name]))
    other, reason = REJECTIONS[name]
    fresh = get_method(name)(**other)
    with pytest.raises(ConfigError) as error:
        fresh.restore_learned_state(state, SOURCE)
    assert str(error.value) == (
        f"{SOURCE}: {name} learned state does not fit this config: {reason}{RELEARN}"
    )
    assert fresh.learned_state() is None  # nothing was loaded


SHAPES: dict[str, tuple[tuple[str | int, ...], Callable[[Any], Any], str]] = {
    "gptswarm": (("policy", "logits"), lambda v: v[:1], r"policy: \d+ edges need as many logits"),
    "graph_grpo": (("policy", "weights"), lambda v: v * 2, r"policy: weights must hold a row of"),
    "maas": (("controller", "logits"), lambda v: v[:1], r"controller: logits must hold a row"),
    "masrouter": (("mode", "logits"), lambda v: v * 2, r"mode: logits must hold a row of"),
    "agentprune": (("spatial", "logits"), lambda v: v[:1], r"spatial: \d+ edges need as many"),
    "agentdropout": (("nodes", "logits"), lambda v: v[:1], r"nodes: logits must hold a row"),
    "g_designer": (("spatial", "weights"), lambda v: v * 2, r"spatial: weights must hold a row of"),
    "goagent": (
        ("domains", "math word problems", "choices", "options"),
        lambda v: v[::-1],
        r"domains\.math word problems: its choices are not over its pool's groups",
    ),
}
"""Where a state holds a policy, how to change it, and what the state model's checks say."""


@pytest.mark.parametrize("name", SHAPES)
async def test_a_policy_of_the_wrong_shape_is_a_one_line_error(name):
    path, change, problem = SHAPES[name]
    state = json_state(await learned(name, OPTIMISED[name]))
    node = state
    for key in path:
        node = node[key]
    state = put(state, path, change(node))
    with pytest.raises(ConfigError, match=f"^{SOURCE}: invalid {name} learned state: {problem}"):
        get_method(name)(**OPTIMISED[name]).restore_learned_state(state, SOURCE)


BASE_ONLY = ("dump_learned_state", "check_learned_state", "restore_learned_state")


def test_no_method_serialises_its_own_learned_state():
    for name in list_methods():
        method = get_method(name)
        for attribute in BASE_ONLY:
            owner = next(c for c in method.__mro__ if attribute in vars(c))
            assert owner is Method, f"{name} overrides {attribute}"
        schema = method.LearnedState  # what a bundled method learns, it declares
        assert (schema is not None) == method.learns(), name
        assert schema is None or issubclass(schema, MethodState)


@pytest.mark.parametrize(
    ("name", "state", "problem"),
    [
        ("dylan", {"team": [], "pool_importance": {}}, "team: List should have at least 1"),
        ("adas", {"archive": []}, "archive: List should have at least 1 item"),
        ("goagent", {"format": "goagent-selector/1", "domains": {}}, "format: Input should be"),
    ],
)
def test_what_the_schema_requires_beyond_types(name, state, problem):
    with pytest.raises(ConfigError, match=problem):
        get_method(name)().restore_learned_state(state, SOURCE)


async def test_an_aflow_tree_grows_from_its_seed_and_names_its_best():
    state = json_state(await learned("aflow", {}))
    for bad, problem in (
        ({**state, "workflows": []}, "workflows: List should have at least 1 item"),
        ({**state, "workflows": state["workflows"][1:]}, "the first workflow is not the seed"),
        ({**state, "best": 7}, "best is 7, the id of no workflow"),
    ):
        with pytest.raises(ConfigError, match=problem):
            get_method("aflow")().restore_learned_state(bad, SOURCE)


class Counted(MethodState):
    seen: int


class Counter(Method):
    """A method that learns how many tasks it saw; ``refusal`` is how it rejects a state."""

    name = "counter"
    LearnedState = Counted

    def __init__(self, refusal: Exception | None = None, learned: Any = None) -> None:
        super().__init__()
        self.refusal, self.learned = refusal, learned

    async def optimize(self, tasks: Any, ctx: Context) -> None:
        self.learned = Counted(seen=len(tasks))

    def learned_state(self) -> Any:
        return self.learned

    def load_learned_state(self, state: Counted) -> None:
        if self.refusal is not None:
            raise self.refusal
        self.learned = state


async def test_the_base_class_saves_and_loads_the_declared_state():
    method = Counter()
    await method.optimize(TASKS, Context(ScriptedModel([])))
    assert method.dump_learned_state() == {"seen": 2}
    again = Counter()
    again.restore_learned_state({"seen": 2}, SOURCE)
    assert again.learned_state() == Counted(seen=2)


def invalid(data: Any) -> ValidationError:
    """The error of validating ``data`` as a :class:`Counted` (a rejection by a nested check)."""
    with pytest.raises(ValidationError) as error:
        Counted.model_validate(data)
    return error.value


def test_a_learned_state_other_than_the_declared_one_is_not_saved():
    with pytest.raises(TypeError, match=r"Counter\.learned_state\(\) returned a dict, not its"):
        Counter(learned={"seen": 2}).dump_learned_state()


@pytest.mark.parametrize(
    ("refusal", "reason"),
    [
        (ValueError("trained on 4 tasks,\nthis run has 3"), "trained on 4 tasks, this run has 3"),
        (ConfigError("wrong size"), "wrong size"),
        (
            invalid({"seen": "many"}),
            "seen: Input should be a valid integer, unable to parse string as an integer",
        ),
    ],
    ids=["ValueError", "ConfigError", "ValidationError"],
)
def test_every_rejection_a_method_raises_is_worded_by_the_base_class(refusal, reason):
    with pytest.raises(ConfigError) as error:
        Counter(refusal).restore_learned_state({"seen": 2}, SOURCE)
    message = str(error.value)
    assert message.startswith(f"{SOURCE}: counter learned state does not fit this config: ")
    assert message.endswith(f"{reason}{RELEARN}") and "\n" not in message


class Unlearned(Method):
    """A method that declares no learned state: it learns nothing it could save."""

    name = "unlearned"

    async def optimize(self, tasks: Any, ctx: Context) -> None:
        """Learns nothing: it only has to be a method that learns."""


def test_a_method_without_a_schema_learns_nothing_to_save():
    method = Unlearned()
    assert method.learns() and method.LearnedState is None
    assert method.learned_state() is None and method.dump_learned_state() is None
    method.restore_learned_state(None, SOURCE)  # nothing learned: nothing to load
    with pytest.raises(ConfigError) as error:
        method.restore_learned_state(["any", "thing"], SOURCE)
    assert str(error.value) == (
        f"{SOURCE}: invalid unlearned learned state: expected null (the method learns nothing)"
        f"{RELEARN}"
    )


def test_an_empty_optimisation_split_is_refused(tmp_path, monkeypatch):
    arith = type(get_benchmark("arith")())
    load = arith.load
    monkeypatch.setattr(
        arith, "load", lambda self, split, **kw: [] if split == "dev" else load(self, split, **kw)
    )
    argv = ["run", "--method", "dylan", "--benchmark", "arith", "--model", "scripted:echo",
            "--limit", "1", "--optimize-on", "dev", "--no-cache", "--quiet",
            "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 2
    assert not (tmp_path / "run" / "learned_state.json").exists()


def tampered_file(path: Path, tampering: str) -> None:
    saved = json.loads(path.read_text())
    if tampering == "a number as text":
        saved["state"]["pool_importance"] = dict.fromkeys(saved["state"]["pool_importance"], "high")
    else:
        saved["state"] = TAMPERINGS[tampering]("dylan", saved["state"])
    path.write_text(json.dumps(saved))


@pytest.mark.parametrize("tampering", ["a list", "null", "a number as text"])
def test_the_cli_refuses_a_tampered_learned_state_in_one_line(tmp_path, capsys, tampering):
    out = tmp_path / "run"
    argv = ["run", "--method", "dylan", "--benchmark", "arith", "--model", "scripted:echo",
            "--optimize-on", "dev", "--optimize-limit", "1", "--no-cache", "--quiet",
            "--out", str(out)]  # fmt: skip
    assert main([*argv, "--limit", "1"]) == 0
    tampered_file(out / "learned_state.json", tampering)
    capsys.readouterr()
    assert main([*argv, "--limit", "2"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert error.startswith(f"maslab: error: {out / 'learned_state.json'}: invalid dylan learned")
    assert error.rstrip().endswith("delete it to optimise again")
    assert len((out / "results.jsonl").read_text().splitlines()) == 1  # nothing more ran
