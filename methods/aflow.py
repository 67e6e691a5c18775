"""AFlow: search over workflows written as code, each a composition of model-calling operators.

Zhang, Xiang, Yu, Teng, Chen, Chen, Zhuge, Cheng, Hong, Wang, Zheng, Liu, Luo, Wu. "AFlow:
Automating Agentic Workflow Generation". arXiv:2410.10762 (ICLR 2025). Code:
github.com/FoundationAgents/AFlow (also MetaGPT ``metagpt/ext/aflow``).

A workflow is a Python program ``async def workflow(task: str) -> str`` (a plain ``def`` is
run too) composing the operators of :data:`OPERATORS`, a library of ours that is written next
to it as ``operators.py``: ``generate`` (a free-form call with an instruction), ``answer``
(step-by-step reasoning to a final answer), ``sc_ensemble`` (the model picks the solution most
of the candidates agree with), ``review`` (a verdict and feedback), ``revise`` (a fix from the
feedback) and ``format_answer`` (the final answer in the task's required form). The workflow
may also call :mod:`maslab_bridge` itself and run operators concurrently
(``asyncio.gather``). It always runs in the sandbox through :func:`maslab.kit.bridge.call_function`
(never in this process): its calls are the sample's, recorded as ``program/<operator>`` (the
role ``executor``); its answer is the value ``workflow`` returns (its own prints never are).

Search (``optimize``, on the validation tasks V, ``validation_rounds`` = r):

1. The seed workflow (one ``answer`` call) is evaluated: it runs r times on every task of V;
   its score is the mean of the benchmark's evaluator scores over those r·|V| runs (the
   evaluator named in the config, else the one for each task's answer type). A run that
   fails (an exception, a timeout, no answer) scores 0 and is kept as a failure example.
2. Round t = 1..``rounds``: the candidates are the ``sample`` best workflows so far (ties: the
   older) plus the seed, sorted by score (best first). The parent is drawn from the sample's
   random stream with the soft mixed probability, scores s in percent (100 x mean accuracy):

       P(i) = lambda / n + (1 - lambda) * exp(alpha (s_i - s_max)) / sum_j exp(alpha (s_j - s_max))

   with alpha = 0.2, lambda = 0.3 (the official code's values), n the number of candidates.
3. The optimizer (role ``optimizer``) reads the operator library, the parent's code and score,
   its experience (each earlier modification of this parent and whether it beat it) and up to
   3 of the parent's failures (drawn from the sample's stream), and replies with JSON:
   ``modification`` (one sentence) and ``code`` (the whole new workflow).
4. A reply that is not such JSON, or whose code does not parse (``ast``, never run here) or
   defines no top-level ``workflow``, ends the round without a child (logged in the parent's
   experience). Otherwise the child is evaluated as in 1 and joins the tree.
5. Early stop (``early_stop``): the search ends when the mean score of the best 3 workflows
   has not risen for ``patience`` consecutive rounds.

The learned state is the tree: every workflow's code, parent, round, modification and score.
``solve`` runs the best workflow (the seed before any optimisation) once on the task.

LLM calls: ``solve``: the best workflow's calls (the seed: 1), at most 100 (the bridge's
limit per run). ``optimize``: at most R optimizer calls (R = ``rounds``, fewer on an early
stop) plus (1 + C)·r·|V| workflow runs (C ≤ R the usable children), each with its workflow's
calls.

Budget stop: ``solve`` proposes the workflow's latest model reply (the program is ended); in
``optimize`` a budget stop ends the search with the tree evaluated so far (a workflow whose
evaluation was cut is dropped).

Deviations:

- Our operator library, prompts and wording; no ``Programmer`` / ``Test`` operators (code
  execution inside the workflow), so the same library serves every benchmark. Workflows are
  one function, not the official ``Workflow`` class with a separate prompt file; the optimizer
  answers in JSON (``modification``, ``code``) instead of XML tags, with one call per round
  (the official code retries until it gets a usable, new modification).
- The seed is always among the candidates (the paper's description); the official
  ``get_top_rounds`` keeps it only when it is among the top ``sample``.
- Early stop: the official check is on the top-3 mean with a standard-error test over 5
  rounds; ours is "the top-3 mean did not rise for ``patience`` rounds".
- Defaults are the paper's: 20 rounds, r = 5 evaluations per workflow, ``sample`` 4 (the
  official default). MASLab's config runs ``max_rounds: 1`` and ``validation_rounds: 1``
  (a single round, so no search at all); set ``rounds`` / ``validation_rounds`` to reproduce
  it. The paper's optimizer and executor models (Claude-3.5-Sonnet, GPT-4o-mini) are model
  roles here: ``--model-role optimizer=...``, ``--model-role executor=...``.
- Failures shown to the optimizer are the parent's wrong or failed validation runs (question,
  workflow output, gold); the official log samples 3 of the parent's logged mistakes.
"""

