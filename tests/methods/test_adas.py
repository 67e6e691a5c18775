"""ADAS (arXiv 2408.08435) with scripted models: the seed agents run in the sandbox, the archive
grows by one agent per generation, a crashing agent is debugged (counted meta calls), fitness is
the mean score, ``solve`` runs the fittest archived agent with its calls in the ledger, the
archive round-trips as learned state, budget stops, garbage meta replies and the command line.
Sandbox runs (about 0.3 s each) are kept few: each test says how many it makes."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.types import ChatRequest
from maslab.methods.adas import (
    ADAS,
    REFLECTION_PROMPT,
    SEEDS,
    UNREADABLE,
    ArchivedAgent,
    Design,
    code_problem,
    meta_system,
    run_agent,
)
from maslab.testing import ScriptedModel, last_user_message

INSTRUCTION = "Give your final answer as a number in the form \\boxed{N}."
SIX_SEVEN = Task(
    id="t1", question="What is 6 * 7?", gold="42", answer_type="number", instruction=INSTRUCTION
)
FOURTEEN_HALF = Task(
    id="t2", question="What is 14 / 2?", gold="7", answer_type="number", instruction=INSTRUCTION
)
TASKS = [SIX_SEVEN, FOURTEEN_HALF]

CRASHING = 'def forward(task):\n    raise ValueError("boom")\n'
# right on 6 * 7 without a call; otherwise it asks its solver, which the script makes say 7
FIXED = (
    "from maslab_bridge import call_llm\n\n\ndef forward(task):\n"
    '    if "6 * 7" in task:\n        return "\\\\boxed{42}"\n'
    '    return call_llm(task, agent="solver")\n'
)
TWO_CALLS = (
    "from maslab_bridge import Agent\n\n\ndef forward(task):\n"
    '    critic = Agent("critic")\n    draft = critic.ask(task)\n'
    '    return critic.ask("Check: " + draft)\n'
)


def design(code: str, name: str = "new") -> str:
    return json.dumps({"thought": f"the idea of {name}", "name": name, "code": code})


def is_meta(request: ChatRequest) -> bool:
    return request.messages[0]["content"] == meta_system()


def scripted(meta: list[str], answers: dict[str, str] | None = None) -> ScriptedModel:
    """Meta calls answered from ``meta`` in order; an agent's call by its caller's name (the
    bridge's ``agent`` or ``agent/<name>``, the last part of the request's scope)."""
    replies = iter(meta)
    answers = {"agent": "The answer is \\boxed{42}.", **(answers or {})}

    def respond(request: ChatRequest) -> str:
        if is_meta(request):
            return next(replies)
        return answers[request.scope.rsplit("\x1f", 1)[-1]]

    return ScriptedModel(respond)


def test_defaults_and_validation():
    cfg = ADAS().config
    assert (cfg.generations, cfg.valid_size, cfg.debug_max, cfg.reflections) == (3, 128, 3, 2)
    assert cfg.seeds == ("cot", "self_consistency", "self_refine")
    assert get_method("adas") is ADAS and ADAS.learns()
    with pytest.raises(ConfigError, match="each seed agent at most once"):
        ADAS(seeds=["cot", "cot"])
    with pytest.raises(ConfigError, match="seeds"):
        ADAS(seeds=["tree_of_thought"])


def test_before_optimisation_solve_uses_the_first_seed_and_there_is_no_state():
    assert ADAS().best().name == "cot" and ADAS().learned_state() is None
    assert ADAS(seeds=["self_refine", "cot"]).best().name == "self_refine"


def test_code_is_checked_without_running_it():
    assert code_problem(FIXED) is None and code_problem(CRASHING) is None
    assert code_problem("async def forward(task):\n    return task\n") is None
    assert code_problem("") == "the code is empty"
    assert "does not parse" in str(code_problem("def forward(:\n"))
    assert "no top-level function" in str(code_problem("def solve(task):\n    return task\n"))
    for seed in SEEDS.values():
        assert code_problem(seed[1]) is None


@pytest.mark.system
async def test_the_seed_agents_run_in_the_sandbox_with_their_calls_counted():
    # 3 sandbox runs
    expected = {
        "cot": ["agent"],
        "self_consistency": ["agent"] * 4,
        "self_refine": ["agent/solver", "agent/critic", "agent/solver"],
    }
    for name, (_, code) in SEEDS.items():
        model = scripted([], {"agent/solver": "\\boxed{42}", "agent/critic": "fine"})
        ctx = Context(model)
        run = await run_agent(code, SIX_SEVEN, ctx)
        assert run.error == "" and run.answer is not None and "42" in run.answer
        assert [r.agent for r in ctx.ledger.records] == expected[name]
        assert run.calls == len(expected[name])
        assert last_user_message(model.calls[0].request).startswith(SIX_SEVEN.prompt())


@pytest.mark.system
async def test_search_grows_the_archive_debugs_crashes_and_scores_fitness():
    # 6 sandbox runs: the seed, the crashing design and its fix, on 2 tasks each; 1 for solve
    meta = [
        design(CRASHING, "crasher"),  # generation 1: proposal
        "I like it as it is.",  # reflection: unreadable, the design stays
        design(FIXED, "fixed"),  # debug round 1, after the crash
        "no json here",  # generation 2: proposal
        "{not json either",  # reflection
        "still nothing",  # debug round 1: the last allowed
    ]
    model = scripted(meta, {"agent/solver": "It is \\boxed{7}."})
    method = ADAS(seeds=["cot"], generations=2, reflections=1, debug_max=1)
    ctx = Context(model)
    await method.optimize(TASKS, ctx)

    archive = method.archive
    assert archive is not None and len(archive) == 1 + 2  # one agent per generation
    seed, fixed, failed = archive
    # fitness = mean score: cot says 42 to both tasks (1 of 2); the fix is right on both
    assert (seed.name, seed.fitness, seed.error) == ("cot", 0.5, None)
    assert (fixed.name, fixed.fitness, fixed.error) == ("fixed", 1.0, None)
    assert fixed.code == FIXED.strip()
    assert (fixed.generation, fixed.debugs) == (1, 1)
    assert (failed.fitness, failed.error, failed.code, failed.debugs) == (0.0, UNREADABLE, "", 1)
    assert failed.name == "generation_2"

    meta_calls = [c.request for c in model.calls if is_meta(c.request)]
    assert len(meta_calls) == 2 * (1 + 1 + 1)  # per generation: proposal, reflection, 1 debug
    prompts = [last_user_message(r) for r in meta_calls]
    assert prompts[1] == prompts[4] == f"{REFLECTION_PROMPT}\n\n{Design.instructions()}"
    assert all(p.endswith(f"\n\n{Design.instructions()}") for p in prompts)
    assert "ValueError: boom" in prompts[2]  # the crash's error goes to the debug round
    assert UNREADABLE in prompts[5]
    assert "Agent 2: fixed (generation 1)" in prompts[3] and "Fitness: 100.0%" in prompts[3]
    assert "Fitness: 50.0%" in prompts[3] and FIXED.strip() in prompts[3]
    assert SIX_SEVEN.prompt() in prompts[0]  # the example task
    # a meta agent per generation, with its whole conversation: the debug call sees the crash
    assert len(meta_calls[2].messages) == 1 + 2 * 2 + 1
    agents = Counter(r.agent for r in ctx.ledger.records)
    assert agents == {"meta": 6, "agent": 2, "agent/solver": 1}  # cot twice, the fix once

    # solve runs the fittest agent; its inner calls are the sample's
    solving = Context(model)
    solution = await method.solve(FOURTEEN_HALF, solving)
    assert solution.answer == "It is \\boxed{7}."
    assert solution.metadata["agent"] == "fixed" and solution.metadata["fitness"] == 1.0
    assert [r.agent for r in solving.ledger.records] == ["agent/solver"]

    # the archive is the learned state, JSON and back
    state = json.loads(json.dumps(method.dump_learned_state()))
    again = ADAS()
    again.restore_learned_state(state, "state.json")
    assert again.archive == archive and again.best() == fixed


def archive_of(*agents: ArchivedAgent) -> ADAS.LearnedState:
    return ADAS.LearnedState(archive=list(agents))


def agent(name: str, code: str, fitness: float | None, generation: int = 1) -> ArchivedAgent:
    return ArchivedAgent(name=name, thought="", code=code, generation=generation, fitness=fitness)


def test_the_fittest_agent_that_checks_is_chosen_ties_go_to_the_earlier():
    method = ADAS()
    method.load_learned_state(
        archive_of(
            agent("cot", SEEDS["cot"][1], 0.5, generation=0),
            agent("broken", "def forward(:", 0.9),  # fitness cannot make code run
            agent("two", TWO_CALLS, 0.75),
            agent("same", FIXED, 0.75),
            agent("unrated", FIXED, None),
        )
    )
    assert method.best().name == "two"
    method.load_learned_state(archive_of(agent("unrated", FIXED, None), agent("x", FIXED, None)))
    assert method.best().name == "unrated"  # nothing evaluated: the first


def test_bad_learned_state_is_a_one_line_error():
    for state in ({}, {"archive": []}, {"archive": [{"name": "x"}]}, {"archive": "code"}):
        with pytest.raises(ConfigError, match="invalid adas learned state"):
            ADAS().restore_learned_state(state, "state.json")


@pytest.mark.system
async def test_solve_runs_the_best_agent_on_the_agent_model_role(tmp_path):
    # 1 sandbox run: the agent's calls go to the `agent` model role, named agent/critic
    other = tmp_path / "other.yaml"
    other.write_text('"^Check": "Checked: \\\\boxed{42}"\n".": "draft"\n')
    method = ADAS()
    method.load_learned_state(archive_of(agent("two", TWO_CALLS, 1.0)))
    main_model = ScriptedModel([])
    outcome = await method.arun(SIX_SEVEN, main_model, model_roles={"agent": f"scripted:{other}"})
    assert outcome.answer == "Checked: \\boxed{42}"
    records = outcome.context.ledger.records
    assert [(r.agent, r.model) for r in records] == [("agent/critic", f"scripted:{other}")] * 2
    assert outcome.solution.metadata["agent_calls"] == 2 and not main_model.calls


@pytest.mark.system
async def test_a_budget_stop_ends_the_agent_and_scores_the_empty_answer():
    # 1 sandbox run
    method = ADAS()
    method.load_learned_state(archive_of(agent("two", TWO_CALLS, 1.0)))
    ctx = Context(scripted([], {"agent/critic": "\\boxed{42}"}), budget=Budget(max_calls=1))
    solution = await method.run_sample(SIX_SEVEN, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert solution.answer == "" and len(ctx.ledger.records) == 1


@pytest.mark.system
async def test_garbage_meta_replies_are_failures_not_crashes():
    # 1 sandbox run (the seed on one task): no unreadable or unparseable design is ever run
    meta = [
        "",  # proposal: nothing
        '{"thought": "t", "code": 3}',  # reflection: "code" reads as "3", which defines nothing
        "```json\n{]\n```",  # debug round 1: unreadable, the design above stays
        design("def forward(task:\n    return task\n", "syntax"),  # debug round 2: no parse
    ]
    model = scripted(meta)
    method = ADAS(seeds=["cot"], generations=1, reflections=1, debug_max=2)
    await method.optimize([SIX_SEVEN], Context(model))
    assert method.archive is not None
    seed, failed = method.archive
    assert seed.fitness == 1.0 and method.best() == seed
    assert (failed.name, failed.fitness, failed.debugs) == ("syntax", 0.0, 2)
    assert failed.error is not None and "does not parse" in failed.error
    prompts = [last_user_message(c.request) for c in model.calls if is_meta(c.request)]
    assert len(prompts) == 1 + 1 + 2
    assert "no top-level function" in prompts[2] and UNREADABLE in prompts[3]


@pytest.mark.system
def test_the_command_line_optimises_then_reuses_the_archive(tmp_path):
    # 7 sandbox runs: the seed and the design on 2 dev tasks, 2 test tasks, 1 more on re-run
    program = (
        "from maslab_bridge import call_llm\n\n\ndef forward(task):\n    return call_llm(task)\n"
    )
    script = {
        "archive of agents|Review your design|problem with your agent": design(program, "plain"),
        ".": "The answer is \\boxed{53}.",
    }
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(script, sort_keys=False))  # patterns in order
    out = tmp_path / "run"

    def run(limit: int) -> int:
        return main(
            ["run", "--method", "adas", "--benchmark", "arith", "--model", f"scripted:{path}",
             "--limit", str(limit), "--optimize-on", "dev", "--optimize-limit", "2",
             "--config", "seeds=[cot]", "--config", "generations=1", "--out", str(out),
             "--no-cache", "--quiet"]
        )  # fmt: skip

    assert run(2) == 0
    state = json.loads((out / "learned_state.json").read_text())
    archive = state["state"]["archive"]
    assert [a["name"] for a in archive] == ["cot", "plain"]
    (attempt,) = [json.loads(x) for x in (out / "optimize.jsonl").read_text().splitlines()]
    # 1 proposal + 2 reflections, and one agent call per run: 2 tasks x 2 agents
    assert attempt["status"] == "ok" and attempt["usage"]["calls"] == 3 + 4
    best = max(archive, key=lambda a: a["fitness"])["name"]  # max keeps the first on ties

    assert run(3) == 0  # a re-run loads the archive: no new optimisation
    assert len((out / "optimize.jsonl").read_text().splitlines()) == 1
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 3 and all(r["usage"]["calls"] == 1 for r in results)
    assert {r["metadata"]["agent"] for r in results} == {best}
