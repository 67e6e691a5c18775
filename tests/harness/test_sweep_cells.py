"""``maslab sweep --max-cells K``: cells run at once under the sweep's one call cap and one pool
of endpoints (an endpoint's ``max_concurrency`` holds across cells); a failing cell stops only
itself; Ctrl-C stops them all, saving what they finished."""

from __future__ import annotations

import io
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from holding import AnswerThenHold, interruptible
from rich.console import Console

from maslab.cli import main
from maslab.harness.progress import RunProgress, run_lines
from maslab.store.run_store import ResultRecord, RunStore
from maslab.testing import FakeOpenAIServer

LABELS = ("a", "b", "c", "d")  # four vanilla cells of the same tasks


def write_sweep(tmp_path: Path, base_url: str, *, limit: int, cap: int | None = None) -> Path:
    """A sweep of four vanilla cells on ``limit`` arith tasks (at most ``limit`` calls in flight
    each), served from an endpoints file (with ``max_concurrency: cap`` when given)."""
    endpoints = tmp_path / "endpoints.yaml"
    endpoints.write_text(
        f"fake:\n  - base_url: {base_url}\n" + (f"    max_concurrency: {cap}\n" if cap else "")
    )
    methods = ", ".join(f"{{name: vanilla, label: {label}}}" for label in LABELS)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nendpoints: {endpoints}\nmodels: [openai:fake]\n"
        f"methods: [{methods}]\nbenchmarks: [arith]\nlimit: {limit}\nconcurrency: 48\n"
        "cache: false\n"
    )
    return sweep


def finished(tmp_path: Path) -> list[int]:
    return [len(RunStore(tmp_path / "sweep/arith" / label / "openai_fake").results())
            for label in LABELS]  # fmt: skip


@pytest.mark.system
@pytest.mark.parametrize(
    ("in_file", "option", "overlap"),
    [(None, None, True), (None, "4", True), (None, "1", False), ("1", None, False),
     ("1", "4", True)],
)  # fmt: skip
def test_cells_overlap_up_to_max_cells(tmp_path, in_file, option, overlap):
    with FakeOpenAIServer(latency=0.5) as server:
        sweep = write_sweep(tmp_path, server.base_url, limit=2)
        if in_file:
            sweep.write_text(sweep.read_text() + f"max_cells: {in_file}\n")
        options = ["--max-cells", option] if option else []
        assert main(["sweep", str(sweep), "--quiet", *options]) == 0
        assert server.served == 4 * 2
        # one cell has at most 2 calls in flight; more means cells ran at once
        assert (server.peak_in_flight > 2) is overlap
    assert finished(tmp_path) == [2, 2, 2, 2]