from __future__ import annotations

import ast
import asyncio
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState, register_method
from maslab.core.task import Solution, Task
from maslab.errors import BudgetExceeded
from maslab.kit.bridge import call_function
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask

OPTIMIZER, EXECUTOR, PROGRAM = "optimizer", "executor", "program"
OPERATOR_AGENTS = ("generate", "answer", "sc_ensemble", "review", "revise", "format_answer")
ALPHA, LAMBDA = 0.2, 0.3  # the soft mixed probability's score sharpness and uniform share
CONVERGENCE_TOP = 3  # early stop watches the mean score of this many best workflows
FAILURES_SHOWN = 3
SHOWN_CHARS = 1500  # a failure's question and output are cut to this many characters

OPERATORS = '''"""Workflow operators: each is one or a few model calls through maslab_bridge."""

import json
import re

from maslab_bridge import acall_llm


def _json(text):
    """The first JSON object in text, or an empty dict."""
    for match in re.finditer(r"\\{.*\\}", text, re.S):
        try:
            value = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


async def generate(task, instruction=""):
    """The model's reply to the instruction followed by the task (free form)."""
    prompt = f"{instruction.strip()}\\n\\n{task}" if instruction.strip() else task
    return await acall_llm(prompt, agent="generate")


async def answer(task):
    """A step-by-step solution of the task that ends with its final answer."""
    prompt = (
        f"{task}\\n\\nWork through this step by step, checking each step, and finish with "
        "the final answer in the form the task asks for."
    )
    return await acall_llm(prompt, agent="answer")


async def sc_ensemble(task, solutions):
    """Of several solutions, the one whose final answer most of them share (the model picks)."""
    if not solutions:
        return ""
    listed = "\\n\\n".join(f"[{i}]\\n{s}" for i, s in enumerate(solutions, 1))
    prompt = (
        f"Task:\\n{task}\\n\\nCandidate solutions:\\n\\n{listed}\\n\\nCompare their final "
        "answers and find the answer that most candidates reach. Reply with a JSON object: "
        '{"reasoning": "...", "choice": <the number of one candidate with that answer>}.'
    )
    reply = _json(await acall_llm(prompt, agent="sc_ensemble"))
    choice = reply.get("choice")
    if isinstance(choice, int) and 1 <= choice <= len(solutions):
        return solutions[choice - 1]
    return solutions[0]


async def review(task, solution):
    """A critical check of a solution: {"correct": bool, "feedback": str}."""
    prompt = (
        f"Task:\\n{task}\\n\\nProposed solution:\\n{solution}\\n\\nCheck the solution step "
        'by step. Reply with a JSON object: {"feedback": "what is wrong or missing", '
        '"correct": true or false}.'
    )
    reply = _json(await acall_llm(prompt, agent="review"))
    return {"correct": reply.get("correct") is True, "feedback": str(reply.get("feedback", ""))}


async def revise(task, solution, feedback):
    """A corrected, complete solution that takes the feedback into account."""
    prompt = (
        f"Task:\\n{task}\\n\\nEarlier solution:\\n{solution}\\n\\nFeedback on it:\\n"
        f"{feedback}\\n\\nWrite a corrected, complete solution that ends with the final answer."
    )
    return await acall_llm(prompt, agent="revise")


async def format_answer(task, solution):
    """The solution's final answer restated exactly in the form the task requires."""
    prompt = (
        f"Task:\\n{task}\\n\\nSolution:\\n{solution}\\n\\nState the solution's final answer in "
        "exactly the form the task requires, with nothing else."
    )
    return await acall_llm(prompt, agent="format_answer")
'''
"""The operator library, written next to each workflow as ``operators.py``."""

