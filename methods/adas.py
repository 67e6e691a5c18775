"""ADAS: Meta Agent Search, a meta agent that writes agents as code and keeps the best.

Hu, Lu, Clune. "Automated Design of Agentic Systems". arXiv:2408.08435 (ICLR 2025).
Code: github.com/ShengranHu/ADAS; MASLab's port ``methods/ADAS``.

An agent is a Python program that defines ``def forward(task: str) -> str`` (or ``async
def``): it gets the task's full prompt and returns the answer text, written as the task asks.
It calls models through :mod:`maslab.kit.bridge_client` (``from maslab_bridge import call_llm,
acall_llm, Agent``). Every run of an agent goes through :func:`maslab.kit.bridge.call_function`:
the program runs in the sandbox (never in this process), where our driver calls its
``forward`` on the task and reports the value (or the error); its model calls are the
sample's calls (budgeted, cached, in the ledger).

Search (``optimize``, on the first V = ``valid_size`` tasks of the optimisation split):

1. The archive starts with our own seed agents (``seeds``: chain of thought, self-consistency
   with an aggregating call, self-refine), each evaluated on the V tasks.
2. Generation g = 1..G: the meta agent reads the archive (each agent's idea, code and
   fitness) and one example task, and writes a new agent as JSON (``thought``, ``name``,
   ``code``). In the same conversation it reviews its design ``reflections`` times, replying
   with a revised design each time.
3. The design is checked (the code parses and defines ``forward``) and run on the V tasks.
   If its reply cannot be read, the code does not check, or a run fails (an exception, a
   time-out, no answer), the meta agent gets the error and writes a fix, up to
   ``debug_max`` times; each fix is evaluated again.
4. The design is added to the archive with its fitness, failed or not (a failed one with the
   runs it got right, and its error, which the meta agent sees in later generations).

Fitness: the mean of the evaluator's scores over the V tasks (a failed run scores 0): for
exact-match benchmarks, the accuracy. The evaluator is ``evaluator``, or the one of the task's
answer type (:data:`maslab.bench.evaluation.EVALUATOR_BY_ANSWER_TYPE`): a method does not see the
run's evaluator.

``solve`` runs the archive's fittest agent (ties: the earlier one) on the task; before any
optimisation, or if nothing in the archive was evaluated, the first seed (``cot`` by default).
The archive (code and fitness) is the learned state. Answer extraction is the evaluator's.

LLM calls: ``solve``: the chosen agent's calls, at most 100 (the bridge's limit; ``cot`` 1,
``self_consistency`` 4, ``self_refine`` 3). ``optimize``: V·Σ(seed calls), then per
generation 1 + ``reflections`` + d meta calls (d ≤ ``debug_max`` debug rounds) and up to
(1 + d) evaluations of V agent runs (at most ``max_programs`` sandboxed runs at once).

Roles: ``meta`` (the meta agent, agent ``meta``) and ``agent`` (every call of an agent's code:
the bridge records it as agent ``agent``, or ``agent/<name>`` for a named ``Agent`` of the
program; model roles ``agent=...`` put them all on another model).

Budget stop: a stopped agent run ends its program; ``solve`` has no answer before the agent's,
so a stop there scores the empty answer. In ``optimize`` a stop fails the step (nothing
learned is saved).

Deviations:

- Prompts, seed agents and the agent API are our own: agents are plain ``forward(task) ->
  answer`` programs over ``call_llm``/``Agent`` rather than the paper's ``LLMAgentBase`` with
  named output fields, and they run in the sandbox with their calls served through the
  context. MASLab's port ``exec``s generated code into its own globals; we never run it
  in-process (the code is only parsed to check it).
- Fitness is the mean score; the paper and MASLab rank by the median of a bootstrap
  confidence interval of the accuracy (which tends to the mean) and show the interval.
- The meta agent sees one example task of the validation set, so that its agents write the
  answer as the benchmark asks; the paper describes the domain in words instead.
- Defaults follow MASLab's port (``n_generation`` 3, ``valid_size`` 128, ``debug_max`` 3;
  two reflection passes as in the paper), not the paper's 25-30 generations. MASLab's debug
  loop does not retry (``n -= 1; continue`` in a ``for`` loop); ours does. A generation that
  still fails after ``debug_max`` fixes is archived with its error instead of dropped, so the
  archive grows by one agent per generation; it is chosen by ``solve`` only if it is the
  fittest agent whose code checks.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState, register_method
from maslab.core.task import Solution, Task
from maslab.kit.bridge import MAX_CALLS, FunctionCall, call_function
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask

META, AGENT = "meta", "agent"

SeedName = Literal["cot", "self_consistency", "self_refine"]

_STEP = "Reason step by step, then state the final answer in the form the task asks for."
SEEDS: dict[str, tuple[str, str]] = {
    "cot": (
        "Chain of thought: one call that reasons step by step before answering.",
        f"""from maslab_bridge import call_llm


