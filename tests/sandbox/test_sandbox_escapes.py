"""Hostile programs against the namespaced sandbox: each attack is contained, reported, and leaves
the host as it was. Every test runs through both backends (``namespaces`` as root, ``userns``
forced), and skips, saying why, where one is unavailable."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import tracemalloc
import uuid
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

import pytest

import maslab
from maslab.errors import ConfigError
from maslab.sandbox import (
    BACKEND_VARIABLE,
    Limits,
    SandboxResult,
    protections,
    require_isolation,
    run_python,
)

pytestmark = pytest.mark.system

# The first line each program prints: the pid namespace that finds its processes from outside.
PRINT_NAMESPACE = "import os\nprint(os.readlink('/proc/self/ns/pid'), flush=True)\n"


@pytest.fixture(params=["namespaces", "userns"])
def backend(request, monkeypatch, tmp_path):
    """Force the backend; skip unless it gives the strict sandbox. Runs' host directories go to a
    private directory, checked empty afterwards."""
    monkeypatch.setenv(BACKEND_VARIABLE, request.param)
    try:
        require_isolation()
    except ConfigError as error:
        pytest.skip(str(error))
    if protections()["backend"] != request.param:
        pytest.skip(f"the {request.param} backend is unavailable here")
    directory = tmp_path / "sandbox-tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    yield request.param
    assert list(directory.iterdir()) == []


def run(code: str, **kwargs) -> tuple[SandboxResult, str]:
    """Run ``PRINT_NAMESPACE + code``: the result (stdout after that line) and the run's own pid
    namespace."""
    result = run_python(PRINT_NAMESPACE + code, **kwargs)
    namespace, _, rest = result.stdout.partition("\n")
    assert namespace.startswith("pid:[") and namespace != os.readlink("/proc/self/ns/pid")
    return replace(result, stdout=rest), namespace


def processes_in(namespace: str) -> list[int]:
    """Host processes in pid namespace ``namespace``, zombies included."""
    found = []
    for proc in Path("/proc").iterdir():
        with suppress(OSError):
            if proc.name.isdigit() and os.readlink(proc / "ns" / "pid") == namespace:
                found.append(int(proc.name))
    return found


def processes_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        with suppress(OSError):
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
    return found


def attempts(paths: str, action: str) -> str:
    """Code printing, as JSON, what ``action`` (a statement using ``path``) did for each of
    ``paths`` (an expression)."""
    return (
        "import json\n"
        "outcomes = {}\n"
        f"for path in {paths}:\n"
        "    try:\n"
        f"        {action}\n"
        "        outcomes[path] = 'done'\n"
        "    except OSError as error:\n"
        "        outcomes[path] = type(error).__name__\n"
        "print(json.dumps(outcomes))\n"
    )


def test_infinite_loop_times_out(backend):
    result, namespace = run("while True:\n    pass", limits=Limits(wall_seconds=2))
    # the wall limit ended it (returncode None: cut short; the CPU limit would leave SIGXCPU)
    assert (result.status, result.returncode, result.stderr) == ("timeout", None, "")
    assert result.duration_s >= 1.9
    assert processes_in(namespace) == []


def test_fork_bomb_is_contained(backend):
    bomb = "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result, namespace = run(bomb, limits=Limits(wall_seconds=2, max_processes=16))
    assert (result.status, result.stderr) == ("timeout", "")
    assert processes_in(namespace) == []
    assert subprocess.run(["true"], check=False).returncode == 0
    assert run_python("print('still fine')").stdout == "still fine\n"


def test_memory_bomb_is_a_memory_error(backend):
    bomb = "hoard = []\nwhile True:\n    hoard.append(bytearray(64 * 1024**2))"
    result, namespace = run(bomb, limits=Limits(memory_mb=512))
    assert result.status == "memory"
    assert result.stderr.strip().splitlines()[-1] == "MemoryError"
    assert processes_in(namespace) == []
    assert run_python("print(len(bytearray(100 * 1024**2)))").stdout == f"{100 * 1024**2}\n"


def test_output_flood_is_cut_off_with_bounded_parent_memory(backend):
    limit = 1_000_000
    flood = "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 1024**2)"
    limits = Limits(max_output_bytes=limit, wall_seconds=60)
    tracemalloc.start()
    try:
        result, namespace = run(flood, limits=limits)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status == "output_limit"
    assert len(result.stdout) <= limit
    # cut off at the cap, not waited out to the wall limit
    assert result.returncode is None and result.duration_s < limits.wall_seconds
    assert peak < 20 * 1024**2
    assert processes_in(namespace) == []


def test_writes_outside_the_sandbox_never_reach_the_host(backend, tmp_path, monkeypatch):
    name = f"maslab-escape-{uuid.uuid4().hex}"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    project = Path(maslab.__file__).parent.parent
    outside = [Path.home(), Path("/tmp"), cwd, Path("/work"), project, Path("/"), Path("/etc")]
    targets = [str(directory / name) for directory in outside]
    private = ["/dev/shm/" + name, name]
    try:
        result, namespace = run(attempts(repr(targets + private), "open(path, 'x').write('pwned')"))
        outcomes = json.loads(result.stdout)
        assert result.status == "ok"
        # Its own /tmp, /dev/shm and working directory are writable, and gone afterwards.
        done = {path for path, outcome in outcomes.items() if outcome == "done"}
        assert done == {"/tmp/" + name, *private}
        assert [target for target in targets if os.path.lexists(target)] == []
        assert processes_in(namespace) == []
    finally:
        for target in targets:
            with suppress(OSError):
                os.remove(target)


def test_the_parents_environment_is_out_of_reach_through_proc(backend, monkeypatch):
    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    snoop = (
        "import json\n"
        "pids = sorted(int(name) for name in os.listdir('/proc') if name.isdigit())\n"
        "found, readable = [], 0\n"
        "for pid in pids:\n"
        "    for name in ('environ', 'cmdline'):\n"
        "        try:\n"
        "            data = open(f'/proc/{pid}/{name}', 'rb').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        readable += 1\n"
        f"        if b'{canary}' in data:\n"
        "            found.append(f'{pid}/{name}')\n"
        "init = open('/proc/1/cmdline', 'rb').read().split(b'\\0')\n"
        "print(json.dumps({'pids': pids, 'me': [os.getpid(), os.getppid()], 'found': found,\n"
        "                  'readable': readable, 'init': init[3].decode()}))\n"
    )
    result, namespace = run(snoop)
    seen = json.loads(result.stdout)
    assert result.status == "ok" and canary not in result.stdout + result.stderr
    me, parent = seen["me"]
    assert seen["pids"] == [1, me] and parent == 1  # the launcher's init and the program
    assert Path(seen["init"]).name == "launcher.py"
    assert seen["found"] == []
    assert seen["readable"] >= 3  # its own environ and cmdline, the init's cmdline: it did look
    assert processes_in(namespace) == []


def test_secrets_on_disk_are_out_of_reach(backend):
    cache = Path.home() / ".cache" / "maslab"
    created = [path for path in (cache.parent, cache) if not path.exists()]
    cache.mkdir(parents=True, exist_ok=True)
    canary = cache / f"canary-{uuid.uuid4().hex}.jsonl"
    canary.write_text('{"answer": "gold"}\n')
    project_file = Path(maslab.__file__).resolve()
    paths = ["/etc/shadow", str(canary), str(cache), str(project_file), sys.prefix + "/pyvenv.cfg"]
    try:
        result, namespace = run(attempts(repr(paths), "open(path).read()"))
    finally:
        canary.unlink()
        for path in reversed(created):
            path.rmdir()
    assert result.status == "ok" and "gold" not in result.stdout
    assert json.loads(result.stdout) == {
        "/etc/shadow": "PermissionError",  # present (/etc is shown) but unreadable
        str(canary): "FileNotFoundError",
        str(cache): "FileNotFoundError",
        str(project_file): "FileNotFoundError",
        sys.prefix + "/pyvenv.cfg": "FileNotFoundError",  # the project's venv
    }
    assert processes_in(namespace) == []


def test_the_network_is_unreachable(backend):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\n"
            "except OSError as error:\n"
            "    print(type(error).__name__)\n"
        )
        result, namespace = run(code)
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # it works from here
    assert result.status == "ok"
    assert result.stdout.strip() in ("ConnectionRefusedError", "OSError")  # no route, no lo
    assert processes_in(namespace) == []


def test_a_daemon_dies_with_the_run(backend):
    marker = f"daemon-{uuid.uuid4().hex}"
    daemon = (
        "import sys\n"
        "ready, up = os.pipe()\n"
        "os.set_inheritable(up, True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        null = os.open('/dev/null', os.O_RDWR)\n"
        "        for fd in (0, 1, 2):\n"
        "            os.dup2(null, fd)\n"
        "        late = \"import os, sys, time\\nos.write(int(sys.argv[1]), b'up')\\n\" \\\n"
        "               \"time.sleep(10)\\nopen('late', 'w').write('still here')\"\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', late, str(up), {marker!r}])\n"
        "    os._exit(0)\n"
        "print(os.read(ready, 2).decode(), flush=True)\n"  # the daemon runs, marker and all
    )
    try:
        result, namespace = run(daemon)
        assert (result.status, result.stdout) == ("ok", "up\n")
        assert processes_in(namespace) == []
        assert processes_with(marker) == []
    finally:
        for pid in processes_with(marker):
            os.kill(pid, 9)


def test_result_records_cannot_be_forged(backend, tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "run-1"
    run_dir.mkdir(parents=True)
    results = run_dir / "results.jsonl"
    results.write_text('{"task": "t1", "correct": false}\n')
    before = (results.read_bytes(), results.stat().st_mtime_ns)
    monkeypatch.chdir(run_dir)
    targets = [
        "/proc/1/cwd/results.jsonl",
        "/proc/1/root" + str(results),
        "../results.jsonl",
        "../../results.jsonl",
        str(results),
        str(run_dir.parent / "run-1" / "results.jsonl"),
    ]
    forge = (
        "import glob\n"
        f"targets = {targets!r} + glob.glob('/proc/*/cwd/results.jsonl')\n"
        "targets.append(f'/proc/{os.getppid()}/cwd/results.jsonl')\n"
    ) + attempts("targets", 'open(path, \'a\').write(\'{"task": "t1", "correct": true}\')')
    result, namespace = run(forge)
    outcomes = json.loads(result.stdout)
    assert result.status == "ok"
    assert set(targets) <= set(outcomes)
    assert "done" not in outcomes.values()
    assert (results.read_bytes(), results.stat().st_mtime_ns) == before
    assert processes_in(namespace) == []


def test_the_program_has_no_privileges(backend):
    probe = (
        "import ctypes, json\n"
        "lines = open('/proc/self/status').read().splitlines()\n"
        "status = dict(line.split(':\\t') for line in lines if line.startswith(('Cap', 'NoNew')))\n"
        "inside, outside, _ = map(int, open('/proc/self/uid_map').read().split()[:3])\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "remount = libc.mount(None, b'/', None, ctypes.c_ulong(0x1020), None)  # rw again\n"
        "unmount = libc.umount2(b'/sandbox', 2)\n"
        "print(json.dumps({'status': status, 'host_uid': outside + os.getuid() - inside,\n"
        "                  'remount': remount, 'unmount': unmount}))\n"
    )
    result, namespace = run(probe)
    seen = json.loads(result.stdout)
    assert result.status == "ok"
    assert seen["status"] == {
        "CapInh": "0000000000000000",
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
        "CapAmb": "0000000000000000",
        "NoNewPrivs": "1",
    }
    assert seen["host_uid"] != 0
    assert (seen["remount"], seen["unmount"]) == (-1, -1)
    assert processes_in(namespace) == []


def test_filling_the_disk_stops_at_the_limit_and_says_so(backend, tmp_path):
    """One sample once wrote 1.25 GiB and 20,000 files into the host's temporary space: the
    program's directory, /tmp and /dev/shm are now bounded file systems of its own."""
    host_before = shutil.disk_usage(tempfile.gettempdir()).used
    fill = (
        "import errno\n"
        "try:\n"
        "    with open('{where}/big', 'wb') as f:\n"
        "        for _ in range(200):\n"
        "            f.write(b'x' * 1024**2)\n"
        "            f.flush()\n"
        "except OSError as error:\n"
        "    print(errno.errorcode[error.errno])\n"
    )
    limits = Limits(disk_mb=8, max_file_mb=64, wall_seconds=30)
    for where in (".", "/tmp", "/dev/shm"):
        result, namespace = run(fill.format(where=where), limits=limits)
        assert (result.status, result.stdout) == ("disk_limit", "ENOSPC\n"), where
        assert processes_in(namespace) == []
    many = (
        "import errno\n"
        "try:\n"
        "    for i in range(100_000):\n"
        "        open(f'f{i}', 'w').close()\n"
        "except OSError as error:\n"
        "    print(errno.errorcode[error.errno], i < 1000)\n"
    )
    result, namespace = run(many, limits=Limits(max_files=500))
    assert (result.status, result.stdout) == ("disk_limit", "ENOSPC True\n")
    assert shutil.disk_usage(tempfile.gettempdir()).used - host_before < 32 * 1024**2
    small = run("open('note', 'w').write('fine')\nprint(open('note').read())", limits=limits)[0]
    assert (small.status, small.stdout) == ("ok", "fine\n")


