"""BFCL's call strings and answers read without running anything (maslab.benchmarks.bfcl.calls),
and its doc dialect translated to JSON schema (maslab.benchmarks.bfcl.schema); no wheel needed."""

from __future__ import annotations

import pytest

from maslab.benchmarks.bfcl.calls import Call, parse_call, parse_calls, read_answer, read_turns
from maslab.benchmarks.bfcl.schema import function_spec
from maslab.errors import ConfigError

ORDER = {"sort": ["file_name"], "mv": ["source", "destination"], "math.hypot": ["x", "y", "z"]}


@pytest.mark.parametrize(
    ("text", "call"),
    [
        ("mv(source='a', destination='b')", Call("mv", {"source": "a", "destination": "b"})),
        ("sort('final_report.pdf')", Call("sort", {"file_name": "final_report.pdf"})),
        ("mv('a', destination='b')", Call("mv", {"source": "a", "destination": "b"})),
        (
            "math.hypot(x=-4, y=5.5e3, z=None)",
            Call("math.hypot", {"x": -4, "y": 5500.0, "z": None}),
        ),
        (
            "f(a=(1, (2, 3)), b={'k': [True, False]})",
            Call("f", {"a": [1, [2, 3]], "b": {"k": [True, False]}}),
        ),
        ('f(s="it\'s ) a, (trap", t="""x\ny""")', Call("f", {"s": "it's ) a, (trap", "t": "x\ny"})),
        ("f()", Call("f", {})),
    ],
)
def test_call_strings_give_names_and_literal_arguments(text, call):
    assert parse_call(text, ORDER) == call


@pytest.mark.parametrize(
    "text",
    [
        "mv(source=__import__('os').getcwd())",  # a call in an argument: never evaluated
        "mv(source=x)",  # a name
        "mv(source='a' + 'b')",
        "sort('a', 'b')",  # more positionals than parameters
        "unknown('a')",  # a positional for a function without a known signature
        "mv(**{'source': 'a'})",
        "mv(source='a', source='b')",
        "mv(",
        "'just a string'",
        "f()()",
    ],
)
def test_anything_but_one_literal_call_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_call(text, ORDER)


def test_python_lists_of_calls_and_json_answers_read_alike():
    expected = [Call("mv", {"source": "a", "destination": "b"}), Call("sort", {"file_name": "c"})]
    assert parse_calls("[mv(source='a', destination='b'), sort('c')]", ORDER) == expected
    json_answer = (
        '[{"name": "mv", "arguments": {"source": "a", "destination": "b"}},'
        ' {"name": "sort", "arguments": {"file_name": "c"}}]'
    )
    assert read_answer(json_answer, ORDER) == expected
    assert read_answer(f"```json\n{json_answer}\n```", ORDER) == expected
    assert read_answer("[mv('a', 'b'), sort('c')]", ORDER) == expected
    assert read_answer("[]", ORDER) == []
    for unreadable in ("I cannot help with that.", '[{"name": 3}]', '{"name": "mv"}',
                       '[{"name": "mv", "arguments": "source=a"}]'):  # fmt: skip
        assert read_answer(unreadable, ORDER) is None


def test_multi_turn_answers_are_one_list_of_calls_per_turn():
    turns = read_turns(
        '[[{"name": "ls", "arguments": {}}], [], [{"name": "cd", "arguments": {"folder": "x"}}]]'
    )
    assert turns == [[Call("ls", {})], [], [Call("cd", {"folder": "x"})]]
    for bad in ('[{"name": "ls"}]', "[ls()]", '{"turns": []}', "[[1]]"):
        assert read_turns(bad) is None


def test_the_doc_dialect_becomes_standard_json_schema():
    doc = {
        "name": "f",
        "description": "d",
        "parameters": {
            "type": "dict",
            "properties": {
                "ratio": {"type": "float", "default": 0.5, "optional": True},
                "point": {"type": "tuple", "items": {"type": "integer"}},
                "anything": {"type": "any", "description": "x"},
                "opts": {
                    "type": "dict",
                    "properties": {"k": {"type": "boolean"}},
                    "required": ["k"],
                },
                "rows": {"type": "array", "items": {"type": "dict", "properties": {}}},
            },
            "required": ["ratio"],
        },
        "response": {"type": "dict"},
    }
    assert function_spec(doc) == {
        "name": "f",
        "description": "d",
        "parameters": {
            "type": "object",
            "properties": {
                "ratio": {"type": "number", "default": 0.5},
                "point": {"type": "array", "items": {"type": "integer"}},
                "anything": {"type": "string", "description": "x"},
                "opts": {
                    "type": "object",
                    "properties": {"k": {"type": "boolean"}},
                    "required": ["k"],
                },
                "rows": {"type": "array", "items": {"type": "object", "properties": {}}},
            },
            "required": ["ratio"],
        },
    }
    assert function_spec({"name": "g"})["parameters"] == {
        "type": "object",
        "properties": {},
        "required": [],
    }
    with pytest.raises(ConfigError, match="unknown BFCL parameter type 'HashMap'"):
        function_spec(
            {"name": "h", "parameters": {"type": "dict", "properties": {"m": {"type": "HashMap"}}}}
        )
