"""The Ray backend measured: a sweep on local Ray against the local backend, and Ray's fixed
split of the limits against a limiter actor that every worker asks per call.

1. Sweep. A FakeOpenAIServer in a process of its own answers every call after LATENCY seconds.
   A sweep of 4 cells (vanilla and llm_debate 3 x 2, on `arith` and on `arith` at difficulty 4;
   `--limit LIMIT`, one repeat, no cache, concurrency CAP) runs through the CLI as a user runs it,
   `maslab sweep FILE --quiet` (local) and `maslab sweep FILE --backend ray --workers WORKERS
   --quiet` (ray). Per backend: the command's wall time; the model window (the server's first
   request arrival to its last answer) and its ratio to the bound max(calls x latency / CAP,
   2 rounds x latency); start-up (command start to first request) and wind-down (last answer
   to exit); overhead per task, (wall - window) / tasks; requests served and the peak in
   flight (at most CAP); CPU. The command's own CPU (wait4) holds only itself and the
   children it reaped: Ray's workers, raylet and GCS run in other processes, so the process
   tree's CPU and resident memory are also sampled from /proc while it runs. Both backends must
   write the same records (each cell's results.jsonl by (task_id, repeat), elapsed_s and every
   latency_s aside).

2. Fixed split against a limiter actor, on a local Ray of 2 CPUs. Two worker actors each
   make simulated calls (a call: `await asyncio.sleep(latency)`), up to CAP-LIMIT at once in all.
   Fixed split (the library's way): each worker holds its own semaphore of CAP-LIMIT // 2.
   Limiter: one async actor holds a semaphore of CAP-LIMIT; each worker runs up to CAP-LIMIT calls
   at once, each acquiring through the actor first and releasing after (the release is sent, not
   waited for). Per latency: calls/s, and the added latency per call, (wall - ideal) over the
   calls each of the CAP-LIMIT slots makes in sequence, where ideal = calls x latency /
   CAP-LIMIT. Then the imbalance where the fixed split loses: one worker has 10x the calls of
   the other, so half the cap idles while it finishes. A verdict is computed from the figures.

    python perf/ray_sweep.py [--latency 0.2] [--cap 64] [--limit 64] [--workers 2]
                             [--calls 4000] [--cap-limit 64] [--call-latency 0 0.05]
                             [--only {sweep,limiter}] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from benchkit import (
    ServerProcess,
    above_zero,
    arguments,
    maslab_command,
    print_machine,
    print_table,
    run_measured,
    spread,
    write_json,
)

METHODS = ("vanilla", "{name: llm_debate, config: {agents: 3, rounds: 2}, label: debate-3x2}")
BENCHMARKS = ("arith", "{name: arith, options: {difficulty: 4}, label: arith-d4}")
TICK = os.sysconf("SC_CLK_TCK")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
ROUNDS = 2  # dependent rounds of model calls in a sample, at most (debate's)
IMBALANCE = 10  # the busier worker's calls over the other's


# -- part 1: the sweep on each backend ------------------------------------------------------


def sweep_file(directory: Path, base_url: str, limit: int, cap: int) -> Path:
    methods = "".join(f"  - {entry}\n" for entry in METHODS)
    benchmarks = "".join(f"  - {entry}\n" for entry in BENCHMARKS)
    path = directory / "sweep.yaml"
    path.write_text(
        f"out: {directory / 'runs'}\nmodels: ['openai:fake@{base_url}']\nmethods:\n{methods}"
        f"benchmarks:\n{benchmarks}limit: {limit}\nrepeats: 1\ncache: false\n"
        f"concurrency: {cap}\n"
    )
    return path


class TreeWatch:
    """Samples a process tree from /proc (every process whose parent chain reaches the root):
    each process's CPU seconds as last seen (so one that exits between samples misses its last
    moments), and the peak of the tree's summed resident memory (shared pages count once per
    process)."""

    def __init__(self) -> None:
        self.cpu: dict[int, float] = {}
        self.peak_rss_mb = 0.0

    def __call__(self, root: int) -> None:
        stats: dict[int, list[str]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    text = Path(entry.path, "stat").read_text()
                except OSError:
                    continue
                stats[int(entry.name)] = text[text.rindex(")") + 2 :].split()
        children: dict[int, list[int]] = {}
        for pid, fields in stats.items():
            children.setdefault(int(fields[1]), []).append(pid)
        tree, todo = [], [root]
        while todo:
            pid = todo.pop()
            if pid in stats:
                tree.append(pid)
                todo += children.get(pid, [])
        rss = 0.0
        for pid in tree:
            fields = stats[pid]  # utime and stime are fields 14 and 15, rss 24 (1-based)
            self.cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
            rss += int(fields[21]) * PAGE_MB
        self.peak_rss_mb = max(self.peak_rss_mb, rss)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())


def _without_latencies(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_latencies(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [_without_latencies(v) for v in value]
    return value


def records(runs: Path) -> dict[tuple[str, str, int], Any]:
    """Every cell's records by (cell, task_id, repeat), without elapsed_s or any latency_s."""
    found = {}
    for results in sorted(runs.rglob("results.jsonl")):
        cell = str(results.parent.relative_to(runs))
        for line in results.read_bytes().splitlines():
            record = orjson.loads(line)
            record.pop("elapsed_s", None)
            found[(cell, record["task_id"], record["repeat"])] = _without_latencies(record)
    return found


