"""``--no-native``: a run whose every call stays on the text protocol, recorded as such."""

from __future__ import annotations

import orjson
import pytest

from maslab.api import run_config
from maslab.cli import main
from maslab.harness.runner import Runner
from maslab.kit.structured import json_params, tool_params
from maslab.kit.tools import get_tools
from maslab.llm import registry
from maslab.llm.pool import ModelPool
from maslab.llm.registry import register_provider
from maslab.testing import ScriptedModel


@pytest.fixture
def native_provider(monkeypatch):
    """A ``nativescript:`` provider: the echo script on a model that claims both features."""
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("nativescript")(
        lambda name, settings: ScriptedModel(
            name=f"nativescript:{name}", native=["structured_output", "tools"]
        )
    )
    return "nativescript:echo"


@pytest.mark.parametrize("native", [True, False])
def test_the_pool_hides_native_features_when_asked(native_provider, native):
    handle = ModelPool(native=native).get(native_provider)
    assert handle.supports("structured_output") is native and handle.supports("tools") is native
    assert bool(json_params(handle, "x", {"type": "object"})) is native
    assert bool(tool_params(handle, [t.spec()["function"] for t in get_tools(["add"])])) is native


def test_a_run_without_native_features_loads_text_only_models_and_says_so(
    native_provider, tmp_path
):
    config = run_config("vanilla", "arith", native_provider, limit=1, cache=False,
                        native=False, out=tmp_path / "run")  # fmt: skip
    runner = Runner(config)
    assert not runner.models.get(native_provider).supports("structured_output")
    assert runner.manifest.native is False and "native" in runner.manifest.identity()


@pytest.mark.system
def test_the_cli_flag_is_recorded_and_names_its_own_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "1",
            "--model", "scripted:echo", "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0 and main([*argv, "--no-native"]) == 0
    runs = sorted((tmp_path / "runs" / "arith").iterdir())
    assert len(runs) == 2
    natives = sorted(orjson.loads((run / "manifest.json").read_bytes())["native"] for run in runs)
    assert natives == [False, True]


def test_a_sweep_file_turns_native_features_off_for_every_cell(tmp_path):
    from maslab.harness.sweep import load_sweep

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo']\nbenchmarks: [arith]\nmethods: [vanilla, cot]\nnative: false\n"
    )
    assert [cell.config.native for cell in load_sweep(sweep).cells()] == [False, False]
