"""Run untrusted, model-written Python in a child process with every protection the OS allows.

Layers, each used where the machine allows it (:func:`protections` says which are active):

* Always: a fresh temporary directory per run (removed afterwards) as the program's cwd, HOME and
  TMPDIR; a scrubbed environment (for the launcher too); its own session; resource limits (CPU,
  address space, file size, no core dumps, processes); the wall-time limit, the output cap, an
  error or a cancellation kill the whole process tree, which is always reaped. The launcher
  also ends the run by itself when maslab dies (even by ``kill -9``: a parent-death signal) and
  a few seconds after the wall limit, should maslab not have ended it.
* A seccomp filter (x86-64 and arm64 kernels with seccomp): no mounts, no new namespaces (user
  ones included), no tracing of other processes, no keyrings, BPF or io_uring
  (:data:`~maslab.sandbox.launcher.DENIED_SYSCALLS`).
* A pids cgroup per run: fork bombs are contained even as root.
* Namespaces: new pid and network namespaces (no network; the namespace's init reaps orphans and
  its exit kills every process left, daemons included) and a mount namespace with a new root
  (``pivot_root``, the host's root detached): the host's system directories and the base Python
  installation read-only, a copy of the run's files writable at ``/sandbox``, a private ``/tmp``
  and ``/dev/shm`` (those three RAM file systems bounded in size and files, none a host
  directory), a few harmless devices and a fresh ``/proc`` showing only the run's processes.
  Home directories, caches, run directories, the working tree and the project's venv are absent.
  The program then drops its privileges: no new privileges, locked securebits, empty capability
  and bounding sets, and as root a uid/gid of its own (random per run, so its process limit is
  its own). Backends: ``namespaces`` (maslab runs as root) or ``userns`` (a user namespace gives
  the rights to mount; the root of that namespace maps to maslab's uid, or to the run's own uid
  when maslab is root). :data:`BACKEND_VARIABLE` forces one (``namespaces``, ``userns``,
  ``none``); if it fails, the run falls back to what works.

Without namespaces (``none``), the program runs as maslab's user in the host's filesystem: it can
read (and write) whatever that user can, including other runs' files, caches and credentials; it
sees every process in ``/proc``, including the parent's environment when they share a uid; it
has the network; and processes it detaches (a new session) outlive the run unless the pids
cgroup catches them. So a program runs only with a new root and no network (the
:data:`ESSENTIAL` protections) unless the caller opted out (:func:`unsafe_no_sandbox`, the runs'
``--unsafe-no-sandbox``): otherwise :func:`arun_python` raises :class:`IsolationMissing`.
:func:`require_isolation` demands every protection (strict runs).

The program runs as ``python -s main.py`` under the base interpreter (not the project's venv) and
:mod:`maslab.sandbox.launcher`, run by file path, which sets all of the above up, runs the program
as its child, reaps orphans like an init and records the program's exit code (a process dying by
a signal is reported as such).

A run may get a channel (:func:`arun_python`'s ``channel``): one end of a socket pair,
inherited through the launcher (its descriptor in :data:`CHANNEL_VARIABLE`), whose other end
either a service in the parent serves while the program runs (:mod:`maslab.kit.bridge` serves model
calls on it) or another sandboxed program holds (:mod:`maslab.kit.code_check` links the tests to
the code under test). It is a local socket pair, no network: the network namespace does not
affect it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from asyncio.subprocess import DEVNULL, PIPE, Process
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from maslab.errors import ConfigError, RunFailed
from maslab.sandbox.launcher import CONFIG_VARIABLE, DEVICES, SANDBOX_DIR, SETUP_FAILED, SYSCALLS

if TYPE_CHECKING:
    from maslab.sandbox.launcher import Config, Filesystem, Namespaces

Status = Literal["ok", "error", "timeout", "memory", "output_limit", "disk_limit", "killed"]
Backend = Literal["namespaces", "userns", "none"]
Ending = Literal["exited", "limit", "channel"]
Service = Callable[[socket.socket], Awaitable[None]]
"""Serves a run's channel: returning ends the run (its status ``killed``), raising ends it and
re-raises the error from :func:`arun_python`; it is cancelled when the program's processes end."""

