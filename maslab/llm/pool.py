"""A run's models: each spec loaded once (:func:`~maslab.llm.registry.load_model`) and shared by
every agent on it, so they share its endpoints' limits and the response cache."""

from __future__ import annotations

from pathlib import Path

from maslab.defaults import ENDPOINT_MAX_CONCURRENCY
from maslab.llm.balancing import Balanced
from maslab.llm.cache import CacheStore, ResponseCache
from maslab.llm.endpoints import Endpoints, endpoints_table
from maslab.llm.registry import load_model
from maslab.llm.retry import RetryPolicy
from maslab.llm.types import ChatModelBase, Middleware


class ModelPool:
    """Loads each spec once and shares the stack, so all agents on a model share its limits.

    ``concurrency`` is the requests in flight an endpoint without its own ``max_concurrency``
    takes: a run's ``concurrency``, so a ``model@url`` spec is never the tighter cap.
    :meth:`share` gives each of several runs (a sweep's cells) a pool of its own over the same
    stacks.
    """

    def __init__(
        self,
        *,
        endpoints: Endpoints = None,
        cache: CacheStore | str | Path | None = None,
        retry: RetryPolicy | None = None,
        native: bool = True,
        concurrency: int = ENDPOINT_MAX_CONCURRENCY,
    ) -> None:
        self.endpoints = endpoints_table(endpoints)
        self.cache = ResponseCache(cache) if isinstance(cache, (str, Path)) else cache
        self.retry = retry
        self.native = native
        self.concurrency = concurrency
        self._models: dict[str, ChatModelBase] = {}
        self._owner: ModelPool | None = None

    def share(self) -> ModelPool:
        """A pool that loads through this one: the same stacks (so the same endpoint caps and
        response cache), its own :meth:`binding_caps` (the models asked of it), and an
        :meth:`aclose` that closes nothing (this pool's does)."""
        shared = ModelPool(
            endpoints=self.endpoints,
            cache=self.cache,
            retry=self.retry,
            native=self.native,
            concurrency=self.concurrency,
        )
        shared._owner = self
        return shared

    def get(self, spec: str) -> ChatModelBase:
        if spec not in self._models:
            self._models[spec] = (
                self._owner.get(spec)
                if self._owner is not None
                else load_model(
                    spec,
                    endpoints=self.endpoints,
                    cache=self.cache,
                    retry=self.retry,
                    native=self.native,
                    concurrency=self.concurrency,
                )
            )
        return self._models[spec]

    def binding_caps(self) -> dict[str, int]:
        """The loaded models whose endpoints together take fewer requests in flight than
        ``concurrency`` (only an explicit ``max_concurrency`` can): spec -> that number."""
        caps = {}
        for spec, model in self._models.items():
            while isinstance(model, Middleware):
                model = model.inner
            if isinstance(model, Balanced) and model.max_concurrency < self.concurrency:
                caps[spec] = model.max_concurrency
        return caps

    async def aclose(self) -> None:
        if self._owner is not None:
            return
        for model in self._models.values():
            await model.aclose()
