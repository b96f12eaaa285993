"""Where a ledger is: a `Location` read once from what the user gave (a file, `:memory:` or a PostgreSQL URL), the
default (`$YIELDGATE_LEDGER`, else ./yieldgate.db), and the check that one exists before a command changes what is
stored in it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from yieldgate.errors import InputError
from yieldgate.ledger.pg import SCHEMES, masked

__all__ = ["DEFAULT_LEDGER", "Location", "default_location", "must_exist"]

SQLITE_URL = "sqlite:///"
"""SQLAlchemy's form of a SQLite file: sqlite:///relative.db, sqlite:////absolute.db."""


@dataclass(frozen=True)
class Location:
    """A ledger's address, read once (`parse`): the one place that tells a file from a URL."""

    kind: Literal["file", "memory", "postgresql"]
    text: str
    """The file's path (without a `sqlite:///` prefix), `:memory:`, or the URL as given, password included: print
    `shown`."""

    @classmethod
    def parse(cls, value: str | os.PathLike[str] | Location | None) -> Location:
        """`value` read as a ledger address (None: `default_location()`); InputError for another scheme's URL."""
        if isinstance(value, Location):
            return value
        text = os.fspath(value) if value is not None else default_location()
        if text == ":memory:":
            return cls("memory", text)
        if text.startswith(SCHEMES):
            return cls("postgresql", text)
        if text.startswith(SQLITE_URL):
            return cls("file", text[len(SQLITE_URL) :])
        if "://" in text:
            raise InputError(
                f"{masked(text)}: not a ledger address yieldgate opens; give a file (./yieldgate.db, "
                "sqlite:///PATH) or a PostgreSQL URL (postgresql://USER@HOST:PORT/DB)"
            )
        return cls("file", text)

    @property
    def is_url(self) -> bool:
        """A PostgreSQL ledger: no file, no folder beside it."""
        return self.kind == "postgresql"

    @property
    def is_file(self) -> bool:
        return self.kind == "file"

    @property
    def shown(self) -> str:
        """The address fit to print (a URL's password masked)."""
        return masked(self.text)

    def missing(self) -> bool:
        """A file that does not exist (a URL or `:memory:` is never missing here: its server says)."""
        return self.is_file and not Path(self.text).exists()


DEFAULT_LEDGER = "yieldgate.db"


def must_exist(location: str | os.PathLike[str]) -> str:
    """`location` when it names a ledger that exists (or a URL or `:memory:`); InputError otherwise. For what changes
    runs already stored: opening a missing file for writing would create an empty ledger."""
    text = os.fspath(location)
    if Location.parse(text).missing():
        raise InputError(
            f"{text}: no ledger there; give the file the runs are in (the ledger argument, or $YIELDGATE_LEDGER)"
        )
    return text


def default_location() -> str:
    """The ledger a user gets without `--ledger`: $YIELDGATE_LEDGER, else ./yieldgate.db."""
    return os.environ.get("YIELDGATE_LEDGER") or DEFAULT_LEDGER