BACKEND_VARIABLE = "MASLAB_SANDBOX_BACKEND"
"""Environment variable forcing a backend: ``namespaces``, ``userns`` or ``none``."""
CHANNEL_VARIABLE = "MASLAB_CHANNEL_FD"
"""The program's environment variable holding its channel's descriptor, when it has one."""

_ENTRY = "main.py"
_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
_LAUNCHER = Path(__file__).with_name("launcher.py")
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
ESSENTIAL = ("filesystem", "network")
"""The protections without which a program runs only when the caller opted out."""
_STRICT = ("filesystem", "proc", "network", "unprivileged", "process_limit", "syscall_filter")
_OPT_OUT = "--unsafe-no-sandbox (unsafe_no_sandbox=True in Python)"
_unisolated: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "maslab_unisolated", default=False
)
_RUN_IDS = range(0x4000_0000, 0x5000_0000)  # a run's own uid and gid, when maslab is root
_CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/pids"))  # v2, then v1
_CPU_SLACK = 0.1  # rusage rounds: a run stopped at the CPU limit may report a hair under it
_RUN_PREFIX, _CGROUP_PREFIX = "maslab-sandbox-", "maslab-"  # then the creator's pid and "-"
_LEFTOVER = re.compile(r"maslab-(?:sandbox-)?(\d+)-[\w]+")
_SETTLE_SECONDS = 5  # after the kill, for the pipes to close
_DEADLINE_GRACE = 5  # the launcher ends a run this long after its wall limit, if maslab has not
_KILL_ROUNDS = 200  # rounds of 10 ms spent killing a cgroup's processes before giving up
_PROBE_SECONDS = 10
_POLL_SECONDS = 0.02
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Limits:
    """Resource limits for one run.

    ``max_processes`` counts threads, and the sandbox's own supervising process.
    ``max_file_mb`` caps each file. With a new root the program's directory, /tmp and /dev/shm
    are file systems of their own (in RAM), each of ``disk_mb`` holding at most ``max_files``
    files and directories.
    """

    wall_seconds: float = 10
    cpu_seconds: float = 10
    memory_mb: int = 1024
    max_output_bytes: int = 1_000_000
    max_processes: int = 32
    max_file_mb: int = 16
    disk_mb: int = 64
    max_files: int = 4096


class IsolationMissing(RunFailed):
    """Model-written code was to run where it cannot be isolated, and nobody opted out."""


@contextmanager
def unsafe_no_sandbox(allowed: bool = True) -> Iterator[None]:
    """Within: let programs run without the :data:`ESSENTIAL` protections (``allowed``), with
    the rights of maslab's user; for this context and the tasks it starts."""
    token = _unisolated.set(allowed)
    try:
        yield
    finally:
        _unisolated.reset(token)


@dataclass(frozen=True)
class SandboxResult:
    """How a run ended. ``returncode`` is negative for a signal, None if the run was cut short."""

    status: Status
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float

    @property
    def passed(self) -> bool:
        return self.status == "ok"


def read_report(stdout: str, token: str) -> dict[str, Any] | None:
    """The JSON object a sandboxed runner printed as the last line of ``stdout``, after the run's
    token (a program that does not know the token cannot forge it); None if there is none."""
    lines = stdout.splitlines()
    if not lines or not lines[-1].startswith(token):
        return None
    try:
        value = json.loads(lines[-1][len(token) :])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def run_python(
    code: str,
    *,
    limits: Limits = Limits(),
    stdin: str | None = None,
    files: Mapping[str, str] | None = None,
) -> SandboxResult:
    """Blocking :func:`arun_python`; also works from inside a running event loop."""
    run = arun_python(code, limits=limits, stdin=stdin, files=files)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(contextvars.copy_context().run, asyncio.run, run).result()


