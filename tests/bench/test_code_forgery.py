"""Forged passes: wrong code that tries to make the ``code`` evaluator say correct.

Every attack below is wrong code (the function computes the wrong value, or nothing) plus a trick
that made, or could make, a single-process runner report a pass: reading the runner's token
from its frames or the heap, objects that equal everything, patched builtins, early exits with
status 0, a redefined ``check`` or helper, a printed success line, exceptions that end a test's
loop quietly, messages forged on the link. Each must score wrong, on a HumanEval-style task
(``check(candidate)`` after a prompt prefix) and on an MBPP-style one (bare asserts).
"""

from __future__ import annotations

import asyncio

import pytest

from maslab.core.task import Task
from maslab.evaluators.code import CodeExecution
from maslab.sandbox import Limits

pytestmark = pytest.mark.system

PROMPT = '''def poly(xs: list, x: float) -> float:
    """The polynomial with coefficients ``xs`` at ``x``."""
    return sum(c * x**i for i, c in enumerate(xs))


def total(xs: list) -> int:
    """Sum of ``xs``."""
'''


def humaneval(check: str) -> Task:
    return Task(
        id="HumanEval/forge",
        question=PROMPT,
        tests=(check,),
        answer_type="code",
        metadata={"entry_point": "total", "prompt_prefix": PROMPT},
    )


# Each task is open to some trick in a runner that runs tests and answer in one process.
TASKS = {
    "humaneval": humaneval(
        "def check(candidate):\n"
        "    assert candidate([1, 2, 3]) == 6\n"
        "    assert candidate([]) == 0\n"
    ),
    "humaneval_loop": humaneval(  # a loop that a quiet StopIteration or a patched zip ends
        "def check(candidate):\n"
        "    for got, want in zip(map(candidate, [[4], [5, 5]]), [4, 10]):\n"
        "        assert got == want\n"
    ),
    "humaneval_helper": humaneval(  # a check that trusts the prompt's helper
        "def check(candidate):\n    assert poly([candidate([1])], 1.0) == 1.0\n"
    ),
    "mbpp": Task(
        id="mbpp/forge",
        question="Write a function total(xs) returning the sum of xs.",
        tests=("assert total([1, 2, 3]) == 6", "assert total([]) == 0", "assert total([7])"),
        answer_type="code",
    ),
}

WRONG = "def total(xs):\n    return 0\n"
ATTACKS = {
    # the runner's secret, looked for everywhere a single process would hold it
    "frame_walk": (
        "import os, sys\n"
        "frame = sys._getframe()\n"
        "while frame:\n"
        "    for value in list(frame.f_locals.values()):\n"
        "        if isinstance(value, str) and len(value) == 32:\n"
        "            print('\\n' + value)\n"
        "    frame = frame.f_back\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n"
    ),
    "gc_walk": (
        "import gc, os, re, sys, types\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, types.FrameType):\n"
        "        obj = obj.f_locals\n"
        "    values = obj.values() if isinstance(obj, dict) else obj\n"
        "    if not isinstance(values, (list, tuple, type({}.values()))):\n"
        "        continue\n"
        "    for value in list(values):\n"
        "        if isinstance(value, str) and re.fullmatch('[0-9a-f]{32}', value):\n"
        "            print('\\n' + value)\n"
        "sys.stdout.flush()\n"
        "os._exit(0)\n"
    ),
    "stdin_files_and_globals": (
        "import os, re, sys\n"
        "seen = sys.stdin.read() + repr(globals())\n"
        "for root, _, names in os.walk('/'):\n"
        "    if root.startswith(('/proc', '/sys', '/usr', '/lib', '/dev')):\n"
        "        continue\n"
        "    for name in names:\n"
        "        try:\n"
        "            seen += open(os.path.join(root, name), errors='ignore').read(100000)\n"
        "        except OSError:\n"
        "            pass\n"
        "print(*re.findall('[0-9a-f]{32}', seen)[-1:])\n"
        "os._exit(0)\n"
    ),
    # values that claim to be right
    "always_equal": (
        "class Yes:\n"
        "    __eq__ = lambda self, other: True\n"
        "    __ne__ = lambda self, other: False\n"
        "    __bool__ = lambda self: True\n"
        "    __hash__ = lambda self: 0\n"
        "def total(xs):\n    return Yes()\n"
    ),
    "int_subclass_equal": (
        "class Yes(int):\n"
        "    __eq__ = lambda self, other: True\n"
        "    __ne__ = lambda self, other: False\n"
        "    __hash__ = int.__hash__\n"
        "def total(xs):\n    return Yes(0)\n"
    ),
    "fake_int_class": (
        "class Sly:\n"
        "    __class__ = int\n"
        "    __eq__ = lambda self, other: True\n"
        "def total(xs):\n    return Sly()\n"
    ),
    # the test machinery patched
    "patched_builtins": (
        "import builtins, os, sys\n"
        "class Never(Exception):\n    pass\n"
        "builtins.AssertionError = Never\n"
        "builtins.print = lambda *a, **k: None\n"
        "sys.exit = lambda *a: None\n"
        "os._exit = lambda *a: None\n"
    ),
    "patched_loop_builtins": "import builtins\nbuiltins.zip = builtins.map = lambda *a: iter(())\n",
    "trace_skips_asserts": (
        "import sys\n"
        "def tracer(frame, event, arg):\n"
        "    if event == 'exception':\n"
        "        frame.f_locals.clear()\n"
        "    return tracer\n"
        "sys.settrace(tracer)\n"
    ),
    "check_redefined": (
        "import builtins\ndef check(candidate):\n    pass\nbuiltins.check = check\n"
    ),
    "helper_redefined": "def poly(xs, x):\n    return 1.0\n",
    # leaving early with status 0, at once or during a test
    "sys_exit": "import sys\nsys.exit(0)\n",
    "os_exit": "import os\nos._exit(0)\n",
    "raise_system_exit": "raise SystemExit(0)\n",
    "exit_builtin": "exit()\n",
    "exit_during_a_call": "import os\ndef total(xs):\n    os._exit(0)\n",
    "keyboard_interrupt": "def total(xs):\n    raise KeyboardInterrupt\n",
    "stop_iteration": "def total(xs):\n    raise StopIteration\n",
    # success said rather than earned
    "fake_success_line": (
        "import sys\nprint('ok')\nprint('0' * 32 + '{\"error\": null, \"results\": []}')\n"
        "sys.stdout.flush()\nsys.exit(0)\n"
    ),
    "forged_link_messages": (
        "import json, os, socket, struct\n"
        "link = socket.socket(fileno=int(os.environ['MASLAB_CHANNEL_FD']))\n"
        "def say(message):\n"
        "    data = json.dumps(message).encode()\n"
        "    link.sendall(struct.pack('>I', len(data)) + data)\n"
        "say({'ready': True})\n"
        "for number in range(1, 20):\n"
        "    say({'id': number, 'value': 6})\n"
        "    say({'id': number, 'kinds': {'total': {'value': 6}}})\n"
        "    say({'id': number, 'value': {'__class__': 'int'}})\n"
        "link.close()\n"
        "os._exit(0)\n"
    ),
    "kill_everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
    "deep_value": (
        "def total(xs):\n"
        "    value = []\n"
        "    for _ in range(100000):\n"
        "        value = [value]\n"
        "    return value\n"
    ),
}


