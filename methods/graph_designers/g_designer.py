"""G-Designer: a query-conditioned generator of the communication graph.

Zhang, Yue, Sun, Wan, Wang, Cheng, Yu, Chen. "G-Designer: Architecting Multi-agent
Communication Topologies via Graph Neural Networks". arXiv:2410.11782 (ICML 2025). Code:
github.com/yanweiyue/GDesigner.

Algorithm (N agents, R rounds, a decision node; the graph of
:mod:`maslab.methods.graph_designers.spacetime`: spatial candidates ``agent_i -> agent_j``
for i < j within a round, temporal candidates every ordered pair from round r-1 to round r):

1. Query features (:func:`maslab.kit.features.query_features`, cheap and deterministic, no
   model): length flags, how many numbers, a code flag, a multiple-choice flag, and
   ``hash_buckets`` hashed word features (the share of the question's words whose CRC-32
   falls in each bucket).
2. The generator: each spatial edge's probability is ``sigmoid(b_e + w_e · x)`` for the
   query's features x (:class:`maslab.kit.learning.EdgePolicy` with features); the temporal
   edges have plain learned logits, as in the official code. All start at probability 0.5.
3. Training (``optimize``, ``maslab run --optimize-on``): ``iterations`` steps, each on the
   next ``batch_size`` validation tasks (cycling). For each task a graph is drawn, round by
   round, from its query-conditioned probabilities (a generator seeded by the run seed), run,
   scored by the task's evaluator, and every drawn logit and feature weight takes one
   REINFORCE step with the batch's mean reward as baseline (``learning_rate``).
4. Inference, per query: the spatial edges whose probability for this query exceeds
   ``threshold`` (0.5), and the temporal edges above it, in every round. Round r runs all N
   agents: agent v reads the task, the round r-1 answers of its temporal predecessors (its own
   if ``v -> v`` is kept) and the round r answers of its spatial predecessors (agent order); a
   layer runs concurrently. The decision node (``decision="llm"``: one aggregator call, the
   paper's FinalRefer; ``"majority"``: a vote, no call) reads the last round's answers.

Before optimisation (or without a learned state) the graph is the full one (the anchor
topology, fully connected): every candidate edge.

LLM calls (solve): N·R + d, d = 1 with ``decision="llm"`` else 0 (default 4·1 + 1 = 5).
``optimize``: iterations · batch_size · (N·R + d) (default 10 · 4 · 5 = 200), plus the
evaluator's calls if it asks a model.

Budget stop: the majority vote over every agent's latest answer after the last complete
layer (ties: the earliest agent).

Defaults, from the official code (``experiments/run_gsm8k.py``): N = 4 solvers, R = 1, the
FinalRefer decision, batch size 4, 10 training iterations, learning rate 0.1, initial
temporal probability 0.5. ``hash_buckets`` (8) and ``threshold`` (0.5) are ours.

Deviations (what replaces what): the paper encodes the query and each agent's role profile
with a sentence encoder (all-MiniLM-L6-v2), runs a GCN over the anchor graph of roles and
decodes edge logits as inner products of the node embeddings (a variational graph
auto-encoder with a sparsity regulariser), trained with Adam on the log-probability times the
reward. Here the query's sentence embedding is replaced by the cheap features of step 1, the
GCN and its decoder by a logit per spatial edge linear in those features, Adam by plain
REINFORCE steps with a mean baseline; there is no sparsity regulariser and no role profile
(the agents are alike). The official code keeps *sampling* the edges at inference; we
threshold the probabilities (a deterministic graph per query). Prompts are our own. Spatial
candidates are the forward pairs (a DAG by agent index), not all ordered pairs with
cycle-closing ones rejected.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from maslab.core.method import register_method
from maslab.core.task import Task
from maslab.kit.features import QUERY_FEATURES, query_features
from maslab.kit.learning import Edge
from maslab.methods.graph_designers.spacetime import TiedConfig, TiedDesigner, TiedState

__all__ = ["GDesigner"]


@register_method("g_designer")
class GDesigner(TiedDesigner):
    """N agents over R rounds on a graph generated per query from its cheap features."""

    paper = "Zhang et al., arXiv 2410.11782 (G-Designer)"
    category = "learned communication topology (query-conditioned graph generator)"
    calls = (
        "N·R + d, d = 1 with `decision=llm` (default 4·1 + 1 = 5); "
        "`optimize`: iterations·batch·(N·R + d) (10·4·5 = 200)"
    )
    STATE_FORMAT = "g-designer/1"

    class Config(TiedConfig):
        threshold: float = Field(
            0.5, ge=0, lt=1, description="inference keeps the edges whose probability exceeds it"
        )
        hash_buckets: int = Field(8, ge=1, description="hashed word features of the query")

    config: Config

    class LearnedState(TiedState):
        format: Literal["g-designer/1"]

    def feature_count(self) -> int:
        return len(QUERY_FEATURES) + self.config.hash_buckets

    def features_of(self, task: Task) -> tuple[float, ...]:
        return query_features(task, self.config.hash_buckets)

    def kept(self, task: Task) -> tuple[list[Edge], list[Edge]]:
        """The edges whose probability for this query exceeds the threshold."""
        cut = self.config.threshold
        return self.spatial.threshold(cut, self.features_of(task)), self.temporal.threshold(cut)

    def about(self, task: Task) -> dict[str, Any]:
        return {"features": list(self.features_of(task))}