OPERATOR_GUIDE = """\
from operators import generate, answer, sc_ensemble, review, revise, format_answer  (all async)
- await generate(task, instruction="") -> str: the model's reply to your instruction + the task
- await answer(task) -> str: a step-by-step solution ending with the final answer
- await sc_ensemble(task, solutions: list[str]) -> str: the solution most candidates agree with
- await review(task, solution) -> {"correct": bool, "feedback": str}
- await revise(task, solution, feedback) -> str: a corrected solution
- await format_answer(task, solution) -> str: just the final answer in the required form
Independent calls may run together: await asyncio.gather(answer(task), answer(task)).
maslab_bridge.acall_llm(prompt, agent="name") is a raw model call."""

SEED_WORKFLOW = """from operators import answer


async def workflow(task: str) -> str:
    return await answer(task)
"""


class Workflow(BaseModel):
    """A node of the search tree."""

    model_config = ConfigDict(extra="forbid")

    id: StrictInt
    parent: StrictInt | None
    round: StrictInt
    modification: str
    code: str
    score: FiniteNumber | None = None
    """Mean evaluator score over its validation runs; None: not evaluated."""


Stopped = Literal["rounds", "converged", "budget"]
"""Why a search ended: its rounds ran out, its top scores stopped rising, its budget ran out."""


def seed_workflow() -> Workflow:
    return Workflow(id=0, parent=None, round=0, modification="seed", code=SEED_WORKFLOW)


class Proposal(Reply):
    """The optimizer's reply."""

    json_name = "aflow_workflow"

    modification: Text = Field("", description="one sentence saying what you changed and why")
    code: Text = Field("", description="the complete new program")


class Run(BaseModel):
    """One run of a workflow on a task: its answer, or why it has none."""

    answer: str = ""
    error: str | None = None


def mixed_probabilities(scores: Sequence[float]) -> list[float]:
    """The soft mixed selection probabilities of candidates scoring ``scores`` (0..1 each)."""
    percent = [100 * s for s in scores]
    top = max(percent)
    weights = [math.exp(ALPHA * (s - top)) for s in percent]
    total = sum(weights)
    n = len(scores)
    return [LAMBDA / n + (1 - LAMBDA) * w / total for w in weights]


def candidates(tree: Sequence[Workflow], sample: int) -> list[Workflow]:
    """The ``sample`` best evaluated workflows plus the seed, best first (ties: the older)."""
    scored = sorted(
        (w for w in tree if w.score is not None), key=lambda w: (-(w.score or 0.0), w.id)
    )
    chosen = scored[:sample]
    if tree[0] not in chosen and tree[0].score is not None:
        chosen.append(tree[0])
    return chosen


def draw(probabilities: Sequence[float], rng: random.Random) -> int:
    """An index drawn with ``probabilities`` (one uniform draw from ``rng``)."""
    u, cumulative = rng.random(), 0.0
    for i, p in enumerate(probabilities):
        cumulative += p
        if u < cumulative:
            return i
    return len(probabilities) - 1


def usable_code(code: str) -> bool:
    """Whether ``code`` parses and defines a top-level ``workflow`` (never executed here)."""
    try:
        module = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return any(isinstance(n, functions) and n.name == "workflow" for n in module.body)


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " [...]"


