"""yieldgate's exceptions: one root, a few named leaves.

Every message carries the offending value and, where there is one, the fix. The CLI prints the message
as one line on stderr and exits with status 2.
"""

from __future__ import annotations

__all__ = [
    "YieldgateError",
    "InputError",
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
]


class YieldgateError(Exception):
    """Root of every error yieldgate raises on purpose."""


class InputError(YieldgateError):
    """A file or value handed to yieldgate is missing, unreadable or malformed."""


class ManifestError(InputError):
    """A manifest (or one of its parts) does not validate; the message names the field."""


class CorpusError(InputError):
    """The built-in corpus cannot be fetched, verified or read, or a value asked of it is out of range."""


class LedgerError(YieldgateError):
    """The ledger cannot be opened, read or written."""


class SchemaVersionError(LedgerError):
    """The ledger was written by a newer yieldgate whose schema this version does not know."""


class BlockDamaged(LedgerError):
    """A stored block of step records fails its checksum (`yieldgate.ledger.checksum`): its numbers cannot be
    trusted."""


class NetworkFilesystem(LedgerError):
    """The ledger is on a network or FUSE filesystem, where SQLite's write-ahead log does not work across hosts."""


class LedgerRefused(LedgerError):
    """The ledger's database server refused us: a wrong password, no such database or role, a missing grant."""


class RunNotFound(LedgerError):
    """No run of that name is in the ledger."""


class RunInUse(YieldgateError):
    """Another process writes that run (or wrote it and died without closing it): a second writer would splice
    two runs into one."""


class RunReferenced(YieldgateError):
    """A gate decision cites the run as evidence: removing or renaming it would break the audit trail."""
