"""Mixture-of-Agents (MoA).

Wang, Wang, Athiwaratkun, Zhang, Zou. "Mixture-of-Agents Enhances Large Language Model
Capabilities". arXiv:2406.04692 (ICLR 2025). Code: github.com/togethercomputer/MoA.

Algorithm (n proposers, L layers, the last of which is the aggregator):

1. Layer 1: every proposer answers the question on its own.
2. Layer l = 2..L-1: every proposer answers the question again, its system message holding a
   synthesis instruction and the numbered responses of *all* layer l-1 proposers (its own
   included), in proposer order. The proposers of a layer run concurrently.
3. Layer L: one aggregator call, shown the question and every layer L-1 response the same way;
   its reply is the answer.

LLM calls: n·(L - 1) + 1 (paper defaults n = 6, L = 3: 13 calls; MoA-Lite is L = 2).

Proposers are ``proposer_1`` .. ``proposer_n``: the paper's proposers are different LLMs, so
give them their own models with model roles (``--model-role proposer_2=openai:other``); each
keeps its model in every layer, as in the paper. ``aggregator`` is the final synthesizer.

Budget stop: the majority vote over the last complete proposer layer (a partial layer never
counts); the paper has no vote, it is only what a stop scores.

Deviations: the synthesis instruction is our own wording (not the paper's
aggregate-and-synthesize prompt); references are shown in proposer order, never in the order
the calls finished; sampling is the run's (the paper uses temperature 0.7: pass it with
``--temperature`` or model roles); the default team is one model unless model roles say
otherwise, where the paper uses six different open models.
"""

from __future__ import annotations

import asyncio

from pydantic import Field

from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import propose_vote

AGGREGATOR = "aggregator"


def synthesis_system(references: list[Message]) -> str | None:
    """The system message of a layer-2+ proposer or of the aggregator; None in layer 1."""
    if not references:
        return None
    shown = "\n\n".join(f"[{i}]\n{m.content.strip()}" for i, m in enumerate(references, start=1))
    return (
        "Several assistants have already answered the user's next question. Their answers "
        "follow, numbered. Treat them as material to weigh, not as authority: any of them may "
        "contain errors, gaps or bias. Check their reasoning, keep what holds up, correct what "
        "does not, and write one answer of your own that is accurate and complete. Do not "
        "mention the other answers or copy one of them wholesale.\n\n"
        f"Answers from other assistants:\n\n{shown}"
    )


@register_method("mixture_of_agents")
class MixtureOfAgents(Method):
    """Layers of proposers, each seeing every previous-layer response; a final aggregator."""

    roles = ("proposer", AGGREGATOR)
    paper = "Wang et al., arXiv 2406.04692"
    category = "layered aggregation (mixed models)"
    calls = "n·(L−1)+1 (default 6·2+1 = 13; MoA-Lite L=2: 7)"

    class Config(MethodConfig):
        layers: int = Field(3, ge=2)
        """L: the layers, the aggregator's included (L - 1 proposer layers)."""
        proposers: int = Field(6, ge=1)
        """n: the proposers of every layer."""

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("proposer", self.config.proposers)

    def structure(self) -> Topology:
        """Across layers, a proposer reads every proposer (itself included); the aggregator
        reads every proposer. Rounds are layers, so each reads the previous layer only."""
        names = self.agent_names()
        edges = [(sender, reader) for sender in names for reader in (*names, AGGREGATOR)]
        return Topology.from_edges(edges, name="mixture_of_agents")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        names = list(self.agent_names())
        topology = ctx.topology = self.structure()

        def references(reader: str, layer: int) -> list[Message]:
            """The responses of layer ``layer - 1``, in proposer order (never finishing order)."""
            return topology.visible_messages(reader, ctx.transcript, layer) if layer else []

        async def propose(name: str, layer: int) -> Message:
            system = synthesis_system(references(name, layer))
            agent = ctx.agent(name, role="proposer", system=system)
            return await agent.reply(task.prompt(), round=layer)

        for layer in range(cfg.layers - 1):
            replies = await asyncio.gather(*(propose(name, layer) for name in names))
            propose_vote(ctx, task, [m.content for m in replies], round=layer)

        last = cfg.layers - 1
        aggregator = ctx.agent(AGGREGATOR, system=synthesis_system(references(AGGREGATOR, last)))
        final = await aggregator.reply(task.prompt(), round=last, kind="aggregate")
        return Solution(answer=final.content, metadata={"layers": cfg.layers})