def optimizer_prompt(
    parent: Workflow, experience: Sequence[str], failures: Sequence[tuple[Task, Run]]
) -> str:
    tried = "\n".join(f"- {line}" for line in experience) or "- nothing yet"
    shown = "\n\n".join(
        f"Task:\n{_cut(task.prompt())}\nWorkflow output: {_cut(run.error or run.answer)}\n"
        f"Expected: {task.gold}"
        for task, run in failures
    )
    return (
        "You improve an agentic workflow: a Python program that solves tasks by calling a "
        "language model through a small operator library.\n\n"
        f"Operator library:\n{OPERATOR_GUIDE}\n\n"
        "The program must define `async def workflow(task: str) -> str` returning the final "
        "answer text; it may import only the standard library, `operators` and "
        "`maslab_bridge`.\n\n"
        f"Current workflow (validation accuracy {100 * (parent.score or 0.0):.1f}%):\n"
        f"```python\n{parent.code}\n```\n\n"
        f"Changes already tried on this workflow and their outcome:\n{tried}\n\n"
        f"Some tasks it got wrong:\n\n{shown or 'none recorded'}\n\n"
        "Propose one focused change that should raise its accuracy (add, remove or replace an "
        "operator, change an instruction, add a check or an ensemble), different from the "
        "changes already tried."
    )


