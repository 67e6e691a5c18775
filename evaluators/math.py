"""``math``: mathematical equivalence with math-verify, under a per-answer time limit.

math-verify enforces its own time limits with ``signal.alarm``, which only works in the main
thread. We switch those off and run math-verify in a pool of persistent child processes per
evaluator (``workers``, by default ``min(4, os.cpu_count())``; started with the ``spawn`` method,
so a script that scores answers needs the usual ``if __name__ == "__main__":`` guard). Each child
serves one answer at a time, and a pool thread waits on each busy child, so calls from any thread
or event loop run in parallel up to the pool's size. A child starts only when every running one
is busy. An answer that takes longer than ``timeout_s`` scores wrong ("math-verify timed out");
its child is killed and the next call that needs it starts a fresh one; the others run on.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from pydantic import Field, StrictFloat, StrictInt

from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator
from maslab.core.answers import extract_answer, strict_answer
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.evaluators.numeric import numbers_equal
from maslab.plugin_config import PluginConfig, Settings

# (verdict, what math-verify parsed from the answer); verdict None: nothing to compare
Check = tuple[bool | None, str | None]

_READY = "ready"
_START_TIMEOUT_S = 60.0  # spawning and importing math-verify; not part of an answer's time
_WORKERS = min(4, os.cpu_count() or 1)


class _WorkerFailed(Exception):
    """The child gave no result for one answer (timed out or died); it has been stopped."""


def _check(gold: str, answer: str) -> Check:
    """Parse both sides and compare them; runs in the child process."""
    from math_verify import parse, verify

    expected = parse(f"${gold}$", parsing_timeout=None)
    predicted = parse(answer, parsing_timeout=None)
    shown = str(predicted[-1]) if predicted else None  # [sympy object, matched text]
    if not expected or not predicted:
        return None, shown
    return verify(expected, predicted, timeout_seconds=None), shown


def _serve(conn: Connection, check: Callable[[str, str], Check]) -> None:
    """Child process main loop: answer ``(gold, answer)`` requests with ``check`` until the pipe
    closes."""
    import math_verify  # noqa: F401  (import before reporting ready)

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled" warnings
    conn.send(_READY)
    while True:
        try:
            gold, answer = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result = check(gold, answer)
        except Exception:  # math-verify mostly catches its own errors; never let one kill us
            result = (None, None)
        conn.send(result)


class _Worker:
    """One child process, started on first use; one check at a time (the pool sees to that)."""

    def __init__(self, check: Callable[[str, str], Check]) -> None:
        self._check = check
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def run(self, gold: str, answer: str, timeout: float) -> Check:
        conn = self._connection()
        try:
            conn.send((gold, answer))
            if conn.poll(timeout):
                return conn.recv()
            reason = "math-verify timed out"
        except (EOFError, OSError):
            reason = "math-verify worker died"
        self.stop()
        raise _WorkerFailed(reason)

    def _connection(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.is_alive():
            return self._conn
        self.stop()
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, self._check), name="maslab-math-verify", daemon=True
        )
        self._process.start()
        child.close()
        try:
            ready = self._conn.poll(_START_TIMEOUT_S) and self._conn.recv() == _READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.stop()
            raise RuntimeError("the math-verify worker process did not start")
        return self._conn

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None and self._process.pid is not None:  # it started
            self._process.kill()
            self._process.join()
        self._conn = self._process = None


class _Pool:
    """``size`` workers and a thread for each; a check takes the idle worker used last, so a
    process starts only when more checks than running processes are in flight."""

    def __init__(self, size: int, check: Callable[[str, str], Check]) -> None:
        self._threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="math-verify")
        self._workers = [_Worker(check) for _ in range(size)]
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        for worker in self._workers:
            self._idle.put(worker)

    @property
    def pids(self) -> set[int]:
        """The process ids of the running workers."""
        return {worker.pid for worker in self._workers if worker.pid is not None}

    async def check(self, gold: str, answer: str, timeout: float) -> Check:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, self._run, gold, answer, timeout)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._threads, self._stop)

    def _run(self, gold: str, answer: str, timeout: float) -> Check:
        worker = self._idle.get()
        try:
            return worker.run(gold, answer, timeout)
        finally:
            self._idle.put(worker)

    def _stop(self) -> None:
        held = [self._idle.get() for _ in self._workers]  # after the checks in progress
        for worker in held:
            worker.stop()
            self._idle.put(worker)


@register_evaluator("math")
class MathEvaluator(Evaluator):
    """Math equivalence with math-verify (LaTeX, fractions, roots, sets, intervals, equations)."""

    execution_options = frozenset({"workers"})

    class Config(PluginConfig):
        timeout_s: StrictFloat = Field(
            5.0, gt=0, allow_inf_nan=False, description="seconds per answer; longer scores wrong"
        )
        workers: StrictInt = Field(
            _WORKERS, ge=1, description="child processes that check answers in parallel"
        )

    config: Config

    def __init__(self, config: Settings = None, **options: Any) -> None:
        super().__init__(config, **options)
        self.timeout_s = self.config.timeout_s  # the checks' limit, settable after construction
        self._pool = _Pool(self.config.workers, _check)

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        """math-verify's verdict on the whole answer (flexible), and in its details the same
        check of the answer in the instructed form only (strict: :meth:`Score.with_strict`): a
        second check when there is one and the first did not fail (time out)."""
        gold = gold_of(task)
        strict = strict_answer(answer, "math")
        try:
            score = await self._grade(gold, answer)
        except _WorkerFailed as failure:
            extracted = extract_answer(answer, "math")
            failed = Score(value=0.0, correct=False, extracted=extracted, explanation=str(failure))
            return failed.with_strict(strict, False)
        if strict is None:
            return score.with_strict(None, False)
        try:
            correct = (await self._grade(gold, f"${strict}$")).correct
        except _WorkerFailed:
            correct = False
        return score.with_strict(strict, correct)

    async def _grade(self, gold: str, answer: str) -> Score:
        """math-verify's verdict on ``answer``; raises :class:`_WorkerFailed` when it gave none."""
        verdict, parsed = await self._pool.check(gold, answer, self.timeout_s)
        extracted = parsed or extract_answer(answer, "math")
        if extracted is None:
            return Score.unparsable()
        if verdict is None:  # math-verify could not read one side: compare as plain numbers
            number = extract_answer(extracted, "number")
            correct = number is not None and numbers_equal(number, gold)
            why = f"math-verify found nothing to compare; {extracted!r} is not the number {gold!r}"
            return Score.graded(correct, extracted, gold, "" if correct else why)
        return Score.graded(verdict, extracted, gold)

    async def aclose(self) -> None:
        await self._pool.close()
