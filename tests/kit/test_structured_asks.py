"""A JSON reply declared once (``maslab.kit.structured.Reply``): its schema, the shape the prompt
shows and its parsing all come from the declaration, and ``ask`` uses them on both paths."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BeforeValidator, Field, WithJsonSchema

from maslab.core.context import Context
from maslab.kit.parsing import Flag, Text
from maslab.kit.structured import Reply, ask
from maslab.testing import ScriptedModel, last_user_message


class Step(Reply):
    """One step of a plan (its docstring is not prompt text)."""

    step: Text = ""
    done: Flag = False


class Review(Reply):
    """A reply with every kind of field."""

    json_name = "review"

    verdict: Literal["accept", "reject"]
    score: int = Field(0, description="a score from 1 to 10")
    reason: Text = ""
    agree: Annotated[
        bool,
        BeforeValidator(lambda v: str(v).lower() == "yes"),
        WithJsonSchema({"type": "string", "enum": ["yes", "no"]}),
    ] = False
    steps: list[Step] = Field(default_factory=list)
    note: str | None = None


def test_the_schema_is_strict_and_inlined():
    schema = Review.json_schema()
    assert schema["required"] == ["verdict", "score", "reason", "agree", "steps", "note"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["agree"] == {"type": "string", "enum": ["yes", "no"]}
    assert schema["properties"]["score"] == {
        "type": "integer",
        "description": "a score from 1 to 10",
    }
    step = schema["properties"]["steps"]["items"]
    assert step == {
        "type": "object",
        "properties": {"step": {"type": "string"}, "done": {"type": "boolean"}},
        "required": ["step", "done"],
        "additionalProperties": False,
    }
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text and "title" not in text
    assert "docstring" not in text and "default" not in text


def test_the_instructions_show_the_shape_with_each_value_described():
    assert Review.instructions() == (
        'Reply with a JSON object only: {"verdict": "accept" or "reject", '
        '"score": <a score from 1 to 10>, "reason": "...", "agree": "yes" or "no", '
        '"steps": [{"step": "...", "done": true or false}, ...], "note": "..." or null}.'
    )


def test_parse_takes_the_first_object_the_model_accepts():
    text = 'First {"verdict": "maybe"}, then ```json\n{"verdict": "reject", "agree": "YES"}\n```'
    review = Review.parse(text)
    assert review is not None and review.verdict == "reject" and review.agree is True
    assert Review.parse("no JSON here") is None
    assert Review.schema_name() == "review" and Step.schema_name() == "step"


@pytest.mark.parametrize("native", [True, False])
async def test_ask_sends_the_instructions_and_the_schema_where_native(native):
    model = ScriptedModel(
        ['{"verdict": "accept", "score": 7}'], native=["structured_output"] if native else []
    )
    agent = Context(model).agent("critic")
    said, review = await ask(agent, "Review the plan.", Review, round=2, kind="review")
    assert review is not None and (review.verdict, review.score) == ("accept", 7)
    assert said.round == 2 and said.kind == "review"
    (request,) = model.requests
    assert last_user_message(request) == f"Review the plan.\n\n{Review.instructions()}"
    if native:
        assert request.response_format == {
            "type": "json_schema",
            "json_schema": {"name": "review", "schema": Review.json_schema(), "strict": True},
        }
    else:
        assert request.response_format is None


async def test_ask_returns_the_message_and_none_for_a_reply_without_json():
    agent = Context(ScriptedModel(["I accept it."])).agent("critic")
    said, review = await ask(agent, "Review the plan.", Review)
    assert review is None and said.content == "I accept it."


# -- one declaration per reply, in every plug-in ------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
LOW_LEVEL = {"json_params", "object_schema", "parse_model", "STRING"}
"""What declaring a reply by hand takes: a schema written apart from the model that parses it."""


def hand_declared(source: str) -> list[str]:
    """The low-level reply helpers a module uses, and the ``*_SCHEMA`` constants it defines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in {
            "maslab.kit.structured",
            "maslab.kit.parsing",
        }:
            found += [f"imports {a.name}" for a in node.names if a.name in LOW_LEVEL]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            found += [f"defines {n}" for n in names if n.endswith("_SCHEMA")]
    return found


def test_the_check_finds_a_reply_declared_by_hand():
    source = (
        "from maslab.kit.structured import STRING, Reply, json_params, object_schema\n"
        "VERDICT_SCHEMA = object_schema(answer=STRING)\n"
    )
    assert hand_declared(source) == [
        "imports STRING",
        "imports json_params",
        "imports object_schema",
        "defines VERDICT_SCHEMA",
    ]


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for folder in ("methods", "benchmarks", "evaluators")
        for p in (ROOT / folder).rglob("*.py")
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_plug_in_declares_its_replies_once(path):
    assert hand_declared(path.read_text()) == []
