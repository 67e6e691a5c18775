"""Free discussion: N agents, no roles, one shared conversation.

Seed paper: "Who Am I, and Who Else Is Here?" (behavioural differentiation of LLM agents
without role assignment). Its authors and arXiv id are not recorded in our notes, and our
method spec has no section for it: everything below is OUR design, written from the question
the paper asks (do agents that share one conversation differentiate their behaviour when
nobody assigns them a role, and how does that depend on whether they know who they are and
who else is present?), not a reproduction of the paper's protocol.

Algorithm (N agents, R rounds, one conversation):

1. Every agent has the same neutral system prompt: no role, no persona, no instruction to
   disagree or agree.
2. In each round the agents speak in turn, ``participant_1`` first, round-robin; every turn
   sees every earlier turn of the conversation (all rounds so far, and the earlier speakers
   of its own round). The turns are sequential, so there is nothing to run concurrently.
3. The final answer is the majority vote over each agent's last message (ties: the earliest
   agent).

How the conversation is shown (our design, all configurable):

* ``naming``: ``"unnamed"`` shows turns without a speaker label and never tells an agent a
  name; ``"numbered"`` labels them "Agent 1" .. "Agent N"; ``"named"`` uses the config's
  ``names`` (one per agent).
* ``introduce``: tell each agent who it is and who else is present (with ``"unnamed"``: only
  how many participants there are, itself included): in ``"single_message"`` after the
  conversation, just before the cue (so every speaker's prompt opens with the same question
  and thread, which a server's prefix cache reuses), in ``"chat_turns"`` in its first user
  message.
* ``transcript``: ``"single_message"`` sends the conversation so far as one user message
  after the system prompt; ``"chat_turns"`` sends it as chat history, the agent's own earlier
  turns as assistant messages and the others' (consecutive ones merged) as user messages.
  In ``"single_message"`` an agent's own earlier turns are shown like everyone else's, so an
  agent that was not told its label (unnamed, or ``introduce=False``) cannot tell which
  turns were its own; in ``"chat_turns"`` its own turns are always recognisable.

Every message carries ``metadata`` for behaviour coding (``evaluators/behaviour_coding.py``):
``round``, ``turn`` (0-based position within the round), ``speaker``, ``label`` (as the
others see it; None when unnamed), ``naming``, ``introduce``, ``transcript`` and
``visible_labels`` (the speaker labels that appeared in what the speaker was sent).

LLM calls: N·R (default 3·3 = 9).

Budget stop: after every turn, the majority vote over the latest message of each agent that
has spoken so far (agent order).

Deviations: the prompts, the defaults (3 agents, 3 rounds, numbered, introduced, one user
message), the answer rule (majority vote, so the run can be scored) and the per-message
metadata are ours; we do not know the paper's exact protocol.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import decide, propose_vote
from maslab.llm.types import ChatMessage

PARTICIPANT = "participant"
Naming = Literal["unnamed", "numbered", "named"]

SYSTEM = (
    "You are taking part in a group conversation about a question. Write your messages to the "
    "group in plain prose."
)


def introduction(label: str | None, labels: list[str | None], introduce: bool) -> str:
    """Who the speaker is and who else is present ("" when not introduced); unnamed speakers
    learn only how many participants there are."""
    if not introduce:
        return ""
    if label is None:
        return f"There are {len(labels)} participants in this conversation, you included.\n\n"
    others = [str(other) for other in labels if other != label]
    present = ", ".join(others) if others else "nobody else"
    return f"You are {label}. Also present: {present}.\n\n"


def opening(task: Task, intro: str) -> str:
    return f"{intro}The question under discussion:\n\n{task.prompt()}"


CUE = (
    "It is your turn. Write your next message to the group, and end it with your current "
    "answer to the question in the required format."
)


def shown(message: Message) -> str:
    """A turn as the others see it: labelled with its speaker, or bare when unnamed."""
    label = message.metadata["label"]
    text = message.content.strip()
    return f"{label}: {text}" if label is not None else f"---\n{text}"


def single_message(task: Task, intro: str, earlier: list[Message]) -> list[ChatMessage]:
    """The whole conversation so far in one user message, then the introduction and the cue."""
    so_far = "\n\n".join(map(shown, earlier)) if earlier else "(nobody has spoken yet)"
    prompt = f"{opening(task, '')}\n\nThe conversation so far:\n\n{so_far}\n\n{intro}{CUE}"
    return [{"role": "user", "content": prompt}]


def chat_turns(task: Task, intro: str, earlier: list[Message], me: str) -> list[ChatMessage]:
    """The conversation as chat history: the agent's own turns as assistant messages, the
    others' as user messages (consecutive ones merged), each own turn after the cue it
    answered, so the history is exactly what the agent was sent and what it said."""
    turns: list[ChatMessage] = [{"role": "user", "content": opening(task, intro)}]

    def say(text: str) -> None:
        if turns[-1]["role"] == "user":
            turns[-1] = {"role": "user", "content": f"{turns[-1]['content']}\n\n{text}"}
        else:
            turns.append({"role": "user", "content": text})

    for message in earlier:
        if message.sender == me:
            say(CUE)
            turns.append({"role": "assistant", "content": message.content})
        else:
            say(shown(message))
    say(CUE)
    return turns


@register_method("free_discussion")
class FreeDiscussion(Method):
    """N role-less agents take turns in one shared conversation for R rounds; majority vote."""

    roles = (PARTICIPANT,)
    paper = '"Who Am I, and Who Else Is Here?" (arXiv id not recorded)'
    category = "free discussion (no roles)"
    calls = "N·R (default 3·3 = 9)"

    class Config(MethodConfig):
        agents: int = Field(3, ge=1)
        rounds: int = Field(3, ge=1)
        naming: Naming = "numbered"
        names: tuple[str, ...] | None = None
        introduce: bool = True
        transcript: Literal["single_message", "chat_turns"] = "single_message"

        @model_validator(mode="after")
        def _names(self) -> FreeDiscussion.Config:
            if self.naming != "named":
                if self.names is not None:
                    raise ValueError(f"names are only for naming=named, not {self.naming}")
                return self
            if self.names is None or len(self.names) != self.agents:
                given = "none" if self.names is None else len(self.names)
                raise ValueError(
                    f"naming=named needs one name per agent ({self.agents}), got {given}"
                )
            if len(set(self.names)) != len(self.names) or not all(n.strip() for n in self.names):
                raise ValueError("names must be distinct and non-empty")
            return self

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(PARTICIPANT, self.config.agents)

    def labels(self) -> list[str | None]:
        """How each agent's turns are labelled for the others (None: unlabelled)."""
        cfg = self.config
        if cfg.naming == "unnamed":
            return [None] * cfg.agents
        if cfg.naming == "named":
            return list(cfg.names or ())
        return [f"Agent {i}" for i in range(1, cfg.agents + 1)]

    def structure(self) -> Topology:
        """Every participant reads every other one (one participant alone: a single node)."""
        names = list(self.agent_names())
        return Topology.complete(names) if self.config.agents > 1 else Topology.chain(names)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        names = list(self.agent_names())
        labels = self.labels()
        everyone = [label for label in labels if label is not None]
        ctx.topology = self.structure()
        agents = [ctx.agent(name, role=PARTICIPANT) for name in names]
        conversation: list[Message] = []
        latest: dict[int, str] = {}

        async def turn(i: int, agent: Agent, r: int) -> Message:
            intro = introduction(labels[i], labels, cfg.introduce)
            if cfg.transcript == "chat_turns":
                *history, cue = chat_turns(task, intro, conversation, agent.name)
                unlabelled = {agent.name}  # its own turns come back as assistant messages
            else:
                *history, cue = single_message(task, intro, conversation)
                unlabelled = set()
            visible = {m.metadata["label"] for m in conversation if m.sender not in unlabelled}
            if cfg.introduce:
                visible |= set(everyone)
            agent.history = [{"role": "system", "content": SYSTEM}, *history]
            return await agent.reply(
                cue["content"],
                round=r,
                remember=False,  # the next turn rebuilds the conversation from the transcript
                metadata={
                    "round": r,
                    "turn": i,
                    "speaker": agent.name,
                    "label": labels[i],
                    "naming": cfg.naming,
                    "introduce": cfg.introduce,
                    "transcript": cfg.transcript,
                    "visible_labels": [label for label in everyone if label in visible],
                },
            )

        for r in range(cfg.rounds):
            for i, agent in enumerate(agents):
                message = await turn(i, agent, r)
                conversation.append(message)
                latest[i] = message.content
                propose_vote(ctx, task, [latest[j] for j in sorted(latest)], round=r, turn=i)

        return await decide(ctx, task, [latest[i] for i in range(cfg.agents)], "majority")
