"""The sandbox contains hostile code: loops, fork bombs, huge allocations and outputs, snooping."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import tracemalloc
import uuid
from contextlib import suppress
from pathlib import Path

import pytest

from maslab import sandbox
from maslab.errors import ConfigError
from maslab.sandbox import (
    BACKEND_VARIABLE,
    IsolationMissing,
    Limits,
    arun_python,
    missing_isolation,
    protections,
    require_isolation,
    run_python,
    unsafe_no_sandbox,
)

pytestmark = pytest.mark.system

# The first line a run prints: its cwd and pid namespace, which find its processes from outside.
PRINT_WHERE = "import os\nprint(os.getcwd(), os.readlink('/proc/self/ns/pid'), flush=True)\n"


@pytest.fixture(autouse=True)
def sandbox_tmp(tmp_path, monkeypatch):
    """A private directory for the runs' host directories, to check that none is left behind."""
    directory = tmp_path / "sandbox-tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def processes_of(where: str) -> list[int]:
    """Live host processes of the run that printed ``where``: in its pid namespace if it had one,
    else with its working directory."""
    cwd, pid_namespace = where.split()
    own_namespace = pid_namespace != os.readlink("/proc/self/ns/pid")
    found = []
    for proc in Path("/proc").iterdir():
        with suppress(OSError):
            if not proc.name.isdigit():
                continue
            if own_namespace:
                hit = os.readlink(proc / "ns" / "pid") == pid_namespace
            else:
                hit = os.readlink(proc / "cwd").startswith(cwd)
            if hit:
                found.append(int(proc.name))
    return found


def zombie_children() -> list[int]:
    """Children of this process that have exited but were never reaped."""
    found = []
    for proc in Path("/proc").iterdir():
        with suppress(OSError):
            status = (proc / "status").read_text() if proc.name.isdigit() else ""
            if "State:\tZ" in status and f"\nPPid:\t{os.getpid()}\n" in status:
                found.append(int(proc.name))
    return found


def assert_nothing_left(where: str, sandbox_tmp: Path) -> None:
    assert processes_of(where) == []
    assert zombie_children() == []
    assert list(sandbox_tmp.iterdir()) == []


def test_runs_code_with_stdin_and_files():
    code = (
        "import sys, helper\n"
        "print(sys.stdin.read().upper(), open('data/in.txt').read(), helper.VALUE)\n"
    )
    files = {"data/in.txt": "from a file", "helper.py": "VALUE = 42\n"}

    result = run_python(code, stdin="from stdin", files=files)

    assert result.status == "ok" and result.passed
    assert result.returncode == 0
    assert result.stdout == "FROM STDIN from a file 42\n"
    assert result.stderr == ""


def test_files_must_stay_inside_the_work_dir():
    with pytest.raises(ConfigError):
        run_python("pass", files={"../escaped.txt": "x"})
    with pytest.raises(ConfigError):
        run_python("pass", files={"main.py": "print('not the program')"})


def test_non_zero_exit_is_an_error():
    result = run_python("import sys\nprint('partial')\nsys.exit(3)")
    assert (result.status, result.returncode, result.stdout) == ("error", 3, "partial\n")
    assert not result.passed

    result = run_python("raise ValueError('boom')")
    assert result.status == "error"
    assert result.stderr.strip().splitlines()[-1] == "ValueError: boom"


@pytest.mark.parametrize("sig", [15, 9])
def test_death_by_signal_is_killed(sig):
    result = run_python(f"import os\nos.kill(os.getpid(), {sig})")
    assert (result.status, result.returncode) == ("killed", -sig)


def test_temp_dir_is_removed_and_is_the_home(sandbox_tmp):
    code = (
        PRINT_WHERE + "print(os.environ['HOME'], os.environ['TMPDIR'])\nopen('x', 'w').write('x')"
    )
    result = run_python(code)
    where, homes = result.stdout.splitlines()
    cwd = where.split()[0]
    assert result.passed and homes.split() == [cwd, cwd]
    assert (cwd == "/sandbox") == protections()["filesystem"]
    assert_nothing_left(where, sandbox_tmp)


