"""The Ray backend measured: a run and a sweep on the local backend, on a Ray the command starts
and on a running Ray cluster it joins; then Ray's fixed split of the limits against a limiter
actor that every worker asks per call.

1. Run and sweep. A FakeOpenAIServer in a process of its own answers every call after LATENCY
   seconds. The run is `maslab run --method llm_debate --benchmark arith --limit RUN_LIMIT`
   (3 agents x 2 rounds); the sweep has 4 cells (vanilla and llm_debate 3 x 2, on `arith` and
   on `arith` at difficulty 4; `--limit LIMIT`). Both: one repeat, no cache (with `--cache`, a
   fresh one per command), concurrency CAP, `--quiet`, through the CLI as a user runs them,
   once per backend:
   - local: no backend options;
   - ray: `--backend ray --workers WORKERS`, which starts a local Ray and stops it;
   - ray, joined: the same with `--address`, joining a running cluster: the one `--address
     ADDR` names, or with `--start-cluster` one this script starts before these rows (`ray
     start --head --num-cpus WORKERS --disable-usage-stats --include-dashboard=false`, in a Ray
     temporary directory of its own, so that `--address auto` finds it and no other Ray) and
     stops after, by killing the processes that write in its session directory (`ray stop
     --force` would stop every Ray on the machine). A fresh cluster has a worker process per
     CPU started for its first command only, so an unmeasured run of 2 tasks goes first: the
     rows measure the commands that follow, as most are.
   Per row: the command's wall time; start-up (command start to the server's first request)
   and wind-down (last answer to exit), each also over the local row's; the model window (the
   first request to the last answer) and its ratio to the bound max(calls x latency / CAP,
   2 rounds x latency); overhead per task over local, (wall - local wall) / tasks, and the part
   of it that is neither start-up nor wind-down, (window - local window) / tasks; requests
   served and the peak in flight (at most CAP); CPU; the load average (1 min) at the row's
   start. The command's own CPU (wait4) holds only itself and the children it reaped: Ray's
   workers, raylet and GCS run in other processes, so the process tree's CPU and resident
   memory are also sampled from /proc while it runs; with `--start-cluster` a joined row's tree
   takes in the cluster's processes (its workers among them), their CPU counted from the
   command's start.
   Every row must write the same records (by task_id and repeat, elapsed_s and every latency_s
   aside). Against the targets (a joined cluster adds at most 1 s of start-up and 2 ms per task
   over local) the script prints met or missed for the joined rows, per task both ways.

2. Fixed split against a limiter actor, on a local Ray of 2 CPUs. Two worker actors each
   make simulated calls (a call: `await asyncio.sleep(latency)`), up to CAP-LIMIT at once in all.
   Fixed split (the library's way): each worker holds its own semaphore of CAP-LIMIT // 2.
   Limiter: one async actor holds a semaphore of CAP-LIMIT; each worker runs up to CAP-LIMIT calls
   at once, each acquiring through the actor first and releasing after (the release is sent, not
   waited for). Per latency: calls/s, and the added latency per call, (wall - ideal) over the
   calls each of the CAP-LIMIT slots makes in sequence, where ideal = calls x latency /
   CAP-LIMIT. Then the imbalance where the fixed split loses: one worker has 10x the calls of
   the other, so half the cap idles while it finishes. A verdict is computed from the figures.

    python perf/ray_sweep.py [--latency 0.2] [--cap 64] [--run-limit 64] [--limit 64]
                             [--workers 2] [--cache] [--address ADDR | --start-cluster]
                             [--calls 4000] [--cap-limit 64] [--call-latency 0 0.05]
                             [--only {run,sweep,limiter} ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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

from maslab.harness.ray_watchdog import end_session, writes_under

METHODS = ("vanilla", "{name: llm_debate, config: {agents: 3, rounds: 2}, label: debate-3x2}")
BENCHMARKS = ("arith", "{name: arith, options: {difficulty: 4}, label: arith-d4}")
TICK = os.sysconf("SC_CLK_TCK")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
ROUNDS = 2  # dependent rounds of model calls in a sample, at most (debate's)
IMBALANCE = 10  # the busier worker's calls over the other's
STARTUP_TARGET_S = 1.0  # a joined cluster's start-up over the local backend's, at most
TASK_TARGET_MS = 2.0  # and its overhead per task over the local backend's


# -- part 1: a run and a sweep on each backend -----------------------------------------------


def sweep_file(
    directory: Path, base_url: str, limit: int, cap: int, cache: Path | None = None
) -> Path:
    methods = "".join(f"  - {entry}\n" for entry in METHODS)
    benchmarks = "".join(f"  - {entry}\n" for entry in BENCHMARKS)
    path = directory / "sweep.yaml"
    path.write_text(
        f"out: {directory / 'runs'}\nmodels: ['openai:fake@{base_url}']\nmethods:\n{methods}"
        f"benchmarks:\n{benchmarks}limit: {limit}\nrepeats: 1\ncache: {cache or 'false'}\n"
        f"concurrency: {cap}\n"
    )
    return path


def _stats(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


class TreeWatch:
    """Samples process trees from /proc (every process whose parent chain reaches the root or
    one of ``others``): each process's CPU seconds as last seen, less what it had used when the
    watch began (so one that exits between samples misses its last moments), and the peak of
    the trees' summed resident memory (shared pages count once per process)."""

    def __init__(self, others: Sequence[int] = ()) -> None:
        self.others = list(others)
        self.cpu: dict[int, float] = {}
        self.peak_rss_mb = 0.0
        self.before: dict[int, float] = {}
        if self.others:
            self.before = dict(self.cpu_and_rss(self.tree([]))[0])

    def tree(self, roots: list[int]) -> dict[int, list[str]]:
        """Every process under ``roots`` and :attr:`others`, with its ``stat`` fields."""
        stats: dict[int, list[str]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (fields := _stats(int(entry.name))) is not None:
                stats[int(entry.name)] = fields
        children: dict[int, list[int]] = {}
        for pid, fields in stats.items():
            children.setdefault(int(fields[1]), []).append(pid)
        tree, todo = {}, [*roots, *self.others]
        while todo:
            pid = todo.pop()
            if pid in stats and pid not in tree:
                tree[pid] = stats[pid]
                todo += children.get(pid, [])
        return tree

    @staticmethod
    def cpu_and_rss(tree: dict[int, list[str]]) -> tuple[dict[int, float], float]:
        """Each process's CPU seconds so far, and the tree's resident memory (MB)."""
        # utime and stime are fields 14 and 15, rss 24 (1-based)
        cpu = {pid: (int(f[11]) + int(f[12])) / TICK for pid, f in tree.items()}
        return cpu, sum(int(f[21]) for f in tree.values()) * PAGE_MB

    def __call__(self, root: int) -> None:
        cpu, rss = self.cpu_and_rss(self.tree([root]))
        self.cpu.update(cpu)
        self.peak_rss_mb = max(self.peak_rss_mb, rss)

    @property
    def cpu_s(self) -> float:
        return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.cpu.items())


