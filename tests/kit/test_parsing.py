"""Defensive JSON parsing of model output."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from maslab.kit.parsing import as_text, parse_json_object, parse_model


class Verdict(BaseModel):
    preference: bool
    answer: str


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": 1, "b": [1, 2]}\n```\nDone.', {"a": 1, "b": [1, 2]}),
        ('prefix {"a": {"b": "}"}} suffix {"c": 2}', {"a": {"b": "}"}}),
        ('{"a": 1,}', {"a": 1}),
        ('{"a": true, "b": null}', {"a": True, "b": None}),
        ("{'a': 1}", None),  # Python literals are not JSON, and never eval'd
        ("no json here", None),
        ('{"unterminated": 1', None),
        ('[1, 2] then {"x": "y"}', {"x": "y"}),
    ],
)
def test_parse_json_object(text, expected):
    assert parse_json_object(text) == expected


def test_parse_model_skips_objects_that_do_not_validate():
    text = 'first {"note": "thinking"} then {"preference": true, "answer": "42"}'
    assert parse_model(text, Verdict) == Verdict(preference=True, answer="42")
    assert parse_model('{"preference": "maybe"}', Verdict) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'Verdict: {"answer": "he said \"yes\"", "reason": "r"} ok', 'he said "yes"'),
        (r'So: {"answer": "a 5\" screen", "reason": "r"} ok', 'a 5" screen'),
        (r'{"answer": "a \"}\" brace", "n": 1} and {"answer": "later"}', 'a "}" brace'),
        (r'{"answer": "ends in a backslash \\"} {"answer": "no"}', "ends in a backslash \\"),
        ('The set {1, 2 is unclosed, then {"answer": "x"}', "x"),
    ],
)
def test_the_object_scan_respects_string_literals_and_escapes(text, expected):
    assert parse_json_object(text)["answer"] == expected


# As models write them: LaTeX inside JSON strings without escaping the backslash.
LATEX = [
    r"\sqrt{2}",
    r"\pi",
    r"a \cdot b",
    r"\left( x \right)",
    r"\infty",
    r"\text{ cm}",
    r"3 \times 4",
    r"\theta",
    r"\frac{1}{2}",
    r"x \neq 0",
    r"\beta",
    r"\boxed{5}",
    r"\rho \to \tau",
    r"\textbf{B}",
    r"\nabla \nu \ne \not\in \nleq \ngeq",
    r"\tan \tfrac12 \tilde{x} \triangle",
    r"\forall \bar{x} \rangle \binom{4}{2}",
    r"\alpha + \$5 \{1\} \, \; \! \%",
]


@pytest.mark.parametrize("latex", LATEX)
def test_unescaped_latex_in_a_json_string_is_read_literally(latex):
    assert parse_json_object(f'{{"answer": "{latex}"}}') == {"answer": latex}


def test_valid_escapes_and_prose_line_breaks_survive_the_latex_repair():
    text = r'{"a": "one\ntwo\n\nThe end\tx\u00e9\\times \"q\" \/", "b": "raw' + "\n" + 'line"}'
    expected = {"a": 'one\ntwo\n\nThe end\txé\\times "q" /', "b": "raw\nline"}
    assert parse_json_object(text) == expected


def test_parse_model_reads_unescaped_latex():
    text = r'{"preference": true, "answer": "\frac{\sqrt{3}}{2} \times \pi"}'
    expected = Verdict(preference=True, answer=r"\frac{\sqrt{3}}{2} \times \pi")
    assert parse_model(text, Verdict) == expected


def test_a_text_field_never_takes_pythons_spelling_of_a_value():
    """A JSON list, number or boolean in a text field reads as a person would write it."""
    values = {
        '"  x "': "x",
        "[14]": "14",
        '["B", 3, null, ""]': "B, 3",
        "true": "true",
        "2.5": "2.5",
        '{"x": 1}': '{"x": 1}',
        "null": "",
    }
    for written, text in values.items():
        assert as_text(json.loads(written)) == text, written
