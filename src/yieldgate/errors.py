"""yieldgate's exceptions: one root, a few named leaves.

Every message carries the offending value and, where there is one, the fix. The CLI prints the message
as one line on stderr and exits with status 2. A message speaks of the library's arguments (`metric`,
`tokens_per_step`), never of a command's flags: an `InputError` lists the arguments it names in `parameters`, and
the CLI puts its flags in their place (`cli.FLAGS`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

__all__ = [
    "YieldgateError",
    "InputError",
    "check_choice",
    "ManifestError",
    "CorpusError",
    "LedgerError",
    "SchemaVersionError",
    "RunNotFound",
    "RunInUse",
    "RunReferenced",
    "BlockDamaged",
    "NetworkFilesystem",
    "LedgerRefused",
    "MissingExtra",
    "ProbesFailed",
]


class YieldgateError(Exception):
    """Root of every error yieldgate raises on purpose."""


class InputError(YieldgateError):
    """A file or value handed to yieldgate is missing, unreadable or malformed.

    `parameter`: the argument (or arguments, in the order the message names them) the message is about, each
    written in the message by its Python name, so that a front end that spells it otherwise can put its own
    spelling in its place: the CLI prints `--tokens-per-step must be > 0` for `tokens_per_step must be > 0`."""

    def __init__(self, message: str, *, parameter: str | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.parameters: tuple[str, ...] = (parameter,) if isinstance(parameter, str) else parameter


_Choice = TypeVar("_Choice")


def check_choice(parameter: str, value: _Choice, choices: Collection[_Choice]) -> _Choice:
    """`value` when it is one of `choices`; else an InputError that names `parameter` and lists the valid values
    (`primary must be learning or throughput, got 'nope'`). The one check of every argument that takes one of a
    set of values, made by the function that owns the set."""
    if value in choices:
        return value
    listed = [str(c) for c in choices]
    valid = " or ".join(listed) if len(listed) == 2 else f"one of {', '.join(listed)}"
    raise InputError(f"{parameter} must be {valid}, got {value!r}", parameter=parameter)


class ManifestError(InputError):
    """A manifest (or one of its parts) does not validate; the message names the field."""


class CorpusError(InputError):
    """The built-in corpus cannot be fetched, verified or read, or a value asked of it is out of range."""


class LedgerError(YieldgateError):
    """The ledger cannot be opened, read or written."""


class SchemaVersionError(LedgerError):
    """The ledger was written by a newer yieldgate whose schema this version does not know."""


class BlockDamaged(LedgerError):
    """A stored block of step records, or another stored record (an evaluation, a run's status, an event, a
    decision), fails its checksum (`yieldgate.ledger.checksum`): what it holds cannot be trusted."""


class NetworkFilesystem(LedgerError):
    """The ledger is on a network or FUSE filesystem, where SQLite's write-ahead log does not work across hosts."""


class LedgerRefused(LedgerError):
    """The ledger's database server refused us: a wrong password, no such database or role, a missing grant."""


class RunNotFound(LedgerError):
    """No run of that name is in the ledger."""


class RunInUse(YieldgateError):
    """Another process writes that run (or wrote it and died without closing it): a second writer would splice
    two runs into one."""


class ProbesFailed(YieldgateError):
    """Every probe of a campaign failed: there is nothing to rank, and a command that said "done" would hide it."""


class RunReferenced(YieldgateError):
    """A gate decision cites the run as evidence: removing or renaming it would break the audit trail."""


class MissingExtra(YieldgateError, ImportError):
    """An optional dependency is not installed: the message names the extra that installs it
    (`pip install 'yieldgate[torch]'`). An ImportError too, so that code that tries an import and falls back
    still does."""
