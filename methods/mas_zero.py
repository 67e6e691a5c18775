"""MAS-Zero: a meta-agent designs, runs, critiques and revises a MAS for each query.

Ke, Xu, Ming, Nguyen, Chin, Xiong, Joty. "MAS-Zero: Designing Multi-Agent Systems with Zero
Supervision". arXiv:2505.14996 (NeurIPS 2025 workshop SEA). Code:
github.com/SalesforceAIResearch/MAS-Zero.

Algorithm (per query; no validation set, no training):

1. MAS-Init: the seed MASs (``seeds``: CoT, CoT-SC, debate, self-refine) each solve the whole
   question, concurrently; each final output is a candidate answer (in seed order).
2. Meta-design (iteration t = 1..T): the designer (the meta-agent) splits the question into
   sub-tasks, choosing for each a building block from the menu and its settings (``n``
   agents, ``rounds``). The first design sees the seeds' answers; a later one sees, in the
   designer's own conversation, what its previous design produced and the meta-feedback on it.
3. The design runs: sub-tasks in order, each block's agents reading the question and every
   earlier sub-task's result (in sub-task order). A sub-task that is too hard may say so with
   a ``[TOO_HARD]`` line and a suggestion, after its best answer. Blocks:

   - ``cot``: one agent reasons step by step (1 call);
   - ``cot_sc``: n agents reason independently, concurrently; the majority answer's response
     is the result (n calls);
   - ``debate``: n agents answer, then for r rounds in all each sees the others' previous
     answers (agent order) as a new turn of its own conversation; the majority over the last
     round (n·r calls);
   - ``self_refine``: an agent answers, a critic reviews (JSON: feedback and stop), a refiner
     rewrites from every earlier answer and its feedback, up to r times, until the critic says
     stop (2j calls if it stops at review j ≤ r, else 1 + 2r).

   The last sub-task answers the question in the task's format: its result is design t's
   candidate answer.
4. Meta-feedback (between iterations): the evaluator reads the design, every agent's output
   and every sub-task's result, and the answers found so far, and judges solvability (is each
   sub-task solved by its block, or too hard, or did a block fail?) and completeness (do the
   sub-tasks together carry all the question's information to the answer?), with a revision
   plan (JSON), which goes to the designer's next turn.
5. MAS-Verify: candidates whose answer can be read (all, if none can) are sorted by how many
   candidates share their answer (ties: production order) and shown to the verifier, which
   compares them and names the best (JSON); that candidate is the answer.
   ``select="majority"``: the majority vote over the candidates instead (no call).

LLM calls: S + Σ_{t≤T} (1 + B_t) + (T − 1) + 1, where S is the seeds' calls and B_t the blocks'
calls of design t (cot 1, cot_sc n, debate n·r, self_refine 2j if the critic stops at review j
≤ r, else 1 + 2r): a design per iteration, a feedback between iterations, one selection (none
with ``select="majority"``). Defaults: T = 5, S = 1 + 5 + 2·5 + (2 to 11) = 18 to 27.

Budget stop: the majority vote over the candidates produced so far (seeds in seed order as they
finish, then designs in order); nothing before the first candidate.

Model roles: ``meta`` (agents ``designer`` and ``evaluator``; the paper's meta model),
``node`` (every block agent; the paper's node model) and ``verifier``. Block agents are named by
where they run: ``seed_<block>_`` for the seeds, ``it<t>_s<i>_`` for sub-task i of design t,
then ``solver``, ``sample_k``, ``debater_k``, ``generator``/``critic``/``refiner``
(``seed_cot_sc_sample_2``, ``it1_s2_debater_1``); model roles reach them through ``node``.

Defaults: T = 5 iterations and the four seeds are the official README's command
(``--n_generation 5 --blocks COT COT_SC Reflexion LLM_debate``; its verifier reads
``--max_response_per_sample 9`` = 4 seeds + 5 designs); 5 CoT-SC samples and 5 debate rounds /
self-refine iterations are the code's ``max_sc`` and ``max_round`` defaults; 2 debaters are its
debate roles for math. The caps on a design (``max_subtasks``, ``max_agents``, ``max_rounds``)
are ours: the official meta-agent writes unbounded code.

Deviations:

- Main one: a design is a structured JSON reply (sub-tasks, each a block from the fixed menu
  with its ``n`` and ``rounds``) that maslab runs itself with the kit's prompts and votes; the
  paper's meta-agent writes each design as Python code that is executed, so it can wire blocks
  arbitrarily and set their instructions and temperatures. No model-written code runs here.
  Each sub-task reads every earlier result (the paper's code passes the results the designer
  chooses).
- All prompts are our own words. Block agents answer in free text (the official ones answer
  JSON with ``thinking`` and ``answer``); intermediate sub-tasks end with an answer line, the
  last one follows the task's answer format. Every block agent samples at the run's settings
  (the official blocks fix temperatures: 0 for CoT and the critic, 0.5 for CoT-SC and
  debate) and debaters have no personas (the official ones get per-benchmark roles, e.g. a
  math professor and a grade-school teacher).
- No early stop: every iteration runs, as in the README's command (``--defer_verifier``); the
  official code can stop once a verifier scores a candidate correct.
- Meta-feedback is its own call with its own JSON reply; the official code asks for the
  reflection and the revised code in one reply after every run (the last one unused). We skip
  the feedback after the last design, which no design would read.
- The official debate block ends with a final-decision agent; ours ends with the majority vote
  of its last round, as in the debate paper (and ``llm_debate``).
- MAS-Verify shows the candidates' full responses; the official verifier first has a model
  summarise each candidate (one call per candidate) and keeps only answers of the benchmark's
  format (AIME integers, GPQA letters); we keep those whose answer the task can read.
- The official run's memory pairs each earlier answer with its fitness, which its deferred
  verifier leaves at 0; we show the earlier answers alone.
- Garbage: a design that cannot be read (no JSON object, no sub-task, an empty instruction, a
  block off the menu) falls back to one ``cot`` sub-task over the whole question
  (``metadata["iterations"][t]["fallback"]``); ``n`` or ``rounds`` missing or below 1 take the
  seed setting, above the cap the cap; sub-tasks beyond ``max_subtasks`` are dropped, keeping
  the first ``max_subtasks`` − 1 and the last (``dropped``). Unreadable feedback passes on as
  the evaluator's raw text; an unreadable critique is feedback without a stop; an unreadable or
  out-of-range selection falls back to the majority vote (``selection["fallback"]``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, field_validator

from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import answer_key, majority_decision, propose_vote
from maslab.kit.parsing import Flag, Text
from maslab.kit.prompts import cot_prompt, debate_prompt, refine_prompt
from maslab.kit.structured import Reply, ask

META, NODE, VERIFIER = "meta", "node", "verifier"
DESIGNER, EVALUATOR = "designer", "evaluator"
BlockName = Literal["cot", "cot_sc", "debate", "self_refine"]
BLOCKS: tuple[BlockName, ...] = ("cot", "cot_sc", "debate", "self_refine")
TOO_HARD = "[TOO_HARD]"
_ALIASES = {
    "chain_of_thought": "cot",
    "sc": "cot_sc",
    "self_consistency": "cot_sc",
    "cot_self_consistency": "cot_sc",
    "llm_debate": "debate",
    "reflexion": "self_refine",
    "refine": "self_refine",
}


def _block_name(value: object) -> object:
    """A block name as designers write it ("CoT-SC", "LLM Debate") in menu spelling."""
    if not isinstance(value, str):
        return value
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    return _ALIASES.get(key, key)


def _count(value: object) -> object:
    """A design's ``n`` or ``rounds``: null means unset (0, the seed setting)."""
    return 0 if value is None else value