def test_max_cells_below_one_is_a_one_line_error(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "http://127.0.0.1:9/v1", limit=1)
    assert main(["sweep", str(sweep), "--max-cells", "0"]) == 2
    sweep.write_text(sweep.read_text() + "max_cells: 0\n")
    assert main(["sweep", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "--max-cells: must be at least 1, got 0" in err
    assert "max_cells: " in err.splitlines()[-1] and not (tmp_path / "sweep").exists()


@pytest.mark.system
def test_concurrency_caps_calls_in_flight_across_all_cells(tmp_path):
    # four cells of one call each would put 4 in flight; --concurrency 3 holds them to 3 (the
    # endpoint's own cap, 48, does not)
    with FakeOpenAIServer(latency=0.5) as server:
        sweep = write_sweep(tmp_path, server.base_url, limit=1, cap=48)
        assert main(["sweep", str(sweep), "--quiet", "--concurrency", "3"]) == 0
        assert server.served == 4 and server.peak_in_flight == 3
    assert RunStore(tmp_path / "sweep/arith/a/openai_fake").manifest().concurrency == 3


@pytest.mark.system
def test_an_endpoints_max_concurrency_holds_across_cells(tmp_path, capsys):
    with FakeOpenAIServer(latency=0.5) as server:
        sweep = write_sweep(tmp_path, server.base_url, limit=1, cap=2)
        assert main(["sweep", str(sweep)]) == 0
        assert server.served == 4 and server.peak_in_flight == 2
    out = capsys.readouterr().out
    for label in LABELS:  # each cell's summary, binding cap included, under its own name
        assert f"arith/{label}/openai:fake: accuracy" in out
    assert out.count("openai:fake caps calls in flight at 2") == 4


@pytest.mark.system
def test_a_failing_cell_does_not_stop_the_cells_beside_it(tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with FakeOpenAIServer(latency=0.5) as server:
        sweep = write_sweep(tmp_path, server.base_url, limit=3)
        endpoints = tmp_path / "endpoints.yaml"
        endpoints.write_text(
            endpoints.read_text()
            + f"down:\n  - base_url: http://127.0.0.1:{port}/v1\n    retry: {{attempts: 1}}\n"
        )
        sweep.write_text(sweep.read_text().replace("[openai:fake]", "[openai:fake, openai:down]"))
        assert main(["sweep", str(sweep), "--quiet", "--max-cells", "8"]) == 1
        assert server.served == 4 * 3 and server.peak_in_flight > 3  # up cells overlapped
    assert finished(tmp_path) == [3, 3, 3, 3]
    out = capsys.readouterr().out
    assert "sweep done: 4 of 8 runs finished" in out
    table = out.split("4 cells failed:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in table] == [f"arith/{x}/openai:down" for x in LABELS]
    assert all("while running" in line and "stopped: ConnectionRefused" in line for line in table)
    # --quiet: one line per cell as it ends (the four that ran, the four that failed)
    assert sum(line.startswith("arith/") for line in out.split("sweep done")[0].splitlines()) == 8


@pytest.mark.system
def test_ctrl_c_stops_every_running_cell_and_says_what_was_saved(tmp_path):
    # two answers, then 5 s a request: Ctrl-C lands mid-sweep even 40 s late (and the call in
    # flight, which the sweep waits for, ends by itself)
    latency = AnswerThenHold(2, hold_s=5)
    with FakeOpenAIServer(lambda r: "The answer is 14.", latency=latency) as server:
        sweep = write_sweep(tmp_path, server.base_url, limit=5)
        sweep.write_text(sweep.read_text().replace("concurrency: 48", "concurrency: 1"))
        process = subprocess.Popen(
            [sys.executable, "-m", "maslab.cli", "sweep", str(sweep), "--quiet",
             "--max-cells", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
        )  # fmt: skip
        deadline = time.monotonic() + 120  # a guard against a hang
        while time.monotonic() < deadline and sum(finished(tmp_path)) < 2:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    saved = finished(tmp_path)
    assert process.returncode == 130
    assert err.strip() == (
        f"maslab: interrupted by Ctrl-C; {sum(saved)} samples saved in 2 runs; "
        "run the same command again to resume"
    )
    assert saved[2:] == [0, 0] and 2 <= sum(saved) < 10  # cells c and d never started


def test_runs_at_once_show_a_line_each_in_one_display():
    lines = run_lines(Console(file=io.StringIO()))
    done = [ResultRecord(task_id="t0", status="ok")]
    with RunProgress("first", 4, lines=lines), RunProgress("second", 2, done=done, lines=lines):
        assert [(t.description, t.completed) for t in lines.tasks] == [("first", 0), ("second", 1)]
    assert lines.tasks == []  # each line goes when its run ends; the display stays


def test_a_cell_tells_only_its_own_models_binding_caps(tmp_path):
    with FakeOpenAIServer(latency=0.05) as server:
        sweep = write_sweep(tmp_path, server.base_url, limit=1, cap=2)
        endpoints = tmp_path / "endpoints.yaml"
        endpoints.write_text(endpoints.read_text() + f"wide:\n  - base_url: {server.base_url}\n")
        sweep.write_text(sweep.read_text().replace("[openai:fake]", "[openai:fake, openai:wide]"))
        assert main(["sweep", str(sweep), "--quiet", "--only", "method=a"]) == 0
    caps = {
        model: RunStore(tmp_path / "sweep/arith/a" / model).manifest().endpoint_caps
        for model in ("openai_fake", "openai_wide")
    }
    assert caps == {"openai_fake": {"openai:fake": 2}, "openai_wide": {}}
