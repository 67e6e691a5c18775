"""Validated run options into a :class:`~maslab.harness.runner.RunConfig`: the one step that
``maslab.evaluate``, ``maslab run`` and each cell of a sweep share.

:func:`configure` checks what the options name (the method's settings, the evaluator and its
options, the model roles, every model spec) and fills the defaults that depend on the run
(the model's ``max_tokens``, the user's response cache), so a run is checked the same way
whichever surface it came from.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from maslab import defaults
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import check_evaluator_options, function_evaluator, get_evaluator
from maslab.config_files import apply_overrides, validation_message
from maslab.core.method import Method, get_method
from maslab.core.roles import ModelRoles, parse_model_roles, role_models
from maslab.defaults import DEMO_MAX_TOKENS, DEMO_MODEL
from maslab.errors import ConfigError, MaslabError
from maslab.harness.options import Overrides, RunOptions
from maslab.harness.runner import RunConfig
from maslab.harness.shard import parse_shard
from maslab.llm.registry import check_model
from maslab.paths import default_response_cache


def unused_judge(option: str, evaluators: Iterable[str]) -> ConfigError:
    """The error for a judge model given where none of ``evaluators`` asks one."""
    return ConfigError(
        f"{option} is only for an evaluator that asks a judge model (llm_judge), "
        f"not for {' or '.join(evaluators)}"
    )


def judge_options(evaluator: str, judge: str | None) -> dict[str, Any]:
    """``{"judge": judge}`` for an evaluator that asks a judge model, else ``{}``; a
    :class:`ConfigError` when the evaluator needs a judge and ``judge`` is None."""
    parameter = inspect.signature(get_evaluator(evaluator)).parameters.get("judge")
    if parameter is None:
        return {}
    if judge is None:
        if parameter.default is inspect.Parameter.empty:
            raise ConfigError(
                f"evaluator {evaluator} needs a judge model: --judge-model SPEC "
                "(judge_model: in a sweep file), e.g. openai:gpt-4o-mini"
            )
        return {}
    return {"judge": judge}


def method_settings(method: str | Method | type[Method]) -> tuple[str, dict[str, Any]]:
    """The registered name of ``method`` and its settings (the defaults, or an instance's)."""
    if isinstance(method, str):
        cls = get_method(method)
    else:
        cls = method if isinstance(method, type) else type(method)
        if not issubclass(cls, Method):
            raise ConfigError(
                f"method must be a method name, or a Method class or instance; got {method!r}"
            )
        if not cls.name or get_method(cls.name) is not cls:
            raise ConfigError(
                f"{cls.__qualname__} is not registered: decorate it with "
                "@register_method('<name>'), so the run's manifest can name it"
            )
    settings = method.config if isinstance(method, Method) else cls.Config()
    return cls.name, settings.model_dump(mode="json")


def checked_method(
    method: str | Method | type[Method],
    options: RunOptions,
    flags: Mapping[str, str] | None = None,
) -> tuple[Method, ModelRoles]:
    """``method`` with the options' ``config`` applied, and the options' model roles checked
    against it (normalised); a one-line :class:`ConfigError` for either."""
    name, settings = method_settings(method)
    overridden = apply_overrides(
        settings, options.config or (), f"{name} {(flags or {}).get('config', 'config')}"
    )
    built = get_method(name)(overridden)
    roles = options.model_roles
    if roles is not None and not isinstance(roles, Mapping):
        roles = parse_model_roles(roles)
    return built, built.check_model_roles(roles)


def scoring_options(
    evaluator: str,
    overrides: Overrides | None,
    judge_model: str | None,
    *,
    judge_flag: str,
    option_flag: str,
) -> dict[str, Any]:
    """The evaluator's options from its overrides (``--evaluator-option``) and a judge model
    (``--judge-model``), checked before anything runs: a judge given twice, a judge model for
    an evaluator without a judge, or a bad option is a one-line ConfigError naming the flags."""
    extra = apply_overrides({}, overrides or (), option_flag)
    if judge_model and "judge" in extra:
        raise ConfigError(f"give the judge once: {judge_flag} or {option_flag} judge")
    judged = judge_options(evaluator, judge_model or extra.get("judge"))
    if judge_model and not judged:
        raise unused_judge(judge_flag, [evaluator])
    return check_evaluator_options(evaluator, {**judged, **extra}, option_flag)


def configure(
    method: str | Method | type[Method],
    benchmark: str,
    model: str | None,
    options: RunOptions,
    *,
    flags: Mapping[str, str] | None = None,
    keys: bool = True,
    sampling: Mapping[str, Any] | None = None,
) -> RunConfig:
    """The :class:`RunConfig` of ``method`` on ``benchmark`` with ``model`` (by default the
    demo model) and ``options``, every option checked; see :func:`maslab.api.run_config`.

    ``flags`` spells options in error messages; ``keys=False`` leaves API key variables
    unchecked (a sweep checks them per cell, as each runs); ``sampling`` adds sampling
    parameters beyond ``temperature`` and ``max_tokens`` (a sweep file's ``sampling``)."""

    def option(name: str) -> str:
        return (flags or {}).get(name, name)

    o = options
    model = model or DEMO_MODEL
    max_tokens = o.max_tokens
    if max_tokens is None:
        max_tokens = DEMO_MAX_TOKENS if model == DEMO_MODEL else defaults.MAX_TOKENS
    built, roles = checked_method(method, o, flags)
    evaluator = o.evaluator
    if callable(evaluator):  # a function: scored through it, recorded by its qualified name
        evaluator = function_evaluator(evaluator).name
    evaluator_name = evaluator or get_benchmark(benchmark).evaluator
    scoring = scoring_options(
        evaluator_name,
        o.evaluator_options,
        o.judge_model,
        judge_flag=option("judge_model"),
        option_flag=option("evaluator_options"),
    )
    for spec in filter(None, (model, o.judge_model, *role_models(roles))):
        check_model(spec, o.endpoints, keys=keys)
    if o.optimize_limit is not None and o.optimize_on is None:
        raise ConfigError(f"{option('optimize_limit')} needs {option('optimize_on')}")
    given = "/".join(map(str, o.shard)) if isinstance(o.shard, tuple) else o.shard
    shard = None if given is None else parse_shard(given, option("shard"))
    if shard is not None and o.optimize_on is not None:
        raise ConfigError(
            f"{option('shard')} cannot go with {option('optimize_on')}: each shard would learn "
            "on its own"
        )
    if o.out is not None and Path(o.out).exists() and not Path(o.out).is_dir():
        raise ConfigError(f"{option('out')} {o.out} is a file; name a run directory")
    if o.log_to is not None:
        from maslab.harness.tracking import check_tracker

        check_tracker(o.log_to)
    cache = default_response_cache() if o.cache is True else o.cache
    try:
        return RunConfig(
            method=built.name,
            method_config=built.config.model_dump(mode="json"),  # what runs (a preset's too)
            benchmark=benchmark,
            benchmark_options=apply_overrides({}, o.bench_options or (), option("bench_options")),
            split=o.split,
            limit=o.limit,
            shuffle=o.shuffle,
            data=str(o.data) if o.data else None,
            model=model,
            model_roles=roles,
            endpoints=str(o.endpoints) if o.endpoints else None,
            sampling={**(sampling or {}), "temperature": o.temperature, "max_tokens": max_tokens},
            repeats=o.repeats,
            seed=o.seed,
            concurrency=o.concurrency,
            scheduler=o.scheduler,
            evaluator=evaluator,
            evaluator_options=scoring,
            max_calls=o.max_calls,
            max_tokens=o.max_sample_tokens,
            max_seconds=o.max_sample_seconds,
            cache=str(cache) if cache else None,
            strict_sandbox=o.strict_sandbox,
            unsafe_no_sandbox=o.unsafe_no_sandbox,
            native=o.native,
            log_to=o.log_to,
            optimize_on=o.optimize_on,
            optimize_limit=o.optimize_limit,
            shard=shard,
            out=None if o.out is None else str(o.out),  # None: the identity's directory
        )
    except ValidationError as exc:
        raise MaslabError(validation_message(exc, "run")) from None
