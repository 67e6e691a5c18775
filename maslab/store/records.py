"""The run format, defined once: what each file of a run directory holds, as typed records, and
the format's version. :mod:`maslab.store.run_store` writes and reads the files; everything else
reads runs through it, in these types.

| file | holds | type |
|---|---|---|
| ``manifest.json`` | what defines the run, and its ``format_version`` | :class:`Manifest` |
| ``results.jsonl`` | one line per finished attempt at a (task, repeat) | :class:`ResultRecord` |
| ``traces.jsonl`` | the matching line: its calls, messages, answers, topology | :class:`Trace` |
| ``traces.idx`` | where each trace line lies | :mod:`maslab.store.trace_index` |
| ``superseded.jsonl`` | attempts older versions moved out of the results | :class:`ResultRecord` |
| ``optimize.jsonl`` | one line per attempt at the optimisation step | :class:`ResultRecord` |
| ``optimize_traces.jsonl`` | the trace of each such attempt | :class:`Trace` |
| ``learned_state.json`` | what the method learned in that step | :class:`LearnedStateFile` |
| ``attributions.jsonl`` | who made failed samples fail | :class:`AttributionRecord` |
| ``scorings.jsonl`` | samples scored again (``maslab score``) | :class:`ScoringRecord` |
| ``.lock`` | the pid of the process writing the run | |

**Versions.** :data:`FORMAT_VERSION` is the format this maslab writes, in the manifest's
``format_version``. A manifest without one was written before the format was versioned:
version 0, whose lines have the shape of version 1 except that the oldest lack the fields added
since (a trace's ``answers``, a call's ``attempts``, ``estimated``, ``purpose``,
``finish_reason`` and ``tool_calls``, the program-call counts, a record's ``signals``,
``usage_by_model`` and ``scoring_usage``); each is read as its default, documented on the field.
A manifest of a later version than :data:`FORMAT_VERSION` is refused in one line
(:class:`FormatTooNew`): its lines may mean what this maslab cannot know.

The version is the directory's, in its manifest only, not repeated in each line: a trace or a
result is only ever read from its directory, whose manifest is read first, so one check covers
every line (none is spent per line on a 50,000-trace file), and the trace line keeps the
``{"task_id": ..., "repeat": ...`` prefix that :mod:`maslab.store.trace_index` reads. A run that
a newer maslab resumes gets its version, its older lines read by the same defaults; so
``format_version`` N says that every line was written in format N or an earlier one.

Bump :data:`FORMAT_VERSION` when an older maslab would misread what is written now (a field
renamed, retyped or meaning something else, a file replaced); a new field with a default needs
no bump (older readers ignore it, newer ones default it in older runs). Every record ignores
unknown fields when read. ``tests/store/test_run_format.py`` checks that every line a run writes is
exactly what these types describe: a field a writer adds without typing it here fails it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import to_jsonable_python

from maslab import defaults
from maslab.bench.evaluation import Score
from maslab.config_files import validation_message
from maslab.errors import ConfigError
from maslab.llm.registry import model_identity, options_identity
from maslab.version import __version__

FORMAT_VERSION = 1
"""The run format this maslab writes (the manifest's ``format_version``); it reads this one and
every earlier one. 0: runs written before the format was versioned. 1: the format versioned
(the lines as the last unversioned maslab wrote them)."""

MANIFEST, RESULTS, TRACES = "manifest.json", "results.jsonl", "traces.jsonl"
LOCK = ".lock"
"""The run directory's lock file: its writer holds it (``flock``) and writes its pid there."""
SUPERSEDED = "superseded.jsonl"
# the optimisation step (``--optimize-on``): one record and one trace per attempt, and what
# the method learned
OPTIMIZATION, OPTIMIZATION_TRACES = "optimize.jsonl", "optimize_traces.jsonl"
LEARNED_STATE = "learned_state.json"
ATTRIBUTIONS = "attributions.jsonl"
"""Failure attribution (``maslab attribute``): one line per failed sample, strategy and judge."""
SCORINGS = "scorings.jsonl"
"""Re-scorings (``maslab score``): one line per sample and scoring label, beside the original
scores, which stay as they are. One file for every label, not one per label: :data:`FILES`
names each file of a run, and a label is a field, as an attribution's strategy is."""

Status = Literal["ok", "budget", "error"]
Key = tuple[str, int]
# usage keys: tokens newly spent, and tokens replayed from the response cache
SPENT_KEYS = ("prompt_tokens", "completion_tokens")
CACHED_KEYS = ("cached_prompt_tokens", "cached_completion_tokens")


class FormatTooNew(ConfigError):
    """The run was written by a newer maslab, in a format this one does not know."""


# --- results -------------------------------------------------------------------------------


class ResultRecord(BaseModel):
    """One (task, repeat). ``status``: ok, budget (ended by its budget, still scored) or error.

    ``score`` is the evaluator's verdict (:class:`maslab.bench.evaluation.Score`; None for an
    errored sample). ``usage`` covers every call the method made for the sample
    (``UsageTotals`` fields: spent and cache-replayed tokens apart), ``usage_by_model`` the same
    per model, and ``scoring_usage`` the evaluator's judge calls, which are not the method's
    cost.
    ``signals``: its triage signals, name -> value, above 0 when it fired (see
    :mod:`maslab.analysis.triage`); empty in runs recorded before they were stored.
    ``tool_calls`` and ``tool_errors``: the calls the sample's agents made on its environment,
    and how many of them errored (:meth:`maslab.core.context.Context.call_tool`; no model
    calls, never in ``usage``); 0 without an environment and in runs recorded before.
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    repeat: int = 0
    status: Status
    answer: str | None = None
    gold: str | None = None
    score: Score | None = None
    usage: dict[str, float] = Field(default_factory=dict)
    usage_by_model: dict[str, dict[str, float]] = Field(default_factory=dict)
    scoring_usage: dict[str, float] = Field(default_factory=dict)
    elapsed_s: float = 0.0
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    signals: dict[str, float] = Field(default_factory=dict)
    tool_calls: int = 0
    tool_errors: int = 0
    truncated_calls: int = 0
    """The sample's model calls (scoring included) whose reply was cut at ``max_tokens``
    (``finish_reason`` "length"); 0 in runs recorded before it was counted."""

    @property
    def key(self) -> Key:
        return (self.task_id, self.repeat)

    @property
    def correct(self) -> bool:
        return self.score is not None and self.score.correct

    @property
    def tokens_used(self) -> int:
        """Tokens the method's calls used: newly spent plus replayed from the cache."""
        return int(sum(self.usage.get(k, 0) for k in SPENT_KEYS + CACHED_KEYS))

    @property
    def unparsed(self) -> bool:
        return self.status != "error" and (self.score is None or self.score.unparsed)


# --- traces --------------------------------------------------------------------------------


class _Part(BaseModel):
    """A piece of a trace line: read-only, unknown fields ignored. A line is written with only
    the fields its writer set (``exclude_unset``): optional chat fields stay absent, as the
    wire format has them."""

    model_config = ConfigDict(frozen=True)


class WireFunction(_Part):
    name: str
    arguments: str
    """A JSON object as text, as the model wrote it (it may not parse)."""


class WireToolCall(_Part):
    """One tool call of an assistant turn, in the OpenAI wire format."""

    id: str
    type: Literal["function"] = "function"
    function: WireFunction


class ChatTurn(_Part):
    """One message of the chat a call sent (:class:`maslab.llm.types.ChatMessage`): an assistant
    turn may carry ``tool_calls``, a ``tool`` turn answers one (``tool_call_id``)."""

    role: str
    content: str
    name: str | None = None
    tool_calls: tuple[WireToolCall, ...] | None = None
    tool_call_id: str | None = None


class ToolCall(_Part):
    """A function the reply asked for (:class:`maslab.llm.types.FunctionCall`)."""

    id: str
    name: str
    arguments: str


class TraceCall(_Part):
    """One model call of a sample, as the ledger recorded it
    (:class:`maslab.llm.ledger.CallRecord`). A failed call has ``error`` set and zero tokens."""

    sample_id: str = ""
    agent: str | None = None
    round: int | None = None
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    queued_s: float = 0.0
    """Of ``latency_s``, the wait at the server before the reply was computed (0 where the
    server did not say, or before it was recorded)."""
    cached: bool = False
    estimated: bool = False
    """The server reported no token counts: the tokens are an estimate (False before it was
    recorded)."""
    error: str | None = None
    draw: int = 0
    purpose: Literal["method", "scoring"] = "method"
    """``scoring``: an evaluator's judge, no agent of the method (``method`` before it was
    recorded)."""
    messages: tuple[ChatTurn, ...] = ()
    response: str | None = None
    finish_reason: str | None = None
    """Why the reply ended, as the server said ("length": cut at max_tokens)."""
    tool_calls: tuple[ToolCall, ...] = ()
    attempts: int = 1
    """Requests the retry layer sent for the call (1 before it was recorded)."""

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens, spent or replayed from the cache."""
        return self.prompt_tokens + self.completion_tokens


class TraceMessage(_Part):
    """One message of the sample's transcript (:class:`maslab.core.messages.Message`)."""

    sender: str = ""
    content: str = ""
    round: int | None = None
    recipients: tuple[str, ...] | None = None
    """None: a broadcast to all who may see it."""
    kind: str = "message"
    metadata: dict[str, Any] = Field(default_factory=dict)


class TraceTool(_Part):
    """One call on the sample's environment (:class:`maslab.core.episode.ToolRecord`), its
    result cut to a bounded length."""

    turn: int = 0
    agent: str | None = None
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    error: bool = False
    duration_s: float = 0.0


class TopologyNode(_Part):
    name: str
    attrs: dict[str, Any] = Field(default_factory=dict)


class TopologyEdge(_Part):
    source: str
    target: str
    attrs: dict[str, Any] = Field(default_factory=dict)


class TopologyGraph(_Part):
    """The topology a sample ran on (:meth:`maslab.core.topology.Topology.to_dict`)."""

    name: str
    nodes: tuple[TopologyNode, ...] = ()
    edges: tuple[TopologyEdge, ...] = ()

    def as_json(self) -> bytes:
        """The topology as JSON (what ``Topology.from_dict`` reads): equal topologies give
        equal bytes, so it keys the distinct topologies of a run."""
        return orjson.dumps(self.model_dump(mode="json"))


class Trace(_Part):
    """One sample's trace line (written by :func:`maslab.harness.samples.trace`): its prompt,
        every model call, the transcript's messages, the topology it ran on and the answer
        extracted from each message.

        ``answers`` holds, per message, the answer extracted the way the task's answer type
        extracts (None where there is none); None when the trace does not record them (the
        optimisation step's, and traces recorded before they were). ``program_calls_refused``
        and ``program_calls_failed`` count the requests of the sample's sandboxed programs that
        the bridge refused and their calls the model failed (:mod:`maslab.kit.bridge`; 0 before
        they were recorded). ``tools`` lists the calls on the sample's environment, in the order
        they ran (absent without one, and before they were recorded); ``roles`` each agent's role.
    ``task_id`` and ``repeat``
        come first: the trace index reads them from a line's first bytes, and every line has them
        (a line without them is no trace).
    """

    task_id: str
    repeat: int
    prompt: str | None = None
    calls: tuple[TraceCall, ...] = ()
    program_calls_refused: int = 0
    program_calls_failed: int = 0
    messages: tuple[TraceMessage, ...] = ()
    topology: TopologyGraph | None = None
    answers: tuple[str | None, ...] | None = None
    tools: tuple[TraceTool, ...] = ()
    roles: dict[str, str] = Field(default_factory=dict)
    """Each agent's role (:class:`maslab.core.agents.Agent`), by agent name; empty in traces
    from before it was recorded."""

    @property
    def key(self) -> Key:
        return (self.task_id, self.repeat)

    def line(self) -> dict[str, Any]:
        """The trace as its JSON line holds it: the fields its writer set."""
        return self.model_dump(mode="json", exclude_unset=True)

    def json_line(self) -> bytes:
        """:meth:`line` as JSON, serialised at once (without building the dict)."""
        return self.model_dump_json(exclude_unset=True).encode()


# --- the manifest and the learned state ----------------------------------------------------


class Manifest(BaseModel):
    """Everything that defines a run. The ``identity`` fields must match to resume into a dir."""

    model_config = ConfigDict(extra="allow")

    format_version: int = FORMAT_VERSION
    """The run format the run was written in (:data:`FORMAT_VERSION`); 0 when the manifest
    predates it (read by :func:`read_manifest`)."""
    method: str
    method_config: dict[str, Any] = Field(default_factory=dict)
    benchmark: str
    benchmark_options: dict[str, Any] = Field(default_factory=dict)
    split: str = defaults.SPLIT
    limit: int | None = None
    seed: int = defaults.SEED
    data: str | None = None
    dataset_hash: str = ""
    tasks: int = 0
    task_ids: list[str] | None = None
    model: str
    model_roles: dict[str, Any] = Field(default_factory=dict)
    native: bool = True
    sampling: dict[str, Any] = Field(default_factory=dict)
    repeats: int = defaults.REPEATS
    evaluator: str
    evaluator_options: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] = Field(default_factory=dict)
    optimize: dict[str, Any] = Field(default_factory=dict)
    """The optimisation step's split, limit, dataset hash and task ids; empty without one."""
    shard: tuple[int, int] | None = None
    """(i, N) for shard i of N (``--shard``, see :mod:`maslab.harness.shard`); None for a whole
    run."""
    concurrency: int | None = None
    """Model calls in flight across the run (as last run; None for older manifests)."""
    endpoint_caps: dict[str, int] = Field(default_factory=dict)
    """The models whose endpoints file capped their calls in flight below ``concurrency``."""
    sandbox: dict[str, Any] = Field(default_factory=dict)
    """How model-written code was isolated: :func:`maslab.sandbox.protections`, ``strict``,
    ``unsafe_no_sandbox`` and the ``missing`` essential protections; empty before they were
    recorded."""
    merged_from: list[str] | None = None
    """A merge's shard directories (``maslab merge``); None for a run that ran."""
    missing_shards: list[int] = Field(default_factory=list)
    """The shards a partial merge lacks (their tasks are not in it)."""
    created: str = ""
    maslab_version: str = ""
    git_commit: str | None = None
    python: str = ""

    IDENTITY: ClassVar[tuple[str, ...]] = (
        "method", "method_config", "benchmark", "split", "seed", "dataset_hash", "model",
        "model_roles", "native", "sampling", "evaluator", "evaluator_options", "budget",
        "optimize",
    )  # fmt: skip

    def identity(self) -> dict[str, Any]:
        """The :data:`IDENTITY` fields, each model spec (the run's, its roles' and its
        evaluator's judge) as :func:`~maslab.llm.registry.model_identity` names it."""
        return {k: self._identity_value(k) for k in self.IDENTITY}

    def _identity_value(self, key: str) -> Any:
        value = getattr(self, key)
        if key == "model":
            return model_identity(value)
        if key == "evaluator_options":
            return options_identity(value)
        if key == "model_roles":
            return {
                name: {**entry, "model": model_identity(entry["model"])} if "model" in entry
                else entry
                for name, entry in value.items()
            }  # fmt: skip
        return value

    def directory(self) -> Path:
        """The run's default directory, ``runs/<benchmark>/<method>__<model>__<digest>``, the
        digest over its :meth:`identity`: running the same run again resumes it there."""
        identity = self.identity()
        digest = hashlib.sha256(
            orjson.dumps(identity, option=orjson.OPT_SORT_KEYS, default=str)
        ).hexdigest()[:8]
        name = f"{_slug(self.method)}__{_slug(identity['model'])}__{digest}"
        return Path("runs") / _slug(self.benchmark) / name

    def identity_differences(self, other: Manifest) -> list[str]:
        """The identity fields in which ``other`` (the run asked for now) differs from this
        manifest. An option this manifest lacks that ``other`` holds at its plug-in's default is
        no difference: the option was added since this run was written, and its default is
        what the run did."""
        return [k for k in self.IDENTITY if not self._same(k, other)]

    def _same(self, key: str, other: Manifest) -> bool:
        mine, theirs = self._identity_value(key), other._identity_value(key)
        if mine == theirs:
            return True
        if key not in ("method_config", "evaluator_options"):
            return False
        if mine.keys() - theirs.keys() or any(mine[k] != theirs[k] for k in mine):
            return False
        defaults = _option_defaults(key, other)
        return all(k in defaults and theirs[k] == defaults[k] for k in theirs.keys() - mine.keys())

    def describe_caps(self) -> list[str]:
        """One line per model in ``endpoint_caps``: its cap binds, not ``--concurrency``."""
        return [
            f"{model} caps calls in flight at {cap} (max_concurrency in the endpoints file), "
            f"below --concurrency {self.concurrency}"
            for model, cap in self.endpoint_caps.items()
        ]

    def describe_sandbox(self) -> list[str]:
        """A warning when the run let model-written code run without isolation (its
        ``--unsafe-no-sandbox``, where the sandbox lacked essential protections)."""
        missing = self.sandbox.get("missing") or []
        if not (self.sandbox.get("unsafe_no_sandbox") and missing):
            return []
        return [
            f"--unsafe-no-sandbox: model-written code could run with the user's rights here "
            f"(no {', '.join(map(str, missing))})"
        ]

    def planned(self) -> set[Key] | None:
        """The (task, repeat) keys this run asked for; None for manifests that predate the list."""
        if self.task_ids is None:
            return None
        return {(task, repeat) for task in self.task_ids for repeat in range(self.repeats)}

    def planning_too(self, previous: Manifest) -> Manifest:
        """This manifest with the plan of the union of its samples and ``previous``'s: the
        tasks of both (``previous``'s first), the larger ``repeats`` and ``limit``."""
        ids = limit = None
        if self.task_ids is not None and previous.task_ids is not None:
            ids = list(dict.fromkeys(previous.task_ids + self.task_ids))
        if self.limit is not None and previous.limit is not None:
            limit = max(self.limit, previous.limit)
        return self.model_copy(
            update={
                "task_ids": ids,
                "tasks": len(ids) if ids is not None else max(self.tasks, previous.tasks),
                "repeats": max(self.repeats, previous.repeats),
                "limit": limit,
            }
        )