async def arun_python(
    code: str,
    *,
    limits: Limits = Limits(),
    stdin: str | None = None,
    files: Mapping[str, str] | None = None,
    channel: Service | socket.socket | None = None,
) -> SandboxResult:
    """Run ``code`` as a script in the sandbox; how it ended, with its output.

    Args:
        code: The Python program.
        limits: Time, memory, output, file and process limits.
        stdin: Text on the program's standard input; None for none.
        files: Extra files in its working directory: relative path -> text.
        channel: Serves the parent's end of a socket pair whose other end the program inherits
            (see :data:`Service`); or a socket the program inherits as its channel, which the
            run owns from then on and closes (the parent keeps no copy); None: no channel.

    Raises:
        IsolationMissing: The :data:`ESSENTIAL` protections are unavailable and the caller did
            not opt out (:func:`unsafe_no_sandbox`); nothing ran.
        Exception: Whatever ``channel`` raised, once the run's processes are gone.
    """
    if not _unisolated.get() and (refusal := isolation_refusal()):
        raise IsolationMissing(refusal)
    _clear_leftovers()
    with (
        _owned(channel),
        tempfile.TemporaryDirectory(prefix=f"{_RUN_PREFIX}{os.getpid()}-") as tmp,
        _pids_cgroup(limits.max_processes) as cgroup,
    ):
        isolation = _isolation()
        run = _Run(Path(tmp).resolve(), isolation)
        _write_files(run.workdir, code, files or {})
        run.prepare()
        output = _Output(limits.max_output_bytes)
        started = time.monotonic()
        command, env = run.launch(limits, cgroup, [_PYTHON, "-s", _ENTRY])
        ending, launcher = await _run(
            command, env, run, stdin, output, cgroup, limits.wall_seconds, channel
        )
        duration = time.monotonic() - started
        returncode, cpu_used, disk_full = _read_exit(run.exit_file)
    cpu_spent = cpu_used >= limits.cpu_seconds - _CPU_SLACK
    return SandboxResult(
        status=_status(output, ending, returncode, cpu_spent, disk_full, launcher == SETUP_FAILED),
        returncode=returncode,
        stdout=output.text(output.stdout),
        stderr=output.text(output.stderr),
        duration_s=duration,
    )


def protections() -> dict[str, bool | str]:
    """Which optional protections are active here (probed once); the others are always on.

    ``backend``: ``namespaces``, ``userns`` or ``none``; ``filesystem``: a new root without the
    host's homes, caches, runs and projects; ``proc``: a /proc of the run's processes only;
    ``network``/``pid_namespace``: fresh namespaces; ``unprivileged``: the program has no root
    identity or capabilities on the host; ``cgroup``: a pids cgroup per run; ``process_limit``: a
    process cap that holds (the cgroup, or RLIMIT_NPROC for an unprivileged program);
    ``disk_limit``: its writable space is bounded in size and files (else only each file's
    size); ``syscall_filter``: a seccomp filter refuses mounts, new namespaces (user ones too),
    tracing other processes, the kernel's keyrings, BPF and the like (see
    :data:`~maslab.sandbox.launcher.DENIED_SYSCALLS`).

    Not protected anywhere: the program sees the machine's CPU, kernel and memory figures
    (``/proc/cpuinfo``, ``uname``), the read-only system directories and base Python (with
    whatever packages are installed there), and time; it can spend its limits in full.
    """
    isolation = _isolation()
    namespaces = isolation.backend != "none"
    unprivileged = isolation.filesystem or os.geteuid() != 0
    cgroup = _cgroup_root() is not None
    return {
        "backend": isolation.backend,
        "filesystem": isolation.filesystem,
        "proc": isolation.filesystem,
        "network": namespaces,
        "pid_namespace": namespaces,
        "unprivileged": unprivileged,
        "cgroup": cgroup,
        "process_limit": cgroup or unprivileged,
        "disk_limit": isolation.filesystem,
        "syscall_filter": _syscall_filter(),
    }


def missing_isolation(strict: bool = True) -> list[str]:
    """The protections a run needs that are unavailable here (keys of :func:`protections`).

    Strict means: a new root (``filesystem``), its own ``proc``, no ``network``, an
    ``unprivileged`` program, a ``process_limit`` that holds and a ``syscall_filter``; otherwise
    the :data:`ESSENTIAL` ones.
    """
    active = protections()
    return [name for name in (_STRICT if strict else ESSENTIAL) if not active[name]]


def require_isolation() -> None:
    """Raise :class:`ConfigError` (one line: what is missing and why) unless a strict run can go."""
    if missing := missing_isolation():
        raise ConfigError(f"strict sandbox unavailable: no {', '.join(missing)}{_why()}")


def isolation_refusal() -> str:
    """Why model-written code may not run here without an opt-out (one line); '' if it may."""
    missing = missing_isolation(strict=False)
    if not missing:
        return ""
    return (
        f"model-written code cannot run isolated here: no {', '.join(missing)}{_why()}; it "
        f"would have your user's rights: pass {_OPT_OUT} to run it anyway"
    )


