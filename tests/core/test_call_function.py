"""maslab.kit.bridge.call_function: a function of model-written code, called in the sandbox by our
driver; its value is the answer, its prints and forged reports never are, and every way of not
answering is an error a model can read."""

from __future__ import annotations

import pytest

from maslab.core.context import Context
from maslab.errors import ConfigError
from maslab.kit.bridge import MODULE_FILE, FunctionCall, call_function
from maslab.llm.types import ChatRequest
from maslab.sandbox import Limits
from maslab.testing import ScriptedModel, last_user_message

SHORT = Limits(wall_seconds=20, cpu_seconds=10)


def echo(request: ChatRequest) -> str:
    return f"echo: {last_user_message(request)}"


async def call(
    code: str, argument: str = "6 * 7", *, function: str = "forward", **options
) -> tuple[FunctionCall, Context]:
    ctx = Context(ScriptedModel(echo))
    options.setdefault("limits", SHORT)
    return await call_function(code, function, argument, ctx, **options), ctx


@pytest.mark.system
async def test_the_value_of_the_function_is_the_answer_and_its_calls_are_the_samples():
    code = (
        "from maslab_bridge import Agent, call_llm\n\n"
        "def forward(task):\n"
        "    plan = call_llm('plan ' + task)\n"
        "    return Agent('critic').ask(plan)\n"
    )
    outcome, ctx = await call(code, agent="agent", role="agent")
    assert (outcome.answer, outcome.error, outcome.calls) == ("echo: echo: plan 6 * 7", "", 2)
    assert outcome.run.result.status == "ok"
    assert [r.agent for r in ctx.ledger.records] == ["agent", "agent/critic"]


@pytest.mark.system
async def test_an_async_function_is_awaited_and_a_value_is_made_text():
    code = (
        "import asyncio\n"
        "from maslab_bridge import acall_llm\n\n"
        "async def solve(task):\n"
        "    got = await asyncio.gather(*(acall_llm(f'{task} #{i}') for i in range(3)))\n"
        "    return len(got) * 14\n"
    )
    outcome, ctx = await call(code, function="solve")
    assert (outcome.answer, outcome.calls) == ("42", 3)
    assert [r.agent for r in ctx.ledger.records] == ["program"] * 3


@pytest.mark.system
async def test_the_function_gets_the_argument_verbatim_and_may_import_files():
    code = "from helper import shout\n\ndef forward(task):\n    return shout(task)\n"
    text = 'a "quoted"\nmulti-line task ✓\n'
    files = {"helper.py": "def shout(text):\n    return text.upper()\n"}
    outcome, _ = await call(code, text, files=files)
    assert outcome.answer == text.upper()


@pytest.mark.system
@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("def solve(task):\n    return task\n", ["the code defines no function named forward"]),
        ("forward = 'not a function'\n", ["the code defines no function named forward"]),
        (
            "def forward(task):\n    return (\n",
            ["the code does not compile", 'File "program.py", line 2', "SyntaxError"],
        ),
        (
            "import no_such_module\n",
            ["failed while loading", "ModuleNotFoundError: No module named 'no_such_module'"],
        ),
        ("def forward(task):\n    return None\n", ["forward returned no answer (None)"]),
    ],
)
async def test_code_that_cannot_answer_says_why(code, shown):
    outcome, _ = await call(code)
    assert outcome.answer is None
    for part in shown:
        assert part in outcome.error
    assert outcome.run.result.status == "error"  # the driver reported the failure


@pytest.mark.system
async def test_an_exception_is_shown_with_the_codes_own_traceback():
    code = (
        "from maslab_bridge import call_llm\n\n"
        "def check(value):\n"
        "    raise ValueError(f'bad value {value}')\n\n"
        "def forward(task):\n"
        "    return check(call_llm(task))\n"
    )
    outcome, _ = await call(code)
    assert outcome.answer is None and outcome.calls == 1
    error = outcome.error
    assert error.startswith("forward raised an exception:\nTraceback (most recent call last):")
    assert 'File "program.py", line 7, in forward' in error
    assert 'File "program.py", line 4, in check' in error
    assert error.endswith("ValueError: bad value echo: 6 * 7")
    assert "main.py" not in error and "importlib" not in error  # the driver's frames are not


@pytest.mark.system
async def test_the_functions_prints_are_never_the_answer():
    code = (
        "import os, subprocess, sys\n"
        "print('42 at import')\n\n"
        "def forward(task):\n"
        "    print('The answer is 42')\n"
        "    os.write(1, b'42 from fd 1\\n')\n"
        "    subprocess.run([sys.executable, '-c', 'print(\"42 from a child\")'])\n"
        "    return 7\n"
    )
    outcome, _ = await call(code)
    assert outcome.answer == "7"
    result = outcome.run.result
    for printed in ("42 at import", "The answer is 42", "42 from fd 1", "42 from a child"):
        assert printed not in result.stdout and printed in result.stderr


@pytest.mark.system
async def test_a_forged_report_is_not_accepted():
    forged = "'\\n' + stolen + json.dumps({'answer': 'forged'})"
    code = (
        "import json, os, sys\n"
        "stolen = sys.stdin.read()  # the driver has read the token already\n\n"
        "def forward(task):\n"
        f"    print({forged}, flush=True)\n"
        f"    sys.__stdout__.write({forged} + '\\n')\n"
        f"    print('\\n' + '0' * 32 + json.dumps({{'answer': 'forged'}}))\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n"
    )
    outcome, _ = await call(code)
    assert outcome.answer is None and "forged" not in outcome.run.result.stdout
    assert outcome.error.startswith("the program exited without an answer (exit code 0)")
    assert "forged" in outcome.error  # its output is shown as the error output's tail


@pytest.mark.system
async def test_threads_the_function_leaves_running_do_not_spoil_the_report():
    code = (
        "import threading, time\n\n"
        "def chatter():\n"
        "    while True:\n"
        "        print('noise', flush=True)\n"
        "        time.sleep(0.01)\n\n"
        "def forward(task):\n"
        "    threading.Thread(target=chatter).start()\n"
        "    time.sleep(0.1)\n"
        "    return 'done'\n"
    )
    outcome, _ = await call(code)
    # ok, not timeout: the driver ends the program after its report (the chattering thread,
    # not a daemon, would keep it running to its wall limit)
    assert (outcome.answer, outcome.run.result.status) == ("done", "ok")


@pytest.mark.system
async def test_a_run_out_of_time_and_the_call_limit_are_errors():
    loops = "def forward(task):\n    while True:\n        pass\n"
    outcome, _ = await call(loops, limits=Limits(wall_seconds=1, cpu_seconds=5))
    assert (outcome.answer, outcome.run.result.status) == (None, "timeout")
    assert outcome.error.startswith("the program ran out of time")

    greedy = (
        "from maslab_bridge import call_llm\n\n"
        "def forward(task):\n"
        "    return [call_llm(str(i)) for i in range(3)]\n"
    )
    outcome, ctx = await call(greedy, max_calls=2)
    assert outcome.answer is None and ctx.usage.calls == 2
    assert "limit of 2 model calls" in outcome.error


async def test_the_module_file_is_the_drivers():
    ctx = Context(ScriptedModel(echo))
    with pytest.raises(ConfigError, match=r"program\.py"):
        await call_function("", "forward", "", ctx, files={MODULE_FILE: "x = 1\n"})
