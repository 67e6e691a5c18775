"""AgentPrune: one-shot pruning of a spatial-temporal communication graph.

Zhang, Yue, Li, Yun, Wan, Wang, Cheng, Yu, Chen. "Cut the Crap: An Economical Communication
Pipeline for LLM-based Multi-Agent Systems". arXiv:2410.02506 (ICLR 2025). Code:
github.com/yanweiyue/AgentPrune.

Algorithm (N agents, R rounds, a decision node; the graph of
:mod:`maslab.methods.graph_designers.spacetime`):

1. Candidate edges: spatial ``agent_i -> agent_j`` for i < j (within a round) and temporal
   ``agent_i -> agent_j`` for every ordered pair, i = j included (round r-1 to round r). Each
   has a learnable Bernoulli logit (:class:`maslab.kit.learning.EdgePolicy`), one for the
   spatial and one for the temporal edges, shared by every round; initial probability 0.5.
2. Mask learning (``optimize``, ``maslab run --optimize-on``): ``iterations`` steps, each on
   the next ``batch_size`` validation tasks (cycling through them). For each task a graph is
   drawn, round by round, from the edge probabilities (a generator seeded by the run seed),
   run, and scored by the task's evaluator; every logit takes one REINFORCE step with the
   batch's mean reward as baseline (``learning_rate``).
3. One-shot pruning, after the last step: of the spatial candidates, and apart of the
   temporal ones, the ``round(prune_ratio · count)`` with the lowest probability are cut
   (ties: the later candidate), the others kept.
4. Inference: every round runs all N agents on the kept graph: in round r, agent v reads the
   task, the round r-1 answers of its kept temporal predecessors (its own, if ``v -> v`` is
   kept) and the round r answers of its kept spatial predecessors (agent order); the agents of
   a layer run concurrently. The decision node (``decision="llm"``: one aggregator call, the
   paper's FinalRefer; ``"majority"``: a vote, no call) reads the last round's answers.

Before optimisation (or without a learned state) the graph is the full one, nothing pruned:
every candidate edge is kept.

LLM calls (solve): N·R + d, d = 1 with ``decision="llm"`` else 0 (default 4·1 + 1 = 5).
``optimize``: iterations · batch_size · (N·R + d) (default 10 · 4 · 5 = 200), plus the
evaluator's calls if it asks a model.

Budget stop: the majority vote over every agent's latest answer after the last complete
layer (ties: the earliest agent).

Defaults, from the official code (``experiments/run_gsm8k.py`` and the README's command):
N = 4 solvers, R = 1, the FinalRefer decision, batch size 4, 10 iterations, learning rate
0.1, pruning rate 0.25, initial edge probability 0.5.

Deviations: prompts are our own, and the agents are alike (the official math agents take
roles from a prompt set). The paper's mask is regularised to be low-rank and sparse (a nuclear
norm and a distance to the anchor graph); we learn plain logits by REINFORCE with a mean
baseline (the official code: Adam on the log-probability times the reward, no baseline). The
official code prunes ``pruning_rate`` of the remaining edges every ``imp_per_iterations`` (5)
steps, twice in 10, and then keeps *sampling* the remaining edges from their probabilities;
we prune once, at the end, and run every kept edge. Its spatial candidates are all ordered
pairs with cycle-closing ones rejected as drawn; ours are the forward pairs (a DAG by agent
index), as in ``gptswarm``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from maslab.core.method import register_method
from maslab.core.task import Task
from maslab.kit.learning import Edge
from maslab.methods.graph_designers.spacetime import TiedConfig, TiedDesigner, TiedState, keep_top

__all__ = ["AgentPrune"]


@register_method("agentprune")
class AgentPrune(TiedDesigner):
    """N agents over R rounds on a spatial-temporal graph whose weakest edges are cut once."""

    paper = "Zhang et al., arXiv 2410.02506 (AgentPrune)"
    category = "learned communication topology (one-shot edge pruning)"
    calls = (
        "N·R + d, d = 1 with `decision=llm` (default 4·1 + 1 = 5); "
        "`optimize`: iterations·batch·(N·R + d) (10·4·5 = 200)"
    )
    STATE_FORMAT = "agentprune/1"

    class Config(TiedConfig):
        prune_ratio: float = Field(
            0.25, ge=0, lt=1, description="the share of spatial, and of temporal, edges cut"
        )

    config: Config

    class LearnedState(TiedState):
        format: Literal["agentprune/1"]

    def kept(self, task: Task) -> tuple[list[Edge], list[Edge]]:
        """The spatial and the temporal edges the one-shot pruning keeps (whatever the task)."""
        ratio = self.config.prune_ratio
        return (
            keep_top(self.spatial, self.spatial.edges, ratio),
            keep_top(self.temporal, self.temporal.edges, ratio),
        )
