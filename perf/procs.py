"""What the process-level perf scripts share: a fake server in its own process, commands run
as a user runs them (wall, CPU and peak RSS of each), the machine header, the table and JSON.

Times that cross processes are wall-clock (``time.time()``): the server stamps each request's
arrival, a run directory's files carry modification times, and a command's start and exit are
taken here, all on the same clock.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

ANSWER = "Adding step by step gives 42. The answer is 42."


def _serve(latency: float, conn: Connection) -> None:
    """The server process: answer every chat request after ``latency`` seconds and obey
    ``stats`` / ``reset`` / ``stop`` commands from ``conn``."""
    from maslab.testing import FakeOpenAIServer

    with FakeOpenAIServer(lambda request: ANSWER, latency=latency) as server:
        conn.send(server.base_url)
        while (command := conn.recv()) != "stop":
            if command == "reset":
                server.reset_stats()
            conn.send(
                {
                    "served": server.served,
                    "requests": server.requests,
                    "peak_in_flight": server.peak_in_flight,
                    "first_arrival": server.first_arrival,
                    "last_arrival": server.last_arrival,
                    "cpu_s": time.process_time(),
                }
            )


class ServerProcess:
    """A :class:`~maslab.testing.FakeOpenAIServer` with ``latency`` in a process of its own
    (use as a context manager), so its CPU is not the client's."""

    def __init__(self, latency: float) -> None:
        self._conn, child = mp.Pipe()
        self._process = mp.get_context("spawn").Process(
            target=_serve, args=(latency, child), daemon=True
        )
        self._process.start()
        while not self._conn.poll(0.1):
            if not self._process.is_alive():
                raise RuntimeError("the fake server's process ended before it served")
        self.url: str = self._conn.recv()

    def stats(self) -> dict[str, Any]:
        """Requests served and in flight at the peak, first and last arrival since the reset;
        the server process's CPU seconds so far."""
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

    def check(self) -> Measured:
        """Itself, or a RuntimeError with the command's output when it failed."""
        if self.returncode not in (0, 1):  # 1: finished with errored samples (counted apart)
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
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
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


def maslab_command() -> list[str]:
    """``maslab`` as installed beside this Python (the console script a user runs)."""
    script = Path(sys.executable).with_name("maslab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "maslab.cli"]


def machine() -> dict[str, Any]:
    """The machine a figure was taken on, and how busy it was (load averages)."""
    return {
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def describe_machine(info: Mapping[str, Any]) -> str:
    load = ", ".join(f"{x:.1f}" for x in info["load_average"])
    return (
        f"machine: {info['cores']} cores, Python {info['python']}, {info['platform']}; "
        f"load average {load} at the start"
    )


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Rows of text cells under ``header``: the first column left-aligned, the rest right."""
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)]
        print("  ".join(cells).rstrip())


def write_json(path: str | None, data: Mapping[str, Any]) -> None:
    if path:
        Path(path).write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"JSON written to {path}")
