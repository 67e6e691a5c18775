"""The default settings are named once (maslab.defaults): the run takes them from there and the
guides state them as it does."""

from __future__ import annotations

import re
from pathlib import Path

from maslab import defaults
from maslab.api import run_config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guide"


def test_every_model_but_the_demo_one_gets_the_one_max_tokens_default():
    assert run_config("vanilla", "arith").sampling["max_tokens"] == defaults.DEMO_MAX_TOKENS
    other = run_config("vanilla", "arith", "scripted:echo").sampling["max_tokens"]
    assert other == defaults.MAX_TOKENS == defaults.SAMPLING["max_tokens"]
    assert run_config("vanilla", "arith", max_tokens=2048).sampling["max_tokens"] == 2048


def test_the_guides_state_the_demo_models_cap_as_its_own_beside_the_default():
    embedded = (DOCS / "models.md").read_text(encoding="utf-8").split("## The embedded model")[1]
    paragraph = " ".join(embedded.split("\n\n", 2)[1].split())
    assert f"take {defaults.DEMO_MAX_TOKENS} tokens at most" in paragraph
    assert "`maslab.defaults.DEMO_MAX_TOKENS`" in paragraph
    assert f"not the default of {defaults.MAX_TOKENS} every other model gets" in paragraph
    assert f"`--max-tokens {defaults.MAX_TOKENS}` puts it there" in paragraph
    fair = (DOCS / "run.md").read_text(encoding="utf-8").split("## Fair settings")[1]
    assert re.search(rf"--max-tokens\s+{defaults.MAX_TOKENS}` by default", fair)
