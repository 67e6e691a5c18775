"""Model roles: one run-level mapping of role or agent name -> model, in every method."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from helpers import GOLD_TASK as TASK
from helpers import TwoModels

from maslab.analysis.stats import summarize
from maslab.bench.benchmark import get_benchmark
from maslab.cli import build_parser, main
from maslab.cli.run import run_config
from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.roles import agent_settings, check_model_roles, parse_model_roles
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.harness.runner import RunConfig, Runner
from maslab.harness.sweep import load_sweep
from maslab.llm.ledger import CallRecord
from maslab.llm.scripted import last_user_message
from maslab.methods.llm_debate import LLMDebate
from maslab.store.run_store import RunStore

GSM8K = Path(__file__).parents[1] / "fixtures" / "cli" / "gsm8k_small.jsonl"
MAIN, OTHER = "scripted:main", "scripted:other"
MAZE = get_benchmark("collab_maze")().load(limit=1)[0]
POOL = {"groups": [{"name": "alpha", "roles": ["a1", "a2"]}, {"name": "beta", "roles": ["b1"]}]}


def respond(request) -> str:
    """One script for every method: each gets the replies it needs to run its whole course."""
    system = request.messages[0]["content"] if request.messages[0]["role"] == "system" else ""
    prompt = last_user_message(request)
    if prompt.startswith("You design teams"):  # goagent
        return json.dumps(POOL)
    if "You are assembling a team" in prompt:
        return json.dumps({"groups": ["alpha", "beta"], "edges": [["alpha", "beta"]]})
    if "You lead a small team" in system:  # conductor: delegate once, then finish
        if prompt.startswith("Observation from"):
            return json.dumps({"action": "final_answer", "arguments": {"answer": "42"}})
        return json.dumps({"action": "analyst", "arguments": {"task": "Compute 6 * 7."}})
    if prompt.startswith("You plan how to carry out"):  # planner_executor
        return json.dumps({"steps": ["Multiply 6 by 7."]})
    if "Carry out this step" in prompt:
        return json.dumps({"function": "multiply", "arguments": {"a": 6, "b": 7}})
    return "The answer is 42."


def named(*agents: str) -> Callable[[CallRecord], bool]:
    return lambda record: record.agent in agents


# (method, config, task, model-roles key, which calls the key moves to the other model)
CASES = [
    ("vanilla", {}, TASK, "solver", named("solver")),
    ("cot", {}, TASK, "solver", named("solver")),
    ("llm_debate", {}, TASK, "debater_2", named("debater_2")),
    ("llm_debate", {"aggregate": "llm"}, TASK, "aggregator", named("aggregator")),
    ("self_consistency", {"k": 3}, TASK, "sample", named("sample_1", "sample_2", "sample_3")),
    ("self_consistency", {"aggregate": "llm"}, TASK, "aggregator", named("aggregator")),
    ("self_refine", {}, TASK, "critic", named("critic")),
    ("self_refine", {"max_iterations": 1}, TASK, "refiner", named("refiner")),
    ("mad", {"max_rounds": 1}, TASK, "negative", named("negative")),
    ("mad", {"max_rounds": 1}, TASK, "judge", named("judge")),
    ("exchange_of_thought", {"max_rounds": 1}, TASK, "Ben", named("Ben")),
    ("mixture_of_agents", {"proposers": 3}, TASK, "proposer_2", named("proposer_2")),
    ("mixture_of_agents", {"proposers": 3}, TASK, "aggregator", named("aggregator")),
    ("macnet", {"topology": "chain", "agents": 3}, TASK, "node_1", named("node_1")),
    (
        "macnet",
        {"topology": "chain", "agents": 3},
        TASK,
        "critic",
        named("critic:node_0->node_1", "critic:node_1->node_2"),
    ),
    ("macnet", {"topology": "star", "agents": 3}, TASK, "output", named("output")),
    ("goagent", {"rounds": 1}, TASK, "member", named("alpha:a1", "alpha:a2", "beta:b1")),
    ("goagent", {"rounds": 1}, TASK, "selector", named("selector")),
    ("goagent", {"rounds": 1}, TASK, "aggregator", named("aggregator")),
    ("collab_pair", {"turn_cap": 4}, MAZE, "agent_2", named("agent_2")),
    ("collab_pair", {"mode": "solo_full"}, MAZE, "solo", named("solo")),
    (
        "relay",
        {"swap_after": 2, "turn_cap": 6},
        MAZE,
        "strong",
        lambda r: r.agent == "agent_1" and r.round <= 2,
    ),
    ("conductor", {}, TASK, "analyst", named("analyst")),
    ("conductor", {}, TASK, "planner", named("planner")),
    ("planner_executor", {}, TASK, "action", named("action")),
    ("planner_executor", {}, TASK, "planner", named("planner")),
]


async def solve(method: str, config: dict, task: Task, model_roles: dict) -> list[CallRecord]:
    models = TwoModels(lambda: respond, (MAIN, OTHER))
    ctx = Context(MAIN, models=models, model_roles=model_roles)
    await get_method(method)(config).solve(task, ctx)
    return ctx.ledger.records


@pytest.mark.parametrize(
    ("method", "config", "task", "key", "moved"),
    CASES,
    ids=[f"{case[0]}-{case[3]}" for case in CASES],
)
async def test_a_role_or_agent_name_routes_exactly_its_calls_to_its_model(
    method, config, task, key, moved
):
    get_method(method)(config).check_model_roles({key: OTHER})  # a key the method declares
    alone = await solve(method, config, task, {})
    records = await solve(method, config, task, {key: OTHER})
    assert len(records) == len(alone)  # the same calls, on other models
    assert [r.agent for r in records] == [r.agent for r in alone]
    assert any(moved(r) for r in records)
    for record in records:
        assert record.model == (OTHER if moved(record) else MAIN), (record.agent, record.round)


def test_an_agent_entry_beats_its_role_which_beats_the_method_and_the_run():
    roles = {"debater": {"model": OTHER, "temperature": 0.1}, "debater_2": {"model": MAIN}}
    models = TwoModels(lambda: respond, (MAIN, OTHER))
    ctx = Context(MAIN, models=models, sampling={"temperature": 0.5}, model_roles=roles)
    first = ctx.agent("debater_1", role="debater", temperature=0.9)
    second = ctx.agent("debater_2", role="debater")
    judge = ctx.agent("judge", temperature=0.9)
    assert (first.model.name, first.sampling) == (OTHER, {"temperature": 0.1})
    assert (second.model.name, second.sampling) == (MAIN, {"temperature": 0.1})
    assert (judge.model.name, judge.sampling, judge.role) == (MAIN, {"temperature": 0.9}, "judge")
    assert agent_settings({}, "x", None, {"model": None}) == {"model": None}


def test_model_roles_are_normalised_and_checked():
    assert check_model_roles({"judge": "openai:x", "critic": {"temperature": 0}}) == {
        "judge": {"model": "openai:x"},
        "critic": {"temperature": 0},
    }
    assert parse_model_roles(["judge=openai:x", "judge.temperature=0"]) == {
        "judge": {"model": "openai:x", "temperature": 0}
    }
    with pytest.raises(ConfigError, match=r"model_roles\.judge: top_p: Extra inputs"):
        check_model_roles({"judge": {"top_p": 0.5}})
    with pytest.raises(ConfigError, match="unknown model provider 'nope'"):
        Context("scripted:echo", model_roles={"judge": "nope:x"})  # checked before any call


def test_method_run_takes_model_roles(tmp_path):
    script = tmp_path / "b.yaml"
    script.write_text('".": "B says the answer is 391."\n')
    debate = LLMDebate(agents=2, rounds=1)
    outcome = debate.run(
        "What is 17 * 23?", "scripted:echo", model_roles={"debater_2": f"scripted:{script}"}
    )
    assert {r.agent: r.model for r in outcome.context.ledger.records} == {
        "debater_1": "scripted:echo",
        "debater_2": f"scripted:{script}",
    }
    with pytest.raises(ConfigError, match="llm_debate has no role or agent 'judge'"):
        debate.run("What is 17 * 23?", "scripted:echo", model_roles={"judge": "scripted:echo"})


# -- a run: checked, recorded, priced per model ------------------------------------------------


def scripts(tmp_path: Path) -> tuple[str, str]:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text('".": "The answer is 14."\n')
    b.write_text('".": "Having checked every step twice, I am sure: the answer is 14."\n')
    return f"scripted:{a}", f"scripted:{b}"


def debate_argv(model: str, *roles: str, out: Path | None = None) -> list[str]:
    argv = ["run", "--method", "llm_debate", "--benchmark", "gsm8k", "--data", str(GSM8K),
            "--limit", "2", "--model", model, "--no-cache", "--quiet"]  # fmt: skip
    for role in roles:
        argv += ["--model-role", role]
    return argv + (["--out", str(out)] if out else [])


def test_a_debate_on_two_models_routes_each_agents_calls_and_prices_them_per_model(
    tmp_path, capsys
):
    a, b = scripts(tmp_path)
    out = tmp_path / "run"
    assert main(debate_argv(a, f"debater_2={b}", out=out)) == 0
    assert "per sample by model" in capsys.readouterr().out
    calls = [c for line in (out / "traces.jsonl").read_bytes().splitlines()
             for c in orjson.loads(line)["calls"]]  # fmt: skip
    assert len(calls) == 2 * 6
    assert {(c["agent"], c["model"]) for c in calls} == {
        ("debater_1", a), ("debater_2", b), ("debater_3", a),
    }  # fmt: skip
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["model"] == a and manifest["model_roles"] == {"debater_2": {"model": b}}

    prices = {a: (1.0, 2.0), b: (10.0, 30.0)}
    expected = sum(
        c["prompt_tokens"] * prices[c["model"]][0] + c["completion_tokens"] * prices[c["model"]][1]
        for c in calls
    ) / 1e6 / 2  # fmt: skip
    summary = summarize(RunStore(out).results())
    assert set(summary.consumed_by_model) == {a, b}
    assert summary.cost(prices) == pytest.approx(expected)
    assert summary.cost({a: (1.0, 2.0)}) is None  # a model without a price: no total

    price_file = tmp_path / "prices.yaml"
    price_file.write_text(f"'{a}': [1, 2]\n'{b}': [10, 30]\n")
    assert (
        main(["report", str(out), "-o", str(tmp_path / "r.html"), "--prices", str(price_file)]) == 0
    )
    html = (tmp_path / "r.html").read_text()
    cost = f"${summary.cost(prices):.4f}"
    assert cost in html and "debater_2=" in html and "per sample by model" in html
    capsys.readouterr()
    assert main(["show", str(out), "--prices", str(price_file)]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # as if the terminal were wide
    assert f"cost {cost} per sample" in shown and "model roles: debater_2=" in shown
    assert all(f"(${c:.4f})" in shown for c in summary.model_costs(prices).values())


def test_the_same_directory_refuses_other_model_roles(tmp_path, capsys):
    a, b = scripts(tmp_path)
    out = tmp_path / "run"
    assert main(debate_argv(a, f"debater_2={b}", out=out)) == 0
    capsys.readouterr()
    assert main(debate_argv(a, f"debater_1={b}", out=out)) == 2
    err = capsys.readouterr().err
    assert "model_roles differ" in err and len(err.strip().splitlines()) == 1


def test_the_run_directory_depends_on_the_model_roles(tmp_path):
    a, b = scripts(tmp_path)

    def out(*roles: str) -> str | None:
        return Runner(run_config(build_parser().parse_args(debate_argv(a, *roles)))).config.out

    plain = out()
    assert plain is not None and plain == out()
    assert len({plain, out(f"debater_2={b}"), out(f"debater_1={b}"), out(f"debater={b}")}) == 4
    assert out(f"debater_2={b}") == out(f"debater_2={b}")
    assert out(f"debater_2={b}", "debater_2.temperature=0") != out(f"debater_2={b}")


@pytest.mark.parametrize(
    ("role", "phrase"),
    [
        ("debater_4=scripted:echo", "llm_debate has no role or agent 'debater_4'; did you mean"),
        (
            "jduge=scripted:echo",
            "roles: debater, aggregator; agents: debater_1, debater_2, debater_3",
        ),
        ("debater=nope:x", "unknown model provider 'nope'"),
    ],
)
def test_an_unknown_role_or_model_is_a_one_line_error_before_anything_runs(
    tmp_path, capsys, role, phrase
):
    out = tmp_path / "run"
    assert main(debate_argv("scripted:echo", role, out=out)) == 2
    err = capsys.readouterr().err
    assert phrase in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_run_config_checks_its_model_roles_against_the_method(tmp_path):
    config = RunConfig(
        method="mad", benchmark="gsm8k", data=str(GSM8K), model="scripted:echo",
        model_roles={"jduge": "scripted:echo"}, out=str(tmp_path / "run"),
    )  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"mad has no role or agent 'jduge'; did you mean judge\?"
    ):
        Runner(config)


def test_a_sweep_cell_takes_model_roles(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo']\nbenchmarks: [gsm8k]\nmethods:\n"
        "  - {name: mad, model_roles: {judge: 'scripted:echo', moderator: {temperature: 0}}}\n"
    )
    (cell,) = load_sweep(sweep).cells()
    assert cell.config.model_roles == {
        "judge": {"model": "scripted:echo"},
        "moderator": {"temperature": 0},
    }
    sweep.write_text(
        "models: ['scripted:echo']\nbenchmarks: [gsm8k]\nmethods:\n"
        "  - {name: mad, model_roles: {jduge: 'scripted:echo'}}\n"
    )
    with pytest.raises(ConfigError, match=r"sweep.yaml:4: .*no role or agent 'jduge'"):
        load_sweep(sweep)


def test_list_methods_shows_the_roles(capsys):
    assert main(["list", "methods"]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "Roles: affirmative, negative, moderator, judge " in listed
    assert "Roles: debater, aggregator " in listed
