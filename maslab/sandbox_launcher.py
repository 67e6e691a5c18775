"""The launcher of one sandboxed run (see :mod:`maslab.sandbox`); standard library only.

Run by file path, never imported by the run: ``python -I -S sandbox_launcher.py CONFIG PROGRAM...``
with ``CONFIG`` a JSON :class:`Config` and ``PROGRAM`` the command to run. The launcher

1. opens the exit file;
2. when ``namespaces`` is set, unshares the pid and network namespaces (and the mount namespace
   when a ``filesystem`` is wanted, and a user namespace when ``id_map`` is set, whose id maps a
   helper left outside writes), then forks the namespaces' init and waits for it; SIGTERM makes
   it kill the init, which takes every process of the run with it;
3. joins the run's pids cgroup (from the init, if there is one) and, in the init, mounts the new
   root: the skeleton the parent built, read-only, with the host's system directories and Python
   read-only, the run's directory writable at :data:`SANDBOX_DIR`, a private ``/tmp`` and
   ``/dev/shm``, the harmless devices and a fresh ``/proc``; pivots into it and detaches the
   host's root;
4. forks the program, which drops its privileges (``user``: no new privileges, locked securebits,
   empty bounding and capability sets, then the given ids), sets its resource limits and execs;
5. reaps every process until the program exits, then records the program's exit code and CPU
   seconds in the exit file. The init's exit ends the pid namespace, killing what is left; the
   launcher outside exits once it is all gone.

Descriptors the parent passed (a run's channel) stay open through every step, so the program
inherits them as they are: nothing here closes them.

A setup failure prints one line (``maslab sandbox: <step>: <reason>``) on stderr and exits with
:data:`SETUP_FAILED`.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from contextlib import contextmanager, suppress
from errno import EINVAL

TYPE_CHECKING = False  # spares the launcher importing typing, which checkers read as usual
if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType
    from typing import NoReturn, TypedDict

    class Filesystem(TypedDict):
        """The new root, mounted on ``root``: a host directory holding its skeleton.

        The skeleton has a mount point for each of ``binds``, for SANDBOX_DIR, /tmp, /proc and
        /dev/shm, an empty file for each of DEVICES, and whatever links (merged /usr, /dev/fd) the
        parent wants; it is shown read-only.
        """

        root: str
        binds: list[str]  # host directories shown read-only at the same path
        workdir: str  # the host directory shown writable at SANDBOX_DIR
        tmp_mb: int  # the size of the private /tmp and /dev/shm

    class Namespaces(TypedDict):
        """New pid and network namespaces, and what else the run gets."""

        id_map: list[int] | None  # [host uid, host gid] behind root of a new user namespace
        user: list[int] | None  # [uid, gid] the program switches to, after dropping privileges
        filesystem: Filesystem | None

    class Config(TypedDict):
        """Everything the launcher needs besides the program's command."""

        exit_file: str
        parent: int  # maslab's pid: the run ends when that process dies
        deadline_seconds: float  # the run ends by then, whatever maslab does
        cgroup_procs: str  # the cgroup to join, "" for none
        rlimits: dict[str, list[int]]  # resource name -> [soft, hard], clamped to the hard limit
        namespaces: Namespaces | None


SANDBOX_DIR = "/sandbox"
"""Where the run's directory appears inside a new root: the program's cwd, HOME and TMPDIR."""
SETUP_FAILED = 125
"""The launcher's exit code when the sandbox could not be set up."""
DEVICES = ("null", "zero", "full", "random", "urandom")
"""The host devices shown in the new root's /dev."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x2, 0x4, 0x8
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_MNT_DETACH = 0x2
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_NOEXEC = 0x1, 0x2, 0x4, 0x8
_LOCKED_DOWN = _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_SYS_MOUNT_SETATTR = 442  # the same on every architecture (Linux 5.12+)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 1, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
# NOROOT and its lock, and locks on SETUID_FIXUP (left on), KEEP_CAPS (left off) and ambient raise.
_SECUREBITS = 0b1110_1011
_CAPABILITY_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class SetupError(Exception):
    """A setup step failed; the message names the step and the reason."""


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def main(argv: list[str]) -> NoReturn:
    """Set up the run described by ``argv[1]``, run ``argv[2:]`` and record how it ended."""
    config: Config = json.loads(argv[1])
    program = argv[2:]
    os.umask(0o022)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as an init, ignore it from inside
    try:
        exit_fd = _open_exit_file(config["exit_file"])
        namespaces = config["namespaces"]
        user = None
        _end_with(config["parent"], config["deadline_seconds"])
        signal.signal(signal.SIGTERM, _end_program if namespaces is None else _end_namespaces)
        if namespaces is not None:
            init = _unshare(namespaces)
            if init:
                _wait_for_init(init)
            _become_init()
            user = namespaces["user"]
        _join_cgroup(config["cgroup_procs"])
        if namespaces is not None and namespaces["filesystem"] is not None:
            _build_root(namespaces["filesystem"])
        _supervise(program, config["rlimits"], user, exit_fd)
    except SetupError as error:
        print(f"maslab sandbox: {error}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    os._exit(0)


@contextmanager
def _step(what: str) -> Iterator[None]:
    """Turn an OSError inside into a one-line :class:`SetupError` naming ``what``."""
    try:
        yield
    except OSError as error:
        raise SetupError(f"{what}: {error.strerror or error}") from None


def _ok(result: int) -> None:
    """Raise the C library's errno as an OSError when a call returned -1."""
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def _end_with(parent: int, seconds: float) -> None:
    """End the run (SIGTERM to this launcher) when maslab dies, even by SIGKILL, or after
    ``seconds``, should maslab, alive, fail to end it at its wall limit."""
    with _step("set the parent-death signal"):
        _ok(_prctl(_PR_SET_PDEATHSIG, signal.SIGTERM))
    if os.getppid() != parent:  # maslab died before the signal was set
        os._exit(SETUP_FAILED)
    signal.signal(signal.SIGALRM, lambda signum, frame: os.kill(os.getpid(), signal.SIGTERM))
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _open_exit_file(path: str) -> int:
    with _step("open the exit file"):
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)


