"""Live progress of a run in the terminal: done/total, accuracy with CI, spend, errors, ETA."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from maslab.results import ResultRecord
from maslab.stats import clustered_interval


class RunProgress:
    """A rich progress bar fed with finished samples (use as a context manager).

    ``done`` are the samples a resumed run finished before: the figures cover the whole run.
    The accuracy and its interval (over every task so far) are recomputed at most every
    ``REFRESH_S`` seconds, so a large run's event loop does not pay for it per sample.
    """

    REFRESH_S = 0.25

    def __init__(
        self,
        label: str,
        total: int,
        *,
        done: Sequence[ResultRecord] = (),
        console: Console | None = None,
    ) -> None:
        self.console = console or Console(stderr=True)
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._task = self._bar.add_task(label, total=total, stats="")
        self.done = self.errors = 0
        self.tokens = self.calls = 0
        self._tasks: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])  # samples, correct
        self._shown = 0.0
        for record in done:
            self._add(record)
        self._bar.update(self._task, completed=self.done)
        self._show()

    def __enter__(self) -> RunProgress:
        self._bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._show()
        self._bar.stop()

    def update(self, record: ResultRecord) -> None:
        self._add(record)
        self._bar.update(self._task, advance=1)
        if time.monotonic() - self._shown >= self.REFRESH_S:
            self._show()

    def _add(self, record: ResultRecord) -> None:
        self.done += 1
        self.errors += record.status == "error"
        tally = self._tasks[record.task_id]
        tally[0] += 1
        tally[1] += record.correct
        self.tokens += record.tokens_used
        self.calls += int(record.usage.get("calls", 0))

    def _show(self) -> None:
        self._shown = time.monotonic()
        if not self.done:
            return
        means = [c / n for n, c in self._tasks.values()]
        accuracy = sum(means) / len(means)
        lo, hi = clustered_interval(means, self.done)
        stats = (
            f"acc {accuracy:.1%} [{lo:.1%}, {hi:.1%}]  "
            f"tokens {self.tokens:,}  calls {self.calls:,}"
            + (f"  [red]errors {self.errors}[/]" if self.errors else "")
        )
        self._bar.update(self._task, stats=stats)