def _stated(text: str) -> str:
    if not text:
        raise ValueError("a sub-task needs an instruction")
    return text


class Subtask(BaseModel):
    """One sub-task of a design: what it asks and the block that solves it."""

    instruction: Annotated[Text, AfterValidator(_stated)] = Field(
        description="the sub-task, specific and solvable from the problem and earlier results"
    )
    block: Annotated[BlockName, BeforeValidator(_block_name)]
    n: Annotated[int, BeforeValidator(_count)] = Field(
        0, description="agents of cot_sc or debate; 0 for the default"
    )
    rounds: Annotated[int, BeforeValidator(_count)] = Field(
        0, description="debate rounds, or self_refine's most revisions; 0 for the default"
    )


def _some(subtasks: list[Subtask]) -> list[Subtask]:
    if not subtasks:
        raise ValueError("a design needs at least one sub-task")
    return subtasks


class Design(Reply):
    """The designer's JSON reply: its reasoning and the sub-tasks in order."""

    thought: Text = Field(
        "", description="how you split the problem and why each block suits its sub-task"
    )
    subtasks: Annotated[list[Subtask], AfterValidator(_some)]


class Feedback(Reply):
    """The evaluator's JSON reply (meta-feedback)."""

    solvability: Text = Field(
        "", description="which sub-tasks were solved, which were wrong or too hard, and why"
    )
    completeness: Text = Field(
        "", description="whether the sub-tasks carry all the information the answer needs"
    )
    revision: Text = Field(description="how to change the design")