def _join_cgroup(procs: str) -> None:
    """Move into the run's cgroup (the init, with namespaces: the launcher outside stays out)."""
    if procs:
        with _step("join the cgroup"), open(procs, "w") as file:
            file.write("0")


# --- namespaces --------------------------------------------------------------------------------


def _unshare(namespaces: Namespaces) -> int:
    """Enter new namespaces and fork their init; the init's pid (0 in the init itself)."""
    flags = _CLONE_NEWPID | _CLONE_NEWNET
    if namespaces["filesystem"] is not None:
        flags |= _CLONE_NEWNS
    if os.geteuid() == 0:
        with _step("setgroups"):
            os.setgroups([])
    if namespaces["id_map"] is None:
        with _step("unshare"):
            _ok(_libc.unshare(flags))
    else:
        _unshare_user(flags | _CLONE_NEWUSER, namespaces["id_map"])
    with _step("fork the init"):
        return os.fork()


def _unshare_user(flags: int, id_map: list[int]) -> None:
    """Unshare with a new user namespace whose root is ``id_map`` (host uid, gid) outside.

    Mapping ids other than one's own takes privileges in the parent namespace, which the
    unshared process no longer has: a helper forked beforehand writes the maps.
    """
    target = os.getpid()
    with _step("fork the id mapper"):
        go_read, go_write = os.pipe()
        report_read, report_write = os.pipe()
        helper = os.fork()
    if helper == 0:
        os.close(go_write)
        os.close(report_read)
        if os.read(go_read, 1):
            os.write(report_write, _map_ids(target, *id_map).encode())
        os._exit(0)
    os.close(go_read)
    os.close(report_write)
    try:
        with _step("unshare"):
            _ok(_libc.unshare(flags))
        os.write(go_write, b"!")
    finally:
        os.close(go_write)
        report = os.read(report_read, 4096).decode()
        os.waitpid(helper, 0)
    if report:
        raise SetupError(report)


def _map_ids(pid: int, uid: int, gid: int) -> str:
    """Map root of ``pid``'s user namespace to ``uid``/``gid``; why that failed, or ''."""
    try:
        with _step("map the user namespace's ids"):
            maps = {"setgroups": "deny", "uid_map": f"0 {uid} 1", "gid_map": f"0 {gid} 1"}
            for name, text in maps.items():
                with open(f"/proc/{pid}/{name}", "w") as file:
                    file.write(text)
    except SetupError as error:
        return str(error)
    return ""


class _Init:
    """The namespaces' init, as the launcher outside sees it."""

    pidfd = -1  # refers to the init, even once it is reaped: never to another process
    ending = False  # SIGTERM came: kill the init as soon as there is one


def _end_namespaces(signum: int, frame: FrameType | None) -> None:
    """On SIGTERM outside: kill the init, and with it every process in the namespaces."""
    _Init.ending = True
    if _Init.pidfd >= 0:
        with suppress(ProcessLookupError):  # already gone
            signal.pidfd_send_signal(_Init.pidfd, signal.SIGKILL)


