"""``--backend ray`` on a local Ray with two workers, against the fake server: the same records
as the local backend, the driver the single writer (a killed worker's samples run again, none
twice), endpoint limits shared across workers, and the response cache replayed from any worker;
the command on a Ray it starts and on a running cluster it joins (``ray start --head``), which
it leaves running, printing under ``--quiet`` only what the local backend prints.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

import maslab
from maslab.api import ray_cluster
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import MethodConfig, MethodState, register_method
from maslab.core.task import Solution, Task
from maslab.errors import ConfigError
from maslab.harness.ray_backend import ATTEMPTS, RayCluster, WorkersLost
from maslab.harness.ray_watchdog import end_session, writes_under
from maslab.methods.vanilla import Vanilla
from maslab.store.run_store import RunStore
from maslab.testing import FakeOpenAIServer

pytestmark = pytest.mark.system

ray = pytest.importorskip("ray")
# the workers build this module's method from its pickled class, not by importing the module
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@register_method("dies_on_a_task")
class DiesOnATask(Vanilla):
    """Vanilla, whose worker process dies (SIGKILL) when it reaches task ``task``, for as long
    as the file ``deaths`` counts fewer than ``times`` deaths."""

    paper = category = calls = "test only"

    class Config(MethodConfig):
        task: str = ""
        deaths: str = ""
        times: int = 1

    async def solve(self, task: Task, ctx: Context) -> Solution:
        deaths = Path(self.config.deaths)
        died = len(deaths.read_text().splitlines()) if deaths.exists() else 0
        if task.id == self.config.task and died < self.config.times:
            with deaths.open("a") as log:
                log.write(f"{os.getpid()}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return await super().solve(task, ctx)


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    # "local": a Ray of its own, even where one runs already (ray start --head)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)  # fmt: skip
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(latency=0.05) as fake:
        yield fake


def records(run_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The run's result lines by (task, repeat), without what timing changes; one line per key
    (a second line of a key would be a duplicate)."""
    lines = [orjson.loads(line) for line in (run_dir / "results.jsonl").read_bytes().splitlines()]
    out = {}
    for record in lines:
        record.pop("elapsed_s")
        for usage in (record["usage"], record["scoring_usage"], *record["usage_by_model"].values()):
            usage.pop("latency_s")
        key = (record["task_id"], record["repeat"])
        assert key not in out, f"{key} recorded twice"
        out[key] = record
    return out


def sweep_file(tmp_path: Path, server: FakeOpenAIServer, out: str, cache: str | bool) -> Path:
    path = tmp_path / f"{out}.yaml"
    path.write_text(
        f"""
out: {tmp_path / out}
models: ["openai:fake@{server.base_url}"]
methods: [vanilla, {{name: llm_debate, config: {{agents: 2, rounds: 2}}}}]
benchmarks: [arith, {{name: arith, options: {{difficulty: 4}}, label: arith4}}]
limit: 6
repeats: 2
cache: {cache}
"""
    )
    return path


def cells(root: Path) -> dict[str, dict[tuple[str, int], dict[str, Any]]]:
    found = {
        str(p.parent.relative_to(root)): records(p.parent) for p in root.rglob("results.jsonl")
    }
    assert len(found) == 4
    return found


def test_a_sweep_on_ray_records_what_the_local_backend_does_and_replays_from_its_cache(
    tmp_path, server
):
    cache = tmp_path / "cache.sqlite"
    assert main(["sweep", str(sweep_file(tmp_path, server, "local", "false")), "--quiet"]) == 0
    served = server.served
    on_ray = sweep_file(tmp_path, server, "ray", str(cache))
    assert main(["sweep", str(on_ray), "--backend", "ray", "--workers", "2", "--quiet"]) == 0
    assert server.served == 2 * served  # every call made again, none twice
    assert cells(tmp_path / "ray") == cells(tmp_path / "local")

    assert main(["sweep", str(on_ray), "--backend", "ray", "--workers", "2", "--quiet"]) == 0
    assert server.served == 2 * served  # resumed: nothing left to do
    replay = sweep_file(tmp_path, server, "replay", str(cache))
    assert main(["sweep", str(replay), "--backend", "ray", "--workers", "2", "--quiet"]) == 0
    assert server.served == 2 * served  # a new run on the cluster: every call from the cache
    replayed = cells(tmp_path / "replay")
    assert all(
        r["usage"]["cached_calls"] == r["usage"]["calls"]
        for c in replayed.values()
        for r in c.values()
    )