def _without_latencies(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_latencies(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [_without_latencies(v) for v in value]
    return value


def records(runs: Path) -> dict[tuple[str, str, int], Any]:
    """Every run's records by (run, task_id, repeat), without elapsed_s or any latency_s."""
    found = {}
    for results in sorted(runs.rglob("results.jsonl")):
        cell = str(results.parent.relative_to(runs))
        for line in results.read_bytes().splitlines():
            record = orjson.loads(line)
            record.pop("elapsed_s", None)
            found[(cell, record["task_id"], record["repeat"])] = _without_latencies(record)
    return found


@dataclass
class Backend:
    """Where a row's samples are solved: its label, the command's options, variables added to
    its environment, and the processes of the cluster it joins when they run here."""

    label: str
    options: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cluster: list[int] = field(default_factory=list)


@contextmanager
def environment(extra: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``extra`` added (the measured command inherits it)."""
    saved = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def command(
    part: str, directory: Path, server: ServerProcess, args: argparse.Namespace
) -> list[str]:
    """The ``maslab`` command of ``part`` (run or sweep) writing under ``directory`` (and its
    fresh response cache there, with ``--cache``)."""
    cache = directory / "cache.sqlite" if args.cache else None
    if part == "sweep":
        sweep = sweep_file(directory, server.url, args.limit, args.cap, cache)
        return [*maslab_command(), "sweep", str(sweep), "--quiet"]
    return [*maslab_command(), "run", "--method", "llm_debate", "--benchmark", "arith",
            "--model", f"openai:fake@{server.url}", "--limit", str(args.run_limit),
            *(["--cache", str(cache)] if cache else ["--no-cache"]),
            "--concurrency", str(args.cap), "--quiet",
            "--out", str(directory / "runs" / "run")]  # fmt: skip


def measure(
    part: str, backend: Backend, server: ServerProcess, args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, Any], dict[tuple[str, str, int], Any]]:
    """``part`` on ``backend`` against ``server``: its row, and its records."""
    directory = tmp / f"{part}-{len(list(tmp.iterdir()))}"
    directory.mkdir()
    argv = [*command(part, directory, server, args), *backend.options]
    load = os.getloadavg()[0]
    watch = TreeWatch(backend.cluster)
    server.reset()
    with environment(backend.env):
        run = run_measured(argv, directory / "command.log", watch=watch, every_s=0.1)
    run.check(ok=(0,))
    stats = server.stats()
    found = records(directory / "runs")
    window = stats["last_answer"] - stats["first_arrival"]
    bound = max(stats["served"] * args.latency / args.cap, ROUNDS * args.latency)
    row = {
        "backend": backend.label,
        "load": load,
        "tasks": len(found),
        "wall_s": run.wall,
        "model_window_s": window,
        "window_over_bound": window / bound,
        "startup_s": stats["first_arrival"] - run.started,
        "wind_down_s": run.ended - stats["last_answer"],
        "served": stats["served"],
        "requests": stats["requests"],
        "peak_in_flight": stats["peak_in_flight"],
        "cpu_s": run.cpu_s,
        "tree_cpu_s": watch.cpu_s,
        "processes": len(watch.cpu),
        "peak_rss_mb": run.peak_rss_mb,
        "tree_peak_rss_mb": watch.peak_rss_mb,
        "output_lines": len(run.output.splitlines()),
    }
    return row, found


def over_local(rows: list[dict[str, Any]]) -> None:
    """Each row's figures over the local row's (the first): start-up, wind-down, and per task
    the whole wall's and the model window's."""
    local = rows[0]
    for row in rows:
        tasks = row["tasks"]
        row["startup_over_local_s"] = row["startup_s"] - local["startup_s"]
        row["wind_down_over_local_s"] = row["wind_down_s"] - local["wind_down_s"]
        row["overhead_ms_per_task"] = (row["wall_s"] - local["wall_s"]) / tasks * 1000
        row["window_ms_per_task"] = (row["model_window_s"] - local["model_window_s"]) / tasks * 1000


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """Each joined row against the targets, met or missed by how much: start-up, and per task
    both the whole wall's overhead and the window's (start-up and wind-down left out)."""
    lines = []
    for row in rows:
        if "joined" not in row["backend"]:
            continue
        for what, value, target, unit in (
            ("start-up over local", row["startup_over_local_s"], STARTUP_TARGET_S, "s"),
            ("overhead per task, (wall - local wall) / tasks", row["overhead_ms_per_task"],
             TASK_TARGET_MS, "ms"),
            ("per task in the window, (window - local window) / tasks",
             row["window_ms_per_task"], TASK_TARGET_MS, "ms"),
        ):  # fmt: skip
            verdict = "met" if value <= target else f"MISSED by {value - target:.2f} {unit}"
            lines.append(f"{row['backend']}: {what} {value:.2f} {unit} "
                         f"(target <= {target:g} {unit}): {verdict}")  # fmt: skip
    return lines


COLUMNS = [
    ("backend", "backend"), ("load", "load", "{:.1f}"), ("tasks", "tasks"),
    ("wall_s", "wall s", "{:.2f}"), ("model_window_s", "window s", "{:.2f}"),
    ("window_over_bound", "window/bound", "{:.2f}"), ("startup_s", "start-up s", "{:.2f}"),
    ("wind_down_s", "wind-down s", "{:.2f}"),
    ("startup_over_local_s", "start-up +s", "{:+.2f}"),
    ("wind_down_over_local_s", "wind-down +s", "{:+.2f}"),
    ("overhead_ms_per_task", "+ms/task", "{:+.1f}"),
    ("window_ms_per_task", "window +ms/task", "{:+.1f}"), ("served", "served"),
    ("peak_in_flight", "peak"), ("cpu_s", "CPU s (wait4)", "{:.1f}"),
    ("tree_cpu_s", "CPU s (tree)", "{:.1f}"), ("processes", "procs"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"), ("tree_peak_rss_mb", "tree RSS MB", "{:.0f}"),
    ("output_lines", "lines out"),
]  # fmt: skip


def free_port() -> int:
    """A TCP port free on this machine now (for the cluster's GCS)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def started_cluster(cpus: int, options: list[str]) -> Iterator[tuple[Backend, float]]:
    """A Ray cluster of ``cpus`` CPUs started here with ``ray start --head``, in a Ray
    temporary directory of its own (``RAY_TMPDIR``, which the joining command gets too, so
    that ``--address auto`` finds this cluster and no other): the backend that joins it, and
    how long ``ray start`` took. On the way out its processes (those writing in its session
    directory) are killed."""
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths are limited
    env = {"RAY_TMPDIR": tmp}
    ray = str(Path(sys.executable).with_name("ray"))
    start = [ray, "start", "--head", f"--port={free_port()}", f"--num-cpus={cpus}",
             "--disable-usage-stats", "--include-dashboard=false"]  # fmt: skip
    session = os.path.join(tmp, "ray", "session_latest")
    try:
        began = time.time()
        done = subprocess.run(start, env={**os.environ, **env}, capture_output=True, text=True)
        took = time.time() - began
        if done.returncode:
            raise RuntimeError(f"{' '.join(start)} exited {done.returncode}:\n{done.stderr}")
        session = os.path.realpath(session)
        daemons = [int(p) for p in os.listdir("/proc") if p.isdigit() and writes_under(p, session)]
        yield Backend("ray, joined", [*options, "--address", "auto"], env, daemons), took
    finally:
        if os.path.isdir(session):
            end_session(session)
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def joined(args: argparse.Namespace) -> Iterator[tuple[Backend | None, float | None]]:
    """The backend of the joined rows (None without ``--address`` or ``--start-cluster``),
    and how long starting the cluster took, if this script started it."""
    options = ["--backend", "ray", "--workers", str(args.workers)]
    if args.start_cluster:
        with started_cluster(args.workers, options) as (backend, took):
            yield backend, took
    elif args.address:
        yield Backend("ray, joined", [*options, "--address", args.address]), None
    else:
        yield None, None


def warm_up(backend: Backend, server: ServerProcess, args: argparse.Namespace, tmp: Path) -> None:
    """A run of 2 tasks on ``backend``, unmeasured: a fresh cluster starts a worker process per
    CPU for its first command only."""
    first = argparse.Namespace(**{**vars(args), "run_limit": 2})
    directory = tmp / "warm-up"
    directory.mkdir()
    with environment(backend.env):
        run = run_measured([*command("run", directory, server, first), *backend.options],
                           directory / "command.log")  # fmt: skip
    run.check(ok=(0,))


def backends_part(args: argparse.Namespace, parts: list[str]) -> dict[str, Any]:
    """Each of ``parts`` (run, sweep) on each backend: its table, records compared, targets."""
    local = Backend("local", [])
    own = Backend("ray", ["--backend", "ray", "--workers", str(args.workers)])
    rows: dict[str, list[dict[str, Any]]] = {part: [] for part in parts}
    found: dict[str, list[dict[tuple[str, str, int], Any]]] = {part: [] for part in parts}
    figures: dict[str, Any] = {}
    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        for part in parts:
            for backend in (local, own):
                row, records_ = measure(part, backend, server, args, Path(tmp))
                rows[part].append(row)
                found[part].append(records_)
        with joined(args) as (cluster, took):
            if took is not None:  # started here: its first command goes unmeasured
                figures["cluster_start_s"] = took
                warm_up(cluster, server, args, Path(tmp))
            for part in parts if cluster is not None else ():
                row, records_ = measure(part, cluster, server, args, Path(tmp))
                rows[part].append(row)
                found[part].append(records_)
    for part in parts:
        what = {
            "run": f"maslab run: llm_debate 3 x 2 on arith, --limit {args.run_limit}",
            "sweep": f"maslab sweep: 2 methods x 2 benchmarks, --limit {args.limit}",
        }[part]
        cache = "a fresh cache" if args.cache else "no cache"
        print(f"\n1. {what}, concurrency {args.cap}, latency {args.latency * 1000:.0f} ms, "
              f"{cache}; ray: --workers {args.workers}")  # fmt: skip
        if "cluster_start_s" in figures:
            print(
                f"the cluster (ray start --head) took {figures['cluster_start_s']:.2f} s to start"
            )
        over_local(rows[part])
        print_table(rows[part], COLUMNS)
        reference = found[part][0]
        differing = sum(
            sum(reference.get(k) != v for k, v in other.items())
            + len(reference.keys() - other.keys())
            for other in found[part][1:]
        )
        within_cap = all(row["peak_in_flight"] <= args.cap for row in rows[part])
        print(f"records identical: {'yes' if not differing else f'NO ({differing} differ)'}; "
              f"peak in flight within {args.cap}: {'yes' if within_cap else 'NO'}")  # fmt: skip
        lines = verdicts(rows[part])
        for line in lines:
            print(line)
        figures[part] = {
            "runs": rows[part],
            "ray_over_local_wall": rows[part][1]["wall_s"] / rows[part][0]["wall_s"],
            "records_identical": not differing,
            "records_differing": differing,
            "peak_within_cap": within_cap,
            "targets": lines,
        }
    print("CPU (wait4) is the command and the children it reaped; Ray's workers, raylet and GCS "
          "run elsewhere: CPU (tree) sums the process tree sampled every 0.1 s (a joined row's "
          "takes in the processes of a cluster started here)")  # fmt: skip
    return figures


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
    # a Ray of its own (address="local"), not one already running here: one CPU per worker
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
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
    parser.add_argument("--cap", type=int, default=64, help="the run's and the sweep's concurrency")
    parser.add_argument("--run-limit", type=int, default=64, help="the run's tasks")
    parser.add_argument("--limit", type=int, default=64, help="tasks per cell of the sweep")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="give every run a fresh response cache (on Ray: served by the cache actor)",
    )
    cluster = parser.add_mutually_exclusive_group()
    cluster.add_argument("--address", help="also join this running Ray cluster (--address)")
    cluster.add_argument(
        "--start-cluster",
        action="store_true",
        help="also join a cluster this script starts (ray start --head) and stops",
    )
    parser.add_argument("--calls", type=int, default=4000, help="simulated calls per worker")
    parser.add_argument("--cap-limit", type=int, default=64, help="the simulated calls' cap")
    parser.add_argument("--call-latency", type=float, nargs="+", default=[0.0, 0.05])
    parser.add_argument(
        "--only", nargs="+", choices=("run", "sweep", "limiter"), help="run these parts only"
    )
    args = parser.parse_args()
    if 0 not in args.call_latency or not any(latency > 0 for latency in args.call_latency):
        parser.error("--call-latency needs 0 and at least one latency above 0")
    figures: dict[str, Any] = {"machine": print_machine(), "settings": vars(args)}
    only = set(args.only or ("run", "sweep", "limiter"))
    if only & {"run", "sweep"}:
        figures.update(backends_part(args, [part for part in ("run", "sweep") if part in only]))
    if "limiter" in only:
        figures["limiter"] = limiters(args)
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
