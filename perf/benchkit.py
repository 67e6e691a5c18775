"""What the perf scripts share: a fake server in its own process, commands run as a user runs
them (wall, CPU and peak RSS of each), the machine line, the parser with ``--json PATH``,
percentiles, the table and the JSON file. The scripts run as ``python perf/NAME.py``, so this
folder is on ``sys.path`` and they ``from benchkit import ...``.

Times that cross processes are wall-clock (``time.time()``): the server stamps each request's
arrival, a run directory's files carry modification times, and a command's start and exit are
taken here, all on the same clock.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing as mp
import os
import platform
import pstats
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

import maslab

ANSWER = "Adding step by step gives 42. The answer is 42."


def _serve(latency: float, answer: str, conn: Connection) -> None:
    """The server process: answer every chat request with ``answer`` after ``latency`` seconds
    and obey ``stats`` / ``reset`` / ``stop`` commands from ``conn``."""
    from maslab.testing import FakeOpenAIServer

    last_answer: float | None = None  # when the latest answer left (after the latency)

    def reply(request: object) -> str:
        nonlocal last_answer
        last_answer = time.time()
        return answer

    with FakeOpenAIServer(reply, latency=latency) as server:
        cpu_at_reset = time.process_time()  # start-up and imports are not serving
        conn.send(server.base_url)
        while (command := conn.recv()) != "stop":
            if command == "reset":
                server.reset_stats()
                last_answer = None
                cpu_at_reset = time.process_time()
            cpu = time.process_time() - cpu_at_reset
            conn.send(
                {
                    "served": server.served,
                    "requests": server.requests,
                    "peak_in_flight": server.peak_in_flight,
                    "first_arrival": server.first_arrival,
                    "last_arrival": server.last_arrival,
                    "last_answer": last_answer,
                    "cpu_s": cpu,
                    "cpu_ms_per_call": cpu / max(1, server.served) * 1000,
                }
            )


class ServerProcess:
    """A :class:`~maslab.testing.FakeOpenAIServer` that answers ``answer`` after ``latency``
    seconds, in a process of its own (use as a context manager), so its CPU is not the
    client's."""

    def __init__(self, latency: float = 0.0, answer: str = ANSWER) -> None:
        self._conn, child = mp.Pipe()
        self._process = mp.get_context("spawn").Process(
            target=_serve, args=(latency, answer, child), daemon=True
        )
        self._process.start()
        while not self._conn.poll(0.1):
            if not self._process.is_alive():
                raise RuntimeError("the fake server's process ended before it served")
        self.url: str = self._conn.recv()

    def stats(self) -> dict[str, Any]:
        """Since it started serving or the last reset: requests served and in flight at the
        peak, first and last arrival and the last answer (wall clock), the server process's CPU
        seconds and CPU milliseconds per request served."""
        self._conn.send("stats")
        return self._conn.recv()

    def reset(self) -> None:
        self._conn.send("reset")
        self._conn.recv()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._process.join(timeout=15)


@dataclass(frozen=True)
class Measured:
    """One command's run: its exit code, wall-clock start and end, CPU and peak RSS."""

    argv: Sequence[str]
    returncode: int
    started: float
    ended: float
    cpu_s: float
    peak_rss_mb: float
    output: str

    @property
    def wall(self) -> float:
        return self.ended - self.started

    def costs(self, calls: int) -> dict[str, float]:
        """Its CPU seconds, CPU milliseconds per one of ``calls`` model calls, and peak RSS."""
        return {
            "cpu_s": self.cpu_s,
            "cpu_ms_per_call": self.cpu_s / calls * 1000,
            "peak_rss_mb": self.peak_rss_mb,
        }

    def check(self, ok: Collection[int] = (0, 1)) -> Measured:
        """Itself, or a RuntimeError with the command's output when it exited with a code not
        in ``ok`` (by default 1 passes: a run finished with errored samples, counted apart)."""
        if self.returncode not in ok:
            raise RuntimeError(f"{' '.join(self.argv)} exited {self.returncode}:\n{self.output}")
        return self