def test_endpoint_limits_are_shared_by_the_workers_not_multiplied(tmp_path):
    with FakeOpenAIServer(latency=0.2) as slow:
        endpoints = tmp_path / "endpoints.yaml"
        endpoints.write_text(f"fake:\n  - base_url: {slow.base_url}\n    max_concurrency: 3\n")
        maslab.evaluate(
            "llm_debate",
            "arith",
            "openai:fake",
            endpoints=endpoints,
            limit=8,
            concurrency=16,
            cache=False,
            out=tmp_path / "run",
            backend="ray",
            workers=2,
            progress=False,
        )
        assert slow.served == 8 * 6
        assert slow.peak_in_flight == 3  # 2 + 1: each worker its share, together the cap


def evaluate_dying(tmp_path: Path, server: FakeOpenAIServer, times: int, **options: Any) -> Any:
    return maslab.evaluate(
        "dies_on_a_task",
        "arith",
        f"openai:fake@{server.base_url}",
        config={"task": "arith-test-0004", "deaths": str(tmp_path / "deaths"), "times": times},
        limit=10,
        concurrency=2,  # one sample at a time per worker: the death comes mid-shard
        cache=False,
        out=tmp_path / "run",
        progress=False,
        **options,
    )


def test_a_killed_workers_samples_run_again_on_another_none_lost_none_twice(tmp_path, server):
    local = evaluate_dying(tmp_path / "local", server, times=0)
    before = server.served
    result = evaluate_dying(tmp_path, server, times=1, backend="ray", workers=2, shards=2)
    assert len((tmp_path / "deaths").read_text().splitlines()) == 1  # a worker did die
    assert records(result.dir) == records(local.dir)  # all ten, each once, as run locally
    assert RunStore(result.dir).superseded() == []
    served = server.served
    assert served - before >= 10

    again = evaluate_dying(tmp_path, server, times=1, backend="ray", workers=2)
    assert server.served == served  # re-running finds nothing to do
    assert records(again.dir) == records(local.dir)


def test_a_shard_that_keeps_losing_workers_stops_its_run_and_a_re_run_resumes_it(tmp_path, server):
    with pytest.raises(WorkersLost, match=f"lost its worker {ATTEMPTS} times"):
        evaluate_dying(tmp_path, server, times=ATTEMPTS, backend="ray", workers=2, shards=2)
    assert len((tmp_path / "deaths").read_text().splitlines()) == ATTEMPTS
    saved = records(tmp_path / "run")
    assert ("arith-test-0004", 0) not in saved and len(saved) >= 5  # the other shard finished

    result = evaluate_dying(tmp_path, server, times=ATTEMPTS, backend="ray", workers=2)
    assert records(result.dir) == records(evaluate_dying(tmp_path / "local", server, 0).dir)


