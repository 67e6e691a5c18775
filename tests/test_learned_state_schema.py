"""A learned state is checked against the schema its method declares (``Method.LearnedState``)
when it is loaded: one that does not fit, ``learned_state.json`` tampered with or damaged, is a
one-line error naming the file, never a traceback nor a run without what was learned."""

from __future__ import annotations

import copy
import json
import math
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import Method, get_method
from maslab.errors import ConfigError
from maslab.llm.types import ChatRequest
from maslab.methods.adas import ArchivedAgent, seed_agent
from maslab.methods.aflow import Workflow, seed_workflow
from maslab.testing import ScriptedModel

TASKS = get_benchmark("arith")().load("dev")[:2]
SOURCE = "run/learned_state.json"

OPTIMISED: dict[str, dict[str, Any]] = {  # small configs whose optimize runs offline
    "gptswarm": {"agents": 3, "iterations": 2, "batch_size": 2},
    "graph_grpo": {"agent_roles": ("Math Solver", "Inspector"), "rounds": 1, "group_size": 2},
    "maas": {"layers": 2, "epochs": 1, "samples": 2},
    "dylan": {"pool": ["Economist", "Doctor", "Lawyer"], "team_size": 2},
    "goagent": {"selector": "learned", "rounds": 1, "train_epochs": 1, "max_groups": 2},
}
NUMBER_AT: dict[str, tuple[str | int, ...]] = {  # where each state holds a number
    "aflow": ("workflows", 1, "score"),
    "gptswarm": ("accuracy", 0),
    "graph_grpo": ("policy", "logits", 0),
    "maas": ("mean_reward", 0),
    "dylan": ("pool_importance", "Doctor"),
    "adas": ("archive", 0, "fitness"),
    "goagent": ("domains", "math word problems", "choices", "logits", 0, 0),
}


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
    state = method.learned_state()
    assert state is not None
    return json.loads(json.dumps(state))


LEARNERS = [(name, OPTIMISED.get(name, {})) for name in NUMBER_AT] + [
    ("goagent", {"selector": "llm"})  # nothing to train: a state with no policy, not null
]


@pytest.mark.parametrize(("name", "config"), LEARNERS, ids=[*NUMBER_AT, "goagent-llm-selector"])
async def test_its_own_learned_state_fits_its_schema_and_loads(name, config):
    method = await learned(name, config)
    assert type(method).LearnedState is not None
    state = json_state(method)
    again = get_method(name)(**config)
    again.restore_learned_state(state, SOURCE)
    assert again.learned_state() == state


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
    assert message.endswith("; delete it to optimise again") and "\n" not in message
    assert fresh.learned_state() is None  # nothing was loaded


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


async def test_a_state_that_does_not_fit_the_config_names_the_file():
    state = json_state(await learned("dylan", OPTIMISED["dylan"]))
    with pytest.raises(ConfigError) as error:
        get_method("dylan")(pool=["Programmer"], team_size=1).restore_learned_state(state, SOURCE)
    assert str(error.value) == (
        f"{SOURCE}: dylan learned state: expected a team of pool roles; delete it to optimise again"
    )


class Unchecked(Method):
    """A learning method that declares no schema: its state loads as it is."""

    name = "unchecked"

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[Any] = []

    async def optimize(self, tasks: Any, ctx: Context) -> None:
        """Learns nothing: it only has to be a method that learns."""

    def load_learned_state(self, state: Any) -> None:
        self.loaded.append(state)


def test_a_method_without_a_schema_loads_its_state_unchecked():
    method = Unchecked()
    assert method.learns() and method.LearnedState is None
    method.restore_learned_state(None, SOURCE)  # nothing learned: nothing to load
    method.restore_learned_state(["any", "thing"], SOURCE)
    assert method.loaded == [["any", "thing"]]


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
