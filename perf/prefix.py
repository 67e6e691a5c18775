"""Prefix reuse: how much of a sample's prompts repeats a prefix an earlier prompt already sent.

A server with a prefix cache (vLLM's automatic prefix caching, SGLang's radix cache) skips the
prefill of a prompt's longest prefix that an earlier prompt shared. Here a prompt is what such a
server sees, its messages serialized in order as ``"role: content\\n"`` segments (a stand-in for
the chat template), and a request reuses the longest prefix it shares with any request sent
before it. Cache block granularity and eviction are ignored: this is what a cache could save.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass


def serialize(messages: Iterable[Mapping[str, object]]) -> str:
    """A chat as a prefix cache sees it: ``"role: content\\n"`` per message, in order."""
    return "".join(f"{m['role']}: {m.get('content') or ''}\n" for m in messages)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search over slice comparisons, which run in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def reused_prefixes(prompts: Sequence[str]) -> list[int]:
    """For each prompt, the length of the longest prefix it shares with an earlier prompt.

    The earlier prompt sharing the longest prefix is a neighbour in sorted order, so each prompt
    is compared with two others only.
    """
    seen: list[str] = []
    reused = []
    for prompt in prompts:
        i = bisect.bisect_left(seen, prompt)
        neighbours = seen[max(i - 1, 0) : i + 1]
        reused.append(max((common_prefix(prompt, s) for s in neighbours), default=0))
        seen.insert(i, prompt)
    return reused


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """Prompt characters (and tokens, where counted) of a run of requests, and the part of them
    a prefix cache could reuse."""

    requests: int
    chars: int
    reused_chars: int
    tokens: int = 0
    reused_tokens: int = 0

    @property
    def share(self) -> float:
        """Reused characters over all prompt characters (0 for no prompt)."""
        return self.reused_chars / self.chars if self.chars else 0.0

    @property
    def token_share(self) -> float:
        """Reused tokens over all prompt tokens (0 when none were counted)."""
        return self.reused_tokens / self.tokens if self.tokens else 0.0

    def __add__(self, other: PrefixReuse) -> PrefixReuse:
        return PrefixReuse(
            self.requests + other.requests,
            self.chars + other.chars,
            self.reused_chars + other.reused_chars,
            self.tokens + other.tokens,
            self.reused_tokens + other.reused_tokens,
        )


def prefix_reuse(
    chats: Sequence[Iterable[Mapping[str, object]]],
    count_tokens: Callable[[str], int] | None = None,
) -> PrefixReuse:
    """Prefix reuse over the chats of one sample, in the order they were sent; with
    ``count_tokens``, tokens too (of each prompt and of its reused prefix)."""
    prompts = [serialize(chat) for chat in chats]
    reused = reused_prefixes(prompts)
    tokens = reused_tokens = 0
    if count_tokens is not None:
        tokens = sum(map(count_tokens, prompts))
        reused_tokens = sum(count_tokens(p[:n]) for p, n in zip(prompts, reused, strict=True))
    return PrefixReuse(len(prompts), sum(map(len, prompts)), sum(reused), tokens, reused_tokens)
