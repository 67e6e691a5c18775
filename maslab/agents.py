"""Agents: a name, a role, a model handle, sampling parameters and an own chat history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from maslab.llm.types import ChatMessage, ChatModel
from maslab.messages import Message
from maslab.roles import agent_settings

if TYPE_CHECKING:
    from maslab.context import Context


class Agent:
    """An LLM agent of one sample. Every call goes through the sample's :class:`Context`.

    ``role`` is the agent's part in the method (``None``: its name is its role). ``model`` may
    differ between agents of one method (a spec string or a model handle; ``None`` is the run's
    model). Extra keyword arguments are sampling parameters (``temperature``, ``max_tokens``,
    ...) that override the run's for this agent. The context's model roles override both, for
    the agent's role and then its name (:func:`maslab.roles.agent_settings`).
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
        **params: Any,
    ) -> Message:
        """Send ``prompt`` as a user turn after the history, return the answer as a Message.

        With ``remember`` the prompt and answer join the history (the agent's memory);
        without, the call leaves no trace in it (the transcript still records the message).
        Other keywords go to :meth:`Context.chat` (sampling parameters, ``stream``).
        """
        messages = (
            [*self.history, {"role": "user", "content": prompt}]
            if prompt is not None
            else self.history
        )
        completion = await self.ctx.chat(
            messages, model=self.model, agent=self.name, round=round, **{**self.sampling, **params}
        )
        if remember:
            self.history = [*messages, {"role": "assistant", "content": completion.text}]
        return self.ctx.transcript.add(
            Message(
                sender=self.name,
                content=completion.text,
                round=round,
                kind=kind,
                recipients=recipients,
            )
        )

    def __repr__(self) -> str:
        return f"<Agent {self.name} on {self.model.name}>"