@register_method("aflow")
class AFlow(Method):
    """Search over code workflows of operators; solve with the best one found."""

    roles = (OPTIMIZER, EXECUTOR)
    paper = "Zhang et al., arXiv 2410.10762 (AFlow)"
    category = "automated workflow search (code workflows of operators, MCTS-style)"
    calls = (
        "the best workflow's calls (seed: 1); optimize: ≤ R optimizer calls + (1 + C)·r·|V| "
        "workflow runs"
    )
    runs_model_code = True

    class Config(MethodConfig):
        rounds: int = Field(20, ge=0)
        """Optimisation rounds (optimizer calls) after the seed's evaluation."""
        validation_rounds: int = Field(5, ge=1)
        """r: runs of each workflow on each validation task."""
        sample: int = Field(4, ge=1)
        """Candidates for the parent: this many best workflows (plus the seed)."""
        early_stop: bool = True
        patience: int = Field(5, ge=1)
        evaluator: str | None = None
        """None: the evaluator of each task's answer type (numeric, math, choice, code, exact)."""
        parallel_runs: int = Field(4, ge=1)
        """Sandbox runs at once while evaluating."""

    config: Config

    class LearnedState(MethodState):
        workflows: list[Workflow] = Field(min_length=1)
        best: StrictInt
        """The id of the workflow ``solve`` runs."""
        stopped: Stopped

        @model_validator(mode="after")
        def _a_tree_from_the_seed(self) -> AFlow.LearnedState:
            if self.workflows[0].parent is not None:
                raise ValueError("the first workflow is not the seed (it has a parent)")
            if self.best not in {w.id for w in self.workflows}:
                raise ValueError(f"best is {self.best}, the id of no workflow")
            return self

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.tree: list[Workflow] = [seed_workflow()]
        self.stopped: Stopped | None = None
        """Why the last ``optimize`` ended (None: it has not run)."""

    def agent_names(self) -> tuple[str, ...]:
        return tuple(f"{PROGRAM}/{name}" for name in OPERATOR_AGENTS)

    @property
    def best(self) -> Workflow:
        """The best evaluated workflow (the older on ties), else the seed."""
        return candidates(self.tree, 1)[0] if self.tree[0].score is not None else self.tree[0]

    async def execute(self, code: str, task: Task, ctx: Context) -> Run:
        """Run workflow ``code`` on ``task`` in the sandbox; its calls are ``ctx``'s."""
        called = await call_function(
            code,
            "workflow",
            task.prompt(),
            ctx,
            agent=PROGRAM,
            role=EXECUTOR,
            files={"operators.py": OPERATORS},
        )
        if called.answer is None:
            return Run(error=called.error)
        return Run(answer=called.answer)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        workflow = self.best
        try:
            run = await self.execute(workflow.code, task, ctx)
        except BudgetExceeded:
            replies = [r.response for r in ctx.ledger.records if r.response is not None]
            if replies:
                ctx.propose(replies[-1], workflow=workflow.id)
            raise
        return Solution(answer=run.answer, metadata={"workflow": workflow.id, "error": run.error})

    async def evaluate(
        self, code: str, tasks: Sequence[Task], ctx: Context, scorer: Scorer
    ) -> tuple[float, list[tuple[Task, Run]]]:
        """The mean score of ``validation_rounds`` runs of ``code`` on every task, and the
        runs that were wrong or failed (in run order)."""
        slots = asyncio.Semaphore(self.config.parallel_runs)
        jobs = [task for _ in range(self.config.validation_rounds) for task in tasks]

        async def one(task: Task) -> tuple[float, Run]:
            async with slots:
                run = await self.execute(code, task, ctx)
            if run.error is not None:
                return 0.0, run
            return (await scorer.score(task, run.answer, ctx=ctx)).value, run

        results = await asyncio.gather(*(one(task) for task in jobs))
        failures = [(t, run) for t, (v, run) in zip(jobs, results, strict=True) if v < 1]
        return sum(v for v, _ in results) / len(results), failures

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """The search of the module docstring on ``tasks``; the tree is the learned state."""
        cfg = self.config
        if not tasks:
            return
        seed = seed_workflow()
        self.tree = [seed]
        failures: dict[int, list[tuple[Task, Run]]] = {}
        experience: dict[int, list[str]] = {}
        optimizer = ctx.agent(OPTIMIZER)
        scorer = Scorer(cfg.evaluator)
        self.stopped = "rounds"
        try:
            seed.score, failures[0] = await self.evaluate(seed.code, tasks, ctx, scorer)
            history = [self.top_mean()]
            for t in range(1, cfg.rounds + 1):
                pool = candidates(self.tree, cfg.sample)
                parent = pool[draw(mixed_probabilities([w.score or 0.0 for w in pool]), ctx.rng)]
                known = failures[parent.id]
                shown = ctx.rng.sample(known, min(FAILURES_SHOWN, len(known)))
                _, proposal = await ask(
                    optimizer,
                    optimizer_prompt(parent, experience.get(parent.id, []), shown),
                    Proposal,
                    round=t,
                    remember=False,
                )
                tried = experience.setdefault(parent.id, [])
                if proposal is None or not usable_code(proposal.code):
                    tried.append("an unusable reply (no valid program): no change")
                else:
                    child = Workflow(
                        id=len(self.tree), parent=parent.id, round=t,
                        modification=proposal.modification, code=proposal.code,
                    )  # fmt: skip
                    child.score, failures[child.id] = await self.evaluate(
                        child.code, tasks, ctx, scorer
                    )
                    self.tree.append(child)
                    outcome = "better" if child.score > (parent.score or 0.0) else "not better"
                    tried.append(
                        f"{proposal.modification or 'unexplained change'} -> "
                        f"{100 * child.score:.1f}% ({outcome})"
                    )
                history.append(self.top_mean())
                recent = history[-cfg.patience - 1 :]
                if cfg.early_stop and len(recent) > cfg.patience and max(recent) <= recent[0]:
                    self.stopped = "converged"
                    break
        except BudgetExceeded:
            self.stopped = "budget"
        finally:
            await scorer.aclose()

    def top_mean(self) -> float:
        """The mean score of the best :data:`CONVERGENCE_TOP` evaluated workflows."""
        scores = [w.score or 0.0 for w in candidates(self.tree, CONVERGENCE_TOP)]
        return sum(scores[:CONVERGENCE_TOP]) / len(scores[:CONVERGENCE_TOP])

    def learned_state(self) -> AFlow.LearnedState | None:
        """The workflow tree and why the search ended (None before ``optimize`` ran)."""
        if self.stopped is None:
            return None
        workflows = [w.model_copy() for w in self.tree]  # optimize sets the scores in place
        return self.LearnedState(workflows=workflows, best=self.best.id, stopped=self.stopped)

    def load_learned_state(self, state: AFlow.LearnedState) -> None:
        self.tree = [w.model_copy() for w in state.workflows]
        self.stopped = state.stopped
