"""MAS-GPT: a model writes a multi-agent system as code for each query, which then runs.

Ye, Tang, Ge, Du, Yin, Chen, Shao. "MAS-GPT: Training LLMs to Build LLM-based Multi-Agent
Systems". arXiv:2503.03686 (ICML 2025). Code: github.com/rui-ye/MAS-GPT.

Algorithm (per query):

1. The generator (the paper's fine-tuned MAS-GPT model) reads the query and writes a MAS as
   Python: a function ``forward(task: str) -> str`` in which agents are model calls and messages
   are strings passed between them.
2. The program runs in the sandbox through :func:`maslab.kit.bridge.call_function`: its calls go to
   the run's model (the "driver" LLM) through the sample's context (budgeted, cached, in the
   ledger). ``forward``'s return value is the answer.

The program convention: the generator's last code block is the program; the bridge's driver
loads it, calls ``forward(task)`` (a coroutine function is run with ``asyncio.run``) and reports
the value, so the program's own prints never pass for the answer. The program talks to models
with ``maslab_bridge`` (``call_llm``, ``acall_llm``, ``Agent(name, system=...).ask(...)``).

Who makes which call: ``generator`` writes the code; the program's calls are agent ``program``,
and ``program/<name>`` for its ``Agent(name)``; ``solver`` answers directly when every program
failed. Model roles put the generator on the fine-tuned model
(``--model-role generator=openai:mas-gpt@http://host:8000/v1``); ``program=SPEC`` moves every
call of the program, ``program/<name>=SPEC`` the calls of one of its named agents.

Failure and fallback: a reply without code, a program that does not run (syntax error,
exception, no ``forward``, no answer or an empty one, the sandbox's time or resource limits, a
channel violation) fails the attempt. The generator is then shown the error and writes a new
program, up to ``retries`` times (in the same conversation, so it sees its earlier code); if no
program answered, ``solver`` answers the task directly (step by step).

LLM calls: with a_k the model calls of the k-th program run (0 for a reply without code,
at most ``max_program_calls`` each), 1 + a_1 when the first program answers; in general
t + Σ_{k≤t} a_k for t ≤ 1 + ``retries`` programs written, plus 1 for the direct answer when
none answered (default retries = 1: 1 + a_1, 2 + a_1 + a_2, or 3 + a_1 + a_2).

Budget stop: the latest reply a call of a program got (the program is ended and its
``forward`` never returns, so its intermediate replies are all there is); nothing if no program
made a call.

Deviations: the generator is any model. The paper fine-tunes a 32B open coder model on its
consistency-filtered query-MAS pairs, which we do not ship; our generator prompt (instructions
and three short example programs, all our own) lets an untuned model write programs, and is
also what a served MAS-GPT model gets, which is not the exact prompt format it was trained on.
``forward`` receives the task's full prompt (its answer-format instruction included). The
program calls models through ``maslab_bridge`` instead of an in-process helper, in the
sandbox, with a cap on its calls and a time limit. The retry with the error shown and the
direct-answer fallback are ours, not the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import Field

from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import ModelRoles, check_model_roles, check_role_names
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import BudgetExceeded
from maslab.kit.bridge import LIMITS, MAX_CALLS, call_function
from maslab.kit.prompts import cot_prompt

GENERATOR, PROGRAM, SOLVER = "generator", "program", "solver"

EXAMPLES = """\
Example 1: two agents, one solves and one checks.

```python
from maslab_bridge import Agent


def forward(task: str) -> str:
    solver = Agent("solver", system="You solve problems carefully, step by step.")
    draft = solver.ask(task)
    checker = Agent("checker", system="You are a meticulous reviewer.")
    review = checker.ask(
        f"Problem:\\n{task}\\n\\nProposed solution:\\n{draft}\\n\\n"
        "Check every step. Reply CORRECT if it is right, otherwise explain the mistake."
    )
    if review.strip().startswith("CORRECT"):
        return draft
    return solver.ask(f"A reviewer found a problem:\\n{review}\\n\\nGive a corrected solution.")
```

Example 2: three independent experts in parallel, then a judge.

```python
import asyncio

from maslab_bridge import Agent, call_llm

EXPERTS = {
    "algebraist": "You reason with equations.",
    "checker": "You solve by estimating first, then computing exactly.",
    "teacher": "You explain each step as if teaching.",
}


async def consult(task: str) -> list[str]:
    agents = [Agent(name, system=role) for name, role in EXPERTS.items()]
    return await asyncio.gather(*(agent.aask(task) for agent in agents))


def forward(task: str) -> str:
    answers = asyncio.run(consult(task))
    shown = "\\n\\n".join(f"Expert {i}:\\n{a}" for i, a in enumerate(answers, 1))
    return call_llm(
        f"Problem:\\n{task}\\n\\nThree experts answered:\\n\\n{shown}\\n\\n"
        "Decide which reasoning is right and give the final solution.",
        agent="judge",
    )
```

Example 3: plan, then execute the plan.