def test_new_namespaces_mounts_and_tracing_are_refused(backend):
    """Inside the sandbox a program could unshare a new user namespace (and with it mount
    tmpfs); a seccomp filter now refuses that and the other calls in DENIED_SYSCALLS, while
    threads, subprocesses and multiprocessing still work."""
    probe = (
        "import ctypes, json, multiprocessing, subprocess, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def errno_of(result):\n"
        "    return 0 if result == 0 else ctypes.get_errno()\n"
        "seen = {\n"
        "    'unshare_user': errno_of(libc.unshare(0x10000000)),\n"
        "    'unshare_mount': errno_of(libc.unshare(0x20000)),\n"
        "    'mount_tmpfs': errno_of(libc.mount(b'x', b'/tmp', b'tmpfs', 0, None)),\n"
        "    'ptrace': errno_of(libc.ptrace(16, 1, 0, 0)),\n"  # PTRACE_ATTACH to the init
        "    'keyctl': errno_of(libc.syscall(250 if os.uname().machine == 'x86_64' else 219,\n"
        "                                    0, -3, 0, 0, 0)),\n"
        "    'bpf': errno_of(libc.syscall(321 if os.uname().machine == 'x86_64' else 280,\n"
        "                                 0, 0, 0)),\n"
        "}\n"
        "threading.Thread(target=lambda: None).start()\n"
        "seen['subprocess'] = subprocess.run(['true']).returncode\n"
        "with multiprocessing.Pool(2) as pool:\n"
        "    seen['pool'] = pool.map(abs, [-1, -2])\n"
        "print(json.dumps(seen))\n"
    )
    result, namespace = run(probe, limits=Limits(wall_seconds=60))  # a pool, on a busy machine
    assert result.status == "ok", result.stderr
    assert json.loads(result.stdout) == {
        "unshare_user": errno.EPERM,
        "unshare_mount": errno.EPERM,
        "mount_tmpfs": errno.EPERM,
        "ptrace": errno.EPERM,
        "keyctl": errno.EPERM,
        "bpf": errno.EPERM,
        "subprocess": 0,
        "pool": [1, 2],
    }
    assert processes_in(namespace) == []


def test_no_host_temporary_path_shows_inside(backend):
    """/proc/1/cmdline and mountinfo showed the run's host directory: the launcher now takes
    its settings from its environment (kept from the program) and mounts nothing from there."""
    probe = (
        "import glob\n"
        "texts = [open('/proc/self/mountinfo').read(), open('/proc/1/cmdline').read()]\n"
        "for path in glob.glob('/proc/[0-9]*/environ'):\n"
        "    try:\n"
        "        texts.append(open(path).read())\n"
        "    except OSError:\n"
        "        pass\n"
        "print('maslab-sandbox-' in ''.join(texts), tempfile_dir in ''.join(texts))\n"
    )
    result, _ = run(f"tempfile_dir = {tempfile.gettempdir()!r}\n" + probe)
    assert (result.status, result.stdout) == ("ok", "False False\n"), result.stderr
