"""Messages between agents and the per-sample transcript that holds them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    """One message an agent sent; ``recipients=None`` broadcasts to all who may see it."""

    model_config = ConfigDict(frozen=True)

    sender: str
    content: str
    round: int | None = None
    recipients: tuple[str, ...] | None = None
    kind: str = "message"
    metadata: dict[str, Any] = Field(default_factory=dict)

    def addressed_to(self, agent: str) -> bool:
        return self.recipients is None or agent in self.recipients


class Transcript(BaseModel):
    """Ordered messages of one sample."""

    messages: list[Message] = Field(default_factory=list)

    def add(self, message: Message) -> Message:
        self.messages.append(message)
        return message

    def annotate(self, message: Message, **metadata: Any) -> Message:
        """Replace ``message`` (this very object, a message of this transcript) by a copy whose
        metadata also holds ``metadata`` (what a method read from it); returns the copy."""
        for i, held in enumerate(self.messages):
            if held is message:
                self.messages[i] = message.model_copy(
                    update={"metadata": {**message.metadata, **metadata}}
                )
                return self.messages[i]
        raise ValueError(f"a message from {message.sender!r} is not in this transcript")

    def filter(
        self,
        *,
        sender: str | Iterable[str] | None = None,
        round: int | None = None,
        kind: str | None = None,
        to: str | None = None,
    ) -> list[Message]:
        """Messages matching every given criterion, in order."""
        senders = {sender} if isinstance(sender, str) else (None if sender is None else set(sender))
        return [
            m
            for m in self.messages
            if (senders is None or m.sender in senders)
            and (round is None or m.round == round)
            and (kind is None or m.kind == kind)
            and (to is None or m.addressed_to(to))
        ]

    def last(self, sender: str, *, kind: str | None = None) -> Message | None:
        found = self.filter(sender=sender, kind=kind)
        return found[-1] if found else None

    def __iter__(self) -> Iterator[Message]:  # type: ignore[override]
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)