def _why() -> str:
    reasons = "; ".join(_isolation().failures)
    return f" ({reasons})" if reasons else ""


# --- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Isolation:
    """The namespaces backend in use (with a new root or not), and why stronger ones failed."""

    backend: Backend
    filesystem: bool
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Run:
    """One run's host directory: ``work`` (the program's), ``exit``, and ``root`` (the skeleton)."""

    tmp: Path
    isolation: _Isolation
    run_id: int = field(default_factory=lambda: secrets.choice(_RUN_IDS))
    """The uid and gid of the program when maslab is root: its own, so is its process limit."""

    @property
    def workdir(self) -> Path:
        return self.tmp / "work"

    @property
    def exit_file(self) -> Path:
        return self.tmp / "exit"

    @property
    def home(self) -> str:
        """The working directory as the program sees it."""
        return SANDBOX_DIR if self.isolation.filesystem else str(self.workdir)

    def prepare(self) -> None:
        """Build the new root's skeleton, and the empty directory it is mounted on."""
        if self.isolation.filesystem:
            _build_skeleton(self.tmp / "skeleton")
            (self.tmp / "root").mkdir()

    def launch(
        self, limits: Limits, cgroup: Path | None, program: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """The launcher's command line and environment, to run with cwd :attr:`workdir`."""
        config: Config = {
            "exit_file": str(self.exit_file),
            "parent": os.getpid(),
            "deadline_seconds": limits.wall_seconds + _DEADLINE_GRACE,
            "cgroup_procs": str(cgroup / "cgroup.procs") if cgroup else "",
            "rlimits": _rlimits(limits),
            "syscall_filter": _syscall_filter(),
            "namespaces": self._namespaces(limits),
        }
        command = [_PYTHON, "-I", "-S", str(_LAUNCHER), *program]
        return command, {**self.environment(), CONFIG_VARIABLE: json.dumps(config)}

    def _namespaces(self, limits: Limits) -> Namespaces | None:
        backend, filesystem = self.isolation.backend, self.isolation.filesystem
        if backend == "none":
            return None
        own = [self.run_id, self.run_id]
        id_map: list[int] | None
        user: list[int] | None
        if backend == "userns":
            id_map = own if os.geteuid() == 0 else [os.geteuid(), os.getegid()]
            user = [0, 0]
        else:
            id_map, user = None, own if filesystem else None
        new_root: Filesystem = {
            "root": str(self.tmp / "root"),
            "skeleton": str(self.tmp / "skeleton"),
            "binds": list(_system_binds()),
            "workdir": str(self.workdir),
            "disk_mb": limits.disk_mb,
            "files": limits.max_files,
        }
        return {"id_map": id_map, "user": user, "filesystem": new_root if filesystem else None}

    def environment(self) -> dict[str, str]:
        """The program's whole environment (the launcher's, less its config): nothing is
        inherited."""
        return {
            "PATH": f"{os.path.dirname(_PYTHON)}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": self.home,
            "TMPDIR": self.home,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
        }


def _write_files(workdir: Path, code: str, files: Mapping[str, str]) -> None:
    """Create ``workdir`` holding ``files`` and the program (``main.py``)."""
    workdir.mkdir()
    for name, text in files.items():
        path = (workdir / name).resolve()
        if path == workdir / _ENTRY or not path.is_relative_to(workdir):
            raise ConfigError(f"sandbox file {name!r} must be a relative path other than {_ENTRY}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (workdir / _ENTRY).write_text(code, encoding="utf-8")


def _build_skeleton(root: Path) -> None:
    """The new root's read-only skeleton: mount points, /dev's files and links, /usr's links."""
    root.mkdir()
    root.chmod(0o755)
    for point in (*_system_binds(), SANDBOX_DIR, "/tmp", "/proc", "/dev/shm"):
        _make_dirs(root, point)
    for name in DEVICES:
        (root / "dev" / name).touch(mode=0o644)
    for name, target in _DEV_LINKS.items():
        (root / "dev" / name).symlink_to(target)
    for path in _SYSTEM_PATHS:
        if os.path.islink(path):
            (root / path.lstrip("/")).symlink_to(os.readlink(path))


def _make_dirs(root: Path, path: str) -> None:
    """``root``/``path`` and its parents, each traversable by anyone whatever the umask."""
    current = root
    for part in Path(path).parts[1:]:
        current = current / part
        if not current.exists():
            current.mkdir()
            current.chmod(0o755)


@cache
def _system_binds() -> tuple[str, ...]:
    """Directories shown read-only: the system's (symlinks are recreated) and base Python's."""
    found: list[str] = []
    system = [path for path in _SYSTEM_PATHS if os.path.isdir(path) and not os.path.islink(path)]
    python = [sys.base_prefix, sys.base_exec_prefix, os.path.dirname(_PYTHON)]
    for path in sorted({*system, *(os.path.realpath(path) for path in python)}, key=len):
        # Never "/" (a Python installed there would show the host's whole tree).
        if path != "/" and not any(Path(path).is_relative_to(done) for done in found):
            found.append(path)
    return tuple(found)


def _rlimits(limits: Limits) -> dict[str, list[int]]:
    """[soft, hard] per resource; CPU gets SIGXCPU at the limit and SIGKILL a second later."""
    cpu = math.ceil(limits.cpu_seconds)
    memory = limits.memory_mb * 1024**2
    file_size = limits.max_file_mb * 1024**2
    return {
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_AS": [memory, memory],
        "RLIMIT_FSIZE": [file_size, file_size],
        "RLIMIT_CORE": [0, 0],
        "RLIMIT_NPROC": [limits.max_processes, limits.max_processes],
    }


def _read_exit(exit_file: Path) -> tuple[int | None, float, bool]:
    """The program's exit code, CPU seconds and whether its writable space filled up, as the
    launcher recorded them."""
    try:
        code, cpu, full = exit_file.read_text().split()
        return int(code), float(cpu), full == "1"
    except (OSError, ValueError):
        return None, 0.0, False


# --- watching it -------------------------------------------------------------------------------


class _Output:
    """The child's stdout and stderr, kept until together they pass ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.full = asyncio.Event()

    async def pump(self, stream: asyncio.StreamReader, buffer: bytearray) -> None:
        """Read ``stream`` to its end (so the pipe never stalls), keeping bytes up to the cap."""
        while chunk := await stream.read(_CHUNK):
            if not self.full.is_set():
                buffer += chunk
                if len(self.stdout) + len(self.stderr) > self.limit:
                    self.full.set()

    def text(self, buffer: bytearray) -> str:
        return buffer[: self.limit].decode(errors="replace")


async def _run(
    command: list[str],
    env: dict[str, str],
    run: _Run,
    stdin: str | None,
    output: _Output,
    cgroup: Path | None,
    wall_seconds: float,
    channel: Service | socket.socket | None,
) -> tuple[Ending, int | None]:
    """Run the child to its end, to a limit or until ``channel`` ends it; how, and its exit code.

    Whatever happens (limit, error, cancellation), the whole tree is killed and reaped, and the
    channel's service cancelled; then what the service raised is raised.
    """
    with _channel_ends(channel) as (parent_end, program_end):
        if program_end:
            env[CHANNEL_VARIABLE] = str(program_end.fileno())
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=run.workdir,
            env=env,
            stdin=DEVNULL if stdin is None else PIPE,
            stdout=PIPE,
            stderr=PIPE,
            start_new_session=True,
            pass_fds=(program_end.fileno(),) if program_end else (),
        )
        serving = None
        if program_end:
            program_end.close()  # only the program holds it now
        if parent_end and callable(channel):
            serving = asyncio.ensure_future(channel(parent_end))
        data = None if stdin is None else stdin.encode()
        communicating = asyncio.ensure_future(_communicate(proc, data, output))
        try:
            ending = await _ending(proc, communicating, output, wall_seconds, serving)
        finally:
            _kill_tree(proc, cgroup, run.isolation.backend != "none")
            await _settle(proc, communicating)
            if serving:
                serving.cancel()
                await asyncio.wait({serving})
    if serving and not serving.cancelled() and (error := serving.exception()):
        raise error
    return ending, proc.returncode


@contextmanager
def _channel_ends(
    channel: Service | socket.socket | None,
) -> Iterator[tuple[socket.socket | None, socket.socket | None]]:
    """(the parent's end, the program's end) of the run's channel, closed on exit: a new pair
    for a service, the given socket as the program's end, or no channel."""
    if channel is None:
        yield None, None
    elif isinstance(channel, socket.socket):
        yield None, channel
    else:
        parent_end, program_end = socket.socketpair()
        with parent_end, program_end:
            yield parent_end, program_end


@contextmanager
def _owned(channel: Service | socket.socket | None) -> Iterator[None]:
    """Close a socket given as the channel when the run ends, whatever ends it."""
    try:
        yield
    finally:
        if isinstance(channel, socket.socket):
            channel.close()


async def _ending(
    proc: Process,
    communicating: asyncio.Future[None],
    output: _Output,
    wall_seconds: float,
    serving: asyncio.Future[None] | None,
) -> Ending:
    """How the run ends: the child is done, or the wall limit passes or its output fills the
    cap (``limit``), or the channel's service ended it.

    Done: the launcher exited, even if processes it left behind still hold the pipes open.
    """
    full = asyncio.ensure_future(output.full.wait())
    exited = asyncio.ensure_future(_exited(proc))
    watched: set[asyncio.Future[Any]] = {communicating, exited, full}
    watched.update([serving] if serving else [])
    try:
        done, _ = await asyncio.wait(
            watched, timeout=wall_seconds, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        full.cancel()
        exited.cancel()
    if communicating in done or exited in done:
        return "exited"
    return "channel" if serving in done else "limit"


async def _exited(proc: Process) -> None:
    """Until the launcher has exited (``wait()`` also waits for the pipes to close)."""
    while proc.returncode is None:
        await asyncio.sleep(_POLL_SECONDS)


async def _settle(proc: Process, communicating: asyncio.Future[None]) -> None:
    """Wait for the pipes' EOF and the exit status once the tree is dead, re-raising any error.

    Bounded: where no cgroup or pid namespace holds it, an escaped process may keep a pipe open.
    A launcher still running by then gets SIGKILL, with its process group.
    """
    done, _ = await asyncio.wait({communicating}, timeout=_SETTLE_SECONDS)
    if done:
        communicating.result()
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    communicating.cancel()


async def _communicate(proc: Process, stdin: bytes | None, output: _Output) -> None:
    """Feed stdin, read stdout and stderr, and wait for the child to exit."""
    assert proc.stdout is not None and proc.stderr is not None  # started with both piped
    await asyncio.gather(
        _feed(proc.stdin, stdin),
        output.pump(proc.stdout, output.stdout),
        output.pump(proc.stderr, output.stderr),
        proc.wait(),
    )


async def _feed(pipe: asyncio.StreamWriter | None, data: bytes | None) -> None:
    if pipe is None or data is None:
        return
    with suppress(BrokenPipeError, ConnectionResetError):  # the child need not read it all
        pipe.write(data)
        await pipe.drain()
    pipe.close()


def _status(
    output: _Output,
    ending: Ending,
    returncode: int | None,
    cpu_spent: bool,
    disk_full: bool,
    setup_failed: bool,
) -> Status:
    """Output cap first, then an end by the channel (killed), then time (wall limit, or killed
    once the CPU limit was spent), then the writable space."""
    if output.full.is_set():
        return "output_limit"
    if ending == "channel":
        return "killed"
    if ending == "limit" or (cpu_spent and returncode in (-signal.SIGXCPU, -signal.SIGKILL)):
        return "timeout"
    if disk_full:
        return "disk_limit"
    if returncode == 0:
        return "ok"
    if b"MemoryError" in output.stderr:
        return "memory"
    if returncode is None:
        return "error" if setup_failed else "killed"
    return "error" if returncode > 0 else "killed"


# --- optional protections ----------------------------------------------------------------------


def _isolation() -> _Isolation:
    """The isolation runs get here, as :data:`BACKEND_VARIABLE` asks (probed once per value)."""
    return _select(os.environ.get(BACKEND_VARIABLE, ""))


@cache
def _select(forced: str) -> _Isolation:
    """The strongest setup that works: each backend with a new root, then, as root, without.

    ``forced`` names the only backend to try ("" for the default order).
    """
    if forced not in ("", "namespaces", "userns", "none"):
        raise ConfigError(f"{BACKEND_VARIABLE} must be namespaces, userns or none, not {forced!r}")
    default: list[Backend] = ["namespaces", "userns"] if os.geteuid() == 0 else ["userns"]
    backends = [cast(Backend, forced)] if forced else default  # a Backend: checked above
    candidates = [_Isolation(backend, True) for backend in backends if backend != "none"]
    if "namespaces" in backends:
        candidates.append(_Isolation("namespaces", False))
    failures = [] if forced != "none" else [f"{BACKEND_VARIABLE}=none"]
    for candidate in candidates:
        failure = _probe(candidate)
        if not failure:
            return _Isolation(candidate.backend, candidate.filesystem, tuple(failures))
        new_root = "" if candidate.filesystem else " without a new root"
        failures.append(f"{candidate.backend}{new_root}: {failure}")
    return _Isolation("none", False, tuple(failures))


def _probe(isolation: _Isolation) -> str:
    """Run ``pass`` under ``isolation``: '' if that works, else why not (one line)."""
    with tempfile.TemporaryDirectory(prefix="maslab-sandbox-probe-") as tmp:
        run = _Run(Path(tmp).resolve(), isolation)
        _write_files(run.workdir, "", {})
        run.prepare()
        command, env = run.launch(Limits(), None, [_PYTHON, "-I", "-S", "-c", "pass"])
        try:
            probe = subprocess.run(
                command,
                cwd=run.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_SECONDS,
                check=False,
                start_new_session=True,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if probe.returncode == 0 and _read_exit(run.exit_file)[0] == 0:
            return ""
    lines = probe.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1].removeprefix("maslab sandbox: ") if lines else f"exit {probe.returncode}"


@cache
def _syscall_filter() -> bool:
    """Whether programs get the seccomp filter: the kernel has seccomp and the filter knows
    this machine's system calls."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    return os.uname().machine in SYSCALLS and "\nSeccomp:" in status


@cache
def _cgroup_root() -> Path | None:
    """The first cgroup hierarchy where we can create a child with a pids controller."""
    for root in _CGROUP_ROOTS:
        probe = root / f"maslab-probe-{uuid.uuid4().hex}"
        try:
            probe.mkdir()
        except OSError:
            continue
        usable = (probe / "pids.max").exists()
        probe.rmdir()
        if usable:
            return root
    return None


@contextmanager
def _pids_cgroup(max_processes: int) -> Iterator[Path | None]:
    """A new pids cgroup capped at ``max_processes`` (None if unavailable), removed on exit."""
    root = _cgroup_root()
    if root is None:
        yield None
        return
    path = root / f"{_CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
    path.mkdir()
    try:
        (path / "pids.max").write_text(str(max_processes))
        yield path
    finally:
        path.rmdir()


@cache
def _clear_leftovers() -> None:
    """Remove what runs of a maslab process that died (``kill -9``) left: their temporary
    directories and their (emptied) pids cgroups, each named after its creator's pid. Once per
    process, before its first run."""
    places = [(Path(tempfile.gettempdir()), _RUN_PREFIX, False)]
    if (cgroups := _cgroup_root()) is not None:
        places.append((cgroups, _CGROUP_PREFIX, True))
    for root, prefix, cgroup in places:
        with suppress(OSError):
            for path in root.glob(f"{prefix}*"):
                found = _LEFTOVER.fullmatch(path.name)
                if found and path.is_dir() and not _alive(int(found[1])):
                    _remove_leftover(path, cgroup=cgroup)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: alive
        return True
    return True


def _remove_leftover(path: Path, *, cgroup: bool) -> None:
    with suppress(OSError):
        if cgroup:
            _kill_cgroup(path)
            path.rmdir()
        else:
            shutil.rmtree(path)


def _kill_tree(proc: Process, cgroup: Path | None, namespaced: bool) -> None:
    """Kill everything the run started, and everything in the cgroup, if there is one.

    With namespaces, the launcher kills the namespaces' init and exits once their last process
    is gone (the init is in the cgroup, the launcher is not). Without, SIGKILL the process group.
    """
    with suppress(ProcessLookupError, PermissionError):
        if namespaced:
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    if cgroup is not None:
        _kill_cgroup(cgroup)


def _kill_cgroup(path: Path) -> None:
    """SIGKILL the cgroup's processes, round after round, until none is left."""
    procs = path / "cgroup.procs"
    for _ in range(_KILL_ROUNDS):
        pids = procs.read_text().split()
        if not pids:
            return
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.01)
