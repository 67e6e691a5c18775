"""``constant:<text>``: a model provider whose model answers every request with ``<text>``.

A real provider would call its service in ``complete``; maslab wraps every provider's model the
same way (response cache, retries), and the sample's context traces and counts each call.
"""

from __future__ import annotations

from maslab.llm.registry import ModelSettings
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Usage


class ConstantModel(ChatModelBase):
    """Answers ``text`` to everything."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.name = f"constant:{text}"

    async def complete(self, request: ChatRequest) -> Completion:
        prompt = sum(len(message["content"].split()) for message in request.messages)
        usage = Usage(prompt, len(self.text.split()), estimated=True)  # words, not tokens
        return Completion(self.text, usage, self.name, finish_reason="stop")


def constant(name: str, settings: ModelSettings) -> ChatModelBase:
    """A model that answers every request with the text after 'constant:' (an example)."""
    return ConstantModel(name)
