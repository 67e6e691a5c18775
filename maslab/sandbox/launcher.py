"""The launcher of one sandboxed run (see :mod:`maslab.sandbox`); standard library only.

Run by file path, never imported by the run: ``python -I -S sandbox_launcher.py PROGRAM...``
with a JSON :class:`Config` in :data:`CONFIG_VARIABLE` and ``PROGRAM`` the command to run. The
launcher

1. opens the exit file;
2. when ``namespaces`` is set, unshares the pid and network namespaces (and the mount namespace
   when a ``filesystem`` is wanted, and a user namespace when ``id_map`` is set, whose id maps a
   helper left outside writes), then forks the namespaces' init and waits for it; SIGTERM makes
   it kill the init, which takes every process of the run with it;
3. joins the run's pids cgroup (from the init, if there is one) and, in the init, builds the new
   root: a tmpfs holding a copy of the skeleton the parent built, read-only, with the host's
   system directories and Python read-only, bounded tmpfs at :data:`SANDBOX_DIR`, ``/tmp`` and
   ``/dev/shm``, the harmless devices and a fresh ``/proc``; pivots into it and detaches the
   host's root;
4. forks the program, which drops its privileges (``user``: no new privileges, locked securebits,
   empty bounding and capability sets, then the given ids), copies the run's files into
   :data:`SANDBOX_DIR`, sets its resource limits, installs the system-call filter and execs;
5. reaps every process until the program exits, then records the program's exit code, CPU
   seconds and whether a writable file system filled up in the exit file. The init's exit ends
   the pid namespace, killing what is left; the launcher outside exits once it is all gone.

Descriptors the parent passed (a run's channel) stay open through every step, so the program
inherits them as they are: nothing here closes them.

A setup failure prints one line (``maslab sandbox: <step>: <reason>``) on stderr and exits with
:data:`SETUP_FAILED`.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import sys
from contextlib import contextmanager, suppress

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

        root: str  # an empty host directory, where the new root is mounted (a tmpfs)
        skeleton: str  # the host directory copied into the new root
        binds: list[str]  # host directories shown read-only at the same path
        workdir: str  # the host directory whose files the program finds in SANDBOX_DIR
        disk_mb: int  # the size of each writable file system: SANDBOX_DIR, /tmp, /dev/shm
        files: int  # the files and directories each of them may hold

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
        syscall_filter: bool  # install the program's seccomp filter (see DENIED_SYSCALLS)
        namespaces: Namespaces | None


CONFIG_VARIABLE = "MASLAB_SANDBOX_CONFIG"
"""The launcher's environment variable holding its JSON :class:`Config` (kept from the program
and from its ``/proc/1/cmdline``)."""
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
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000
_MNT_DETACH = 0x2
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV, _MOUNT_ATTR_NOEXEC = 0x1, 0x2, 0x4, 0x8
_LOCKED_DOWN = _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442  # every architecture's
_OPEN_TREE_CLONE, _MOVE_MOUNT_F_EMPTY_PATH = 0x1, 0x4
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 1, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
# Classic BPF over struct seccomp_data (little-endian): its fields' offsets, the opcodes used.
_NR_AT, _ARCH_AT, _FIRST_ARGUMENT_AT = 0, 4, 16
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF_0000, 0x0005_0000
_AUDIT_ARCH_X86_64, _X32_BIT = 0xC000003E, 0x4000_0000
_NAMESPACE_FLAGS = 0x7E02_0000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
# NOROOT and its lock, and locks on SETUID_FIXUP (left on), KEEP_CAPS (left off) and ambient raise.
_SECUREBITS = 0b1110_1011
_CAPABILITY_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


DENIED_SYSCALLS = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",  # namespaces, mounts
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",  # other processes
    "keyctl", "add_key", "request_key",  # the kernel's keyrings
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register",  # kernel attack surface, or calls a filter cannot see into
    "open_by_handle_at", "name_to_handle_at", "fanotify_init",  # files by handle, watching
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "vhangup",
    "settimeofday", "clock_settime", "adjtimex",  # the machine's, never a program's
)  # fmt: skip
"""System calls a sandboxed program is refused (EPERM), besides ``clone`` with a namespace flag
(new user namespaces and the rest) and ``clone3`` (ENOSYS: the C library falls back to
``clone``)."""
_GENERIC = {  # the numbers every architecture added since Linux 5.0 shares
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "clone3": 435, "pidfd_getfd": 438, "mount_setattr": 442, "quotactl_fd": 443,
}  # fmt: skip
SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {
        **_GENERIC, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "kcmp": 312, "keyctl": 250, "add_key": 248,
        "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "fanotify_init": 300,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168, "syslog": 103,
        "acct": 163, "quotactl": 179, "vhangup": 153, "settimeofday": 164,
        "clock_settime": 227, "adjtimex": 159, "clone": 56,
    }),
    "aarch64": (0xC00000B7, {
        **_GENERIC, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97,
        "setns": 268, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "kcmp": 272, "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "open_by_handle_at": 265,
        "name_to_handle_at": 264, "fanotify_init": 262, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "reboot": 142, "swapon": 224, "swapoff": 225, "syslog": 116, "acct": 89,
        "quotactl": 60, "vhangup": 58, "settimeofday": 170, "clock_settime": 112,
        "adjtimex": 171, "clone": 220,
    }),
}  # fmt: skip
"""Per machine (``os.uname().machine``): the audit architecture and the system calls'
numbers that the filter needs. A machine not listed runs without the filter."""


class SetupError(Exception):
    """A setup step failed; the message names the step and the reason."""


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def main(argv: list[str]) -> NoReturn:
    """Set up the run :data:`CONFIG_VARIABLE` describes, run ``argv[1:]``, record how it ended."""
    config: Config = json.loads(os.environ.pop(CONFIG_VARIABLE))  # not the program's to read
    program = argv[1:]
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
        workdir = None
        if namespaces is not None and namespaces["filesystem"] is not None:
            in_userns = namespaces["id_map"] is not None
            workdir = _build_root(namespaces["filesystem"], in_userns, user or [0, 0])
        _supervise(program, config, user, workdir, exit_fd)
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


def _build_root(filesystem: Filesystem, in_userns: bool, owner: list[int]) -> int:
    """Mount the new root (a tmpfs holding a copy of the skeleton), pivot into it and detach the
    host's root; the host's working directory, open for the program to copy (see
    :func:`_fill_sandbox`).

    No mount shows a host path but the system's: the root, SANDBOX_DIR, /tmp and /dev/shm are
    tmpfs. In a user namespace the init first takes the namespace's root ids, so that what it
    creates has an owner there (its host ids are unmapped when maslab runs as root); from then
    on it reaches host paths only through what it opened before: the run's directories and
    copies of the mounts it shows. ``owner``: the program's ids, owning SANDBOX_DIR.
    """
    with _step("make the mounts private"):
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    with _step("open the run's directories"):
        skeleton = _open_directory(filesystem["skeleton"])
        workdir = _open_directory(filesystem["workdir"])
    binds = [(_detach(path), "." + path, _LOCKED_DOWN) for path in filesystem["binds"]]
    devices = _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NOEXEC
    binds += [(_detach(f"/dev/{name}"), f"./dev/{name}", devices) for name in DEVICES]
    _mount_new("tmpfs", filesystem["root"], _MS_NOSUID | _MS_NODEV, "mode=0755,uid=0,gid=0")
    with _step("enter the new root"):
        os.chdir(filesystem["root"])
    if in_userns:
        with _step("take the namespace's root ids"):
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
    with _step("copy the skeleton"):
        _copy_tree(skeleton, ".")
        os.close(skeleton)
    for tree, target, attributes in binds:
        _attach(tree, target, attributes)
    bounds = f"size={filesystem['disk_mb']}m,nr_inodes={filesystem['files']}"
    own = f"mode=0700,uid={owner[0]},gid={owner[1]},{bounds}"
    _mount_new("tmpfs", "." + SANDBOX_DIR, _MS_NOSUID | _MS_NODEV, own)
    private = f"mode=1777,{bounds}"
    _mount_new("tmpfs", "./tmp", _MS_NOSUID | _MS_NODEV, private)
    _mount_new("tmpfs", "./dev/shm", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, private)
    _mount_new("proc", "./proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _set_attributes(".", _LOCKED_DOWN, recursive=False)
    _pivot_root()
    with _step(f"enter {SANDBOX_DIR}"):
        os.chdir(SANDBOX_DIR)
    return workdir


def _open_directory(path: str, parent: int | None = None) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)


def _copy_tree(source: int, target: str) -> None:
    """Copy the directories, regular files and symbolic links under the open directory
    ``source`` into ``target`` (modes kept, less the umask; owned by whoever copies)."""
    for entry in os.scandir(source):
        path = f"{target}/{entry.name}"
        mode = entry.stat(follow_symlinks=False).st_mode & 0o777
        if entry.is_symlink():
            os.symlink(os.readlink(entry.name, dir_fd=source), path)
        elif entry.is_dir(follow_symlinks=False):
            os.mkdir(path, mode)
            inner = _open_directory(entry.name, source)
            try:
                _copy_tree(inner, path)
            finally:
                os.close(inner)
        elif entry.is_file(follow_symlinks=False):
            _copy_file(os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=source), path, mode)


def _copy_file(source: int, target: str, mode: int) -> None:
    try:
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            while os.sendfile(out, source, None, 1 << 20):
                pass
        finally:
            os.close(out)
    finally:
        os.close(source)


def _mount_new(fstype: str, target: str, flags: int, options: str | None = None) -> None:
    with _step(f"mount {fstype} on {target}"):
        _mount(fstype, target, fstype, flags, options)


def _detach(source: str) -> int:
    """A detached copy of the mount at ``source`` and of the mounts under it, open."""
    flags = _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE
    with _step(f"bind {source}"):
        tree = _libc.syscall(
            ctypes.c_long(_SYS_OPEN_TREE), ctypes.c_int(_AT_FDCWD), _c(source), ctypes.c_uint(flags)
        )
        _ok(tree)
        return int(tree)


def _attach(tree: int, target: str, attributes: int) -> None:
    """Show the detached mounts ``tree`` at ``target`` with mount ``attributes``."""
    with _step(f"bind {target.removeprefix('.')}"):
        moved = _libc.syscall(
            ctypes.c_long(_SYS_MOVE_MOUNT),
            ctypes.c_int(tree),
            _c(""),
            ctypes.c_int(_AT_FDCWD),
            _c(target),
            ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH),
        )
        _ok(moved)
        os.close(tree)
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


def _pivot_root() -> None:
    """Make the working directory the root of this mount namespace; detach the old one entirely."""
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise SetupError(f"pivot_root: unknown syscall number on {os.uname().machine}")
    with _step("pivot_root"):
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
    program: list[str], config: Config, user: list[int] | None, workdir: int | None, exit_fd: int
) -> None:
    """Run the program as a child and reap (as an init must) until it exits; record its end:
    exit code, CPU seconds and whether its writable space filled up (1 or 0)."""
    with _step("fork the program"):
        child = os.fork()
    if child == 0:
        if user is not None:
            _drop_privileges(*user)
        if workdir is not None:
            _fill_sandbox(workdir)
        _set_rlimits(config["rlimits"])
        if config["syscall_filter"]:
            _filter_syscalls()
        with _step(f"exec {program[0]}"):
            os.execv(program[0], program)
    _Program.pid = child
    if workdir is not None:
        os.close(workdir)
    while (reaped := os.wait3(0))[0] != child:
        pass
    _, status, usage = reaped
    cpu = usage.ru_utime + usage.ru_stime
    full = workdir is not None and _filled_up()
    os.write(exit_fd, f"{os.waitstatus_to_exitcode(status)} {cpu} {int(full)}".encode())


def _fill_sandbox(workdir: int) -> None:
    """As the program: copy the run's files (the host directory open at ``workdir``) into
    SANDBOX_DIR, the working directory."""
    with _step(f"copy the run's files into {SANDBOX_DIR}"):
        _copy_tree(workdir, ".")
        os.close(workdir)


def _filled_up() -> bool:
    """Whether any of the run's writable file systems has no space or no file left."""
    for path in (SANDBOX_DIR, "/tmp", "/dev/shm"):
        with suppress(OSError):
            space = os.statvfs(path)
            if space.f_bavail == 0 or space.f_favail == 0:
                return True
    return False