def sweep_on(
    backend: str, server: ServerProcess, args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, Any], dict[tuple[str, str, int], Any]]:
    """One sweep on ``backend`` against ``server``: its row, and its records."""
    directory = tmp / backend
    directory.mkdir()
    sweep = sweep_file(directory, server.url, args.limit, args.cap)
    ray = ["--backend", "ray", "--workers", str(args.workers)] if backend == "ray" else []
    watch = TreeWatch()
    server.reset()
    command = [*maslab_command(), "sweep", str(sweep), "--quiet", *ray]
    run = run_measured(command, directory / "sweep.log", watch=watch, every_s=0.1)
    run.check(ok=(0,))
    stats = server.stats()
    found = records(directory / "runs")
    window = stats["last_answer"] - stats["first_arrival"]
    bound = max(stats["served"] * args.latency / args.cap, ROUNDS * args.latency)
    row = {
        "backend": backend,
        "tasks": len(found),
        "wall_s": run.wall,
        "model_window_s": window,
        "window_over_bound": window / bound,
        "startup_s": stats["first_arrival"] - run.started,
        "wind_down_s": run.ended - stats["last_answer"],
        "overhead_ms_per_task": (run.wall - window) / len(found) * 1000,
        "served": stats["served"],
        "requests": stats["requests"],
        "peak_in_flight": stats["peak_in_flight"],
        "cpu_s": run.cpu_s,
        "tree_cpu_s": watch.cpu_s,
        "processes": len(watch.cpu),
        "peak_rss_mb": run.peak_rss_mb,
        "tree_peak_rss_mb": watch.peak_rss_mb,
    }
    return row, found