def test_run_on_ray_with_shards_and_the_ray_options_need_the_ray_backend(tmp_path, server, capsys):
    model = f"openai:fake@{server.base_url}"
    common = ["run", "--method", "llm_debate", "--benchmark", "arith", "--model", model,
              "--limit", "7", "--no-cache", "--quiet"]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "local")]) == 0
    ray_run = [*common, "--out", str(tmp_path / "ray"), "--backend", "ray", "--shards", "3"]
    assert main(ray_run) == 0
    assert records(tmp_path / "ray") == records(tmp_path / "local")

    capsys.readouterr()
    assert main([*common, "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--workers only go with the ray backend" in err
    with pytest.raises(ConfigError, match="unknown backend 'spark'"):
        ray_cluster("spark")


def test_without_ray_installed_the_ray_backend_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now fails
    with pytest.raises(ConfigError, match=r"pip install 'maslab\[ray\]'"):
        maslab.evaluate("vanilla", "arith", "scripted:echo", limit=1, cache=False,
                        out=tmp_path / "run", backend="ray", progress=False)  # fmt: skip


def quiet_run(out: Path, *options: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    """``maslab run ... --quiet`` of 4 tasks on a scripted model into ``out``, as a user runs
    it (``options`` added, ``env`` added to the environment, ``$RAY_ADDRESS`` left out): its
    stdout, with ``out`` written OUT, and its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "maslab.cli", "run", "--method", "vanilla", "--benchmark", "arith",
         "--model", "scripted:echo", "--limit", "4", "--no-cache", "--quiet", "--out", str(out),
         *options],
        capture_output=True, text=True, timeout=180,
        env={**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.replace(str(out), "OUT"), done.stderr


def test_the_command_starts_its_own_local_ray_and_stops_it_quietly(tmp_path):
    local = quiet_run(tmp_path / "local")
    assert quiet_run(tmp_path / "run", "--backend", "ray", "--workers", "2") == local
    assert records(tmp_path / "run") == records(tmp_path / "local")


@pytest.fixture
def running_cluster() -> Iterator[tuple[dict[str, str], list[int]]]:
    """A Ray cluster of 2 CPUs started with ``ray start --head``, as the docs say, in a Ray
    temporary directory of its own: the environment that has ``--address auto`` find it (and
    no other Ray of the machine), and its processes. On the way out they are killed, not ``ray
    stop``-ped, which would stop every Ray of the machine."""
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths are limited
    env = {"RAY_TMPDIR": tmp}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    session = Path(tmp, "ray", "session_latest")
    try:
        subprocess.run(
            [str(Path(sys.executable).with_name("ray")), "start", "--head", f"--port={port}",
             "--num-cpus=2", "--disable-usage-stats", "--include-dashboard=false"],
            env={**os.environ, **env}, capture_output=True, check=True, timeout=120,
        )  # fmt: skip
        session = session.resolve()
        yield (
            env,
            [int(p) for p in os.listdir("/proc") if p.isdigit() and writes_under(p, str(session))],
        )
    finally:
        if session.is_dir():
            end_session(str(session))
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_command_joins_a_running_cluster_quietly_and_leaves_it_running(tmp_path, running_cluster):
    env, cluster = running_cluster
    local = quiet_run(tmp_path / "local")
    joined = ["--backend", "ray", "--address", "auto", "--workers", "2"]
    assert quiet_run(tmp_path / "joined", *joined, env=env) == local
    assert records(tmp_path / "joined") == records(tmp_path / "local")
    gone = [pid for pid in cluster if (fields := stat_fields(pid)) is None or fields[0] == "Z"]
    assert cluster and gone == []  # the cluster runs on


def test_without_an_address_a_local_ray_starts_even_where_a_cluster_runs(monkeypatch):
    """Ray's own default joins the cluster last started on the machine, whose processes the
    watchdog of "our" local Ray would then kill; with an address the command joins, with no
    watchdog (closing only disconnects)."""
    calls: list[dict[str, Any]] = []
    node = SimpleNamespace(get_session_dir_path=lambda: "/session")
    fake = SimpleNamespace(
        init=lambda **options: calls.append(options),
        _private=SimpleNamespace(worker=SimpleNamespace(_global_node=node)),
    )
    monkeypatch.setattr("maslab.harness.ray_backend.watch", lambda session: f"watching {session}")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    started, joined = RayCluster(workers=2), RayCluster("auto")
    started._connect(fake)
    joined._connect(fake)
    assert [options["address"] for options in calls] == ["local", "auto"]
    assert started._watchdog == "watching /session" and joined._watchdog is None


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command: state, ppid, ... (start time at
    19); None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(root: int) -> set[tuple[int, str]]:
    """Each process under ``root``, as its pid and start time (which a reused pid changes)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and (fields := stat_fields(int(proc.name))):
            children.setdefault(int(fields[1]), []).append((int(proc.name), fields[19]))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def running(process: tuple[int, str]) -> bool:
    fields = stat_fields(process[0])
    return fields is not None and fields[0] != "Z" and fields[19] == process[1]


def test_the_local_ray_of_a_command_killed_with_sigkill_ends_with_it(tmp_path):
    """Without maslab's watchdog, the raylet's agents outlive a ``kill -9`` by a minute."""
    stderr = tmp_path / "stderr"
    with FakeOpenAIServer(latency=60) as slow, stderr.open("w") as log:  # in flight till the kill
        driver = subprocess.Popen(
            [sys.executable, "-m", "maslab.cli", "run", "--method", "vanilla", "--benchmark",
             "arith", "--model", f"openai:fake@{slow.base_url}", "--limit", "2", "--no-cache",
             "--quiet", "--out", str(tmp_path / "run"), "--backend", "ray", "--workers", "2"],
            stdout=subprocess.DEVNULL, stderr=log,
            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        )  # fmt: skip
        ray_processes: set[tuple[int, str]] = set()
        try:
            deadline = time.monotonic() + 120
            while slow.requests == 0:  # a worker asks: Ray is up, agents and all
                assert driver.poll() is None and time.monotonic() < deadline, stderr.read_text()
                time.sleep(0.1)
            ray_processes = descendants(driver.pid)
            driver.kill()
            driver.wait()
            deadline = time.monotonic() + 30
            while (left := set(filter(running, ray_processes))) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not left, f"{len(left)} of Ray's {len(ray_processes)} processes outlived it"
        finally:
            driver.kill()
            for pid, _ in filter(running, ray_processes):
                os.kill(pid, signal.SIGKILL)


@register_method("counts_what_it_learned")
class CountsWhatItLearned(Vanilla):
    """Vanilla that learns how many tasks its optimisation step saw, and says so per sample."""

    paper = category = calls = "test only"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.learned: int | None = None

    async def optimize(self, tasks: Any, ctx: Context) -> None:
        self.learned = len(tasks)

    class LearnedState(MethodState):
        tasks: int

    def learned_state(self) -> CountsWhatItLearned.LearnedState | None:
        return None if self.learned is None else self.LearnedState(tasks=self.learned)

    def load_learned_state(self, state: CountsWhatItLearned.LearnedState) -> None:
        self.learned = state.tasks

    async def solve(self, task: Task, ctx: Context) -> Solution:
        solution = await super().solve(task, ctx)
        return Solution(answer=solution.answer, metadata={"learned": self.learned})


def test_the_optimisation_step_runs_on_the_driver_and_the_workers_get_what_it_learned(tmp_path):
    result = maslab.evaluate(
        "counts_what_it_learned", "arith", "scripted:echo", limit=4, optimize_on="dev",
        optimize_limit=3, cache=False, out=tmp_path / "run", backend="ray", workers=2,
        progress=False,
    )  # fmt: skip
    assert [r.metadata["learned"] for r in result.records] == [3] * 4


def test_ray_client_without_a_reachable_cache_is_refused_before_connecting(tmp_path):
    with pytest.raises(ConfigError, match="--no-cache"):
        maslab.evaluate("vanilla", "arith", "scripted:echo", limit=1, out=tmp_path / "run",
                        cache=tmp_path / "cache.sqlite", backend="ray",
                        address="ray://127.0.0.1:1", progress=False)  # fmt: skip
    assert not (tmp_path / "run" / "results.jsonl").exists()
