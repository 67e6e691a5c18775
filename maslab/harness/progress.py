"""Live progress of a run in the terminal: done/total, accuracy with CI, spend, errors, ETA.

One line at any width: the count, elapsed time and ETA always show in full; the rest of the
line gets what is left, giving up first the bar, then calls and tokens, then label characters,
and last the accuracy and error count. Several runs at once (a sweep's cells) show a line each
in one display (:func:`run_lines`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console, ConsoleOptions, RenderResult
from rich.progress import (
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text

from maslab.analysis.stats import RunningAccuracy
from maslab.secrets import redact
from maslab.store.run_store import ResultRecord

# (text, style) pieces of the figures, most important first; the first ``kept`` come before
# the label, the rest only while the whole label fits
Figures = tuple[tuple[str, str], ...]
_BAR_MIN, _BAR_MAX = 10, 40


@dataclass(frozen=True)
class _FittedLine:
    """Label, bar and figures laid out in the width the table gives them."""

    label: str
    completed: float
    total: float | None
    figures: Figures
    kept: int

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        label = Text(redact(self.label), style="bold")  # a Text: the console would not redact it
        shown = self.kept
        while shown < len(self.figures) and self._room(width, shown + 1) >= label.cell_len:
            shown += 1
        room = self._room(width, shown)
        line = Text(no_wrap=True, overflow="ellipsis")
        if room > 0:
            bar = min(_BAR_MAX, room - label.cell_len - 1)
            label.truncate(room, overflow="ellipsis")
            line.append_text(label)
            if bar >= _BAR_MIN and self.total:
                done = round(bar * min(1.0, self.completed / self.total))
                line.append(" ").append("━" * done, "bar.complete")
                line.append("━" * (bar - done), "bar.back")
            if shown:
                line.append(" ")
        for i, (text, style) in enumerate(self.figures[:shown]):
            line.append(("  " if i else "") + text, style)
        line.truncate(width, overflow="ellipsis")
        yield line

    def _room(self, width: int, shown: int) -> int:
        """What is left for the label and bar beside the first ``shown`` figures."""
        figures = sum(len(text) + 2 for text, _ in self.figures[:shown]) - 1 if shown else 0
        return width - figures


class _LineColumn(ProgressColumn):
    """The flexible part of the line (see :class:`_FittedLine`)."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(ratio=1, no_wrap=True))

    def render(self, task: Task) -> _FittedLine:
        figures, kept = task.fields["figures"]
        return _FittedLine(task.description, task.completed, task.total, figures, kept)


def run_lines(console: Console | None = None) -> Progress:
    """A live display of run lines on stderr (start and stop it, or use it as a context
    manager); each :class:`RunProgress` given it adds its line, and removes it at its end."""
    return Progress(
        _LineColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        transient=False,
        expand=True,
    )


class RunProgress:
    """A rich progress bar fed with finished samples (use as a context manager).

    ``done`` are the samples a resumed run finished before: the figures cover the whole run.
    The accuracy and its interval (over every task so far) are recomputed at most every
    ``REFRESH_S`` seconds, so a large run's event loop does not pay for it per sample.
    ``lines``: a display of several runs (:func:`run_lines`) to show the bar in, as one line
    that goes at the end; by default the bar is a display of its own.
    """

    REFRESH_S = 0.25

    def __init__(
        self,
        label: str,
        total: int,
        *,
        done: Sequence[ResultRecord] = (),
        console: Console | None = None,
        lines: Progress | None = None,
    ) -> None:
        self._own = lines is None
        self._bar = run_lines(console) if lines is None else lines
        self._task = self._bar.add_task(label, total=total, figures=((), 0))
        self.done = self.errors = 0
        self.verdicts = 0  # scores that grade (not measurements): no accuracy shown without one
        self.tokens = self.calls = 0
        self._accuracy = RunningAccuracy()
        self._shown = 0.0
        for record in done:
            self._add(record)
        self._bar.update(self._task, completed=self.done)
        self._show()

    def __enter__(self) -> RunProgress:
        if self._own:
            self._bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._show()
        if self._own:
            self._bar.stop()
        else:
            self._bar.remove_task(self._task)

    def update(self, record: ResultRecord) -> None:
        self._add(record)
        self._bar.update(self._task, advance=1)
        if time.monotonic() - self._shown >= self.REFRESH_S:
            self._show()

    def _add(self, record: ResultRecord) -> None:
        self.done += 1
        self.errors += record.status == "error"
        self.verdicts += record.score is not None and not record.score.measurement
        self._accuracy.add(record.task_id, record.correct)
        self.tokens += record.tokens_used
        self.calls += int(record.usage.get("calls", 0))

    def _show(self) -> None:
        self._shown = time.monotonic()
        if not self.done:
            return
        kept: Figures = ()
        if self.verdicts:
            accuracy, (lo, hi) = self._accuracy.accuracy, self._accuracy.interval()
            kept = ((f"acc {accuracy:.1%} [{lo:.1%}, {hi:.1%}]", ""),)
        if self.errors:
            kept += ((f"errors {self.errors}", "red"),)
        spend = ((f"tokens {self.tokens:,}", ""), (f"calls {self.calls:,}", ""))
        self._bar.update(self._task, figures=(kept + spend, len(kept)))
