"""MARS² (inference-time part): several coding agents grow one search tree of programs, choosing
who writes next and what to work on by two-level Thompson sampling on public-test scores.

Li, Wang, ..., Zhou. "MARS²: Scaling Multi-Agent Tree Search via Reinforcement Learning for
Code Generation". arXiv:2604.14564 (ACL 2026). Code: github.com/TsinghuaC3I/MARTI
(``marti/agent_workflows/ab_mcts_workflow.py``).

Algorithm (K = ``agents``, budget B = ``nodes``), one expansion at a time:

1. The tree starts as a bare root (no program). The public tests are the examples the task's
   prompt shows (:func:`maslab.kit.code_tests.public_tests`: HumanEval's doctests, MBPP's shown
   assert); the hidden tests that score the run are never used or shown.
2. Expansion n = 1..B, two Thompson draws from the sample's random stream (``ctx.rng``):

   * level 1, the agent: every agent ``agent_k`` has a Beta posterior, Beta(1, 1) at first,
     over the score of the nodes it writes; one draw from each, the highest draw writes.
   * level 2, the node: every node has a Beta posterior over the score of what expanding it
     yields; one draw from each, the highest draw is expanded. Expanding the root is the
     **generate** action (a fresh program from the task alone: the tree widens); expanding a
     program node is **refine** (the chosen agent reads the task, the node's program and its
     public-test feedback, and writes a revised program: the tree deepens).

3. The new node's program (its reply's last code block, after the task's ``prompt_prefix``) is
   run against the public tests in the sandbox (:func:`maslab.kit.code_tests.run_tests`). Its
   score r is the fraction passed (with no public test: 1 if the code runs without error,
   else 0; a reply without code scores 0). The reward r updates, as a fractional Bernoulli
   observation (alpha += r, beta += 1 - r), the writing agent's posterior and the expanded
   node's posterior. A new node's posterior starts at Beta(1, 1) updated with its own score:
   a program that passes more tests is more promising to refine.
4. With ``stop_on_pass`` (default), the search stops at the first node that passes every
   public test. This never changes the answer: that node is the earliest best-scoring one.
5. The answer is the best node's reply: the highest score, the earliest on ties.

LLM calls: one per node, n = B (default 8), or n = t if node t is the first to pass every
public test (``stop_on_pass``). Running the tests calls no model.

Budget stop: the best node so far (each improvement of the best score is proposed).

Deviations: prompts are our own. The paper's search (MARTI's ``AsyncABMCTSA``, TreeQuest's
adaptive-branching MCTS) walks down the tree from the root, choosing at each node by Thompson
sampling between generating a new child with one of the models and descending into a child,
and backs scores up to the ancestors; we follow the spec's flat two-level form: an agent
first, then any node of the tree (the root standing for "generate"), each by its own Beta
posterior, with rewards credited to the expanded node only (not its ancestors). The paper's
public tests come with the benchmark (LiveCodeBench); here they are the prompt's examples.
Defaults: K = 2 agents (the paper pairs two policies, e.g. Qwen3-8B and AReaL) and B = 8
nodes (``MCTS_NODES`` in MARTI's MARS² scripts); ``stop_on_pass`` saves calls the paper would
spend after a full pass. Agents differ only by their model: put them on different models with
model roles (``agent_1=..., agent_2=...``). The training part (reward shaping, per-agent
policy updates) is not implemented. Tasks that are not code tasks are refused.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.kit.code_tests import TestRun, public_tests, run_tests

ROOT = 0
"""The root's node id: it holds no program; expanding it is the generate action."""


def generate_prompt(task: Task) -> str:
    return (
        f"{task.prompt()}\n\nWrite a correct and complete Python solution. Think briefly about "
        "the approach and the edge cases, then give the whole program in one ```python code "
        "block."
    )


def refine_prompt(task: Task, node: TreeNode) -> str:
    if node.code is not None:
        shown = f"A candidate program for this task:\n```python\n{node.code.strip()}\n```"
    else:
        shown = f"An earlier attempt at this task (it had no Python code):\n{node.answer.strip()}"
    return (
        f"{task.prompt()}\n\n{shown}\n\nWhat happened when it was run on the examples the task "
        f"gives:\n{node.feedback.strip()}\n\nImprove it: find why it fails, fix that, keep what "
        "works, and give the complete revised program in one ```python code block."
    )


@dataclass
class Beta:
    """A Beta posterior over a reward in [0, 1], updated with fractional Bernoulli rewards."""

    alpha: float = 1.0
    beta: float = 1.0

    def update(self, reward: float) -> None:
        self.alpha += reward
        self.beta += 1.0 - reward

    def draw(self, rng: random.Random) -> float:
        return rng.betavariate(self.alpha, self.beta)

    def as_list(self) -> list[float]:
        return [self.alpha, self.beta]