def _option_defaults(key: str, manifest: Manifest) -> dict[str, Any]:
    """The defaults of the method's settings (``method_config``) or the evaluator's options
    (``evaluator_options``) of ``manifest``, as JSON values; none if the plug-in is unknown."""
    from maslab.bench.evaluation import get_evaluator
    from maslab.core.method import get_method

    by_method = key == "method_config"
    try:
        plugin = get_method(manifest.method) if by_method else get_evaluator(manifest.evaluator)
    except ConfigError:
        return {}
    return config_defaults(plugin.Config)


def config_defaults(config: type[BaseModel]) -> dict[str, Any]:
    """The defaults of the settings of a plug-in's ``config`` that have one, as JSON values."""
    return {
        name: to_jsonable_python(field.get_default(call_default_factory=True))
        for name, field in config.model_fields.items()
        if not field.is_required()
    }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60]


def check_format_version(version: object, source: str | Path) -> None:
    """A one-line :class:`FormatTooNew` if ``version`` (a manifest's ``format_version``) is
    later than :data:`FORMAT_VERSION`; ``source`` names the file in it."""
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise FormatTooNew(
            f"{source}: written by a newer maslab (run format {version}; maslab {__version__} "
            f"reads formats up to {FORMAT_VERSION}): upgrade maslab to read it"
        )


