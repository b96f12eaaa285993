"""The ledger: every run with its manifest, step records, eval records, events and decisions.

SQLite by default (WAL: several processes may write different runs at once, and readers see a consistent
snapshot while a run is being written); PostgreSQL for a team, given a `postgresql://` URL: the same schema,
statements and transactions, run by `ledger_pg.PgConnection`. Writes are batched in transactions; reads return
DataFrames.

Step records follow the data contract of DESIGN.md: the core columns (`yieldgate.names.CORE_STEP_COLUMNS`)
live in a wide table stored as column blocks of consecutive steps, the namespaced extras in a long table
(run, step, key, value). Reading a run's core columns never touches the long table.
"""

from __future__ import annotations

from yieldgate.ledger.records import RecordsMixin
from yieldgate.ledger.runs import RunsMixin
from yieldgate.ledger.steps import StepsMixin

__all__ = ["Ledger"]


class Ledger(RunsMixin, StepsMixin, RecordsMixin):
    """A run ledger in one SQLite file (WAL), or in a PostgreSQL database (`postgresql://USER@HOST:PORT/DB`).
    One instance per thread; processes and hosts may share the ledger. Opening it: `connection.LedgerConnection`;
    its runs, steps and other records: `runs`, `steps`, `records`."""
