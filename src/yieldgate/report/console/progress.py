"""A command's work in progress on the console: live bars on a terminal, plain lines anywhere else.

On a terminal, rich draws bars that redraw in place. With the output going to a file (CI, `tee`, a Slurm log) no bar
can be redrawn, and rich prints nothing until the work ends: the demo was silent for eight minutes. There,
`PlainProgress` takes the same calls as rich's `Progress` (`add_task`, `update`, `advance`, `remove_task`) and
prints plain lines instead, each stamped with the time since it began: one when a task starts something new (a
stage, the next run), completes or advances, one per line its caller says (a probe's end, with the count done),
and, while nothing else is said, one per task under way every `EVERY_S` seconds. Its first line names `yieldgate
serve`, which shows the runs live from the ledger.

`progress_bar` chooses between the two; `WorkProgress` (`train`, `batch-check`, `audit A B`) is one task of it,
shown from its first update on, so that an error raised before the work begins (a file that does not validate)
prints alone.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console

from yieldgate.report.console.lines import say

__all__ = ["EVERY_S", "PlainProgress", "WorkProgress", "live", "progress_bar", "status"]

EVERY_S = 30.0
"""Seconds between two plain lines while nothing else is said."""


def live(console: Console) -> bool:
    """Whether `console` can show live bars: it is a terminal, and so is standard output (`yieldgate probe > log`
    on a terminal: the log is the user's record of the run, and it gets the plain lines on standard error beside
    it)."""
    return console.is_terminal and sys.stdout.isatty()


def serve_hint(ledger: str) -> str:
    """The command that shows the runs of `ledger` live (a URL's password masked)."""
    from yieldgate.ledger.pg import masked

    return f"`yieldgate --ledger {masked(ledger)} serve` shows the runs live"


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float
    lines: bool
    """Said as it goes (a stage, a counter); False: only in the lines of what is under way, its caller says its end."""
    said: str = ""
    """The description its last line showed: a new one (the next run on the same task) is said at once."""


class PlainProgress:
    """rich's `Progress` where nothing can be redrawn: the same calls, said as plain lines (see the module
    docstring). `every`: seconds between the lines of tasks under way; `ledger`: where the runs go, for the first
    line's `yieldgate serve` (None: work that writes no runs, named without it)."""

    def __init__(self, console: Console, *, every: float = EVERY_S, ledger: str | None = None) -> None:
        self.console = console
        self.every = every
        self.ledger = ledger
        self.tasks: dict[int, _Task] = {}
        self.started = time.monotonic()
        self.last_line = self.started
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> PlainProgress:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._ticker is not None:
            return
        self.started = self.last_line = time.monotonic()
        self._say(
            f"progress: a line as each run ends and every {self.every:.0f} s (no terminal here to draw bars on)"
            + ("" if self.ledger is None else f"; {serve_hint(self.ledger)}")
        )
        self._ticker = threading.Thread(target=self._tick, name="yieldgate-progress", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=5)

    def add_task(
        self, description: str, *, total: float | None = None, completed: float = 0, lines: bool = True, **_: Any
    ) -> int:
        """A task, as rich's; `lines` False (a field to rich, which ignores it): said only among the tasks under way,
        never as it changes, starts or ends (a probe among many, whose end its caller says)."""
        with self._lock:
            task = 1 + max(self.tasks, default=0)
            self.tasks[task] = _Task(description.strip(), total, completed, lines)
            return task

    def update(
        self,
        task: int,
        *,
        description: str | None = None,
        completed: float | None = None,
        total: float | None = None,
        advance: float | None = None,
        **_: Any,
    ) -> None:
        with self._lock:
            t = self.tasks.get(task)
            if t is None:
                return
            was_done = t.total is not None and t.completed >= t.total
            t.description = t.description if description is None else description.strip()
            t.total = t.total if total is None else total
            t.completed = (t.completed if completed is None else completed) + (advance or 0)
            done = t.total is not None and t.completed >= t.total
            if t.lines and (advance or (done and not was_done) or t.description != t.said):
                self._say(self._line(t))

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def remove_task(self, task: int) -> None:
        with self._lock:
            self.tasks.pop(task, None)

    def print(self, text: str) -> None:
        """A line of its own (what a task's end says beside its counter)."""
        with self._lock:
            self._say(text)

    def _line(self, t: _Task) -> str:
        t.said = t.description
        if t.total is None:
            count = ""
        else:
            count = f": {_count(t.completed)} of {_count(t.total)}"
        return f"{t.description}{count}"

    def _say(self, text: str) -> None:
        self.last_line = time.monotonic()
        say(self.console, f"[{_clock(self.last_line - self.started)}] {text}", soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every, 1.0)):
            with self._lock:
                if time.monotonic() - self.last_line < self.every:
                    continue
                under_way = [t for t in self.tasks.values() if t.total is None or t.completed < t.total]
                for t in under_way:
                    self._say(self._line(t))
                if not under_way:
                    self._say("working")


def _count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}m{s % 60:02d}s"


def progress_bar(
    console: Console,
    *columns: Any,
    quiet: bool = False,
    transient: bool = False,
    ledger: str | None = None,
    lines: bool = True,
) -> Any:
    """rich's `Progress` with `columns` on a terminal (`live`; no bar with `quiet`: `--json`), else `PlainProgress`:
    the same calls either way. `ledger`: where the runs go, named in the plain lines' first line; `lines` False: no
    plain lines either (work of seconds, whose error must print alone)."""
    from rich.progress import Progress

    if not live(console):
        return PlainProgress(console, ledger=ledger) if lines else Progress(console=console, disable=True)
    return Progress(*columns, console=console, disable=quiet, transient=transient)


@contextmanager
def status(console: Console, text: str) -> Iterator[None]:
    """rich's spinner with `text` on a terminal; elsewhere `text` said once, as the work begins."""
    if live(console):
        with console.status(text):
            yield
    else:
        say(console, text)
        yield


class WorkProgress:
    """One task of `progress_bar`, started by its first `update` and stopped on leaving the `with` block; `quiet`:
    no bar on a terminal (`--json`; off a terminal the plain lines still go to `console`, standard error: a CI log
    of `probe --json > out.json` is not silent), `transient`: the bar cleared once done, `lines`: see
    `progress_bar`."""

    def __init__(
        self,
        console: Console,
        *,
        quiet: bool = False,
        transient: bool = False,
        ledger: str | None = None,
        lines: bool = True,
    ) -> None:
        self.bar = progress_bar(console, quiet=quiet, transient=transient, ledger=ledger, lines=lines)
        self.task: Any = None

    def __enter__(self) -> WorkProgress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.task is not None:
            self.bar.stop()

    def update(
        self, description: str | None = None, *, completed: float | None = None, total: float | None = None
    ) -> None:
        """Say what is under way (`description`), how far it is (`completed` of `total`; no total: unknown)."""
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task(description or "", total=total)
        self.bar.update(self.task, description=description, completed=completed, total=total)

    def finished(self, text: str) -> None:
        """One piece of the work has ended (a training of several): a line of its own where there is no bar to show
        it."""
        if isinstance(self.bar, PlainProgress):
            self.bar.print(text)
