"""Public testing kit: scripted models and a fake OpenAI-compatible HTTP server.

* :class:`ScriptedModel` answers in-process from a list, a pattern dict or a callable and
  records every request (``assert_consumed()`` checks a list script was used up); an answer
  may be a :class:`Reply` with tool calls, and ``native=`` sets what the model claims to
  support natively.
* :class:`FakeOpenAIServer` serves the same scripts over real HTTP on 127.0.0.1, with latency,
  fault injection (429 with Retry-After, 500, 503, hangs, malformed JSON, empty choices) and
  counters (requests, served tokens, peak in-flight).
"""

from typing import TYPE_CHECKING

from maslab.lazy import lazy_exports

if TYPE_CHECKING:  # each name below loads on first use (see maslab.lazy)
    from maslab.llm.scripted import (
        Reply,
        Script,
        ScriptedCall,
        ScriptedModel,
        ScriptError,
        count_prompt_tokens,
        count_tokens,
        echo,
        last_user_message,
    )
    from maslab.testing.fake_server import FAULTS, FakeOpenAIServer

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FAULTS": "maslab.testing.fake_server",
        "FakeOpenAIServer": "maslab.testing.fake_server",
        "Reply": "maslab.llm.scripted",
        "Script": "maslab.llm.scripted",
        "ScriptedCall": "maslab.llm.scripted",
        "ScriptedModel": "maslab.llm.scripted",
        "ScriptError": "maslab.llm.scripted",
        "count_prompt_tokens": "maslab.llm.scripted",
        "count_tokens": "maslab.llm.scripted",
        "echo": "maslab.llm.scripted",
        "last_user_message": "maslab.llm.scripted",
    },
)

__all__ = [
    "FAULTS",
    "FakeOpenAIServer",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedCall",
    "ScriptedModel",
    "count_prompt_tokens",
    "count_tokens",
    "echo",
    "last_user_message",
]
