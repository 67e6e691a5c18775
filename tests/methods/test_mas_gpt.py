"""MAS-GPT with scripted generators: the generated program runs in the sandbox through the
bridge, its calls are counted in the ledger (1 + the program's), cached on a re-run, failures
retry with the error shown and then answer directly, a budget stop inside the program returns
its latest reply, model roles move the generator, and the command line runs it end to end."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest
from helpers import TASK, agent_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.pool import ModelPool
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.cot import cot_prompt
from maslab.methods.mas_gpt import EXAMPLES, MasGpt, generator_system, query_prompt


def fenced(code: str) -> str:
    return f"Here is the system.\n\n```python\n{code}\n```\n"


def chain(n: int) -> str:
    """A program of n sequential calls by agents step_1 .. step_n; it prints noise too."""
    return fenced(
        "from maslab_bridge import call_llm\n\n"
        "def forward(task):\n"
        "    print('thinking...')\n"
        "    text = task\n"
        f"    for i in range({n}):\n"
        "        text = call_llm(text, agent=f'step_{i + 1}')\n"
        "    return 'final: ' + text\n"
    )


PARALLEL = fenced(
    "import asyncio\n"
    "from maslab_bridge import Agent, acall_llm\n\n"
    "async def forward(task):\n"
    "    experts = [Agent(f'expert_{i}', system=f'You are expert {i}.') for i in range(3)]\n"
    "    drafts = await asyncio.gather(*(e.aask(task) for e in experts))\n"
    "    return await acall_llm('Pick one: ' + ' | '.join(drafts))\n"
)
BROKEN = fenced("def forward(task):\n    return (\n")
RAISES_AFTER_2 = fenced(
    "from maslab_bridge import call_llm\n\n"
    "def forward(task):\n"
    "    call_llm('one')\n"
    "    call_llm('two')\n"
    "    raise ValueError('the plan went wrong')\n"
)
RETURNS_NONE = fenced("def forward(task):\n    return None\n")
NO_FORWARD = fenced("def solve(task):\n    return '42'\n")
LOOPS = fenced("def forward(task):\n    while True:\n        pass\n")
NO_CODE = "I would use a team of three agents that debate."


def responder(programs: list[str]) -> Callable[[ChatRequest], str]:
    """The generator writes ``programs`` in order; every other agent answers '<agent>: <its
    prompt's first 40 characters>' (a program's agent without its ``program/`` prefix)."""
    written: Iterator[str] = iter(programs)

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent == "generator":
            return next(written)
        return f"{agent.removeprefix('program/')}: {last_user_message(request)[:40]}"

    return respond


async def solve(programs: list[str], *, budget: Budget | None = None, **config):
    model = ScriptedModel(responder(programs))
    ctx = Context(model, budget=budget)
    solution = await MasGpt(**config).run_sample(TASK, ctx)
    return solution, ctx, model


def agents(ctx: Context) -> list[str]:
    return [r.agent for r in ctx.ledger.records]


def test_registered_with_the_documented_defaults():
    assert get_method("mas_gpt") is MasGpt
    cfg = MasGpt().config
    assert (cfg.retries, cfg.max_program_calls, cfg.time_limit) == (1, 100, 120)
    with pytest.raises(ConfigError):
        MasGpt(retries=-1)


@pytest.mark.system
@pytest.mark.parametrize("n", [0, 1, 3])
async def test_calls_are_one_plus_the_programs(n):
    solution, ctx, model = await solve([chain(n)])
    assert len(model.calls) == ctx.usage.calls == 1 + n
    assert agents(ctx) == ["generator", *(f"program/step_{i}" for i in range(1, n + 1))]
    expected = TASK.prompt() if n == 0 else f"step_{n}: "
    assert solution.answer.startswith(f"final: {expected}")  # forward's value; prints ignored
    assert solution.metadata == {"attempts": [{"status": "ok", "calls": n}], "fallback": False}


@pytest.mark.system
async def test_the_generator_sees_the_query_and_the_program_gets_the_task():
    _, _, model = await solve([chain(1)])
    generator, step = model.requests
    assert generator.messages[0] == {"role": "system", "content": generator_system()}
    assert last_user_message(generator) == query_prompt(TASK)
    assert TASK.prompt() in query_prompt(TASK)
    assert list(step.messages) == [{"role": "user", "content": TASK.prompt()}]  # the task, verbatim


@pytest.mark.system
async def test_an_async_forward_with_gathered_agents_runs_concurrently():
    solution, ctx, _ = await solve([PARALLEL])
    assert ctx.usage.calls == 1 + 3 + 1
    assert sorted(agents(ctx)[1:4]) == ["program/expert_0", "program/expert_1", "program/expert_2"]
    assert agents(ctx)[4] == "program"
    assert solution.answer.startswith("program: Pick one: expert_0: ")


@pytest.mark.system
@pytest.mark.parametrize(
    ("bad", "calls", "shown"),
    [
        (NO_CODE, 0, "held no Python code block"),
        (BROKEN, 0, "SyntaxError"),
        (RAISES_AFTER_2, 2, "ValueError: the plan went wrong"),
        (RETURNS_NONE, 0, "returned no answer"),
        (NO_FORWARD, 0, "defines no function named forward"),
    ],
)
async def test_a_failed_program_is_retried_with_the_error_shown(bad, calls, shown):
    solution, ctx, model = await solve([bad, chain(2)])
    assert ctx.usage.calls == 1 + calls + 1 + 2
    assert agents(ctx) == [
        "generator", *["program"] * calls, "generator", "program/step_1", "program/step_2"
    ]  # fmt: skip
    retry = [r for r in model.requests if agent_of(r) == "generator"][1]
    assert shown in last_user_message(retry)
    assert [m["role"] for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2]["content"] == bad  # its own earlier reply, in its conversation
    assert solution.answer.startswith("final: step_2: ")
    assert solution.metadata["attempts"][1] == {"status": "ok", "calls": 2}
    assert solution.metadata["fallback"] is False


@pytest.mark.system
async def test_when_every_program_fails_the_solver_answers_directly():
    solution, ctx, model = await solve([RAISES_AFTER_2, NO_CODE])
    assert ctx.usage.calls == 1 + 2 + 1 + 0 + 1
    assert agents(ctx) == ["generator", "program", "program", "generator", "solver"]
    assert last_user_message(model.requests[-1]) == cot_prompt(TASK)
    assert solution.answer == f"solver: {cot_prompt(TASK)[:40]}"
    assert solution.metadata == {
        "attempts": [{"status": "error", "calls": 2}, {"status": "no code", "calls": 0}],
        "fallback": True,
    }


@pytest.mark.system
@pytest.mark.parametrize("retries", [0, 2])
async def test_retries_bound_the_programs_written(retries):
    solution, ctx, _ = await solve([RAISES_AFTER_2] * (retries + 1), retries=retries)
    assert ctx.usage.calls == (retries + 1) * (1 + 2) + 1
    assert agents(ctx).count("generator") == retries + 1 and agents(ctx)[-1] == "solver"
    assert solution.metadata["fallback"] is True


@pytest.mark.system
async def test_an_endless_program_is_cut_at_the_time_limit():
    solution, ctx, model = await solve([LOOPS, LOOPS], time_limit=1)
    assert agents(ctx) == ["generator", "generator", "solver"]
    assert "ran out of time" in last_user_message(model.requests[1])
    assert [a["status"] for a in solution.metadata["attempts"]] == ["timeout", "timeout"]


@pytest.mark.system
async def test_the_program_is_served_at_most_max_program_calls():
    greedy = fenced(
        "from maslab_bridge import BridgeError, call_llm\n\n"
        "def forward(task):\n"
        "    got = []\n"
        "    for i in range(10):\n"
        "        try:\n"
        "            got.append(call_llm(f'call {i}'))\n"
        "        except BridgeError as error:\n"
        "            return f'{len(got)} answers, then: {error}'\n"
    )
    solution, ctx, _ = await solve([greedy], max_program_calls=4)
    assert ctx.usage.calls == 1 + 4
    assert solution.answer.startswith("4 answers, then: the program's limit of 4 model calls")


@pytest.mark.system
async def test_a_budget_stop_inside_the_program_returns_its_latest_reply():
    solution, ctx, _ = await solve([chain(5)], budget=Budget(max_calls=3))
    assert ctx.usage.calls == 3 and agents(ctx)[-1] == "program/step_2"
    assert solution.answer == ctx.ledger.records[-1].response
    assert solution.answer.startswith("step_2: step_1: ")
    assert "budget" in solution.metadata
    # a stop before the program made a call has nothing to propose
    solution, ctx, _ = await solve([chain(5)], budget=Budget(max_calls=1))
    assert solution.answer == "" and agents(ctx) == ["generator"]


@pytest.mark.system
async def test_a_rerun_replays_the_generator_and_the_programs_calls_from_the_cache(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    scripted = ScriptedModel(responder([chain(2)]))
    model = Cached(scripted, cache, namespace="scripted:gen")
    first = await MasGpt().solve(TASK, Context(model, sample_id=TASK.id))
    replay = Context(model, sample_id=TASK.id)
    again = await MasGpt().solve(TASK, replay)
    assert first.answer == again.answer and first.answer.startswith("final: step_2: ")
    assert agents(replay) == ["generator", "program/step_1", "program/step_2"]
    assert replay.usage.calls == replay.usage.cached_calls == 3
    assert len(scripted.calls) == 3  # the model answered nothing the second time
    cache.close()


@pytest.mark.system
@pytest.mark.parametrize("example", re.findall(r"```python\n(.*?)```", EXAMPLES, re.S))
async def test_the_example_programs_shown_to_the_generator_run(example):
    solution, ctx, _ = await solve([fenced(example)])
    assert solution.metadata["fallback"] is False
    assert ctx.usage.calls >= 3 and all(a.startswith("program") for a in agents(ctx)[1:])


def tuned(request: ChatRequest) -> str:
    """The fine-tuned generator's model: writes PARALLEL, and answers any agent put on it."""
    return PARALLEL if agent_of(request) == "generator" else "tuned: The answer is 42."


class TwoModels(ModelPool):
    def __init__(self) -> None:
        super().__init__()
        self.served = {
            "scripted:driver": ScriptedModel(responder([]), name="scripted:driver"),
            "scripted:mas-gpt": ScriptedModel(tuned, name="scripted:mas-gpt"),
        }

    def get(self, spec: str) -> ScriptedModel:  # type: ignore[override]
        return self.served[spec]


@pytest.mark.system
async def test_model_roles_put_the_generator_and_program_agents_on_other_models():
    method = MasGpt()
    roles = method.check_model_roles(
        {"generator": "scripted:mas-gpt", "program/expert_1": "scripted:mas-gpt"}
    )
    ctx = Context("scripted:driver", models=TwoModels(), model_roles=roles)
    await method.solve(TASK, ctx)
    served = sorted((r.agent, r.model) for r in ctx.ledger.records)
    assert served == [
        ("generator", "scripted:mas-gpt"),
        ("program", "scripted:driver"),
        ("program/expert_0", "scripted:driver"),
        ("program/expert_1", "scripted:mas-gpt"),
        ("program/expert_2", "scripted:driver"),
    ]
    (judge,) = [r for r in ctx.ledger.records if r.agent == "program"]
    assert "expert_0: " in judge.messages[-1]["content"]
    assert "| tuned: The answer is 42. |" in judge.messages[-1]["content"]  # expert_1's


def test_model_roles_name_the_roles_and_any_program_agent():
    method = MasGpt()
    assert method.check_model_roles({"program": "scripted:echo", "program/judge": "scripted:echo"})
    for bad in ("programme", "program/", "critic"):
        with pytest.raises(ConfigError, match="mas_gpt has no role or agent"):
            method.check_model_roles({bad: "scripted:echo"})


@pytest.mark.system
def test_the_command_line_runs_mas_gpt_end_to_end(tmp_path):
    program = chain(2).split("```python\n")[1].split("```")[0]
    script = tmp_path / "mas-gpt.yaml"
    script.write_text(json.dumps({".": fenced(program)}))  # JSON is YAML
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "mas_gpt", "--benchmark", "arith", "--model", "scripted:echo",
         "--model-role", f"generator=scripted:{script}",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 2
    for trace in traces:
        assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
            ("generator", f"scripted:{script}"),
            ("program/step_1", "scripted:echo"),
            ("program/step_2", "scripted:echo"),
        ]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["usage"]["calls"] == 3 for r in results)
