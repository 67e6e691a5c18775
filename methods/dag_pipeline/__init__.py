"""DAG pipeline: role agents wired by any DAG, each reading one field of its predecessors' replies.

Li, Gao, Wang. "Aligned Agents, Biased Swarm: Measuring Bias Amplification in Multi-Agent
Systems". arXiv:2604.08963 (ICLR 2026). Code: github.com/weizhihao1/MAS-Bias.

Algorithm (a DAG of V role nodes; ``topology`` names a preset of
:mod:`maslab.methods.dag_pipeline.topologies`: ``chain``, ``spindle``, ``parallel``, ``ffn``,
``iteration``, ...; or ``nodes`` {name: persona} and ``edges`` [[u, v], ...] give one, edge
u -> v meaning "v reads u"):

1. The nodes run in topological layers; the nodes of a layer run concurrently. A node's system
   message is its persona; its one user turn lists its predecessors' replies, only their
   ``pass_field`` (default ``Reason``), as "Expert 1", "Expert 2", ... (in layer order, then
   node order; never in the order calls finished), then the task.
2. Every node answers the task in a JSON reply: on a Discrim-Eval-Open scenario (the paper's
   task) ``ChoiceProbabilities`` {A, B, C} and ``Reason``, read and renormalised by
   :func:`maslab.benchmarks.discrim_eval_open.read_choice_reply` (0.33/0.33/0.34 when
   unreadable); on any other task ``Reason`` and ``Answer`` (:class:`NodeAnswer`, whose JSON
   shape ends the prompt). The reply's fields are kept in the message's metadata (``reply``;
   ``choice_probabilities`` and ``parsed`` too, with the node's ``position`` in node order,
   1-based), which the ``choice_bias`` evaluator reads.
3. The answer is the sink's ``answer_field`` (default: ``ChoiceProbabilities`` on a scenario,
   as JSON, else ``Answer``); with several sinks, the majority vote over their answers
   (ties and unreadable answers: the first sink in node order).

LLM calls: V, one per node (chain 4, spindle 7, parallel 6, ffn 6, iteration 6·T, T = 4: 24).

Budget stop: the answer of the last node (in node order) of the last complete layer.

Models: every node is an agent of role ``node`` reachable by its name, so model roles put
each on its own model (``--model-role Judge_1=openai:...``: the paper's different-model
setting).

Deviations: prompts and personas are our own wording, and one prompt serves every position
(the paper words each position's instruction differently: "summarise", "from your legal
perspective", ...); predecessors are listed as "Expert i" without their role; a field missing
from a predecessor's reply is replaced by that reply's whole text (the paper passes a parse
failure notice); probabilities are renormalised but not rounded back to tenths.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from maslab.benchmarks.discrim_eval_open import (
    PROBABILITIES,
    ScenarioReply,
    is_scenario_task,
    read_choice_reply,
)
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.kit.aggregation import majority_decision
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask
from maslab.methods.dag_pipeline.topologies import PRESETS, preset

NODE = "node"
ReplyField = Literal["Reason", "Answer", "ChoiceProbabilities"]
REASON: ReplyField = "Reason"
ANSWER: ReplyField = "Answer"


class NodeAnswer(Reply):
    """A node's JSON reply to a task that is not a scenario (a scenario's own instruction asks
    for the benchmark's JSON, :class:`~maslab.benchmarks.discrim_eval_open.ScenarioReply`)."""

    json_name = "node_reply"

    Reason: Text = Field("", description="your reasoning")
    Answer: Text = Field("", description="your final answer, in the form the task asks for")


def node_prompt(task: Task, experts: list[str]) -> str:
    """A node's one user turn: its predecessors' passed fields, then the task."""
    parts = []
    if experts:
        shown = "\n\n".join(f"Expert {i}: {text}" for i, text in enumerate(experts, 1))
        parts.append(
            "Other experts have already looked at this task. Their conclusions, numbered:\n\n"
            f"{shown}\n\nTreat them as input, not as the answer: reach your own judgement."
        )
    parts.append(task.prompt())
    return "\n\n".join(parts)


def read_reply(text: str, scenario: bool) -> dict[str, Any]:
    """What a node's reply holds, for its message's metadata."""
    if scenario:
        reply = read_choice_reply(text)
        return {
            "reply": reply.fields,
            "choice_probabilities": reply.probabilities,
            "parsed": reply.parsed,
        }
    answer = NodeAnswer.parse(text)
    return {"reply": {} if answer is None else answer.model_dump(), "parsed": answer is not None}


def field_text(message: Message, field: str) -> str:
    """``field`` of a node's reply as text: a string as written, other values as JSON (on a
    scenario, ``ChoiceProbabilities`` renormalised); the whole reply when it is missing."""
    if field == PROBABILITIES and "choice_probabilities" in message.metadata:
        return json.dumps(message.metadata["choice_probabilities"])
    value = message.metadata["reply"].get(field)
    if value is None or value == "":
        return message.content.strip()
    return value.strip() if isinstance(value, str) else json.dumps(value)


