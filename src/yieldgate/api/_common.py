"""What every api function shares: the ledger argument, opened for one call or handed on as a location."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from yieldgate.ledger import Ledger, default_location, must_exist

if TYPE_CHECKING:
    pass


LedgerArg = Ledger | str | os.PathLike[str] | None
LocationArg = str | os.PathLike[str] | None
"""Where a ledger is, for a command that hands it to other threads or processes (a training, a campaign's workers):
a path or URL, or None for the default (`$YIELDGATE_LEDGER`, else `./yieldgate.db`)."""


@contextmanager
def _open(ledger: LedgerArg, *, readonly: bool, existing: bool = False) -> Iterator[Ledger]:
    """The ledger given, or one opened (and closed) for the call; with `existing`, a location with no ledger is an
    error rather than a new file."""
    if isinstance(ledger, Ledger):
        yield ledger
        return
    location = ledger if ledger is not None else default_location()
    with Ledger(must_exist(location) if existing else location, readonly=readonly) as opened:
        yield opened


def _many(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _matching(led: Ledger, patterns: str | Sequence[str]) -> list[str]:
    from yieldgate.analysis.listing import match_patterns

    # The names alone (`Ledger.run_names`): `tag`, `untag` and `rm` match inside their write transaction, where the
    # runs list (every run's totals, every record's checksum, a DataFrame) held the write lock for seconds.
    return match_patterns(led.run_names(), _many(patterns), led.location)


def _location(ledger: LocationArg) -> str:
    return os.fspath(ledger) if ledger is not None else default_location()