```python
from maslab_bridge import call_llm


def forward(task: str) -> str:
    plan = call_llm(f"List the steps needed to solve this, without solving it:\\n{task}",
                    agent="planner")
    return call_llm(f"Problem:\\n{task}\\n\\nFollow this plan and solve it:\\n{plan}",
                    agent="executor")
```
"""


def generator_system() -> str:
    return (
        "You design multi-agent systems of language models. For the query you are given, "
        "write a Python program whose agents work together to answer it well.\n\n"
        "Rules for the program:\n"
        "- Define `forward(task: str) -> str`: it receives the query's full text and returns "
        "the final answer text, written so that it follows the query's instructions on how to "
        "state the answer.\n"
        "- Make model calls only through the module `maslab_bridge`: "
        "`call_llm(prompt_or_messages, agent=name, **params) -> str`, its asyncio form "
        "`await acall_llm(...)`, and `Agent(name, system=...)`, whose `ask(prompt)` (or "
        "`await aask(prompt)`) keeps the agent's own conversation. Messages are lists of "
        '{"role": "system" | "user" | "assistant", "content": str}; the only params are '
        "temperature, top_p, max_tokens, stop, seed and response_format.\n"
        "- Agent names are letters, digits, '_', '.' or '-'. Agents share information by "
        "putting each other's replies into their prompts.\n"
        "- Use only the standard library: no network, no files, no input(). Keep the number "
        "of model calls small (a few up to about ten) and suited to the query's difficulty.\n"
        "- Reply with the whole program in one ```python code block.\n\n" + EXAMPLES
    )


def query_prompt(task: Task) -> str:
    return f"Write the multi-agent system for this query:\n\n{task.prompt()}"


def retry_prompt(error: str) -> str:
    return (
        f"Your program did not produce an answer:\n\n{error}\n\n"
        "Fix it and reply with the whole corrected program in one ```python code block."
    )


def program_agent(name: str) -> bool:
    """Whether ``name`` is an agent of the program (``program/<name>``)."""
    return name.startswith(f"{PROGRAM}/") and len(name) > len(PROGRAM) + 1


def latest_program_reply(ctx: Context) -> str | None:
    """The latest answer a call of the program got (what a budget stop scores)."""
    for record in reversed(ctx.ledger.records):
        agent = record.agent or ""
        if (agent == PROGRAM or program_agent(agent)) and record.response is not None:
            return record.response
    return None


@register_method("mas_gpt")
class MasGpt(Method):
    """A generator writes a MAS as code per query; it runs in the sandbox on the driver model."""

    roles = (GENERATOR, PROGRAM, SOLVER)
    paper = "Ye et al., arXiv 2503.03686 (MAS-GPT)"
    category = "generated MAS (query-specific code written by a model, run on a driver model)"
    calls = (
        "t + Σ a_k over t ≤ 1 + `retries` programs written (a_k = program k's calls, "
        "≤ `max_program_calls`), + 1 direct answer if none answered; default 1 + a_1 when the "
        "first answers, up to 3 + a_1 + a_2"
    )
    runs_model_code = True

    class Config(MethodConfig):
        retries: int = Field(1, ge=0)
        """Programs written again, with the error shown, after one fails."""
        max_program_calls: int = Field(MAX_CALLS, ge=1)
        """The most model calls one program run is served."""
        time_limit: float = Field(LIMITS.wall_seconds, gt=0)
        """Wall seconds of one program run, its waits for the model included."""

    config: Config

    def check_model_roles(self, model_roles: Mapping[str, Any] | None) -> ModelRoles:
        """As :meth:`Method.check_model_roles`, and ``program/<name>`` names an agent of the
        program (whose names are only known once it runs)."""
        checked = check_model_roles(model_roles)
        fixed = {key: entry for key, entry in checked.items() if not program_agent(key)}
        check_role_names(fixed, self.name, self.roles, self.agent_names())
        return checked

    def structure(self) -> Topology:
        """The generator's code is the program; the solver (the fallback) reads no one."""
        return Topology.from_edges([(GENERATOR, PROGRAM)], name="mas_gpt", nodes=[SOLVER])

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        generator = ctx.agent(GENERATOR, system=generator_system())
        limits = replace(LIMITS, wall_seconds=cfg.time_limit)
        attempts: list[dict[str, Any]] = []
        prompt = query_prompt(task)
        for attempt in range(1 + cfg.retries):
            reply = (await generator.reply(prompt, round=attempt, kind="program")).content
            code = extract_answer(reply, "code")
            if code is None:
                attempts.append({"status": "no code", "calls": 0})
                prompt = retry_prompt("Your reply held no Python code block.")
                continue
            try:
                called = await call_function(
                    code,
                    "forward",
                    task.prompt(),
                    ctx,
                    agent=PROGRAM,
                    limits=limits,
                    max_calls=cfg.max_program_calls,
                )
            except BudgetExceeded:
                best = latest_program_reply(ctx)
                if best is not None:
                    ctx.propose(best, attempt=attempt)
                raise
            attempts.append({"status": called.run.result.status, "calls": called.calls})
            if called.answer is not None and called.answer.strip():
                metadata = {"attempts": attempts, "fallback": False}
                return Solution(answer=called.answer, metadata=metadata)
            prompt = retry_prompt(called.error or "forward returned no answer (empty text)")
        solver = ctx.agent(SOLVER)
        direct = await solver.reply(cot_prompt(task), round=len(attempts), kind="fallback")
        return Solution(answer=direct.content, metadata={"attempts": attempts, "fallback": True})
