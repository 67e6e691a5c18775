"""What every command shares: the redacting console, the stop exceptions, argument types and
the checks that turn a bad path into a one-line error."""

from __future__ import annotations

import argparse
import errno
import os
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.text import Text

from maslab.errors import ConfigError
from maslab.secrets import redact


class _Console(Console):
    """Redacts every string before it is rendered (wrapping or highlighting could split a key);
    a broken pipe reaches :func:`maslab.cli.main` (rich's own handler exits with 1). Emoji codes
    are not replaced: ``:x:`` in a model name or an answer is printed as written."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(redact(text), **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of stdout went away")


console = _Console(soft_wrap=True, emoji=False)  # a model spec like "forms:x:" stays text


def plain_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], right: Collection[str] = ()
) -> str:
    """Aligned plain columns under a header, a line each, the columns named in ``right``
    right-aligned: what the commands print where a rich ``Table`` would measure every cell."""
    lines = [tuple(headers), *map(tuple, rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "".join(
        "  ".join(
            v.rjust(w) if h in right else v.ljust(w)
            for h, v, w in zip(headers, line, widths, strict=True)
        ).rstrip()
        + "\n"
        for line in lines
    )


_RST = re.compile(r"``(.+?)``|:[a-z]+(?::[a-z]+)?:`(~?)([^`]+)`")


def plain_text(text: str) -> str:
    """``text`` without reStructuredText markup, as a terminal shows help derived from a
    docstring or a description: a literal and a cross-reference (``:func:`a.b```) become their
    text, ``~a.b`` its last part."""

    def text_of(match: re.Match[str]) -> str:
        literal, short, target = match.groups()
        if literal is not None:
            return literal
        return target.rpartition(".")[2] if short else target

    return _RST.sub(text_of, text)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so the same cleanup runs."""


class RunStopped(Exception):
    """A run ended early by ``cause`` (a signal, a failed write); the message says what is
    saved."""

    def __init__(self, cause: KeyboardInterrupt | OSError, saved: str) -> None:
        super().__init__(saved)
        self.cause = cause


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other maslab error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def number(
    kind: Callable[[str], float], low: float, high: float | None = None, *, above: bool = False
) -> Callable[[str], float]:
    """An argparse type: a ``kind`` number at least ``low`` (above it, with ``above``) and at
    most ``high``."""
    noun = "a whole number" if kind is int else "a number"
    if high is not None:
        rule = f"between {low:g} and {high:g}"
    else:
        rule = f"{'above' if above else 'at least'} {low:g}"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not (value > low if above else value >= low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value

    return parse


COUNT = number(int, 1)


def import_option(p: argparse.ArgumentParser) -> None:
    """``--import MODULE`` (repeatable): :func:`maslab.cli.main` imports each before the command
    resolves any name, so what they register can be named."""
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module first (a dotted name or a .py file) so the methods, benchmarks, "
        "evaluators, providers or tools it registers can be named; repeatable",
    )


def output_file(path: Path) -> None:
    """A one-line error now if ``path`` cannot be created as a file."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; name the file, e.g. {path / 'report.html'}")
    folder = next(p for p in path.absolute().parents if p.exists())
    if not folder.is_dir():
        raise ConfigError(f"{path}: {folder} is a file, not a directory")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{path}: {folder} is not writable")
