"""Self-Refine: one model drafts an answer, critiques it, and rewrites it, in a loop.

Madaan, Tandon, Gupta, Hallinan, Gao, Wiegreffe, Alon, Dziri, Prabhumoye, Yang, Gupta,
Majumder, Hermann, Welleck, Yazdanbakhsh, Clark. "Self-Refine: Iterative Refinement with
Self-Feedback". arXiv:2303.17651 (NeurIPS 2023).

Algorithm (T = ``max_iterations``), strictly sequential, one model in three parts:

1. The generator answers the question (y0), reasoning step by step.
2. Iteration t = 1..T: the critic reads the question and the current answer y_{t-1} (nothing
   else) and returns JSON feedback: what is wrong or could be better, and ``stop``, true when the
   answer needs no change. If it says stop, the loop ends. Otherwise the refiner reads the
   question and the whole history so far (every earlier answer with the feedback it got) and
   writes an improved complete answer y_t.
3. The final answer is the last answer written.

LLM calls: 2t if the critic says stop at iteration t (t ≤ T), else 1 + 2T; between 2 and
1 + 2T (2-9 at T = 4). Written with k = refinements made: 1 + 2k, plus one for the critique
that stopped the loop when it did.

Budget stop: the latest answer (y0, then each refinement as it is written).

Native structured output: where the model handle supports it, the feedback is requested with
its JSON schema as well (same prompt, same calls); either way it is parsed as below.

Deviations: prompts are our own, zero-shot and task-generic (the paper uses task-specific
few-shot prompts and feedback dimensions, e.g. program-of-thought code for GSM8K). The stop
signal is an explicit ``stop`` field rather than a task-specific score threshold or phrase; a
critique that is not valid JSON counts as feedback without a stop (``metadata["parsed"]``
records which critiques parsed), a JSON one may leave out either key (no ``stop``: no stop; a
stop needs no feedback), and wherever ``feedback`` is missing the whole reply is the feedback.
The three parts are three model roles (``generator``, ``critic``, ``refiner``) on the run's
model unless model roles say otherwise; the paper uses one model for all. After the T-th
refinement no critique is requested: the paper's loop would ask for one only to stop on the
iteration cap, and it cannot change the final answer, so we save the call.
"""

from __future__ import annotations

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.parsing import Flag, Text
from maslab.kit.prompts import cot_prompt, refine_prompt
from maslab.kit.structured import Reply, ask

GENERATOR, CRITIC, REFINER = "generator", "critic", "refiner"


class Feedback(Reply):
    """The critic's JSON reply: its feedback and whether the answer is ready as it is."""

    feedback: Text = Field("", description="your review")
    stop: Flag = False


def feedback_prompt(task: Task, answer: str) -> str:
    return (
        f"Here is a question and a proposed answer to it.\n\nQuestion:\n{task.prompt()}\n\n"
        f"Proposed answer:\n{answer.strip()}\n\n"
        "Review the answer carefully: check every step of the reasoning and the final result, "
        'and say precisely what is wrong, missing or could be improved. Set "stop" to true '
        "only if the answer is correct and needs no change at all."
    )


@register_method("self_refine")
class SelfRefine(Method):
    """Generate, then critique and refine until the critic says stop (≤ 1 + 2T calls)."""

    roles = (GENERATOR, CRITIC, REFINER)
    paper = "Madaan et al., arXiv 2303.17651"
    category = "single-agent iterative refinement (self-feedback loop)"
    calls = "2t if the critic says stop at iteration t, else 1 + 2T (T = 4: 2–9)"

    class Config(MethodConfig):
        max_iterations: int = Field(4, ge=0)

    config: Config

    def structure(self) -> Topology:
        """The critic and the refiner read the generator's draft, the refiner reads the
        critique, and the critic reads each refinement (the loop)."""
        edges = [(GENERATOR, CRITIC), (GENERATOR, REFINER), (CRITIC, REFINER), (REFINER, CRITIC)]
        return Topology.from_edges(edges, name="self_refine")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        ctx.topology = self.structure()
        generator, critic, refiner = (ctx.agent(name) for name in (GENERATOR, CRITIC, REFINER))

        answer = (await generator.reply(cot_prompt(task), round=0)).content
        ctx.propose(answer, round=0)
        attempts: list[tuple[str, str]] = []  # (answer, feedback on it), oldest first
        parsed: list[bool] = []
        stopped = False
        for t in range(1, self.config.max_iterations + 1):
            said, review = await ask(
                critic,
                feedback_prompt(task, answer),
                Feedback,
                round=t,
                kind="critique",
                remember=False,
            )
            parsed.append(review is not None)
            if review is None:
                review = Feedback(feedback=said.content)
            if review.stop:
                stopped = True
                break
            attempts.append((answer, review.feedback or said.content))
            answer = (
                await refiner.reply(refine_prompt(task, attempts), round=t, remember=False)
            ).content
            ctx.propose(answer, round=t)
        return Solution(
            answer=answer,
            metadata={"refinements": len(attempts), "stopped": stopped, "parsed": parsed},
        )
