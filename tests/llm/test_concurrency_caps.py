"""``--concurrency`` is what a run gets: an endpoint without its own ``max_concurrency`` takes the
run's, and an endpoints file's lower cap is said in the summary, ``show`` and the manifest."""

from __future__ import annotations

import pytest

from maslab.cli import main
from maslab.defaults import ENDPOINT_MAX_CONCURRENCY
from maslab.llm.balancing import Balanced
from maslab.llm.openai_compat import OpenAIHTTP
from maslab.llm.pool import ModelPool
from maslab.llm.registry import load_model
from maslab.llm.types import ChatModelBase, Middleware
from maslab.store.run_store import RunStore
from maslab.testing.fake_server import FakeOpenAIServer


def _balanced(model: ChatModelBase) -> Balanced:
    while isinstance(model, Middleware):
        model = model.inner
    assert isinstance(model, Balanced)
    return model


def _run(tmp_path, model: str, concurrency: int, *extra: str) -> list[str]:
    return ["run", "--method", "llm_debate", "--benchmark", "arith", "--model", model,
            "--concurrency", str(concurrency), "--no-cache", "--out", str(tmp_path / "run"),
            "--quiet", *extra]  # fmt: skip


@pytest.mark.system
def test_a_model_at_url_spec_gets_the_runs_concurrency(tmp_path, capsys):
    # 24 tasks x 3 agents want 72 calls at once per round: only --concurrency 48 holds them back
    with FakeOpenAIServer(latency=0.5) as server:
        spec = f"openai:fake@{server.base_url}"
        assert main(_run(tmp_path, spec, 48, "--limit", "24", "--config", "rounds=1")) == 0
        assert server.served == 24 * 3
        assert ENDPOINT_MAX_CONCURRENCY < server.peak_in_flight <= 48
    assert "caps calls in flight" not in capsys.readouterr().out
    manifest = RunStore(tmp_path / "run").manifest()
    assert manifest.concurrency == 48 and manifest.endpoint_caps == {}


@pytest.mark.system
def test_an_endpoints_file_cap_below_concurrency_binds_and_is_said(tmp_path, capsys):
    endpoints = tmp_path / "endpoints.yaml"
    with FakeOpenAIServer(latency=0.05) as server:
        endpoints.write_text(f"fake:\n  - base_url: {server.base_url}\n    max_concurrency: 4\n")
        command = _run(tmp_path, "openai:fake", 48, "--limit", "6", "--endpoints", str(endpoints))
        assert main(command) == 0
        assert server.served == 6 * 3 * 2
        assert server.peak_in_flight == 4
    line = (
        "openai:fake caps calls in flight at 4 (max_concurrency in the endpoints file), "
        "below --concurrency 48"
    )
    assert line in capsys.readouterr().out
    assert RunStore(tmp_path / "run").manifest().endpoint_caps == {"openai:fake": 4}
    main(["show", str(tmp_path / "run")])
    assert line in capsys.readouterr().out


@pytest.mark.parametrize(
    ("caps", "concurrency", "binding"),
    [
        ([4], 48, {"openai:m": 4}),
        ([16, 16], 48, {"openai:m": 32}),  # an alias's endpoints add up
        ([16, 16], 32, {}),
        ([64], 48, {}),
        ([None, 4], 48, {}),  # the unset endpoint takes the run's 48
    ],
)
def test_binding_caps_are_the_models_whose_endpoints_take_fewer_than_the_run(
    caps, concurrency, binding
):
    table = {
        "m": [
            {"base_url": f"http://h{i}:8000/v1"} | ({"max_concurrency": c} if c else {})
            for i, c in enumerate(caps)
        ]
    }
    pool = ModelPool(endpoints=table, concurrency=concurrency)
    pool.get("openai:m")
    assert pool.binding_caps() == binding


@pytest.mark.parametrize("concurrency", [None, 48])
async def test_an_unset_cap_is_the_pools_concurrency_connection_pool_included(concurrency):
    """Outside a run (no concurrency given) the default cap is unchanged."""
    pool = ModelPool() if concurrency is None else ModelPool(concurrency=concurrency)
    balanced = _balanced(pool.get("openai:m@http://localhost:1/v1"))
    expected = concurrency or ENDPOINT_MAX_CONCURRENCY
    assert balanced.max_concurrency == expected
    (limited,) = balanced.endpoints
    transport = limited.inner
    assert isinstance(transport, OpenAIHTTP)
    assert transport._client().connector.limit == expected
    await pool.aclose()


def test_load_model_keeps_the_default_cap_and_an_explicit_one():
    assert _balanced(load_model("openai:m@http://localhost:1/v1")).max_concurrency == 32
    table = {"m": [{"base_url": "http://localhost:1/v1", "max_concurrency": 7}]}
    model = load_model("openai:m", endpoints=table, concurrency=48)
    assert _balanced(model).max_concurrency == 7
