"""A command's work in progress on the console (`train`, `batch-check`, `audit A B`): one bar, shown from its first
update on, so that an error raised before the work begins (a file that does not validate) prints alone."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console

__all__ = ["WorkProgress"]


class WorkProgress:
    """One rich progress bar, started by its first `update` and stopped on leaving the `with` block; `quiet`: none
    (`--json`), `transient`: cleared once done."""

    def __init__(self, console: Console, *, quiet: bool = False, transient: bool = False) -> None:
        from rich.progress import Progress

        self.bar = Progress(console=console, disable=quiet, transient=transient)
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
