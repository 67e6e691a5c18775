"""The ``maslab`` command: run, sweep, merge, report, show, triage, attribute, score, view,
compare, agreement, export, list, data, cache.

Every failure is one line on stderr. Exit status: 2 for a user mistake (a bad option, name,
file or value), 1 for samples that errored or a file system failure (disk full, permissions),
130 after Ctrl-C and 143 after SIGTERM (an interrupted run resumes when the same command is run
again), 141 when the reader of stdout goes away (``maslab list methods | head -1``).
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from maslab.cli.commands import COMMANDS
from maslab.cli.console import Parser, RunStopped, Terminated, plain_text
from maslab.errors import MaslabError, RunFailed
from maslab.harness.heap import steady_heap
from maslab.plugins import import_module
from maslab.secrets import redact


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The parser of ``maslab``, with the options of the command ``argv`` names (only its
    module is imported; the others are listed with their one-line help); None: of every
    command."""
    summary = " ".join(__doc__.split("\n\n")[0].split())
    parser = Parser(prog="maslab", description=plain_text(summary))
    sub = parser.add_subparsers(dest="command", required=True)
    named = next((arg for arg in argv if not arg.startswith("-")), None) if argv else None
    modules = dict.fromkeys(command.module for command in COMMANDS.values())
    if argv is not None:
        modules = dict.fromkeys([COMMANDS[named].module] if named in COMMANDS else [])
    for module in modules:
        importlib.import_module(f"maslab.cli.{module}").add_commands(sub)
    for name, command in COMMANDS.items():
        if command.module not in modules:
            sub.add_parser(name, help=command.help)  # its options load when it is the command
    return parser


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: raise :class:`Terminated` where Ctrl-C raises KeyboardInterrupt. While a run's
    event loop runs, from a callback of the loop, between two steps of its tasks: raised in the
    middle of whichever task the signal interrupted, that task would keep the exception, and
    asyncio would print it at exit ("Task exception was never retrieved") after the one line
    saying what was saved."""
    asyncio = sys.modules.get("asyncio")  # not imported: no loop runs
    try:
        loop = asyncio.get_running_loop() if asyncio is not None else None
    except RuntimeError:  # none runs
        loop = None
    if loop is None:
        raise Terminated
    loop.call_soon_threadsafe(_raise_terminated)  # asyncio.run runs its loop again to clean up


def _raise_terminated() -> NoReturn:
    raise Terminated


def _file_problem(exc: OSError) -> str:
    """One line for a failed file operation: the path and the reason."""
    where = f"{exc.filename}: " if exc.filename else ""
    hint = " (free some space first)" if exc.errno == errno.ENOSPC else ""
    return f"{where}{exc.strerror or exc}{hint}"


def _report_stop(exc: KeyboardInterrupt | OSError, saved: str = "") -> int:
    """Print why the command stopped (one line); return its exit status."""
    note = f"; {saved}" if saved else ""
    if isinstance(exc, OSError):
        print(f"maslab: error: {_file_problem(exc)}{note}", file=sys.stderr)
        return 1
    if isinstance(exc, Terminated):
        print(f"maslab: interrupted by SIGTERM{note}", file=sys.stderr)
        return 128 + signal.SIGTERM
    print(f"maslab: interrupted by Ctrl-C{note}", file=sys.stderr)
    return 128 + signal.SIGINT


def _quiet_stdout() -> None:
    """After a broken pipe: send what is left of stdout to /dev/null, so the flush at exit
    does not fail again (the recipe of Python's signal module documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # stdout is not a file (captured, replaced)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else argv
        args = build_parser(argv).parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else 2
    on_main_thread = threading.current_thread() is threading.main_thread()
    # only the main thread may handle signals
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    try:
        for module in getattr(args, "imports", ()):
            import_module(module)
        with steady_heap():
            status = args.func(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # the reader of stdout is gone (| head): stop quietly
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a process the pipe ended
    except MaslabError as exc:
        message = " ".join(redact(str(exc)).split())  # one line, whatever the message held
        print(f"maslab: error: {message}", file=sys.stderr)
        return 1 if isinstance(exc, RunFailed) else 2  # 2: a mistake, and nothing written
    except RunStopped as exc:
        return _report_stop(exc.cause, str(exc))
    except (KeyboardInterrupt, OSError) as exc:
        return _report_stop(exc)
    except Exception:  # a bug: its traceback, for a report, with every secret redacted
        print(redact(traceback.format_exc()), end="", file=sys.stderr)
        print("maslab: internal error (a bug): please report it with the above", file=sys.stderr)
        return 1
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