def test_cannot_read_secrets_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    code = "import os\nprint(os.environ.get('OPENAI_API_KEY'))\nprint(*sorted(os.environ))"
    result = run_python(code)
    key, names = result.stdout.splitlines()
    assert key == "None"
    assert "sk-secret" not in result.stdout
    # The whole environment: nothing is inherited.
    assert set(names.split()) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "HOME",
        "TMPDIR",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
    }


def test_infinite_loop_hits_the_wall_limit(sandbox_tmp):
    result = run_python(PRINT_WHERE + "while True:\n    pass", limits=Limits(wall_seconds=2))
    # the wall limit ended it (returncode None: cut short), not the CPU limit (SIGXCPU)
    assert result.status == "timeout" and result.returncode is None
    assert result.duration_s >= 1.9
    assert_nothing_left(result.stdout.strip(), sandbox_tmp)


def test_cpu_limit_reports_timeout():
    result = run_python("while True:\n    pass", limits=Limits(cpu_seconds=1, wall_seconds=20))
    # the CPU limit ended it (its signal), not the wall limit (which leaves no returncode)
    assert result.status == "timeout"
    assert result.returncode in (-signal.SIGXCPU, -signal.SIGKILL)


def test_fork_bomb_is_contained(sandbox_tmp):
    if not protections()["process_limit"]:
        pytest.skip("no enforceable process limit here (root without a writable pids cgroup)")
    bomb = (
        PRINT_WHERE + "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    result = run_python(bomb, limits=Limits(wall_seconds=2, max_processes=16))

    assert result.status == "timeout" and result.returncode is None  # the wall limit ended it
    assert_nothing_left(result.stdout.splitlines()[0], sandbox_tmp)
    # The machine is fine: it can still start processes, inside the sandbox and out.
    assert subprocess.run(["true"], check=False).returncode == 0
    assert run_python("print('still fine')").stdout == "still fine\n"


def test_process_limit_caps_children(sandbox_tmp):
    if not protections()["process_limit"]:
        pytest.skip("no enforceable process limit here (root without a writable pids cgroup)")
    code = PRINT_WHERE + (
        "import time\n"
        "started = 0\n"
        "try:\n"
        "    for _ in range(50):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        started += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print(started)\n"
    )
    result = run_python(code, limits=Limits(max_processes=8))
    where, started = result.stdout.splitlines()
    assert result.passed
    assert 0 < int(started) < 8
    assert_nothing_left(where, sandbox_tmp)


def test_huge_allocation_is_a_memory_error():
    result = run_python("data = bytearray(4 * 1024**3)", limits=Limits(memory_mb=512))
    assert result.status == "memory"
    assert run_python("data = bytearray(100 * 1024**2)", limits=Limits(memory_mb=512)).passed


def test_huge_output_is_cut_off_with_bounded_parent_memory():
    limits = Limits(max_output_bytes=1_000_000, wall_seconds=60)
    tracemalloc.start()
    try:
        result = run_python("print('x' * 100_000_000)", limits=limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "output_limit"
    assert len(result.stdout) <= limits.max_output_bytes
    # cut off at the cap: a run the cap did not end (a writer blocked on a pipe nobody reads)
    # would last until its wall limit
    assert result.returncode is None and result.duration_s < limits.wall_seconds
    assert peak < 20 * 1024**2


def test_network_is_blocked():
    if not protections()["network"]:
        pytest.skip("no network namespace here (sandbox backend: none)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\n"
            "except OSError:\n"
            "    print('blocked')\n"
        )
        result = run_python(code)
        # The same connection works from outside the sandbox, so it is the sandbox that blocks.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert result.stdout == "blocked\n"


async def test_many_runs_at_once():
    code = "import sys\nprint(int(sys.stdin.read()) * 2)"
    results = await asyncio.gather(*(arun_python(code, stdin=str(i)) for i in range(8)))
    assert [r.status for r in results] == ["ok"] * 8
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(8)]


async def test_cancelling_a_run_kills_and_reaps_the_child(sandbox_tmp):
    marker = f"marker-{uuid.uuid4().hex}"
    sleeper = arun_python("import time\ntime.sleep(60)", files={marker: ""}, limits=Limits(60))
    run = asyncio.create_task(sleeper)
    where = await _where_running(marker)
    assert processes_of(where)

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert_nothing_left(where, sandbox_tmp)


async def _where_running(marker: str) -> str:
    """Where (as :data:`PRINT_WHERE` prints it) the sandboxed process with ``marker`` in its cwd
    runs, seen from outside (waiting up to a minute: a guard, not a measure of start-up)."""
    for _ in range(1200):
        for proc in Path("/proc").iterdir():
            with suppress(OSError):
                if proc.name.isdigit() and (proc / "cwd" / marker).exists():
                    return f"{os.readlink(proc / 'cwd')} {os.readlink(proc / 'ns' / 'pid')}"
        await asyncio.sleep(0.05)
    raise AssertionError("the sandboxed process never started")


# --- what is isolated, and the fallback ----------------------------------------------------------


def test_protections_say_what_is_active():
    active = protections()
    assert json.loads(json.dumps(active)) == active
    assert active["backend"] in ("namespaces", "userns", "none")
    flags = {key: value for key, value in active.items() if key != "backend"}
    assert set(flags) == {
        "cgroup",
        "process_limit",
        "network",
        "pid_namespace",
        "filesystem",
        "proc",
        "unprivileged",
        "disk_limit",
        "syscall_filter",
    }
    assert all(isinstance(value, bool) for value in flags.values())
    assert active["disk_limit"] == active["filesystem"]
    assert active["network"] == active["pid_namespace"] == (active["backend"] != "none")
    assert missing_isolation() == [
        name
        for name in (
            "filesystem",
            "proc",
            "network",
            "unprivileged",
            "process_limit",
            "syscall_filter",
        )
        if not active[name]
    ]


def test_without_namespaces_runs_still_work_and_strict_mode_refuses(monkeypatch, sandbox_tmp):
    monkeypatch.setenv(BACKEND_VARIABLE, "none")
    assert protections()["backend"] == "none"
    assert {"filesystem", "proc", "network"} <= set(missing_isolation())
    with pytest.raises(ConfigError) as error:
        require_isolation()
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("strict sandbox unavailable: no filesystem, proc, network")
    assert message.endswith(f"({BACKEND_VARIABLE}=none)")

    with pytest.raises(IsolationMissing) as refused:  # no program runs unless the caller opts in
        run_python("open('ran', 'w')")
    assert str(refused.value) == (
        f"model-written code cannot run isolated here: no filesystem, network "
        f"({BACKEND_VARIABLE}=none); it would have your user's rights: pass --unsafe-no-sandbox "
        "(unsafe_no_sandbox=True in Python) to run it anyway"
    )
    assert list(sandbox_tmp.iterdir()) == []
    with unsafe_no_sandbox():
        result = run_python(PRINT_WHERE + "print(open('/proc/1/cmdline').read() != '')")
    where, sees_host = result.stdout.splitlines()
    assert result.passed and where.split()[0].startswith(str(sandbox_tmp))
    assert sees_host == "True"  # the host's init: nothing hides it without namespaces
    assert_nothing_left(where, sandbox_tmp)

    if protections()["syscall_filter"]:  # the system-call filter needs no namespace
        unshare = "import ctypes\nprint(ctypes.CDLL(None).unshare(0x10000000))"
        with unsafe_no_sandbox():
            assert run_python(unshare).stdout == "-1\n"


def test_an_unknown_backend_is_a_config_error(monkeypatch):
    monkeypatch.setenv(BACKEND_VARIABLE, "chroot")
    with pytest.raises(ConfigError, match=f"{BACKEND_VARIABLE} must be namespaces, userns or none"):
        protections()


def test_a_failing_new_root_falls_back_and_is_reported(monkeypatch):
    """Probes fail for a new root: runs keep the namespaces they can get, strict mode says why."""
    if os.geteuid() != 0:
        pytest.skip("the fallback without a new root is for root (namespaces without a user one)")
    real_probe = sandbox._probe
    monkeypatch.setattr(
        sandbox, "_probe", lambda iso: "mount: denied" if iso.filesystem else real_probe(iso)
    )
    monkeypatch.setenv(BACKEND_VARIABLE, "")
    sandbox._select.cache_clear()
    try:
        isolation = sandbox._isolation()
        missing = missing_isolation()
        with pytest.raises(ConfigError) as error:
            require_isolation()
    finally:
        sandbox._select.cache_clear()
    if isolation.backend == "none":
        pytest.skip(f"no namespaces at all here: {error.value}")
    assert (isolation.backend, isolation.filesystem) == ("namespaces", False)
    assert missing == ["filesystem", "proc", "unprivileged"]
    assert str(error.value) == (
        "strict sandbox unavailable: no filesystem, proc, unprivileged "
        "(namespaces: mount: denied; userns: mount: denied)"
    )


def test_a_failed_setup_is_an_error_that_says_why(monkeypatch, sandbox_tmp):
    if not protections()["filesystem"]:
        pytest.skip("no new root here to fail to build")
    missing = "/nonexistent-maslab-bind"
    binds = (*sandbox._system_binds(), missing)
    monkeypatch.setattr(sandbox, "_system_binds", lambda: binds)
    result = run_python("print('never runs')")
    assert (result.status, result.returncode, result.stdout) == ("error", None, "")
    assert result.stderr == f"maslab sandbox: bind {missing}: No such file or directory\n"
    assert list(sandbox_tmp.iterdir()) == []


@pytest.mark.parametrize("backend", ["namespaces", "none"])
async def test_a_sandboxed_program_ends_when_maslab_is_killed(backend, tmp_path):
    """``kill -9`` of the process that ran a sandbox orphaned its program, which ran on past
    its wall limit: the launcher now ends the run when its parent dies."""
    if backend == "namespaces" and protections()["backend"] == "none":
        pytest.skip("no namespaces here")
    marker = f"marker-{uuid.uuid4().hex}"
    script = (
        "from maslab.sandbox import Limits, run_python, unsafe_no_sandbox\n"
        "with unsafe_no_sandbox():\n"
        f"    run_python('import time\\ntime.sleep(600)', files={{{marker!r}: ''}},"
        " limits=Limits(wall_seconds=600, cpu_seconds=600))\n"
    )
    env = {**os.environ, BACKEND_VARIABLE: backend, "TMPDIR": str(tmp_path)}  # what it leaves
    maslab = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        where = await _where_running(marker)
        assert processes_of(where)
    finally:
        maslab.kill()
        maslab.wait()
    for _ in range(600):  # up to 30 s: a guard, not a measure
        if not processes_of(where):
            break
        await asyncio.sleep(0.05)
    assert processes_of(where) == []


def test_the_launcher_ends_a_run_past_its_wall_limit_by_itself(tmp_path):
    """Should maslab, alive, fail to end a run at its wall limit, the launcher ends it a few
    seconds later (here nothing else would: the launcher runs alone)."""
    run = sandbox._Run(tmp_path, sandbox._isolation())
    sandbox._write_files(run.workdir, "import time\ntime.sleep(600)\n", {})
    run.prepare()
    command, env = run.launch(Limits(wall_seconds=1), None, [sandbox._PYTHON, "-s", "main.py"])
    ended = subprocess.run(
        command, cwd=run.workdir, env=env, capture_output=True, timeout=120
    )  # a 600 s sleep, ended long before the guard
    assert ended.returncode != 0


def test_what_a_killed_maslab_left_is_cleared_before_the_next_run(sandbox_tmp):
    """A ``kill -9`` of maslab leaves its runs' temporary directories and pids cgroups; the next
    process clears those of dead processes (never a live one's) before its first run."""
    dead = _a_dead_pid()
    left = sandbox_tmp / f"maslab-sandbox-{dead}-x1y2"
    (left / "work").mkdir(parents=True)
    (left / "work" / "main.py").write_text("print('left over')")
    live = sandbox_tmp / f"maslab-sandbox-{os.getpid()}-a3b4"
    live.mkdir()
    cgroups = sandbox._cgroup_root()
    cgroup = cgroups / f"maslab-{dead}-{uuid.uuid4().hex}" if cgroups else None
    if cgroup is not None:
        cgroup.mkdir()
    sandbox._clear_leftovers.cache_clear()
    assert run_python("print('ok')").stdout == "ok\n"
    assert not left.exists() and live.is_dir()
    assert cgroup is None or not cgroup.exists()
    live.rmdir()


def _a_dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
