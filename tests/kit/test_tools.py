"""maslab.kit.tools: JSON tool calls in plain text, error observations, built-in tools."""

from __future__ import annotations

import pytest

from maslab.errors import BudgetExceeded, ConfigError
from maslab.kit.tools import Tool, ToolCall, get_tools, parse_tool_call, python_tool, run_tool
from maslab.sandbox import Limits

ARITHMETIC = get_tools(["add", "subtract", "multiply", "divide", "compare"])


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "add", "arguments": {"a": 2, "b": 3}}',
        'I will add them.\n```json\n{"function": "add", "args": {"a": 2, "b": 3},}\n```',
        'Call: {"name": "add", "parameters": {"a": 2, "b": 3}} and done.',
    ],
)
def test_parse_tool_call_reads_the_usual_spellings(text):
    assert parse_tool_call(text) == ToolCall(name="add", arguments={"a": 2, "b": 3})


@pytest.mark.parametrize(
    "text", ["no json here", '{"arguments": {"a": 1}}', '{"tool": "add", "arguments": [1, 2]}']
)
def test_parse_tool_call_returns_none_without_a_valid_call(text):
    assert parse_tool_call(text) is None


def test_a_call_without_arguments_has_an_empty_dict():
    assert parse_tool_call('{"tool": "now"}') == ToolCall(name="now")


@pytest.mark.parametrize(
    ("name", "arguments", "observation"),
    [
        ("add", {"a": 2, "b": 3}, "5"),
        ("subtract", {"a": 2, "b": 3.5}, "-1.5"),
        ("multiply", {"a": "4", "b": 2.5}, "10"),  # numeric strings are accepted
        ("divide", {"a": 1, "b": 3}, "0.333333333333"),
        ("divide", {"a": 10**20, "b": 1}, "1e+20"),
        ("compare", {"a": 2, "b": 3}, "2 < 3"),
        ("compare", {"a": 3.0, "b": 3}, "3 = 3"),
    ],
)
async def test_built_in_arithmetic(name, arguments, observation):
    assert await run_tool(ARITHMETIC, ToolCall(name=name, arguments=arguments)) == observation


@pytest.mark.parametrize(
    ("call", "observation"),
    [
        (ToolCall(name="sqrt"), "error: unknown tool 'sqrt'; available: add, subtract,"),
        (ToolCall(name="add", arguments={"a": 1}), "error: bad arguments for add: b: Field req"),
        (
            ToolCall(name="add", arguments={"a": 1, "b": 2, "c": 3}),
            "error: bad arguments for add: c: Extra inputs are not permitted",
        ),
        (
            ToolCall(name="add", arguments={"a": "one", "b": 2}),
            "error: bad arguments for add: a: Input should be a valid number",
        ),
        (
            ToolCall(name="divide", arguments={"a": 1, "b": 0}),
            "error: divide failed: ZeroDivisionError:",
        ),
    ],
)
async def test_failures_become_error_observations(call, observation):
    assert (await run_tool(ARITHMETIC, call)).startswith(observation)


async def test_the_sample_s_own_failures_propagate():
    async def spend() -> str:
        raise BudgetExceeded("calls", 1, 1)

    with pytest.raises(BudgetExceeded):
        await run_tool([Tool("spend", "Uses the budget.", {}, spend)], ToolCall(name="spend"))


async def test_defaults_fill_missing_optional_arguments():
    async def greet(name: str, punctuation: str) -> str:
        return f"hello {name}{punctuation}"

    params = {"name": {"type": "string"}, "punctuation": {"type": "string", "default": "!"}}
    tool = Tool("greet", "Greets.", params, greet)
    assert await run_tool([tool], ToolCall(name="greet", arguments={"name": "Ada"})) == "hello Ada!"


def test_describe_lists_signature_and_argument_notes():
    (python,) = get_tools(["python"])
    assert python.describe() == (
        "- python(code: string): Run Python code in a sandbox (no network).\n"
        "    code: a complete program; print the results you need"
    )
    assert ARITHMETIC[0].describe() == "- add(a: number, b: number): a + b."


def test_unknown_tool_names_are_a_config_error():
    with pytest.raises(ConfigError, match="unknown tools 'web'; known: add, compare, divide"):
        get_tools(["add", "web"])


@pytest.mark.system
async def test_python_tool_reports_status_stdout_and_stderr():
    (python,) = get_tools(["python"])
    ok = await run_tool([python], ToolCall(name="python", arguments={"code": "print(6 * 7)"}))
    assert ok == "status: ok\nstdout:\n42"
    code = "import sys\nprint('partial')\nsys.exit('boom')"
    failed = await run_tool([python], ToolCall(name="python", arguments={"code": code}))
    assert failed == "status: error\nstdout:\npartial\nstderr:\nboom"


@pytest.mark.system
async def test_python_tool_limits_and_output_cap_are_configurable():
    slow = python_tool(Limits(wall_seconds=0.3, cpu_seconds=5))
    assert await slow.run(code="while True: pass") == "status: timeout"
    chatty = python_tool(max_chars=30)
    observation = await chatty.run(code="print('x' * 100)")
    assert observation == "status: ok\nstdout:\n" + "x" * 11 + "\n[output truncated]"
