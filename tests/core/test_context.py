"""Context: budgets, ledger, draws, seeded RNG; Agent histories; config-file errors."""

from __future__ import annotations

import asyncio

import pytest

from maslab.config_files import load_yaml
from maslab.core.context import Budget, Context, derive_seed
from maslab.errors import BudgetExceeded, ConfigError, ServerError
from maslab.llm.endpoints import load_endpoints
from maslab.llm.registry import load_model
from maslab.llm.scripted import ScriptedModel, ScriptError
from maslab.llm.types import ChatModelBase


async def test_call_budget_raises_before_the_extra_call():
    model = ScriptedModel(["a", "b", "c"])
    ctx = Context(model, budget=Budget(max_calls=2))
    await ctx.chat("1")
    await ctx.chat("2")
    with pytest.raises(BudgetExceeded, match="calls limit 2"):
        await ctx.chat("3")
    assert len(model.calls) == 2


async def test_token_budget_counts_every_call():
    ctx = Context(ScriptedModel(lambda r: "word " * 50), budget=Budget(max_tokens=55))
    await ctx.chat("first")
    with pytest.raises(BudgetExceeded, match="tokens"):
        await ctx.chat("second")


class HeldModel(ScriptedModel):
    """Answers only once the test sets ``release``: when a call ends is up to the test, not to
    a clock (a latency races the deadline on a busy machine)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = asyncio.Event()

    async def complete(self, request):
        await self.release.wait()
        return await super().complete(request)


async def test_deadline_stops_the_wait_and_the_late_call_is_still_recorded():
    model = HeldModel(lambda r: "late answer")
    ctx = Context(model, budget=Budget(max_seconds=0.3))
    with pytest.raises(BudgetExceeded, match="seconds"):
        # the model never answers by itself: only the deadline ends the wait (the guard would
        # raise TimeoutError, not BudgetExceeded)
        await asyncio.wait_for(ctx.chat("slow"), 60)
    assert ctx.budget_stop is not None and model.calls == []  # stopped before the answer
    (record,) = ctx.ledger.records
    assert record.response is None
    model.release.set()
    await ctx.settle()  # the server answers anyway: its tokens belong in the record
    assert record.response == "late answer" and record.error is None
    assert record.completion_tokens > 0


async def test_failed_calls_are_recorded_with_their_error():
    def fail(request):
        raise ServerError("boom", model="scripted", status=500)

    ctx = Context(ScriptedModel(fail), sample_id="s9")
    with pytest.raises(ServerError):
        await ctx.chat("x", agent="a", round=1)
    record = ctx.ledger.records[0]
    assert record.error.startswith("ServerError") and record.sample_id == "s9"
    assert ctx.usage.failed_calls == 1 and ctx.usage.prompt_tokens == 0


class Failing(ChatModelBase):
    """A custom provider with a bug (not an LLMError), or one that never answers."""

    name = "custom"

    def __init__(self, exc: BaseException | None = None) -> None:
        self.exc = exc

    async def complete(self, request):
        if self.exc is not None:
            raise self.exc
        await asyncio.sleep(3600)


async def test_a_provider_bug_is_recorded_as_a_failed_call_and_propagates():
    ctx = Context(Failing(RuntimeError("provider bug, key sk-proj-abcdefgh12345678XYZ")))
    with pytest.raises(RuntimeError, match="provider bug"):
        await ctx.chat("x", agent="a")
    (record,) = ctx.ledger.records
    assert record.error == "RuntimeError: provider bug, key [REDACTED]"
    assert ctx.usage.failed_calls == 1


@pytest.mark.parametrize("started", [True, False])
async def test_a_cancelled_call_is_recorded_as_failed_and_the_caller_sees_it(started):
    ctx = Context(Failing())
    caller = asyncio.ensure_future(ctx.chat("x"))
    await asyncio.sleep(0.01 if started else 0)  # 0: the call is scheduled, not yet begun
    (call,) = ctx._inflight
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    (record,) = ctx.ledger.records
    assert record.error is not None and record.error.startswith("CancelledError")
    assert ctx.usage.failed_calls == 1


async def test_agents_keep_their_own_history_and_post_to_the_transcript():
    ctx = Context(ScriptedModel(["hello from a", "hello from b", "second from a"]))
    a = ctx.agent("a", system="You are A.", temperature=0.1)
    b = ctx.agent("b")
    await a.reply("hi a", round=0)
    await b.reply("hi b", round=0)
    await a.reply("again", round=1)
    assert [m["role"] for m in a.history] == ["system", "user", "assistant", "user", "assistant"]
    assert [m["content"] for m in b.history] == ["hi b", "hello from b"]
    assert [(m.sender, m.round) for m in ctx.transcript] == [("a", 0), ("b", 0), ("a", 1)]
    assert ctx.ledger.records[0].messages[0]["content"] == "You are A."
    assert ctx.model.calls[0].request.temperature == 0.1


async def test_annotate_replaces_the_message_with_a_copy_holding_the_new_metadata():
    ctx = Context(ScriptedModel(["one", "two"]))
    first = await ctx.agent("a").reply("q", round=0)
    await ctx.agent("b").reply("q", round=0)
    annotated = ctx.transcript.annotate(first, parsed={"Reason": "r"})
    assert annotated.metadata == {"parsed": {"Reason": "r"}} and first.metadata == {}
    assert ctx.transcript.messages[0] is annotated and annotated.content == "one"
    assert [m.sender for m in ctx.transcript] == ["a", "b"]
    with pytest.raises(ValueError, match="not in this transcript"):
        ctx.transcript.annotate(first, parsed=None)  # the original was replaced


async def test_a_reply_keeps_the_metadata_it_is_given_and_never_sends_it():
    model = ScriptedModel(["noted"])
    ctx = Context(model)
    said = await ctx.agent("a").reply("q", round=2, metadata={"turn": 1, "label": "Agent 1"})
    assert said.metadata == {"turn": 1, "label": "Agent 1"}
    assert ctx.transcript.messages == [said]
    assert "metadata" not in repr(model.calls[0].request)


async def test_agents_may_use_different_models():
    ctx = Context(ScriptedModel(["default"]))
    other = ScriptedModel(["other"])
    assert (await ctx.agent("x").reply("q")).content == "default"
    assert (await ctx.agent("y", model=other).reply("q")).content == "other"
    assert [r.model for r in ctx.ledger.records] == ["scripted", "scripted"]


async def test_run_sampling_defaults_are_overridden_by_agent_and_call():
    model = ScriptedModel()
    ctx = Context(model, sampling={"temperature": 0.7, "max_tokens": 100})
    await ctx.agent("a", temperature=0.2).reply("q", max_tokens=5)
    request = model.calls[0].request
    assert (request.temperature, request.max_tokens) == (0.2, 5)


async def test_concurrent_identical_requests_get_distinct_draws():
    ctx = Context(ScriptedModel(latency=0.01))
    await asyncio.gather(*(ctx.chat("same") for _ in range(3)))
    assert sorted(r.draw for r in ctx.ledger.records) == [0, 1, 2]


def test_rng_is_seeded_per_run_task_and_repeat():
    def draw(**kw):
        return Context(ScriptedModel(), **kw).rng.random()

    assert draw(seed=1, sample_id="t", repeat=0) == draw(seed=1, sample_id="t", repeat=0)
    assert draw(seed=1, sample_id="t", repeat=0) != draw(seed=1, sample_id="t", repeat=1)
    assert draw(seed=1, sample_id="t") != draw(seed=2, sample_id="t")
    assert derive_seed(1, "t", 0) == derive_seed(1, "t", 0) < 2**64


def test_scripted_model_assert_consumed():
    model = ScriptedModel(["a", "b"])
    asyncio.run(model.chat("x"))
    with pytest.raises(ScriptError, match="1 scripted answers were never requested"):
        model.assert_consumed()
    asyncio.run(model.chat("y"))
    model.assert_consumed()
    with pytest.raises(ScriptError, match="used up"):
        asyncio.run(model.chat("z"))


def test_scripted_patterns_and_files(tmp_path):
    model = ScriptedModel({r"capital of France": "Paris", r"\d\+\d": "4"}, default="?")
    assert asyncio.run(model.chat("What is the capital of France?")).text == "Paris"
    assert asyncio.run(model.chat("2+2")).text == "4"
    assert asyncio.run(model.chat("other")).text == "?"
    script = tmp_path / "script.yaml"
    script.write_text("- first\n- second\n")
    loaded = load_model(f"scripted:{script}")
    assert asyncio.run(loaded.chat("x")).text == "first"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "needs a provider prefix, e.g. 'openai:gpt-4o'"),
        (
            "opnai:gpt-4o",
            "unknown model provider 'opnai' in 'opnai:gpt-4o'; did you mean 'openai'?",
        ),
        ("scripted:nope.txt", "use 'scripted:echo' or a .json/.yaml script file"),
        ("openai:m@ftp://x", "must start with http:// or https://"),
    ],
)
def test_bad_model_specs_are_one_line_config_errors(spec, message):
    with pytest.raises(ConfigError) as info:
        load_model(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_malformed_endpoints_file_names_file_line_and_field(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text("qwen:\n  - base_url: http://a:8000/v1\n    max_concurrency: many\n")
    with pytest.raises(ConfigError) as info:
        load_endpoints(path)
    text = str(info.value)
    assert text.startswith(f"{path}:3: qwen[0].max_concurrency:") and "\n" not in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("qwen:\n  - base_url: http://a/v1\n    colour: red\n", ":3: qwen[0].colour: Extra inputs"),
        ("qwen:\n  - base_url: a:8000\n", ":2: qwen[0].base_url: must start"),
        ("qwen: [\n", "invalid YAML"),
        ("qwen: []\n", "qwen: needs at least one endpoint"),
    ],
)
def test_endpoints_file_errors(tmp_path, content, expected):
    path = tmp_path / "endpoints.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_endpoints(path)
    assert expected in str(info.value)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_yaml(tmp_path / "nope.yaml", dict)