SWEEP_COLUMNS = [
    ("backend", "backend"), ("tasks", "tasks"), ("wall_s", "wall s", "{:.2f}"),
    ("model_window_s", "window s", "{:.2f}"), ("window_over_bound", "window/bound", "{:.2f}"),
    ("startup_s", "start-up s", "{:.2f}"), ("wind_down_s", "wind-down s", "{:.2f}"),
    ("overhead_ms_per_task", "overhead ms/task", "{:.1f}"), ("served", "served"),
    ("peak_in_flight", "peak"), ("cpu_s", "CPU s (wait4)", "{:.1f}"),
    ("tree_cpu_s", "CPU s (tree)", "{:.1f}"), ("processes", "procs"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"), ("tree_peak_rss_mb", "tree RSS MB", "{:.0f}"),
]  # fmt: skip


def sweeps(args: argparse.Namespace) -> dict[str, Any]:
    print(f"\n1. sweep: 2 methods x 2 benchmarks, --limit {args.limit}, concurrency {args.cap}, "
          f"latency {args.latency * 1000:.0f} ms; ray: --workers {args.workers}")  # fmt: skip
    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        local, local_records = sweep_on("local", server, args, Path(tmp))
        on_ray, ray_records = sweep_on("ray", server, args, Path(tmp))
    rows = [local, on_ray]
    print_table(rows, SWEEP_COLUMNS)
    identical = local_records == ray_records
    differing = sum(local_records.get(k) != v for k, v in ray_records.items())
    differing += len(local_records.keys() - ray_records.keys())
    within_cap = all(row["peak_in_flight"] <= args.cap for row in rows)
    ratio = on_ray["wall_s"] / local["wall_s"]
    windows = on_ray["model_window_s"] / local["model_window_s"]
    print(f"ray / local: wall {ratio:.2f}, model window {windows:.2f}")
    print(f"records identical: {'yes' if identical else f'NO ({differing} differ)'}; "
          f"peak in flight within {args.cap}: {'yes' if within_cap else 'NO'}")  # fmt: skip
    print("CPU (wait4) is the command and the children it reaped; Ray's workers, raylet and GCS "
          "run elsewhere: CPU (tree) sums the process tree sampled every 0.1 s")  # fmt: skip
    return {
        "runs": rows,
        "ray_over_local_wall": ratio,
        "records_identical": identical,
        "records_differing": differing,
        "peak_within_cap": within_cap,
    }


# -- part 2: fixed split against a limiter actor --------------------------------------------


class Limiter:
    """One semaphore of the whole cap, asked by every worker for every call."""

    def __init__(self, cap: int) -> None:
        self.free = asyncio.Semaphore(cap)

    async def acquire(self) -> None:
        await self.free.acquire()

    async def release(self) -> None:
        self.free.release()


class Caller:
    """A worker making simulated calls, at most ``cap`` at once, each through ``limiter`` when
    one is given."""

    async def ready(self) -> None:
        """Answers once the actor is up."""

    async def run(self, calls: int, latency: float, cap: int, limiter: Any | None) -> float:
        local = asyncio.Semaphore(cap)

        async def call() -> None:
            async with local:
                if limiter is not None:
                    await limiter.acquire.remote()
                await asyncio.sleep(latency)
                if limiter is not None:
                    limiter.release.remote()

        started = time.perf_counter()
        await asyncio.gather(*(call() for _ in range(calls)))
        return time.perf_counter() - started

    async def round_trips(self, limiter: Any, count: int) -> list[float]:
        """``count`` acquire round trips to an idle limiter, one after another (seconds)."""
        times = []
        for _ in range(count):
            started = time.perf_counter()
            await limiter.acquire.remote()
            times.append(time.perf_counter() - started)
            await limiter.release.remote()
        return times


def limited(ray: Any, design: str, calls: list[int], latency: float, cap: int) -> dict[str, Any]:
    """The workers make ``calls[i]`` calls each under ``design`` (fixed or limiter)."""
    callers = [ray.remote(num_cpus=1)(Caller).remote() for _ in calls]
    ray.get([caller.ready.remote() for caller in callers])
    limiter = None
    if design == "limiter":
        limiter = ray.remote(num_cpus=0, max_concurrency=10_000)(Limiter).remote(cap)
    per_worker = cap if limiter is not None else cap // len(calls)
    started = time.perf_counter()
    ray.get(
        [c.run.remote(n, latency, per_worker, limiter) for c, n in zip(callers, calls, strict=True)]
    )
    wall = time.perf_counter() - started
    for actor in [*callers, *([limiter] if limiter is not None else [])]:
        ray.kill(actor)
    total = sum(calls)
    ideal = total * latency / cap
    return {
        "design": design,
        "latency_ms": latency * 1000,
        "calls": "+".join(str(n) for n in calls),
        "wall_s": wall,
        "ideal_s": ideal,
        "calls_per_s": total / wall,
        "added_ms_per_call": (wall - ideal) / (total / cap) * 1000,
    }


LIMITER_COLUMNS = [
    ("design", "design"), ("latency_ms", "latency ms", "{:.0f}"), ("calls", "calls"),
    ("wall_s", "wall s", "{:.3f}"), ("ideal_s", "ideal s", "{:.3f}"),
    ("calls_per_s", "calls/s", "{:,.0f}"), ("added_ms_per_call", "added ms/call", "{:.2f}"),
]  # fmt: skip


def verdict(balanced: list[dict[str, Any]], uneven: list[dict[str, Any]], rtt_ms: float) -> str:
    """A paragraph that reads the figures: the ceiling one actor puts on every worker's calls,
    and at each latency above 0 the limiter's cost when the load is even and its gain when it
    is not (each a ratio of walls: above 1, the limiter is the slower)."""
    row = {(r["design"], r["latency_ms"], r["calls"]): r for r in balanced + uneven}
    even, skew = balanced[0]["calls"], uneven[0]["calls"]
    fast = min(r["latency_ms"] for r in balanced)
    ceiling = row["limiter", fast, even]["calls_per_s"]
    text = (
        f"A limiter actor adds a round trip to every call ({rtt_ms:.2f} ms median to an idle "
        f"one) and funnels every worker's calls through one actor, which served "
        f"{ceiling:,.0f} calls/s at {fast:.0f} ms against the fixed split's "
        f"{row['fixed', fast, even]['calls_per_s']:,.0f}. "
    )
    better = []
    for latency in sorted({r["latency_ms"] for r in uneven}):
        cost = row["limiter", latency, even]["wall_s"] / row["fixed", latency, even]["wall_s"]
        gain = row["fixed", latency, skew]["wall_s"] / row["limiter", latency, skew]["wall_s"]
        text += (
            f"At {latency:.0f} ms that rate keeps about {ceiling * latency / 1000:,.0f} calls in "
            f"flight (Little's law); with even work it took {cost:.2f}x the fixed split's wall "
            f"({row['limiter', latency, even]['added_ms_per_call']:.2f} against "
            f"{row['fixed', latency, even]['added_ms_per_call']:.2f} ms added per call), and "
            f"with one worker holding {IMBALANCE}x the other's calls the fixed split took "
            f"{gain:.2f}x the limiter's wall ({row['fixed', latency, skew]['wall_s']:.2f} s "
            f"against {row['limiter', latency, skew]['wall_s']:.2f} s, ideal "
            f"{row['fixed', latency, skew]['ideal_s']:.2f} s). "
        )
        if gain > 1 and gain > cost:
            better.append(f"{latency:.0f} ms")
    if better:
        text += (
            f"The limiter wins at {', '.join(better)}, where uneven work costs the fixed split "
            "more than the limiter costs even work; it loses wherever cap / latency nears "
            f"{ceiling:,.0f} calls/s."
        )
    else:
        text += (
            "The fixed split is the better design at every latency measured: the limiter's "
            f"ceiling of {ceiling:,.0f} calls/s costs more than the idle share of the cap that "
            "uneven work leaves the fixed split."
        )
    return text


def limiters(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    cap, n = args.cap_limit, args.calls
    print(f"\n2. fixed split against a limiter actor: 2 workers, cap {cap}, {n} calls each "
          f"(uneven: {n} and {n // IMBALANCE})")  # fmt: skip
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # one per worker
    try:
        probe = ray.remote(num_cpus=1)(Caller).remote()
        limiter = ray.remote(num_cpus=0)(Limiter).remote(cap)
        rtt_ms = spread(ray.get(probe.round_trips.remote(limiter, 500)))["median"] * 1000
        ray.kill(probe)
        ray.kill(limiter)
        even = [n, n]
        uneven = [n, n // IMBALANCE]
        balanced = [
            limited(ray, design, even, latency, cap)
            for latency in args.call_latency
            for design in ("fixed", "limiter")
        ]
        skewed = [
            limited(ray, design, uneven, latency, cap)
            for latency in args.call_latency
            if latency > 0
            for design in ("fixed", "limiter")
        ]
    finally:
        ray.shutdown()
    print_table(balanced + skewed, LIMITER_COLUMNS)
    print(f"an acquire round trip to an idle limiter: {rtt_ms:.2f} ms median")
    text = verdict(balanced, skewed, rtt_ms)
    print(f"\nverdict: {text}")
    return {"round_trip_ms": rtt_ms, "balanced": balanced, "uneven": skewed, "verdict": text}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--latency", type=above_zero, default=0.2, help="seconds per call")
    parser.add_argument("--cap", type=int, default=64, help="the sweep's concurrency")
    parser.add_argument("--limit", type=int, default=64, help="tasks per cell")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers")
    parser.add_argument("--calls", type=int, default=4000, help="simulated calls per worker")
    parser.add_argument("--cap-limit", type=int, default=64, help="the simulated calls' cap")
    parser.add_argument("--call-latency", type=float, nargs="+", default=[0.0, 0.05])
    parser.add_argument("--only", choices=("sweep", "limiter"), help="run one part only")
    args = parser.parse_args()
    if 0 not in args.call_latency or not any(latency > 0 for latency in args.call_latency):
        parser.error("--call-latency needs 0 and at least one latency above 0")
    figures: dict[str, Any] = {"machine": print_machine(), "settings": vars(args)}
    if args.only != "limiter":
        figures["sweep"] = sweeps(args)
    if args.only != "sweep":
        figures["limiter"] = limiters(args)
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
