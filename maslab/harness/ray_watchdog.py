"""Ends a local Ray's processes when the driver that started it ends, even by ``kill -9``.

The kernel kills the processes the driver started (the GCS, the raylet, ...) with it, but not
the raylet's children: its agents linger a minute or more, stuck reaching the dead GCS.
:func:`watch` runs this file (standard library only) in a session of its own, out of reach of
the terminal's Ctrl-C, with a pipe on its stdin whose write end only the driver holds. At end of
file (the driver closed the pipe, or died) it kills every process but the driver that has a
file in the Ray session's directory open for writing: Ray sends each of its processes' output
and logs there, and other Rays use directories of their own.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Collection
from contextlib import suppress

SWEEPS = 25  # kill what is found, look again PAUSE_S later; stop when nothing is left
PAUSE_S = 0.2


def watch(session_dir: str) -> subprocess.Popen[bytes]:
    """Start the watchdog of the local Ray whose session directory is ``session_dir``; closing
    its ``stdin`` (the driver's death does) has it end the session's processes, then itself."""
    return subprocess.Popen(
        [sys.executable, "-I", __file__, session_dir, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def writes_under(pid: str, directory: str) -> bool:
    """Whether process ``pid`` (of this user) has a file under ``directory`` open for writing."""
    inside = os.path.join(directory, "")
    try:
        fds = list(os.scandir(f"/proc/{pid}/fd"))
    except OSError:  # gone, or another user's
        return False
    for fd in fds:
        with suppress(OSError):  # closed meanwhile
            if os.lstat(fd.path).st_mode & stat.S_IWUSR and os.readlink(fd.path).startswith(inside):
                return True
    return False


def end_session(session_dir: str, spare: Collection[int] = ()) -> None:
    """Kill every process but this one and ``spare`` that has a file in the Ray session's
    directory ``session_dir`` open for writing, and look again until none is left (or
    :data:`SWEEPS` times): how a Ray started here ends, whoever started it."""
    spared = {os.getpid(), *spare}
    for _ in range(SWEEPS):
        pids = [
            int(pid)
            for pid in filter(str.isdigit, os.listdir("/proc"))
            if int(pid) not in spared and writes_under(pid, session_dir)
        ]
        if not pids:
            return
        for pid in pids:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(PAUSE_S)


def main(session_dir: str, driver: int) -> None:
    """Wait for end of file on stdin, then end the session's processes (the driver spared)."""
    sys.stdin.buffer.read()  # nobody writes: this returns at end of file
    end_session(session_dir, (driver,))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
