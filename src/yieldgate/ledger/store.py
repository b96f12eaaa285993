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

    def copy_run(self, source: Ledger, run: str) -> int:
        """Merge run `run` of another ledger (a Tracker's spill file, another node's ledger) into this one:
        steps, extras, evals, tags and note, one transaction; the run is created (with its manifest and status) if
        this ledger lacks it, and steps already here are merged as `append_steps` merges. Returns step rows copied."""
        info = source.run_info(run)
        steps = source.steps(run, nullable=True)
        extras = source.extras(run)
        evals = source.evals(run)
        with self.transaction():
            if self._db.execute("SELECT 1 FROM runs WHERE name = ?", (run,)).fetchone() is None:
                self.create_run(
                    run, manifest=source.manifest(run), status=info["recorded_status"], source=info["source"]
                )
            for key, value in source.meta(run).items():
                self.set_meta(run, key, value)
            self.tag_run(run, source.tags(run))
            note = source.note(run)
            if note:
                self.set_note(run, note)
            if len(steps):
                self.append_steps(run, steps)
            for key, part in extras.groupby("key", sort=False):
                self.append_steps(run, {"step": part["step"].to_numpy(), str(key): part["value"].to_numpy()})
            if len(evals):
                self.append_evals(run, evals.to_dict("records"))
        return len(steps)
