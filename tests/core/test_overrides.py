"""key.path=value overrides on method configs."""

from __future__ import annotations

import re

import pytest

from maslab.config_files import apply_overrides
from maslab.errors import ConfigError

BASE = {"agents": [{"model": None, "role": "a"}, {"model": None, "role": "b"}], "rounds": 2}


def test_values_are_typed_and_paths_reach_into_lists():
    out = apply_overrides(BASE, ["rounds=3", "agents.1.model=openai:gpt-4o", "flag=true"], "x")
    assert out["rounds"] == 3 and out["flag"] is True
    assert out["agents"][1] == {"model": "openai:gpt-4o", "role": "b"}
    assert BASE["agents"][1]["model"] is None  # the base is not modified


def test_new_nested_keys_become_mappings():
    assert apply_overrides({}, ["a.b.c=1"], "x") == {"a": {"b": {"c": 1}}}


def test_a_setting_that_defaults_to_none_takes_nested_keys():
    # dag_pipeline's nodes default to none (its preset decides); a sweep entry may give them
    out = apply_overrides({"nodes": None, "rounds": 2}, {"nodes": {"A": "solve it"}}, "x")
    assert out == {"nodes": {"A": "solve it"}, "rounds": 2}
    assert apply_overrides({"nodes": None}, ["nodes.A=x"], "x") == {"nodes": {"A": "x"}}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rounds", "'rounds' is not key=value"),
        ("agents.5.model=x", "no item 5 (the list has 2)"),
        ("rounds.x=1", "'rounds' is not a mapping or list"),
    ],
)
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_overrides(BASE, [override], "x")
