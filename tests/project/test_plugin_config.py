"""Plug-ins take their settings one way: a method's, a benchmark's and an evaluator's ``Config``
is built from a mapping, a ``Config`` or keywords, a mistake is the same one-line error, and a
run's manifest records the checked settings, defaults included."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers import run_cli

from maslab.api import run_config
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import check_evaluator_options, get_evaluator
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.harness.runner import RunConfig, Runner
from maslab.plugin_config import PluginConfig
from maslab.testing import ScriptedModel

SCRIPTED = "scripted:echo"
# one plug-in of each kind, with a setting of each: (class, noun, setting, a good value)
PLUGINS = {
    "method": (get_method("llm_debate"), "config", "agents", 2),
    "benchmark": (get_benchmark("arith"), "options", "difficulty", 4),
    "evaluator": (get_evaluator("numeric"), "options", "rel_tol", 0.01),
}


def error_of(build: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        build(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("cls", "noun", "setting", "good"), PLUGINS.values(), ids=PLUGINS.keys())
def test_a_wrong_key_or_type_is_the_same_one_line_error_for_every_kind(cls, noun, setting, good):
    assert issubclass(cls.Config, PluginConfig)
    what = f"{cls.name} {noun}"
    assert (
        error_of(cls, **{f"{setting}x": good})
        == f"{what}: {setting}x: Extra inputs are not permitted"
    )
    assert re.fullmatch(
        rf"{what}: {setting}: Input should be a valid (integer|number)[^\n]*",
        error_of(cls, **{setting: "lots"}),
    )
    wrong = f"{what} must be a mapping or {cls.__name__}.Config, got int 7; pass settings as "
    message = error_of(cls, 7)
    assert message.startswith(f"{wrong}keywords: {cls.__name__}(") and f"{setting}=..." in message


@pytest.mark.parametrize(("cls", "noun", "setting", "good"), PLUGINS.values(), ids=PLUGINS.keys())
def test_keywords_a_mapping_and_a_config_build_the_same_settings(cls, noun, setting, good):
    by_keyword = cls(**{setting: good}).config
    assert getattr(by_keyword, setting) == good
    assert cls({setting: good}).config == by_keyword == cls(cls.Config(**{setting: good})).config
    assert cls({setting: "lots"}, **{setting: good}).config == by_keyword  # keywords go over


def test_a_run_time_handle_is_no_setting_and_a_judge_handle_records_its_name():
    judge = get_evaluator("llm_judge")(judge=ScriptedModel(name="judge-x"))
    assert judge.config.model_dump() == {"judge": "judge-x", "mode": "default"}
    with pytest.raises(
        ConfigError, match=r"evaluator code has no option 'limits' \(its options: none\)"
    ):
        check_evaluator_options("code", {"limits": {"wall_seconds": 1}}, "--evaluator-option")
    coding = get_evaluator("behaviour_coding")(
        {"base": "exact"}, judge_a=SCRIPTED, judge_b=SCRIPTED
    )
    assert coding.config.base == "exact" and type(coding.base).name == "exact"


@pytest.mark.parametrize(
    ("flag", "value", "phrase"),
    [
        ("--bench-option", "steps=2", "arith options: steps: Extra inputs are not permitted"),
        ("--bench-option", "difficulty=hard", "arith options: difficulty: Input should be a valid"),
        (
            "--evaluator-option",
            "tol=1",
            "evaluator numeric has no option 'tol' (its options: rel_tol)",
        ),
        (
            "--evaluator-option",
            "rel_tol=loose",
            "numeric options: rel_tol: Input should be a valid",
        ),
    ],
)
def test_a_bad_bench_or_evaluator_option_on_the_cli_is_one_line_and_exit_2(
    flag, value, phrase, tmp_path, capsys
):
    out = tmp_path / "run"
    status = run_cli("run", "--method", "vanilla", "--benchmark", "arith", "--model", SCRIPTED,
                     "--no-cache", "--quiet", "--out", out, flag, value)  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and phrase in err, err
    assert not out.exists()


def test_the_manifest_records_the_checked_options_with_their_defaults(tmp_path):
    ran = run_config("vanilla", "arith", SCRIPTED, out=tmp_path / "a", cache=False,
                     bench_options=["size=20"], evaluator="math")  # fmt: skip
    manifest = Runner(ran).manifest
    assert manifest.benchmark_options == {"difficulty": 3, "size": 20, "seed": 0}
    assert manifest.evaluator_options == {"timeout_s": 5.0}  # workers: an execution option
    # a config built without run_config (a sweep's cell) records the same
    cell = RunConfig(method="vanilla", benchmark="arith", model=SCRIPTED, out=str(tmp_path / "b"))
    manifest = Runner(cell).manifest
    assert manifest.benchmark_options == {"difficulty": 3, "size": 200, "seed": 0}
    assert manifest.evaluator_options == {"rel_tol": 1e-6}
    judged = run_config("vanilla", "arith", SCRIPTED, out=tmp_path / "c", cache=False,
                        evaluator="llm_judge", judge_model=SCRIPTED)  # fmt: skip
    assert Runner(judged).manifest.evaluator_options == {"judge": SCRIPTED, "mode": "default"}