def build_topology(config: DAGPipeline.Config) -> Topology:
    """The configured DAG; a one-line ConfigError for an unknown node or a cycle."""
    if config.nodes is None:
        name = config.topology or "chain"
        return preset(name, **({"iterations": config.iterations} if name == "iteration" else {}))
    topology = Topology(name="dag_pipeline")
    for node, description in config.nodes.items():
        topology.add_node(node, role=node, persona=description)
    for u, v in config.edges:
        if unknown := [end for end in (u, v) if end not in config.nodes]:
            known = ", ".join(config.nodes)
            raise ConfigError(
                f"dag_pipeline: edge [{u}, {v}] names unknown node {unknown[0]!r}; nodes: {known}"
            )
        topology.add_edge(u, v)
    topology.layers()  # a cycle is a one-line ConfigError here, before anything runs
    return topology


@register_method("dag_pipeline")
class DAGPipeline(Method):
    """Role agents in a DAG (chain, spindle, parallel, FFN, iterated FFN, or your own)."""

    roles = (NODE,)
    paper = "Li et al., arXiv 2604.08963 (Aligned Agents, Biased Swarm)"
    category = "role DAG pipeline (bias amplification)"
    calls = "V, one per node (chain 4, spindle 7, parallel 6, ffn 6, iteration 6·T = 24)"

    class Config(MethodConfig):
        topology: str | None = None
        """A preset of :data:`~maslab.methods.dag_pipeline.topologies.PRESETS`; None with no
        ``nodes``: ``chain``."""
        iterations: int = Field(4, ge=1)
        """T, the FFN units of the ``iteration`` preset."""
        nodes: dict[str, str] | None = None
        """An own DAG instead of a preset: node name -> persona (its system message)."""
        edges: list[tuple[str, str]] = Field(default_factory=list)
        """The own DAG's edges [u, v]: v reads u."""
        pass_field: ReplyField = REASON
        """The one field of a reply its successors read."""
        answer_field: ReplyField | None = None
        """The sink's field that is the answer; None: ChoiceProbabilities on a scenario, else
        Answer."""

        @field_validator("topology")
        @classmethod
        def _known(cls, name: str | None) -> str | None:
            if name is not None and name not in PRESETS:
                raise ValueError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
            return name

        @model_validator(mode="after")
        def _one_graph(self) -> DAGPipeline.Config:
            if self.nodes is not None and self.topology is not None:
                raise ValueError("give a topology preset, or nodes and edges, not both")
            if self.nodes is None and self.edges:
                raise ValueError("edges need nodes (an own DAG)")
            if self.nodes is not None and not self.nodes:
                raise ValueError("nodes needs at least one node")
            return self

    config: Config

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.graph = build_topology(self.config)

    def agent_names(self) -> tuple[str, ...]:
        return tuple(self.graph.nodes)

    def structure(self) -> Topology:
        return self.graph

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        topology = ctx.topology = self.structure()
        scenario = is_scenario_task(task)
        answer_field = cfg.answer_field or (PROBABILITIES if scenario else ANSWER)
        position = {node: i for i, node in enumerate(topology.nodes, 1)}

        async def run_node(node: str, layer: int) -> Message:
            attributes = topology.graph.nodes[node]
            agent = ctx.agent(node, role=NODE, system=attributes["persona"])
            seen = topology.visible_messages(node, ctx.transcript, layer, rounds="history")
            prompt = node_prompt(task, [field_text(m, cfg.pass_field) for m in seen])
            if scenario:  # the scenario's own instruction asks for the benchmark's JSON
                native = ScenarioReply.native_params(agent.model)
                said = await agent.reply(prompt, round=layer, **native)
            else:
                said, _ = await ask(agent, prompt, NodeAnswer, round=layer)
            return ctx.transcript.annotate(
                said,
                **read_reply(said.content, scenario),
                node=node,
                role=attributes["role"],
                position=position[node],
            )

        answers: dict[str, str] = {}
        for layer, nodes in enumerate(topology.layers()):
            for message in await asyncio.gather(*(run_node(node, layer) for node in nodes)):
                answers[message.sender] = field_text(message, answer_field)
            ctx.propose(answers[nodes[-1]], round=layer, node=nodes[-1])

        sinks = topology.sinks()
        decision = majority_decision(task, [answers[sink] for sink in sinks])
        parsed = sum(bool(m.metadata.get("parsed")) for m in ctx.transcript)
        return Solution(
            answer=decision.response,
            metadata={"topology": topology.name, "sinks": sinks, "parsed": parsed},
        )