def read_manifest(data: bytes, source: str | Path) -> Manifest:
    """The manifest in ``data`` (the bytes of ``source``): one without ``format_version``
    predates it and is version 0; a later version than this maslab's is refused. A one-line
    :class:`ConfigError` when it is unreadable."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{source}: unreadable manifest ({exc})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: unreadable manifest (not a JSON object)")
    check_format_version(raw.setdefault("format_version", 0), source)
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: unreadable manifest ({validation_message(exc)})") from None


class LearnedStateFile(BaseModel):
    """``learned_state.json``: what the method learned in the optimisation step, written once
    the step has succeeded. ``state`` is the method's (its ``LearnedState`` checks it when it
    is loaded); ``method``, ``split`` and ``tasks`` say what learned it, on which split and how
    many tasks (None in files that lack them)."""

    method: str | None = None
    split: str | None = None
    tasks: int | None = None
    state: Any


# --- failure attribution -------------------------------------------------------------------


class AttributionRecord(_Part):
    """Which agent a judge holds responsible for a failed sample, and at which step
    (:mod:`maslab.analysis.attribution`); one line of ``attributions.jsonl``.

    ``step`` is the 0-based index of the decisive message in the sample's transcript, ``agent``
    its sender and ``role`` that agent's role (None, all three, when the judge named none);
    ``steps`` is the transcript's length. ``calls``, ``prompt_tokens`` and
    ``completion_tokens`` are the judge's spend on the sample: analysis, never the run's."""

    task_id: str
    repeat: int
    strategy: str
    judge: str
    agent: str | None = None
    role: str | None = None
    step: int | None = None
    reason: str = ""
    steps: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def key(self) -> tuple[str, int, str, str]:
        """The sample, strategy and judge: a later line for the same key replaces the earlier."""
        return (self.task_id, self.repeat, self.strategy, self.judge)


# --- re-scoring -------------------------------------------------------------------------------


class ScoringRecord(_Part):
    """One sample of the run scored again, by another evaluator or other options
    (:mod:`maslab.analysis.rescoring`); one line of ``scorings.jsonl``.

    ``label`` names the scoring (``maslab show --scoring LABEL``); every line of a label has
    the same ``evaluator`` and ``evaluator_options`` (the checked options, defaults included,
    less the execution options). ``score`` is the evaluator's verdict on the sample's recorded
    answer; None when the evaluator failed on it, ``error`` saying why (the next ``maslab
    score`` of the label tries it again). ``scoring_usage`` is the judge's calls on the sample
    (``UsageTotals`` fields), scoring spend, never the method's."""

    label: str
    task_id: str
    repeat: int
    evaluator: str
    evaluator_options: dict[str, Any] = Field(default_factory=dict)
    score: Score | None = None
    error: str | None = None
    scoring_usage: dict[str, float] = Field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, int]:
        """The label and the sample: a later line for the same key replaces the earlier."""
        return (self.label, self.task_id, self.repeat)


FILES: dict[str, type[BaseModel]] = {
    MANIFEST: Manifest,
    RESULTS: ResultRecord,
    TRACES: Trace,
    SUPERSEDED: ResultRecord,
    OPTIMIZATION: ResultRecord,
    OPTIMIZATION_TRACES: Trace,
    LEARNED_STATE: LearnedStateFile,
    ATTRIBUTIONS: AttributionRecord,
    SCORINGS: ScoringRecord,
}
"""Each file of a run directory that holds records -> their type (one per line in a
``.jsonl``; ``traces.idx`` and ``.lock`` hold none)."""
