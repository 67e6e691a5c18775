"""Agents: a name, a role, a model handle, sampling parameters and an own chat history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from maslab.core.messages import Message
from maslab.core.roles import agent_settings
from maslab.llm.types import ChatMessage, ChatModel

if TYPE_CHECKING:
    from maslab.core.context import Context


class Agent:
    """An LLM agent of one sample. Every call goes through the sample's :class:`Context`.

    Agents of one method may use different models and sampling (heterogeneous teams). Methods
    make agents with ``ctx.agent(name, ...)``, which takes the same keywords. The context's
    model roles override ``model`` and ``sampling``, for the agent's role and then its name
    (:func:`maslab.core.roles.agent_settings`).

    Args:
        ctx: The sample's context.
        name: Unique within the sample: the sender of its messages, and its random stream.
        system: The system prompt, the first turn of its history; None for none.
        role: The agent's part in the method (``"critic"``, ``"debater"``), which model roles
            name; None: its name is its role. Never sent.
        model: A spec or a handle; None is the run's model.
        **sampling: Sampling parameters (``temperature``, ``max_tokens``, ...) that override
            the run's for every call of this agent.
    """

    def __init__(
        self,
        ctx: Context,
        name: str,
        *,
        system: str | None = None,
        role: str | None = None,
        model: ChatModel | str | None = None,
        **sampling: Any,
    ) -> None:
        self.ctx = ctx
        self.name = name
        self.role = role or name
        ctx.roles[name] = self.role
        settings = agent_settings(ctx.model_roles, name, role, {"model": model, **sampling})
        self.model = ctx.resolve(settings.pop("model"))
        self.sampling = settings
        self.history: list[ChatMessage] = [{"role": "system", "content": system}] if system else []

    async def reply(
        self,
        prompt: str | None = None,
        *,
        round: int | None = None,
        kind: str = "message",
        recipients: tuple[str, ...] | None = None,
        remember: bool = True,
        metadata: dict[str, Any] | None = None,
        **params: Any,
    ) -> Message:
        """Send ``prompt`` as a user turn after the history; the answer, added to the transcript.

        Args:
            prompt: The new user turn; None sends the history as it is.
            round: The method's round, on the message and the call's record; it is what
                :meth:`Topology.visible_messages` selects by.
            kind: The message's kind (``"message"``, ``"critique"``, ``"aggregate"``, ...).
            recipients: The agents it is addressed to; None broadcasts it to all who may see it
                (the topology decides).
            remember: Add the prompt and the answer to the history (the agent's memory);
                False leaves the history as it was (the transcript still has the message).
            metadata: Kept in the message's ``metadata`` (what an evaluator or a trace reads:
                the turn, the speaker's label, ...).
            **params: For :meth:`Context.chat`: sampling parameters over the agent's,
                ``stream``, ``tools``, ``response_format``.

        Native tool calls of the answer are in the message's ``metadata["tool_calls"]``
        (:class:`~maslab.llm.types.FunctionCall` objects).
        """
        messages: list[ChatMessage] = (
            [*self.history, {"role": "user", "content": prompt}]
            if prompt is not None
            else self.history
        )
        completion = await self.ctx.chat(
            messages, model=self.model, agent=self.name, round=round, **{**self.sampling, **params}
        )
        answer: ChatMessage = {"role": "assistant", "content": completion.text}
        if completion.tool_calls:
            answer["tool_calls"] = [call.to_wire() for call in completion.tool_calls]
        if remember:
            self.history = [*messages, answer]
        return self.ctx.transcript.add(
            Message(
                sender=self.name,
                content=completion.text,
                round=round,
                kind=kind,
                recipients=recipients,
                metadata={
                    **(metadata or {}),
                    **({"tool_calls": completion.tool_calls} if completion.tool_calls else {}),
                },
            )
        )

    def remember(self, *turns: ChatMessage) -> None:
        """Add turns that no reply of its own made to its history, which the next
        :meth:`reply` sends: the ``tool`` turns answering its last reply's native tool calls, a
        result shown with the next prompt."""
        self.history = [*self.history, *turns]

    def has_read(self, text: str) -> bool:
        """Whether a user turn of its history holds ``text``: what a prompt need not repeat to
        an agent that keeps its history (a list of functions, say)."""
        return any(
            turn["role"] == "user" and text in str(turn.get("content") or "")
            for turn in self.history
        )

    def __repr__(self) -> str:
        return f"<Agent {self.name} on {self.model.name}>"