def forward(task: str) -> str:
    return call_llm(task + "\\n\\n{_STEP}")
""",
    ),
    "self_consistency": (
        "Self-consistency: three independent solutions at a higher temperature, then one call "
        "that answers with the result most of them reach.",
        f"""from concurrent.futures import ThreadPoolExecutor

from maslab_bridge import call_llm

SAMPLES = 3


def forward(task: str) -> str:
    prompt = task + "\\n\\n{_STEP}"
    with ThreadPoolExecutor(SAMPLES) as pool:
        drafts = list(pool.map(lambda _: call_llm(prompt, temperature=0.8), range(SAMPLES)))
    shown = "\\n\\n".join(f"Solution {{i}}:\\n{{d}}" for i, d in enumerate(drafts, 1))
    return call_llm(
        f"{{task}}\\n\\nIndependent solutions:\\n\\n{{shown}}\\n\\n"
        "Give the answer most of them reach, stated in the form the task asks for."
    )
""",
    ),
    "self_refine": (
        "Self-refine: a solver answers, a critic lists its mistakes, the solver revises.",
        f"""from maslab_bridge import Agent


def forward(task: str) -> str:
    solver = Agent("solver")
    answer = solver.ask(task + "\\n\\n{_STEP}")
    critique = Agent("critic").ask(
        f"{{task}}\\n\\nProposed solution:\\n{{answer}}\\n\\n"
        "Check it step by step and list every mistake, or say that there is none."
    )
    return solver.ask(f"A reviewer wrote:\\n{{critique}}\\n\\nRevise your solution. {_STEP}")
""",
    ),
}


class Design(Reply):
    """The meta agent's JSON reply: the idea, a short name and the program."""

    json_name = "adas_agent"

    thought: Text = Field("", description="the idea of the agent and why it should work")
    name: Text = Field("", description="a short name")
    code: Text = Field(description="the complete program, imports included")


UNREADABLE = "your reply could not be read as the JSON object asked for"


