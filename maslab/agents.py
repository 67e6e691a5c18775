"""Agents: a name, a role, a model handle, sampling parameters and an own chat history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from maslab.llm.types import ChatMessage, ChatModel
from maslab.messages import Message

if TYPE_CHECKING:
    from maslab.context import Context


class Agent:
    """An LLM agent of one sample. Every call goes through the sample's :class:`Context`.

    ``model`` may differ between agents of one method (a spec string or a model handle;
    ``None`` is the run's model). Extra keyword arguments are sampling parameters
    (``temperature``, ``max_tokens``, ...) that override the run's for this agent.
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
        self.role = role
        self.model = ctx.resolve(model)
        self.sampling = sampling
        self.history: list[ChatMessage] = [{"role": "system", "content": system}] if system else []

    async def reply(
        self,
        prompt: str | None = None,
        *,
        round: int | None = None,
        kind: str = "message",
        recipients: tuple[str, ...] | None = None,
        remember: bool = True,
        **params: Any,
    ) -> Message:
        """Send ``prompt`` as a user turn after the history, return the answer as a Message.

        With ``remember`` the prompt and answer join the history (the agent's memory);
        without, the call leaves no trace in it (the transcript still records the message).
        Other keywords go to :meth:`Context.chat` (sampling parameters, ``stream``, ``tools``,
        ``response_format``). Native tool calls of the answer are in the message's
        ``metadata["tool_calls"]`` (:class:`~maslab.llm.types.FunctionCall` objects).
        """
        messages = (
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
                metadata={"tool_calls": completion.tool_calls} if completion.tool_calls else {},
            )
        )

    def __repr__(self) -> str:
        return f"<Agent {self.name} on {self.model.name}>"