@dataclass
class TreeNode:
    """A node of the search tree: a program, who wrote it from which node, and its score."""

    id: int
    parent: int | None
    agent: str | None
    action: Literal["root", "generate", "refine"]
    answer: str = ""
    code: str | None = None
    feedback: str = ""
    counts: tuple[int, int] = (0, 0)
    score: float = 0.0
    posterior: Beta = field(default_factory=Beta)

    def record(self) -> dict[str, Any]:
        passed, tests = self.counts
        return {
            "id": self.id,
            "parent": self.parent,
            "agent": self.agent,
            "action": self.action,
            "score": self.score,
            "passed": passed,
            "tests": tests,
            "posterior": self.posterior.as_list(),
        }


def thompson(posteriors: list[Beta], rng: random.Random) -> int:
    """The index of the highest draw, one draw per posterior in order (the first on ties)."""
    draws = [p.draw(rng) for p in posteriors]
    return draws.index(max(draws))


def score_of(run: TestRun) -> float:
    passed, tests = run.counts
    return passed / tests if tests else float(run.passed)


@register_method("mars2_search")
class Mars2Search(Method):
    """Agents grow a shared tree of programs; two-level Thompson sampling; best public score."""

    roles = ("agent",)
    paper = "Li et al., arXiv 2604.14564 (MARS², inference-time search)"
    category = "multi-agent tree search over programs (Thompson sampling, public tests)"
    calls = "n = nodes (default 8); t if node t first passes every public test (`stop_on_pass`)"

    class Config(MethodConfig):
        agents: int = Field(2, ge=1)
        nodes: int = Field(8, ge=1)
        stop_on_pass: bool = True

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("agent", self.config.agents)

    def structure(self) -> Topology:
        """The agents share one tree: each may refine any other agent's program."""
        names = list(self.agent_names())
        return Topology.complete(names) if len(names) > 1 else Topology.chain(names)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        if task.answer_type != "code":
            raise ConfigError(
                f"mars2_search searches over programs: task '{task.id}' is not a code task "
                f"(answer_type '{task.answer_type}'); use a code benchmark (humaneval, mbpp)"
            )
        cfg = self.config
        names = list(self.agent_names())
        ctx.topology = self.structure()
        agents = [ctx.agent(name, role="agent") for name in names]
        agent_posteriors = {name: Beta() for name in names}
        expansions = dict.fromkeys(names, 0)
        tests = public_tests(task)
        tree = [TreeNode(ROOT, None, None, "root")]
        best: TreeNode | None = None

        for n in range(1, cfg.nodes + 1):
            k = thompson(list(agent_posteriors.values()), ctx.rng)
            parent = tree[thompson([node.posterior for node in tree], ctx.rng)]
            node = await self._expand(task, ctx, agents[k], parent, n, tests)
            tree.append(node)
            agent_posteriors[names[k]].update(node.score)
            expansions[names[k]] += 1
            parent.posterior.update(node.score)
            node.posterior.update(node.score)
            if best is None or node.score > best.score:
                best = node
                ctx.propose(node.answer, node=node.id, score=node.score)
            if cfg.stop_on_pass and node.score == 1.0:
                break

        assert best is not None  # nodes >= 1
        return Solution(
            answer=best.answer,
            metadata={
                "best": best.id,
                "best_score": best.score,
                "public_tests": len(tests),
                "passed_all": best.score == 1.0,
                "expansions": expansions,
                "agent_posteriors": {name: p.as_list() for name, p in agent_posteriors.items()},
                "tree": [node.record() for node in tree],
            },
        )

    @staticmethod
    async def _expand(
        task: Task, ctx: Context, agent: Agent, parent: TreeNode, n: int, tests: list[str]
    ) -> TreeNode:
        """Node ``n``: ``agent`` generates from the root or refines ``parent``; then its tests."""
        action: Literal["generate", "refine"] = "generate" if parent.id == ROOT else "refine"
        prompt = generate_prompt(task) if action == "generate" else refine_prompt(task, parent)
        said = await agent.reply(
            prompt,
            round=n,
            remember=False,
            metadata={"node": n, "parent": parent.id, "action": action},
        )
        run = await run_tests(task, said.content, tests)
        ctx.post("sandbox", run.feedback, round=n, kind="test_results", metadata={"node": n})
        return TreeNode(
            id=n,
            parent=parent.id,
            agent=agent.name,
            action=action,
            answer=said.content,
            code=extract_answer(said.content, "code", entry_point=task.entry_point),
            feedback=run.feedback,
            counts=run.counts,
            score=score_of(run),
        )