class Critique(Reply):
    """A self-refine critic's JSON reply."""

    feedback: Text = Field("", description="your review")
    stop: Flag = False


class Selection(Reply):
    """The verifier's JSON reply: its comparison and the chosen candidate's number."""

    reasoning: Text = Field(
        "", description="the candidates compared one by one, with the errors you find"
    )
    choice: int = Field(description="the number of the best candidate")


@dataclass(frozen=True)
class Step:
    """A checked sub-task: its instruction, block, agents and rounds as they run."""

    instruction: str
    block: BlockName
    n: int = 1
    rounds: int = 1


@dataclass
class BlockRun:
    """What one block did: its result, every agent's output in order, its agents."""

    output: str
    said: list[tuple[str, str]]
    agents: list[str]
    outputs: list[str]
    unreadable: int = 0


FALLBACK = Step("Solve the overall problem.", "cot")
SUBTASK_FORMAT = "End with a line 'The answer is <the result of this sub-task>'."
TOO_HARD_NOTE = (
    "If this sub-task is too hard to solve as posed, or information it needs is missing, still "
    f"give your best answer, then add a line {TOO_HARD} followed by what is missing or how to "
    "split the sub-task."
)


def describe(step: Step) -> str:
    """The block and its settings, as prompts and metadata show them."""
    settings = {
        "cot": "",
        "cot_sc": f", n={step.n}",
        "debate": f", n={step.n}, rounds={step.rounds}",
        "self_refine": f", rounds={step.rounds}",
    }[step.block]
    return step.block + settings


def designer_system(max_subtasks: int, max_agents: int, max_rounds: int) -> str:
    return (
        "You design multi-agent systems of language models, one for each problem. A design "
        "splits the problem into sub-tasks that run in order; one building block solves each "
        "sub-task, seeing the problem and the results of every earlier sub-task. The blocks:\n"
        '- "cot": one agent reasons step by step (1 call).\n'
        '- "cot_sc": n agents reason independently; the most common answer wins (n calls).\n'
        '- "debate": n agents answer, then see each other\'s answers and update their own, '
        "rounds times in all; the most common final answer wins (n x rounds calls).\n"
        '- "self_refine": an agent answers, a critic reviews the answer and the agent revises '
        "it, up to rounds times, until the critic is satisfied (up to 1 + 2 x rounds calls).\n\n"
        "Make every sub-task specific and solvable by its block from what it is given, without "
        "giving away or guessing the answer; together the sub-tasks must use every piece of "
        "information in the problem, and the last one must answer the whole problem. A simple "
        "problem may need a single sub-task. Spend calls where the difficulty is. Limits: at "
        f"most {max_subtasks} sub-tasks, n at most {max_agents}, rounds at most {max_rounds}."
    )


def answers_part(task: Task, found: list[tuple[str, str]]) -> str:
    """The answers found so far (the run's memory), one line each."""
    lines = [
        f"- {label}: {task.answer_in(text) or '(no readable answer)'}" for label, text in found
    ]
    return "\n".join(lines)


