"""What identifies a run is declared once (``Manifest.IDENTITY``) and used by resume, merge and
the default run directory; every option is either part of it or listed here as not, with why."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from maslab.api import run_config
from maslab.cli import main
from maslab.harness.runner import RunConfig, Runner
from maslab.llm.registry import model_identity
from maslab.store.run_store import MANIFEST, Manifest
from maslab.testing.fake_server import FakeOpenAIServer

# RunConfig fields outside the identity, and why: the same run, resumed or extended under them.
NOT_IDENTITY = {
    "limit": "a larger limit extends the same run (the dataset hash covers the whole split)",
    "repeats": "more repeats extend the same run",
    "concurrency": "how fast, not what",
    "scheduler": "orders calls, never changes them",
    "endpoints": "where a model is served; the model spec is in the identity",
    "cache": "replays what the same calls returned",
    "strict_sandbox": "refuses to start or not; runs the same",
    "unsafe_no_sandbox": "likewise",
    "shard": "a shard is part of the whole run, merged back by identity",
    "out": "where the run is, not what",
    "log_to": "where the finished run is logged, not what it is",
}
# RunConfig fields the identity holds under another name, or through the dataset hash.
FOLDED = {
    "benchmark_options": "dataset_hash",  # they change the tasks, which the hash covers
    "data": "dataset_hash",
    "shuffle": "dataset_hash",  # the order of the split, which the hash covers
    "max_calls": "budget",
    "max_tokens": "budget",
    "max_seconds": "budget",
    "optimize_on": "optimize",
    "optimize_limit": "optimize",
}


def test_every_run_option_is_in_the_identity_or_said_not_to_be():
    identity = set(Manifest.IDENTITY)
    for name in RunConfig.model_fields:
        held = name in identity or FOLDED.get(name) in identity
        assert held != (name in NOT_IDENTITY), f"{name}: in the identity, or in NOT_IDENTITY"
    assert set(FOLDED.values()) <= identity


BASE = {"method": "vanilla", "benchmark": "arith", "model": "scripted:echo"}
SCRIPT = Path(__file__).parents[1] / "fixtures" / "cli" / "answers.yaml"


def directory(**options: object) -> Path:
    return Path(str(Runner(run_config(**{**BASE, **options})).config.out))


@pytest.mark.parametrize(
    "options",
    [{"seed": 1}, {"temperature": 0.9}, {"method": "llm_debate"}, {"model": f"scripted:{SCRIPT}"},
     {"max_calls": 4}, {"bench_options": {"difficulty": 4}}, {"shuffle": True},
     {"native": False}, {"evaluator": "exact"}],
    ids=lambda options: next(iter(options)),
)  # fmt: skip
def test_an_identity_change_is_another_directory(options):
    assert directory(**options) != directory()


@pytest.mark.parametrize(
    "options", [{"limit": 3}, {"repeats": 2}, {"concurrency": 2}, {"cache": False}],
    ids=lambda options: next(iter(options)),
)  # fmt: skip
def test_what_is_not_identity_keeps_the_directory(options):
    assert directory(**options) == directory()


@pytest.mark.parametrize(
    ("key", "added", "same"),
    [
        ("method_config", {"aggregate": "majority"}, True),  # an option added since, at its default
        ("method_config", {"aggregate": "llm"}, False),  # ... not at its default
        ("method_config", {"nonsense": 1}, False),  # not an option of the method
        ("evaluator_options", {"rel_tol": 1e-6}, True),
        ("evaluator_options", {"rel_tol": 0.1}, False),
    ],
)
def test_an_option_added_since_a_run_was_written_resumes_it_at_its_default(key, added, same):
    config = run_config("llm_debate", "arith", "scripted:echo", out=Path("run"))
    now = Runner(config).manifest
    written = now.model_copy(update={key: {k: v for k, v in getattr(now, key).items()
                                           if k not in added}})  # fmt: skip
    asked = now.model_copy(update={key: {**getattr(written, key), **added}})
    assert written.identity_differences(asked) == ([] if same else [key])
    assert asked.identity_differences(written) == [key]  # an option the run asked for went away


@pytest.mark.parametrize(
    ("spec", "identity"),
    [
        ("openai:qwen@http://127.0.0.1:8000/v1", "openai:qwen@localhost"),
        ("openai:qwen@http://localhost:8001", "openai:qwen@localhost"),
        ("openai:qwen@http://[::1]:8000/v1", "openai:qwen@localhost"),
        ("openai:qwen@http://gpu1:8000/v1", "openai:qwen@gpu1"),
        ("openai:qwen@https://gpu1/other/v1", "openai:qwen@gpu1"),
        ("openai:qwen", "openai:qwen"),  # an alias, or the default server's model
        ("openai:qwen@default", "openai:qwen@default"),
        ("litellm:groq/llama3@x", "litellm:groq/llama3@x"),
    ],
)
def test_a_model_at_a_url_is_named_by_its_host_without_the_port(spec, identity):
    assert model_identity(spec) == identity


def test_a_local_server_on_another_port_is_the_same_run_another_host_is_not():
    at = "openai:m@http://{}/v1".format
    roles = {"model_roles": {"judge": at("127.0.0.1:8001")}}
    assert directory(model=at("127.0.0.1:8000")) == directory(model=at("localhost:9000"))
    assert directory(model=at("127.0.0.1:8000")) != directory(model=at("gpu1:8000"))
    assert directory(method="mad", **roles) == directory(
        method="mad", model_roles={"judge": at("localhost:8002")}
    )
    assert "__openai-m-localhost__" in str(directory(model=at("127.0.0.1:8000")))


def test_a_run_written_with_a_port_resumes_on_another(tmp_path, capsys):
    out = tmp_path / "run"

    def run(server: FakeOpenAIServer) -> int:
        return main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2",
                     "--model", f"openai:m@{server.base_url}", "--out", str(out), "--no-cache",
                     "--quiet"])  # fmt: skip

    with (
        FakeOpenAIServer(lambda request: "The answer is 4.") as first,
        FakeOpenAIServer(lambda request: "The answer is 4.") as second,  # another port
    ):
        assert run(first) == 0 and first.served == 2
        written = orjson.loads((out / MANIFEST).read_bytes())
        assert written["model"] == f"openai:m@{first.base_url}"  # the whole spec, as ever
        assert run(second) == 0 and second.served == 0  # another port: resumed, nothing to do
    assert "2 tasks × 1 repeat" in capsys.readouterr().out


def test_a_server_restarted_on_another_port_replays_from_the_cache(tmp_path):
    def run(server: FakeOpenAIServer, out: str) -> int:
        return main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2",
                     "--model", f"openai:m@{server.base_url}", "--out", str(tmp_path / out),
                     "--cache", str(tmp_path / "cache.sqlite"), "--quiet"])  # fmt: skip

    with (
        FakeOpenAIServer(lambda request: "The answer is 4.") as first,
        FakeOpenAIServer(lambda request: "The answer is 4.") as second,  # another port
    ):
        assert run(first, "a") == 0 and first.served == 2
        assert run(second, "b") == 0 and second.served == 0  # a new run, replayed


def test_a_judge_on_another_port_is_the_same_scoring(tmp_path):
    at = "openai:judge@http://127.0.0.1:{}/v1".format
    scoring = {"evaluator": "llm_judge"}
    assert directory(**scoring, evaluator_options={"judge": at(8001), "mode": "default"}) == (
        directory(**scoring, evaluator_options={"judge": at(9001), "mode": "default"})
    )
    assert directory(**scoring, evaluator_options={"judge": at(8001)}) != directory(
        **scoring, evaluator_options={"judge": "openai:judge@http://gpu1:8001/v1"}
    )