def run_measured(
    argv: Sequence[str],
    log: Path,
    *,
    watch: Callable[[int], None] | None = None,
    every_s: float = 0.05,
) -> Measured:
    """Run ``argv`` to its end (output to ``log``) and measure it from the exec to the exit;
    ``watch(pid)`` is called every ``every_s`` seconds while it runs. CPU and peak RSS are the
    process's own and those of the children it waited for (``wait4``)."""
    with log.open("wb") as out:
        started = time.time()
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=command_env())
        ended: list[tuple[float, int, Any]] = []

        def reap() -> None:
            _, status, usage = os.wait4(process.pid, 0)
            ended.append((time.time(), os.waitstatus_to_exitcode(status), usage))

        waiter = threading.Thread(target=reap, daemon=True)
        waiter.start()
        while waiter.is_alive():
            if watch is not None:
                watch(process.pid)
            waiter.join(every_s)
    process.returncode = ended[0][1]  # reaped above: Popen must not wait for it again
    end, code, usage = ended[0]
    return Measured(
        argv=list(argv),
        returncode=code,
        started=started,
        ended=end,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        output=log.read_text(errors="replace"),
    )


def rss_mb(pid: int) -> tuple[float, float] | None:
    """``pid``'s resident set now and at its peak (VmRSS, VmHWM) in MB; None once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    try:
        return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]
    except (KeyError, ValueError):  # a zombie has no memory lines
        return None


def command_env() -> dict[str, str]:
    """The environment a measured command runs in: this one, with Python's bytecode cache on
    (``PYTHONDONTWRITEBYTECODE`` dropped), as an installed maslab runs; the first command
    writes the cache, so a script's first figure includes compiling."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def maslab_command() -> list[str]:
    """``maslab`` as installed beside this Python (the console script a user runs)."""
    script = Path(sys.executable).with_name("maslab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "maslab.cli"]


def machine() -> dict[str, Any]:
    """The machine a figure was taken on (cores usable and in all, Python, platform, maslab),
    and how busy it was at the start (load averages over 1, 5 and 15 minutes)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cores": usable,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "maslab": maslab.__version__,
        "load_average": [round(x, 2) for x in load] if load else None,
    }


def describe_machine(info: Mapping[str, Any]) -> str:
    """``info`` (from :func:`machine`) as the one line a script prints first."""
    line = (
        f"machine: {info['cores']} usable cores ({info['cpu_count']} in all), "
        f"{info['implementation']} {info['python']}, {info['platform']}, maslab {info['maslab']}"
    )
    if info["load_average"]:
        line += f"; load average {', '.join(f'{x:.1f}' for x in info['load_average'])} at the start"
    return line


def print_machine() -> dict[str, Any]:
    """:func:`machine`, after printing it (:func:`describe_machine`): a script's first line."""
    info = machine()
    print(describe_machine(info))
    return info


def arguments(doc: str, json_help: str = "also write the figures here") -> argparse.ArgumentParser:
    """A script's parser: described by the first line of ``doc``, with ``--json PATH``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help=json_help)
    return parser


def above_zero(text: str) -> float:
    """The argparse type of a ``--latency``: seconds, above 0 (the figures are ratios to a bound
    of calls x latency)."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0: the bound would be 0 s")
    return value


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, p99 and maximum of ``values``."""
    return {
        "median": statistics.median(values),
        "p99": percentile(values, 99),
        "max": max(values),
    }


# (key, header) or (key, header, format): a str.format string such as "{:.2f}" or "{:.1%}"
Column = tuple[str, str] | tuple[str, str, str]


def _cell(value: Any, fmt: str | None) -> str:
    if value is None:
        return ""
    if fmt is not None:
        return fmt.format(value)
    return f"{value:,.1f}" if isinstance(value, float) else str(value)


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> None:
    """``rows`` under ``columns``: the first column left-aligned, the others right-aligned.
    A column's format, when it has one, formats its values; otherwise a float has one decimal
    and thousands separators, anything else is ``str``'d; None is a blank cell."""
    header = [column[1] for column in columns]
    cells = [
        [_cell(row[column[0]], column[2] if len(column) > 2 else None) for column in columns]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in (header, *cells)) for i in range(len(columns))]
    for r in (header, *cells):
        line = [r[0].ljust(widths[0])]
        line += [cell.rjust(w) for cell, w in zip(r[1:], widths[1:], strict=True)]
        print("  ".join(line).rstrip(), flush=True)


def write_json(path: str | Path | None, data: Mapping[str, Any]) -> None:
    """``data`` as indented JSON in ``path``, when one is given."""
    if path:
        Path(path).write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"JSON written to {path}")


def top_functions(profile: cProfile.Profile, count: int = 15) -> str:
    """The ``count`` functions with the most cumulative time, as pstats prints them."""
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(count)
    return out.getvalue()