def _drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good: no new privileges, no capabilities, none to regain."""
    with _step("drop privileges"):
        _ok(_prctl(_PR_SET_NO_NEW_PRIVS, 1))
        _ok(_prctl(_PR_SET_SECUREBITS, _SECUREBITS))
        capability = 0
        while _prctl(_PR_CAPBSET_DROP, capability) == 0:
            capability += 1
        if ctypes.get_errno() != errno.EINVAL:  # EINVAL: past the last capability
            _ok(-1)
        _ok(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL))
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        header = _CapHeader(version=_CAPABILITY_VERSION_3, pid=0)
        _ok(_libc.capset(ctypes.byref(header), (_CapData * 2)()))


def _filter_syscalls() -> None:
    """Refuse the program (and its children) the calls of :data:`DENIED_SYSCALLS` with EPERM,
    ``clone`` with a namespace flag too, and ``clone3`` with ENOSYS (so the C library falls back
    to ``clone``, whose flags a filter can read); calls of another ABI (x32, i386) are refused."""
    arch, numbers = SYSCALLS[os.uname().machine]
    program = _filter_program(arch, numbers)
    filters = (_SockFilter * len(program))(*(_SockFilter(*insn) for insn in program))
    fprog = _SockFprog(len(program), filters)
    with _step("filter system calls"):
        _ok(_prctl(_PR_SET_NO_NEW_PRIVS, 1))
        _ok(_prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog)))


def _filter_program(arch: int, numbers: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """The classic BPF program of :func:`_filter_syscalls`: (code, jump if true, if false, k);
    a jump skips that many instructions."""
    deny = (_RET, 0, 0, _ERRNO | errno.EPERM)
    body = [(_LD, 0, 0, _ARCH_AT), (_JEQ, 1, 0, arch), deny, (_LD, 0, 0, _NR_AT)]
    if arch == _AUDIT_ARCH_X86_64:  # x32 calls: the same arch, bit 30 set in the number
        body += [(_JGE, 0, 1, _X32_BIT), deny]
    for name in DENIED_SYSCALLS:
        body += [(_JEQ, 0, 1, numbers[name]), deny]
    return [
        *body,
        (_JEQ, 0, 1, numbers["clone3"]),
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),
        (_JEQ, 0, 3, numbers["clone"]),
        (_LD, 0, 0, _FIRST_ARGUMENT_AT),
        (_JSET, 0, 1, _NAMESPACE_FLAGS),
        deny,
        (_RET, 0, 0, _ALLOW),
    ]


def _prctl(option: int, argument: int = 0, second: int = 0) -> int:
    zero = ctypes.c_ulong(0)
    arguments = ctypes.c_ulong(argument), ctypes.c_ulong(second), zero, zero
    return _libc.prctl(ctypes.c_int(option), *arguments)


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
