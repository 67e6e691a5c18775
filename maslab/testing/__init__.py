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
    from maslab.testing.fake_server import FAULTS, FakeOpenAIServer
    from maslab.testing.scripted import (
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FAULTS": "maslab.testing.fake_server",
        "FakeOpenAIServer": "maslab.testing.fake_server",
        "Reply": "maslab.testing.scripted",
        "Script": "maslab.testing.scripted",
        "ScriptedCall": "maslab.testing.scripted",
        "ScriptedModel": "maslab.testing.scripted",
        "ScriptError": "maslab.testing.scripted",
        "count_prompt_tokens": "maslab.testing.scripted",
        "count_tokens": "maslab.testing.scripted",
        "echo": "maslab.testing.scripted",
        "last_user_message": "maslab.testing.scripted",
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