def _wait_for_init(pid: int) -> NoReturn:
    """Wait for the init and exit with its code (128 + signal if killed).

    The init exits only once every other process of its pid namespace is gone, so when this
    launcher exits, nothing of the run is left.
    """
    with _step("open the init's pidfd"):
        _Init.pidfd = os.pidfd_open(pid)
    if _Init.ending:
        signal.pidfd_send_signal(_Init.pidfd, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def _become_init() -> None:
    """In the new pid namespace: die with the launcher outside, leave SIGTERM to it."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with _step("set the parent-death signal"):
        _ok(_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL))


# --- the new root ------------------------------------------------------------------------------


def _build_root(filesystem: Filesystem) -> None:
    """Mount the new root on its skeleton, pivot into it and detach the host's root.

    Nothing is created here, only mounted: the parent built the skeleton (mount points, /dev's
    files and links), so this works even where the init's own uid is unmapped in its user
    namespace and could not own new files.
    """
    root = filesystem["root"]
    with _step("make the mounts private"):
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    with _step("bind the new root"):
        _mount(root, root, None, _MS_BIND)
    for path in filesystem["binds"]:
        _bind(path, root + path, _LOCKED_DOWN)
    for name in DEVICES:
        _bind(f"/dev/{name}", f"{root}/dev/{name}", _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NOEXEC)
    _bind(filesystem["workdir"], root + SANDBOX_DIR, _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV)
    private = f"mode=1777,size={filesystem['tmp_mb']}m"
    _mount_new("tmpfs", root + "/tmp", _MS_NOSUID | _MS_NODEV, private)
    _mount_new("tmpfs", root + "/dev/shm", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, private)
    _mount_new("proc", root + "/proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _set_attributes(root, _LOCKED_DOWN, recursive=False)
    _pivot_root(root)
    with _step(f"enter {SANDBOX_DIR}"):
        os.chdir(SANDBOX_DIR)


def _mount_new(fstype: str, target: str, flags: int, options: str | None = None) -> None:
    with _step(f"mount {fstype} on {target}"):
        _mount(fstype, target, fstype, flags, options)


def _bind(source: str, target: str, attributes: int) -> None:
    """Show ``source`` (and the mounts under it) at ``target`` with mount ``attributes``."""
    with _step(f"bind {source}"):
        _mount(source, target, None, _MS_BIND | _MS_REC)
    _set_attributes(target, attributes, recursive=True)


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, options: str | None = None
) -> None:
    _ok(_libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(options)))


def _set_attributes(path: str, attributes: int, *, recursive: bool) -> None:
    """Set mount ``attributes`` (never clearing any) on ``path``, and the mounts under it."""
    attr = _MountAttr(attr_set=attributes)
    flags = _AT_RECURSIVE if recursive else 0
    with _step(f"lock down {path}"):
        _ok(
            _libc.syscall(
                ctypes.c_long(_SYS_MOUNT_SETATTR),
                ctypes.c_int(_AT_FDCWD),
                _c(path),
                ctypes.c_uint(flags),
                ctypes.byref(attr),
                ctypes.c_size_t(ctypes.sizeof(attr)),
            )
        )


def _pivot_root(root: str) -> None:
    """Make ``root`` the root of this mount namespace and detach the old one entirely."""
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise SetupError(f"pivot_root: unknown syscall number on {os.uname().machine}")
    with _step("pivot_root"):
        os.chdir(root)
        _ok(_libc.syscall(ctypes.c_long(number), _c("."), _c(".")))
        _ok(_libc.umount2(_c("."), ctypes.c_int(_MNT_DETACH)))  # the old root, stacked on "."
        os.chdir("/")


def _c(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


# --- the program -------------------------------------------------------------------------------


class _Program:
    """The program, as the process that forked it sees it."""

    pid = 0  # 0 until forked


def _end_program(signum: int, frame: FrameType | None) -> None:
    """On SIGTERM without namespaces: kill the program (the launcher reaps it and exits)."""
    if not _Program.pid:
        os._exit(SETUP_FAILED)
    with suppress(ProcessLookupError):
        os.kill(_Program.pid, signal.SIGKILL)


def _supervise(
    program: list[str], rlimits: dict[str, list[int]], user: list[int] | None, exit_fd: int
) -> None:
    """Run the program as a child and reap (as an init must) until it exits; record its end."""
    with _step("fork the program"):
        child = os.fork()
    if child == 0:
        if user is not None:
            _drop_privileges(*user)
        _set_rlimits(rlimits)
        with _step(f"exec {program[0]}"):
            os.execv(program[0], program)
    _Program.pid = child
    while (reaped := os.wait3(0))[0] != child:
        pass
    _, status, usage = reaped
    cpu = usage.ru_utime + usage.ru_stime
    os.write(exit_fd, f"{os.waitstatus_to_exitcode(status)} {cpu}".encode())


def _drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good: no new privileges, no capabilities, none to regain."""
    with _step("drop privileges"):
        _ok(_prctl(_PR_SET_NO_NEW_PRIVS, 1))
        _ok(_prctl(_PR_SET_SECUREBITS, _SECUREBITS))
        capability = 0
        while _prctl(_PR_CAPBSET_DROP, capability) == 0:
            capability += 1
        if ctypes.get_errno() != EINVAL:  # EINVAL: past the last capability
            _ok(-1)
        _ok(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL))
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        header = _CapHeader(version=_CAPABILITY_VERSION_3, pid=0)
        _ok(_libc.capset(ctypes.byref(header), (_CapData * 2)()))


def _prctl(option: int, argument: int = 0) -> int:
    zero = ctypes.c_ulong(0)
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(argument), zero, zero, zero)


def _set_rlimits(rlimits: dict[str, list[int]]) -> None:
    """Set each limit, clamped to the hard limit already in place (it cannot be raised)."""
    with _step("set resource limits"):
        for name, (soft, hard) in rlimits.items():
            kind = getattr(resource, name)
            ceiling = resource.getrlimit(kind)[1]
            if ceiling != resource.RLIM_INFINITY:
                soft, hard = min(soft, ceiling), min(hard, ceiling)
            resource.setrlimit(kind, (soft, hard))


if __name__ == "__main__":
    main(sys.argv)