def first_design_prompt(task: Task, found: list[tuple[str, str]]) -> str:
    seen = (
        "\n\nThe standard blocks, each run on the whole problem, answered:\n"
        f"{answers_part(task, found)}\n(any of these may be wrong)"
        if found
        else ""
    )
    return f"Problem:\n{task.prompt()}{seen}\n\nDesign a multi-agent system for this problem."


def results_part(steps: list[Step], runs: list[BlockRun]) -> str:
    return "\n\n".join(
        f"--- Sub-task {i} ({describe(step)}): {step.instruction} ---\n{run.output.strip()}"
        for i, (step, run) in enumerate(zip(steps, runs, strict=True), 1)
    )


def revision_prompt(
    task: Task,
    steps: list[Step],
    runs: list[BlockRun],
    feedback: str,
    found: list[tuple[str, str]],
) -> str:
    return (
        f"Your design ran. What each sub-task produced:\n\n{results_part(steps, runs)}\n\n"
        f"A review of the run:\n{feedback.strip()}\n\nAnswers found so far, in order:\n"
        f"{answers_part(task, found)}\n\n"
        "Revise the design for the same problem: split further the sub-tasks that were wrong or "
        "too hard, change a block or its settings where its agents failed, add what was "
        "missing, keep what worked, or simplify. If answers keep repeating a suspected "
        "mistake, tell the relevant sub-task which answers to avoid."
    )


def feedback_prompt(
    task: Task, steps: list[Step], runs: list[BlockRun], found: list[tuple[str, str]]
) -> str:
    design = "\n".join(
        f"{i}. ({describe(step)}) {step.instruction}" for i, step in enumerate(steps, 1)
    )
    outputs = "\n\n".join(
        f"=== Sub-task {i} ===\n"
        + "\n\n".join(f"--- {name} ---\n{text.strip()}" for name, text in run.said)
        + f"\n\nResult of sub-task {i}:\n{run.output.strip()}"
        for i, run in enumerate(runs, 1)
    )
    return (
        "A multi-agent system was designed for one problem and run on it. Review the run.\n\n"
        f"Problem:\n{task.prompt()}\n\nThe design (sub-tasks in order):\n{design}\n\n"
        f"What every agent wrote, sub-task by sub-task:\n\n{outputs}\n\n"
        f"Answers found so far, in order:\n{answers_part(task, found)}\n\n"
        "Judge two things from the agents' outputs. Solvability: was each sub-task solved by "
        f"its block? A result that is wrong, that its agents disagree on, or that says {TOO_HARD} "
        "means it was not: say whether the sub-task must be split further, or whether its "
        "block or settings failed. Completeness: do the sub-tasks together use every piece of "
        "information in the problem, each getting what it needs from earlier results, so that "
        "the last one answers the whole problem? Then say concretely how to revise the design."
    )


def feedback_text(review: Feedback) -> str:
    return (
        f"Solvability: {review.solvability}\nCompleteness: {review.completeness}\n"
        f"Revision: {review.revision}"
    )


def critique_prompt(task: Task, answer: str) -> str:
    return (
        f"Question:\n{task.prompt()}\n\nProposed answer:\n{answer.strip()}\n\n"
        "Review the answer: check each step and the result, and say precisely what is wrong or "
        'missing. Set "stop" to true only if it is correct and needs no change.'
    )


def selection_prompt(task: Task, shown: list[str]) -> str:
    listed = "\n\n".join(
        f"--- Candidate {k} ---\n{text.strip()}" for k, text in enumerate(shown, 1)
    )
    return (
        f"Problem:\n{task.prompt()}\n\nCandidate solutions:\n\n{listed}\n\n"
        "Do not solve the problem yourself. Read each candidate's reasoning and answer, compare "
        "them one by one, find the erroneous steps of the ones you reject, and choose the best "
        "candidate."
    )