class ArchivedAgent(BaseModel):
    """An agent of the archive; ``generation`` 0 is a seed. ``fitness`` is its mean score on
    the validation tasks (None: not evaluated); ``error`` the last problem it had, if any."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    thought: str
    code: str
    generation: int = Field(ge=0, strict=True)
    fitness: FiniteNumber | None = Field(None, ge=0, le=1)
    error: str | None = None
    debugs: int = Field(0, ge=0, strict=True)


def seed_agent(name: str) -> ArchivedAgent:
    thought, code = SEEDS[name]
    return ArchivedAgent(name=name, thought=thought, code=code, generation=0)


def meta_system() -> str:
    return (
        "You design agentic systems: Python programs in which calls to a language model work "
        "together to solve a task. An agent is a program that defines\n\n"
        "    def forward(task: str) -> str\n\n"
        "(or `async def forward`), which receives the full text of one task and returns the "
        "answer text, stated in the form the task asks for. The program runs in a sandbox with "
        "the standard library and the module `maslab_bridge`:\n"
        "- `call_llm(messages, *, agent=None, **params) -> str`: `messages` is a prompt string "
        '(one user turn) or a list of {"role": "system" | "user" | "assistant", "content": '
        "str}; `agent` names the caller; `params` may only be temperature, top_p, max_tokens, "
        "stop and seed.\n"
        "- `acall_llm(...)`: the same, to await (gather several for concurrent calls).\n"
        "- `Agent(name, system=None, **params)`: `.ask(prompt) -> str` (or `await "
        ".aask(prompt)`) keeps the agent's own conversation history.\n"
        "- `BridgeError`: raised by a call that is refused or fails.\n"
        "There is no network and no other package; threads are allowed. One run of an agent "
        f"may make at most {MAX_CALLS} model calls."
    )


def describe(index: int, agent: ArchivedAgent) -> str:
    origin = "seed" if agent.generation == 0 else f"generation {agent.generation}"
    fitness = "not evaluated" if agent.fitness is None else f"{agent.fitness:.1%}"
    lines = [f"## Agent {index}: {agent.name} ({origin})", f"Idea: {agent.thought or '-'}"]
    lines.append(f"Fitness: {fitness}")
    if agent.error:
        lines.append(f"Its last problem: {agent.error}")
    return "\n".join([*lines, f"```python\n{agent.code.strip()}\n```"])


def proposal_prompt(archive: Sequence[ArchivedAgent], example: Task, tasks: int) -> str:
    shown = "\n\n".join(describe(i, a) for i, a in enumerate(archive, 1))
    return (
        f"The archive of agents so far, each with its fitness (its mean score on {tasks} "
        f"validation tasks):\n\n{shown}\n\nAn example task, as `forward` receives it:\n\n"
        f"{example.prompt()}\n\n"
        "Design a new agent that should reach a higher fitness than every agent of the archive. "
        "Learn from the archive which ideas work and which fail, and do not just repeat one of "
        "its designs: combine, extend or invent."
    )


REFLECTION_PROMPT = (
    "Review your design. Is it really new compared with the archive, and likely to do better? "
    "Check the code line by line: the API of `maslab_bridge`, the signature of `forward`, "
    "the form of the answer it returns, errors that could stop it. Then reply with the improved "
    "design."
)


def debug_prompt(problem: str) -> str:
    return (
        f"There is a problem with your agent: {problem}\n\nFix it and reply with the corrected "
        "design."
    )


def code_problem(code: str) -> str | None:
    """Why ``code`` cannot be an agent (it does not parse, or defines no ``forward``), or None.
    The code is parsed, never run."""
    if not code.strip():
        return "the code is empty"
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"the code does not parse: {error}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "forward":
            return None
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "forward" for target in node.targets
        ):
            return None
    return "the code defines no top-level function `forward(task)`"


async def run_agent(code: str, task: Task, ctx: Context) -> FunctionCall:
    """Run the agent ``code`` on ``task`` in the sandbox, its calls served through ``ctx``."""
    return await call_function(code, "forward", task.prompt(), ctx, agent=AGENT, role=AGENT)


@dataclass(frozen=True)
class Evaluation:
    """An agent on the validation tasks: its fitness and the first failed run's error."""

    fitness: float
    error: str | None


@dataclass(frozen=True)
class Validation:
    """The validation tasks, and how agents run and are scored on them."""

    tasks: Sequence[Task]
    ctx: Context
    scorer: Scorer
    programs: asyncio.Semaphore  # sandboxed agent runs at once

    async def evaluate(self, code: str) -> Evaluation:
        """Run the agent on every task (at most ``programs`` at once); a failed run scores 0."""

        async def value(task: Task) -> tuple[float, str | None]:
            async with self.programs:
                run = await run_agent(code, task, self.ctx)
            if run.answer is None:
                return 0.0, run.error
            return (await self.scorer.score(task, run.answer, ctx=self.ctx)).value, None

        results = await asyncio.gather(*(value(task) for task in self.tasks))
        errors = [error for _, error in results if error]
        fitness = sum(v for v, _ in results) / len(results)
        return Evaluation(fitness, errors[0] if errors else None)

    async def check(self, design: Design | None) -> tuple[Evaluation | None, str | None]:
        """The design's evaluation (None if it cannot run) and its problem (None if none)."""
        if design is None:
            return None, UNREADABLE
        if problem := code_problem(design.code):
            return None, problem
        evaluation = await self.evaluate(design.code)
        return evaluation, evaluation.error