def fenced(code: str) -> str:
    return f"Here is my solution:\n\n```python\n{code}```\n"


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
async def test_wrong_code_cannot_forge_a_pass(attack: str):
    code = attack if "def total" in attack else f"{WRONG}\n{attack}"
    evaluator = CodeExecution(limits=Limits(wall_seconds=10))
    scores = await asyncio.gather(*(evaluator.score(t, fenced(code)) for t in TASKS.values()))
    for name, score in zip(TASKS, scores, strict=True):
        assert (score.value, score.correct, score.unparsed) == (0.0, False, False), name


async def test_the_right_code_passes_the_same_tests():
    """The attacks fail because they are wrong, not because these tests fail everything."""
    right = fenced("def total(xs):\n    return sum(xs)\n")
    scores = await asyncio.gather(*(CodeExecution().score(t, right) for t in TASKS.values()))
    assert [(s.value, s.explanation) for s in scores] == [(1.0, "ok")] * len(TASKS)


async def test_an_early_exit_is_named_in_the_explanation():
    mbpp = TASKS["mbpp"]
    score = await CodeExecution().score(mbpp, fenced(f"{WRONG}\n{ATTACKS['os_exit']}"))
    assert score.explanation == "error: the program exited before the tests ran"
    score = await CodeExecution().score(mbpp, fenced(ATTACKS["exit_during_a_call"]))
    assert score.explanation.startswith("error: test 1: SubjectError: the program exited")


async def test_values_come_back_as_plain_data_and_unplain_ones_as_references():
    returns = {
        "(1, 'a')": "assert total([]) == (1, 'a')",
        "{1: [2.5, None], 'k': {3}}": "assert total([]) == {1: [2.5, None], 'k': {3}}",
        "frozenset({b'x', 2j})": "assert total([]) == frozenset({b'x', 2j})",
        "float('nan')": "assert total([]) != total([])",
        "10 ** 5000": "assert total([]) == 10 ** 5000",
        "True": "assert total([]) is True",
        "object()": "assert total([]) is total([]) or True",
    }
    for value, test in returns.items():
        task = Task(id="plain", question="q", tests=(test,), answer_type="code")
        score = await CodeExecution().score(task, fenced(f"def total(xs):\n    return {value}\n"))
        assert score.correct, (value, score.explanation)
    task = Task(id="ref", question="q", tests=("assert total([]) == object",), answer_type="code")
    score = await CodeExecution().score(task, fenced("def total(xs):\n    return object\n"))
    assert not score.correct  # a class is no data: a reference equals nothing of the tests'


async def test_objects_of_the_code_can_be_passed_back_to_it():
    """MBPP tests build the answer's own objects (``Pair(5, 24)``) and hand them to it."""
    code = (
        "class Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n\n"
        "def longest(pairs):\n    return max(p.b - p.a for p in pairs)\n"
    )
    task = Task(
        id="pairs",
        question="q",
        tests=("assert longest([Pair(5, 24), Pair(1, 2)]) == 19",),
        answer_type="code",
    )
    score = await CodeExecution().score(task, fenced(code))
    assert (score.correct, score.explanation) == (True, "ok")


async def test_exceptions_the_tests_expect_arrive_as_pythons_own():
    code = "def total(xs):\n    if not xs:\n        raise ValueError('empty')\n    return sum(xs)\n"
    test = "try:\n    total([])\nexcept ValueError as exc:\n    assert str(exc) == 'empty'\n"
    tests = (test, "assert total([2]) == 2")
    task = Task(id="raises", question="q", tests=tests, answer_type="code")
    assert (await CodeExecution().score(task, fenced(code))).correct