def subtask_task(task: Task, steps: list[Step], i: int, results: list[str]) -> Task:
    """Sub-task ``i`` (0-based) as a task: the problem, the earlier results in order, the
    sub-task. The last sub-task keeps the task's options and answer format."""
    last = i == len(steps) - 1
    problem = (
        task.question.strip() if last else task.model_copy(update={"instruction": ""}).prompt()
    )
    parts = [f"The overall problem:\n{problem}"]
    if results:
        earlier = "\n\n".join(
            f"--- Sub-task {j} ({steps[j - 1].instruction}) ---\n{result.strip()}"
            for j, result in enumerate(results, 1)
        )
        parts.append(f"Results of the earlier sub-tasks:\n\n{earlier}")
    parts += [f"Your sub-task ({i + 1} of {len(steps)}): {steps[i].instruction}", TOO_HARD_NOTE]
    question = "\n\n".join(parts)
    if last:
        return task.model_copy(update={"question": question})
    return Task(id=f"{task.id}/{i + 1}", question=question, instruction=SUBTASK_FORMAT)


def block_agents(step: Step, prefix: str) -> tuple[list[str], list[str]]:
    """A block's agents, and those of them whose reply can be its result."""
    if step.block == "cot":
        return [f"{prefix}solver"], [f"{prefix}solver"]
    if step.block in ("cot_sc", "debate"):
        names = list(numbered(prefix + ("sample" if step.block == "cot_sc" else "debater"), step.n))
        return names, names
    generator, critic, refiner = (f"{prefix}{p}" for p in ("generator", "critic", "refiner"))
    return [generator, critic, refiner], [generator, refiner]