@register_method("adas")
class ADAS(Method):
    """Meta Agent Search: a meta agent writes agents as code, evaluated in the sandbox."""

    roles = (META, AGENT)
    paper = "Hu et al., arXiv 2408.08435"
    category = "automated design (meta agent writes agents as code)"
    calls = (
        "solve: the best archived agent's calls (default seed `cot`: 1); optimize: "
        "V·Σ seed calls + G·(1 + reflections + d ≤ debug_max) meta calls + ≤ G·(1 + d)·V runs"
    )
    runs_model_code = True

    class Config(MethodConfig):
        generations: int = Field(3, ge=0)  # MASLab's n_generation (the paper: about 25-30)
        valid_size: int = Field(128, ge=1)  # the first V tasks of the optimisation split
        reflections: int = Field(2, ge=0)
        debug_max: int = Field(3, ge=0)
        seeds: tuple[SeedName, ...] = Field(
            ("cot", "self_consistency", "self_refine"), min_length=1
        )
        max_programs: int = Field(8, ge=1)  # sandboxed agent runs at once in optimize
        evaluator: str | None = None  # None: by the task's answer type

        @field_validator("seeds")
        @classmethod
        def _distinct(cls, seeds: tuple[str, ...]) -> tuple[str, ...]:
            if len(set(seeds)) != len(seeds):
                raise ValueError("each seed agent at most once")
            return seeds

    config: Config

    class LearnedState(MethodState):
        archive: list[ArchivedAgent] = Field(min_length=1)

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.archive: list[ArchivedAgent] | None = None  # None: not optimised (nor loaded)

    def best(self) -> ArchivedAgent:
        """The fittest agent of the archive whose code checks (ties: the earliest); the first
        seed when there is no archive or nothing in it was evaluated."""
        archive = self.archive or [seed_agent(name) for name in self.config.seeds]
        scored = [a for a in archive if a.fitness is not None and code_problem(a.code) is None]
        return max(scored, key=lambda a: a.fitness or 0.0) if scored else archive[0]

    async def solve(self, task: Task, ctx: Context) -> Solution:
        agent = self.best()
        run = await run_agent(agent.code, task, ctx)
        metadata = {
            "agent": agent.name,
            "generation": agent.generation,
            "fitness": agent.fitness,
            "agent_calls": run.calls,
        }
        if run.answer is None:
            return Solution(answer="", metadata={**metadata, "error": run.error})
        return Solution(answer=run.answer, metadata=metadata)

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Meta Agent Search on the first ``valid_size`` tasks; the archive is what it learns."""
        cfg = self.config
        tasks = list(tasks[: cfg.valid_size])
        if not tasks:
            return
        validation = Validation(
            tasks, ctx, Scorer(cfg.evaluator), asyncio.Semaphore(cfg.max_programs)
        )
        try:
            seeds = [seed_agent(name) for name in cfg.seeds]
            evaluations = await asyncio.gather(*(validation.evaluate(s.code) for s in seeds))
            archive = [
                seed.model_copy(update={"fitness": e.fitness, "error": e.error})
                for seed, e in zip(seeds, evaluations, strict=True)
            ]
            for generation in range(1, cfg.generations + 1):
                archive.append(await self.design(archive, validation, generation))
        finally:
            await validation.scorer.aclose()
        self.archive = archive

    async def design(
        self, archive: Sequence[ArchivedAgent], validation: Validation, generation: int
    ) -> ArchivedAgent:
        """One generation: propose, reflect, evaluate, debug; the agent to archive."""
        cfg = self.config
        meta = validation.ctx.agent(META, role=META, system=meta_system())

        async def request(prompt: str, kind: str) -> Design | None:
            _, design = await ask(meta, prompt, Design, round=generation, kind=kind)
            return design

        tasks = validation.tasks
        design = await request(proposal_prompt(archive, tasks[0], len(tasks)), "proposal")
        for _ in range(cfg.reflections):
            design = await request(REFLECTION_PROMPT, "reflection") or design
        evaluation, problem = await validation.check(design)
        debugs = 0
        while problem is not None and debugs < cfg.debug_max:
            debugs += 1
            fixed = await request(debug_prompt(problem), "debug")
            if fixed is None:
                problem = UNREADABLE  # the last readable design stays, with its evaluation
                continue
            design = fixed
            evaluation, problem = await validation.check(fixed)
        return ArchivedAgent(
            name=(design.name if design else "") or f"generation_{generation}",
            thought=design.thought if design else "",
            code=design.code if design else "",
            generation=generation,
            fitness=evaluation.fitness if evaluation else 0.0,
            error=problem,
            debugs=debugs,
        )

    def learned_state(self) -> ADAS.LearnedState | None:
        """The archive, each agent with its code and fitness (None before ``optimize``)."""
        if self.archive is None:
            return None
        return self.LearnedState(archive=self.archive)

    def load_learned_state(self, state: ADAS.LearnedState) -> None:
        self.archive = list(state.archive)