@register_method("mas_zero")
class MasZero(Method):
    """Seed MASs, then T rounds of meta-design, run and meta-feedback; a verifier picks the
    best candidate."""

    roles = (META, NODE, VERIFIER)
    paper = "Ke et al., arXiv 2505.14996 (MAS-Zero)"
    category = "per-query MAS design by a meta-agent (design, run, meta-feedback; self-verify)"
    calls = (
        "S + Σ_{t≤T} (1 + B_t) + (T − 1) + 1: seed MASs S, per iteration a design and its "
        "blocks' B_t (cot 1, cot_sc n, debate n·r, self_refine 2j if the critic stops at j, "
        "else 1 + 2r), a feedback between iterations, 1 selection (0 with `select=majority`); "
        "default T = 5, S = 18–27"
    )

    class Config(MethodConfig):
        iterations: int = Field(5, ge=1, description="T: design, run and feedback rounds")
        seeds: tuple[BlockName, ...] = Field(
            BLOCKS, description="the seed MASs run on the whole question first (MAS-Init)"
        )
        samples: int = Field(5, ge=1, description="n of the cot_sc seed; a design's default")
        debaters: int = Field(2, ge=1, description="n of the debate seed; a design's default")
        rounds: int = Field(
            5, ge=1, description="debate rounds and self-refine revisions of the seeds; default"
        )
        max_subtasks: int = Field(5, ge=1, description="the most sub-tasks a design runs")
        max_agents: int = Field(5, ge=1, description="the most agents of a designed block")
        max_rounds: int = Field(5, ge=1, description="the most rounds of a designed block")
        select: Literal["verify", "majority"] = Field(
            "verify", description="pick the answer by the verifier's call or by majority vote"
        )

        @field_validator("seeds")
        @classmethod
        def _distinct(cls, seeds: tuple[str, ...]) -> tuple[str, ...]:
            if len(set(seeds)) != len(seeds):
                raise ValueError("each seed block may appear once")
            return seeds

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return (DESIGNER, EVALUATOR)

    def seed_step(self, block: BlockName) -> Step:
        cfg = self.config
        n = {"cot_sc": cfg.samples, "debate": cfg.debaters}.get(block, 1)
        rounds = cfg.rounds if block in ("debate", "self_refine") else 1
        return Step("", block, n, rounds)

    def check(self, design: Design | None) -> tuple[list[Step], dict[str, Any]]:
        """The steps a design runs (capped, defaults filled in) and what was changed."""
        cfg = self.config
        if design is None:
            return [FALLBACK], {"fallback": True, "dropped": 0}
        subtasks = design.subtasks
        dropped = max(len(subtasks) - cfg.max_subtasks, 0)
        if dropped:
            subtasks = subtasks[: cfg.max_subtasks - 1] + subtasks[-1:]
        steps = []
        for sub in subtasks:
            seed = self.seed_step(sub.block)
            n = min(sub.n if sub.n >= 1 else seed.n, cfg.max_agents)
            rounds = min(sub.rounds if sub.rounds >= 1 else seed.rounds, cfg.max_rounds)
            steps.append(
                Step(
                    sub.instruction,
                    sub.block,
                    n if sub.block in ("cot_sc", "debate") else 1,
                    rounds if sub.block in ("debate", "self_refine") else 1,
                )
            )
        return steps, {"fallback": False, "dropped": dropped}

    async def run_block(
        self, ctx: Context, step: Step, task: Task, prefix: str, round: int, topology: Topology
    ) -> BlockRun:
        """Run one block on ``task`` with agents named ``prefix`` + part (wired first)."""
        agents, outputs = block_agents(step, prefix)
        for name in agents:
            topology.add_node(name, block=step.block)
        if step.block == "debate":
            for u in agents:
                for v in agents:
                    if u != v:
                        topology.add_edge(u, v)
        if step.block == "self_refine":
            generator, critic, refiner = agents
            for u, v in ((generator, critic), (generator, refiner), (critic, refiner)):
                topology.add_edge(u, v)
            topology.add_edge(refiner, critic)
        if step.block == "cot":
            (agent,) = agents
            text = (await ctx.agent(agent, role=NODE).reply(cot_prompt(task), round=round)).content
            return BlockRun(text, [(agent, text)], agents, outputs)
        if step.block == "cot_sc":
            said = await asyncio.gather(
                *(ctx.agent(n, role=NODE).reply(cot_prompt(task), round=round) for n in agents)
            )
            texts = [m.content for m in said]
            output = majority_decision(task, texts).response
            return BlockRun(output, list(zip(agents, texts, strict=True)), agents, outputs)
        if step.block == "debate":
            return await self.debate(ctx, step, task, agents, round)
        return await self.self_refine(ctx, step, task, agents, round)

    async def debate(
        self, ctx: Context, step: Step, task: Task, names: list[str], round: int
    ) -> BlockRun:
        debaters = [ctx.agent(n, role=NODE) for n in names]
        said: list[Message] = list(
            await asyncio.gather(*(d.reply(cot_prompt(task), round=round) for d in debaters))
        )
        everything = [(m.sender, m.content) for m in said]
        for _ in range(1, step.rounds):
            previous = said
            said = list(
                await asyncio.gather(
                    *(
                        d.reply(
                            debate_prompt(task, [m for m in previous if m.sender != d.name]),
                            round=round,
                        )
                        for d in debaters
                    )
                )
            )
            everything += [(m.sender, m.content) for m in said]
        output = majority_decision(task, [m.content for m in said]).response
        return BlockRun(output, everything, names, names)

    async def self_refine(
        self, ctx: Context, step: Step, task: Task, names: list[str], round: int
    ) -> BlockRun:
        generator, critic, refiner = (ctx.agent(n, role=NODE) for n in names)
        answer = (await generator.reply(cot_prompt(task), round=round)).content
        run = BlockRun(answer, [(generator.name, answer)], names, [names[0], names[2]])
        attempts: list[tuple[str, str]] = []
        for _ in range(step.rounds):
            said, review = await ask(
                critic,
                critique_prompt(task, answer),
                Critique,
                round=round,
                kind="critique",
                remember=False,
            )
            if review is None:
                run.unreadable += 1
                review = Critique(feedback=said.content)
            run.said.append((critic.name, review.feedback or said.content))
            if review.stop:
                break
            attempts.append((answer, review.feedback or said.content))
            answer = (
                await refiner.reply(refine_prompt(task, attempts), round=round, remember=False)
            ).content
            run.said.append((refiner.name, answer))
        run.output = answer
        return run

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        topology = ctx.topology = Topology(name="mas_zero")
        topology.add_node(DESIGNER)
        topology.add_node(EVALUATOR)
        candidates: list[tuple[str, str]] = []  # (label, response), in production order
        sources: list[list[str]] = []  # the agents whose output each candidate is

        # MAS-Init: the seeds, concurrently; candidates in seed order
        done: dict[int, str] = {}

        async def seed(j: int, block: BlockName) -> BlockRun:
            run = await self.run_block(
                ctx, self.seed_step(block), task, f"seed_{block}_", 0, topology
            )
            done[j] = run.output
            propose_vote(ctx, task, [done[k] for k in sorted(done)], candidates=len(done))
            return run

        seed_runs = await asyncio.gather(*(seed(j, b) for j, b in enumerate(cfg.seeds)))
        for block, run in zip(cfg.seeds, seed_runs, strict=True):
            candidates.append((f"{block} (seed)", run.output))
            sources.append(run.outputs)

        designer = ctx.agent(
            DESIGNER,
            role=META,
            system=designer_system(cfg.max_subtasks, cfg.max_agents, cfg.max_rounds),
        )
        iterations: list[dict[str, Any]] = []
        prompt = first_design_prompt(task, candidates)
        for t in range(1, cfg.iterations + 1):
            _, design = await ask(designer, prompt, Design, round=t, kind="design")
            steps, notes = self.check(design)
            runs: list[BlockRun] = []
            for i, step in enumerate(steps):
                sub = subtask_task(task, steps, i, [r.output for r in runs])
                run = await self.run_block(ctx, step, sub, f"it{t}_s{i + 1}_", t, topology)
                for name in run.agents:
                    topology.add_edge(DESIGNER, name)
                    topology.add_edge(name, EVALUATOR)
                    for earlier in runs:
                        for source in earlier.outputs:
                            topology.add_edge(source, name)
                runs.append(run)
            candidates.append((f"design {t}", runs[-1].output))
            sources.append(runs[-1].outputs)
            propose_vote(ctx, task, [text for _, text in candidates], candidates=len(candidates))
            record: dict[str, Any] = {
                "design": [asdict(step) for step in steps],
                **notes,
                "too_hard": [i for i, r in enumerate(runs, 1) if TOO_HARD in r.output],
                "unreadable_critiques": sum(r.unreadable for r in runs),
                "answer": task.answer_in(runs[-1].output),
            }
            iterations.append(record)
            if t == cfg.iterations:
                break
            evaluator = ctx.agent(EVALUATOR, role=META)
            said, review = await ask(
                evaluator,
                feedback_prompt(task, steps, runs, candidates),
                Feedback,
                round=t,
                kind="feedback",
            )
            record["feedback_parsed"] = review is not None
            feedback = feedback_text(review) if review is not None else said.content
            topology.add_edge(EVALUATOR, DESIGNER)
            prompt = revision_prompt(task, steps, runs, feedback, candidates)

        texts = [text for _, text in candidates]
        chosen, selection = await self.select(task, ctx, texts, sources, topology)
        return Solution(
            answer=texts[chosen],
            metadata={
                "candidates": [
                    {"source": label, "answer": task.answer_in(text)} for label, text in candidates
                ],
                "iterations": iterations,
                "chosen": chosen + 1,
                "selection": selection,
            },
        )

    async def select(
        self,
        task: Task,
        ctx: Context,
        texts: list[str],
        sources: list[list[str]],
        topology: Topology,
    ) -> tuple[int, dict[str, Any]]:
        """MAS-Verify: the index of the chosen candidate and how it was chosen."""
        vote = majority_decision(task, texts)
        voted = texts.index(vote.response)
        if self.config.select == "majority":
            return voted, {"how": "majority"}
        keys = [answer_key(task, text) for text in texts]
        kept = [i for i, key in enumerate(keys) if key is not None] or list(range(len(texts)))
        counts = Counter(keys[i] for i in kept)
        shown = sorted(kept, key=lambda i: -counts[keys[i]])  # stable: ties keep their order
        topology.add_node(VERIFIER)
        for i in shown:
            for source in sources[i]:
                topology.add_edge(source, VERIFIER)
        verifier = ctx.agent(VERIFIER)
        prompt = selection_prompt(task, [texts[i] for i in shown])
        round = self.config.iterations + 1
        _, picked = await ask(verifier, prompt, Selection, round=round, kind="selection")
        info: dict[str, Any] = {"how": "verify", "shown": [i + 1 for i in shown]}
        if picked is None or not 1 <= picked.choice <= len(shown):
            return voted, {**info, "fallback": True}
        return shown[picked.choice - 1], {**info, "fallback": False}
