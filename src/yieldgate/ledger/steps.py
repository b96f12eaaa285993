"""The Ledger's step records: appends cut into column blocks (`blocks`), small appends merged at the run's tail,
the namespaced extras in their own blocks, superseded steps set apart (never deleted) when a run resumes, and reads
of the core columns that never touch the extras."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from yieldgate.errors import InputError
from yieldgate.ledger import pg as ledger_pg
from yieldgate.ledger.checksum import block_checksum, group_checksum, verify_block
from yieldgate.names import (
    CORE_STEP_COLUMNS,
    STEP_VALUE_COLUMNS,
    is_extra_key,
    unsafe_character,
)
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

else:
    np = lazy.module("numpy")  # loaded by the first block read or written: listing runs needs neither
    pd = lazy.module("pandas")  # loaded by the first DataFrame built: listing runs builds none

from yieldgate.ledger.blocks import (
    BLOCK,
    BLOCK_COLUMNS,
    Columns,
    block_columns,
    collapse,
    column_values,
    concat,
    encode,
    largest,
    take,
)
from yieldgate.ledger.connection import LedgerConnection

__all__ = ["StepsMixin"]

# Bulk appends are cut into blocks of BLOCK_ROWS steps. Small appends (a tracker flushing every second)
# are written as blocks of their own, and every COMPACT_BLOCKS of them at the run's end are merged into one
# while they hold fewer than TAIL_MERGE_ROWS steps, so a long run ends up in ~256-row blocks and a flush
# seldom decodes and rewrites old rows (the Tracker's CPU per step is a target: benchmarks/bench_tracker.py).
BLOCK_ROWS = 8192
_TAILS_PER_QUERY = 200
"""Extras keys whose tails one query reads (a compound SELECT; SQLite allows 500 parts)."""
TAIL_MERGE_ROWS = 256
COMPACT_BLOCKS = 16
BLOCK_READ_TRIES = 3
"""Reads of a run's blocks one at a time (`_blocks_streamed`) before they are read all at once."""


class StepsMixin(LedgerConnection):
    # -- steps ----------------------------------------------------------------------------------------

    def _normalise_steps(
        self, rows: pd.DataFrame | Mapping[str, Any] | Iterable[Mapping[str, Any]]
    ) -> tuple[Columns, dict[str, Columns]]:
        pandas = sys.modules.get("pandas")  # a DataFrame means pandas is loaded: a Tracker's flush never loads it
        if pandas is not None and isinstance(rows, pandas.DataFrame):
            table: Mapping[str, Any] = {c: rows[c] for c in rows.columns}
        elif isinstance(rows, Mapping):
            table = rows
        else:
            records = list(rows)
            keys: dict[str, None] = {}
            for r in records:
                keys.update(dict.fromkeys(r))
            table = {k: [r.get(k) for r in records] for k in keys}
        if "step" not in table:
            raise InputError("step records need a 'step' column")
        n = len(table["step"])
        step_vals, step_missing = column_values(table["step"], n, "step")
        if step_missing.any() or not np.all(np.isfinite(step_vals)):
            row = int(np.argmax(step_missing | ~np.isfinite(step_vals)))
            raise InputError(f"step records: 'step' is missing or not finite in row {row}")
        steps = step_vals.astype(np.int64)
        if not np.array_equal(steps, step_vals):
            bad = int(np.argmax(steps != step_vals))
            raise InputError(f"step records: 'step' must be a whole number, got {step_vals[bad]} in row {bad}")
        core, extras = {}, {}
        for key, seq in table.items():
            if key == "step":
                continue
            if len(seq) != n:
                raise InputError(f"step records: column {key!r} has {len(seq)} values, 'step' has {n}")
            unsafe = unsafe_character(key) if isinstance(key, str) else "a name that is not text"
            if unsafe is not None:
                raise InputError(f"step records: column {key!r} is not allowed: it holds {unsafe}")
            if key in CORE_STEP_COLUMNS:
                core[key] = column_values(seq, n, key)
            elif is_extra_key(key):
                extras[key] = column_values(seq, n, key)
            else:
                raise InputError(
                    f"step records: unknown column {key!r}; core columns are {', '.join(STEP_VALUE_COLUMNS)}, "
                    f"anything else needs a namespace (e.g. 'signals/{key}')"
                )
        series = {}
        for key, (vals, miss) in extras.items():
            keep = ~miss
            series[key] = collapse(steps[keep], {"value": (vals[keep], miss[keep])})
        return collapse(steps, core), series

    def append_steps(self, run: str, rows: pd.DataFrame | Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> int:
        """Add step records (a DataFrame, a dict of columns or a list of row dicts); return rows given.

        Core columns go to the core table, namespaced keys to the extras table. A step that is already
        stored is merged: each column takes the newly recorded value, and keeps the old one where the new
        record has none. Missing: None / pandas NA (and NaN in a plain float DataFrame column); a NaN given
        as a Python float or a numpy array value is recorded as NaN.
        """
        core, extras = self._normalise_steps(rows)
        if not len(core):
            return 0
        with self.transaction():
            run_id = self.run_id(run)
            if core.values or not extras:
                self._write_blocks(run, "step_blocks", {"run_id": run_id}, core)
            extras = {key: series for key, series in extras.items() if len(series)}
            if extras:
                self._write_extras(run, run_id, extras)
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return len(core)

    def _write_extras(self, run: str, run_id: int, extras: dict[str, Columns]) -> None:
        """Write the new records of many extras keys: the common case, every key's series growing at its end
        (a Tracker's flush), costs one query for all the keys' tails and one insert, instead of both per key;
        a key whose new steps overlap its stored ones, or whose small blocks are due to merge, goes through
        `_write_blocks`."""
        ids = self._key_ids(extras)
        tails: dict[int, list[tuple[int, int]]] = {ids[key]: [] for key in extras}
        keys = list(tails)
        for start in range(0, len(keys), _TAILS_PER_QUERY):
            chunk = keys[start : start + _TAILS_PER_QUERY]
            query = " UNION ALL ".join(
                f"SELECT key_id, n, last_step, first_step FROM (SELECT key_id, n, last_step, first_step FROM "
                f"extra_blocks WHERE run_id = ? AND key_id = ? ORDER BY first_step DESC LIMIT {COMPACT_BLOCKS}) t{i}"
                for i in range(len(chunk))
            )
            rows = self._db.execute(query, [v for key_id in chunk for v in (run_id, key_id)]).fetchall()
            for key_id, n, last_step, _ in sorted(rows, key=lambda r: -r[3]):  # each key's last block first
                tails[key_id].append((n, last_step))
        appended = []
        for key, series in extras.items():
            scope = {"run_id": run_id, "key_id": ids[key]}
            tail = tails[ids[key]]
            small = sum(1 for _ in itertools.takewhile(lambda t: t[0] < TAIL_MERGE_ROWS, tail))
            if (tail and tail[0][1] >= int(series.steps[0])) or small >= COMPACT_BLOCKS:
                self._write_blocks(run, "extra_blocks", scope, series, key)
            else:
                appended += self._block_rows("extra_blocks", scope, series, key)
        if appended:
            self._insert_rows("extra_blocks", BLOCK_COLUMNS["extra_blocks"], appended)

    def _checked(
        self, run: str, run_id: int, key: str | None, row: Sequence[Any], want: Sequence[str] | None = None
    ) -> Columns:
        """A stored block (`BLOCK` fields) decoded once it passes its checksum (BlockDamaged otherwise)."""
        verify_block(self.location, run, key, tuple(row), run_id)
        return block_columns(row, want)

    def _write_blocks(self, run: str, table: str, scope: dict[str, int], new: Columns, key: str | None = None) -> None:
        """Write step records into `table` (step_blocks or extra_blocks) for one scope (run, key).

        Blocks the new steps overlap or precede (a resumed run re-logging steps) are merged and rewritten;
        otherwise a small last block absorbs the new rows. Blocks never overlap and stay in step order.
        """
        where = " AND ".join(f"{k} = ?" for k in scope)
        params = list(scope.values())
        first = int(new.steps[0])
        # The common case, a run growing at its end, needs only the last block (an index lookup).
        tail = self._db.execute(
            f"SELECT id, n, last_step FROM {table} WHERE {where} ORDER BY first_step DESC LIMIT {COMPACT_BLOCKS}",
            params,
        ).fetchall()
        if tail and tail[0][2] >= first:
            # Re-logged or out-of-order steps: every block from the one holding `first` on is merged.
            affected = self._db.execute(
                f"SELECT id, {BLOCK} FROM {table} WHERE {where} AND first_step >= COALESCE("
                f"(SELECT MAX(first_step) FROM {table} WHERE {where} AND first_step <= ?), ?) ORDER BY first_step",
                (*params, *params, first, first),
            ).fetchall()
        else:
            # Small appends go in as blocks of their own; once COMPACT_BLOCKS small blocks end the run, they
            # are merged into one (with the new rows), so a flush rarely decodes and rewrites old data.
            small = [t[0] for t in itertools.takewhile(lambda t: t[1] < TAIL_MERGE_ROWS, tail)]
            affected = []
            if len(small) >= COMPACT_BLOCKS:
                affected = self._db.execute(
                    f"SELECT id, {BLOCK} FROM {table} WHERE id IN ({','.join('?' * len(small))}) ORDER BY first_step",
                    small,
                ).fetchall()
        if affected:
            merged = concat([self._checked(run, scope["run_id"], key, a[1:]) for a in affected] + [new])
            new = collapse(merged.steps, merged.values)
            self._db.executemany(f"DELETE FROM {table} WHERE id = ?", [(a[0],) for a in affected])
        self._insert_rows(table, BLOCK_COLUMNS[table], self._block_rows(table, scope, new, key))

    @staticmethod
    def _block_rows(table: str, scope: dict[str, int], new: Columns, key: str | None) -> list[tuple[Any, ...]]:
        """The rows (`BLOCK_COLUMNS[table]`) that store `new` as blocks of at most BLOCK_ROWS steps."""
        rows = []
        for start in range(0, len(new), BLOCK_ROWS):
            cut = slice(start, start + BLOCK_ROWS)
            part = Columns(new.steps[cut], {k: (v[cut], m[cut]) for k, (v, m) in new.values.items()})
            tokens_max = largest(part, "tokens")
            head = (int(part.steps[0]), int(part.steps[-1]), len(part), tokens_max, *encode(part))
            # The core table also keeps its blocks' last wall clock, which `runs()` reads as a run's duration, and a
            # checksum of what `runs()` reads without decoding the block (`checksum.FIELD_GROUPS`).
            tail_cols: tuple[Any, ...] = ()
            if table == "step_blocks":
                wall = largest(part, "wall_s")
                summary = (scope["run_id"], *head[:4], wall)
                tail_cols = (wall, group_checksum("step_blocks.summary", summary))
            rows.append((*scope.values(), *head, block_checksum(scope["run_id"], key, *head), *tail_cols))
        return rows

    def _insert_rows(self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        """Many new rows into one table: through COPY on PostgreSQL, one prepared INSERT on SQLite."""
        if isinstance(self._db, ledger_pg.PgConnection):
            self._db.copy_rows(table, columns, rows)
        else:
            self._db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows
            )

    def step_at(self, run: str, step: int) -> dict[str, Any] | None:
        """The stored core record at or before `step`: step, tokens, samples, wall_s (None where not recorded),
        or None when the run has no step at or before it."""
        run_id = self.run_id(run)
        rows = self._query(
            f"SELECT {BLOCK} FROM step_blocks WHERE run_id = ? AND first_step <= ? ORDER BY first_step DESC LIMIT 1",
            (run_id, int(step)),
        )
        if not rows:
            return None
        cols = self._checked(run, run_id, None, rows[0], ["tokens", "samples", "wall_s"])
        i = int(np.searchsorted(cols.steps, int(step), side="right")) - 1
        out: dict[str, Any] = {"step": int(cols.steps[i])}
        for name in ("tokens", "samples", "wall_s"):
            stored = cols.values.get(name)  # (values, missing mask), or None: never recorded in this block
            out[name] = None if stored is None or stored[1][i] else float(stored[0][i])
        return out

    def supersede(
        self,
        run: str,
        after_step: int,
        *,
        resume: Mapping[str, Any] | None = None,
        replaced: Mapping[str, Any] | None = None,
        source: str = "tracker",
    ) -> int | None:
        """Set apart the run's records after `after_step`: the run was resumed from a checkpoint taken there, so
        the work recorded after it was thrown away. Steps and extras move to `superseded_blocks` (read them with
        `superseded`), evals into the event's body, and a `resume` event keeps both points: `old`, the last
        stored step and its tokens, and `resume`, as given. From then on the run's steps, extras and evals are
        the surviving records only; nothing is spliced. Returns the event's id, or None when nothing was stored
        after `after_step`.

        `replaced` instead of `resume`: the records are set apart because an import replaces them (`import` with
        `replace`), not because work was thrown away; the event is a resolved `warning` holding `replaced` (what
        replaced them, the run's status and source before) in place of `resume`, so that goodput does not count
        the set-apart records as lost work."""
        if (resume is None) == (replaced is None):
            raise InputError("supersede needs exactly one of resume and replaced")
        after = int(after_step)
        with self.transaction():
            run_id = self.run_id(run)
            core = self._db.execute(
                f"SELECT id, NULL, NULL, {BLOCK} FROM step_blocks WHERE run_id = ? AND last_step > ? "
                "ORDER BY first_step",
                (run_id, after),
            ).fetchall()
            extra = self._db.execute(
                f"SELECT b.id, b.key_id, k.key, {', '.join('b.' + f for f in BLOCK.split(', '))} FROM extra_blocks b "
                "JOIN extra_keys k ON k.id = b.key_id WHERE b.run_id = ? AND b.last_step > ? "
                "ORDER BY b.key_id, b.first_step",
                (run_id, after),
            ).fetchall()
            decoded = {
                (table, b[0]): self._checked(run, run_id, b[2], b[3:])  # ids are per table
                for table, blocks in (("step_blocks", core), ("extra_blocks", extra))
                for b in blocks
            }
            evals = self.evals(run)
            evals = evals[evals["step"] > after]
            if not (core or extra or len(evals)):
                return None
            last = self.step_at(run, 1 << 62)
            old_step = max(
                [last["step"] if last else after] + [int(decoded["extra_blocks", b[0]].steps[-1]) for b in extra]
            )
            # The event is written whole, with the counts of what moves: one insert, one checksum of its body.
            moved = {"step_blocks": 0, "extra_blocks": 0}
            for (table, _), cols in decoded.items():
                moved[table] += int((cols.steps > after).sum())
            body: dict[str, Any] = {
                "source": source,
                **({"resume": dict(resume)} if resume is not None else {"replaced": dict(replaced or {})}),
                "old": {"step": old_step, "tokens": last["tokens"] if last else None},
                "superseded": {
                    "steps": moved["step_blocks"],
                    "extra_values": moved["extra_blocks"],
                    "evals": evals.to_dict("records"),
                },
            }
            kind = "resume" if resume is not None else "warning"
            event = self.add_event(run, kind, body, start_step=after, end_step=old_step, state="resolved")
            for table, blocks in (("step_blocks", core), ("extra_blocks", extra)):
                for block_id, key_id, key, *_ in blocks:
                    cols = decoded[table, block_id]
                    self._set_apart(run, run_id, event, table, (block_id, key_id, key), cols, cols.steps > after)
            self._db.execute("DELETE FROM evals WHERE run_id = ? AND step > ?", (run_id, after))
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return event

    def set_apart_steps(
        self, run: str, steps: Iterable[int], evals: Iterable[tuple[int, str, str, str, str]], body: Mapping[str, Any]
    ) -> int:
        """Set apart the run's step records (core and extras) at `steps` and its evaluations at the keys `evals`
        (`EvalRecord.key`): another ledger's records replace them (`ledger.merge` with `replace`). They move to
        `superseded_blocks` under a resolved `warning` event holding `body` and what moved (the evaluations whole), as
        `supersede` sets apart what a replacing import replaces; returns the event's id."""
        wanted = np.unique(np.fromiter((int(s) for s in steps), dtype=np.int64))
        keys = set(evals)
        with self.transaction():
            run_id = self.run_id(run)
            blocks: list[tuple[str, tuple[Any, Any, Any], Columns]] = []
            if len(wanted):
                span = (run_id, int(wanted[-1]), int(wanted[0]))
                for table, sql in (
                    ("step_blocks", f"SELECT id, NULL, NULL, {BLOCK} FROM step_blocks b"),
                    (
                        "extra_blocks",
                        f"SELECT b.id, b.key_id, k.key, {', '.join('b.' + f for f in BLOCK.split(', '))} "
                        "FROM extra_blocks b JOIN extra_keys k ON k.id = b.key_id",
                    ),
                ):
                    rows = self._db.execute(
                        f"{sql} WHERE b.run_id = ? AND b.first_step <= ? AND b.last_step >= ? ORDER BY b.first_step",
                        span,
                    ).fetchall()
                    for b in rows:
                        cols = self._checked(run, run_id, b[2], b[3:])
                        if np.isin(cols.steps, wanted).any():
                            blocks.append((table, (b[0], b[1], b[2]), cols))
            stored = self.evals(run)
            key_columns = ["step", "portfolio", "portfolio_version", "task", "metric"]
            at = stored[[k in keys for k in stored[key_columns].itertuples(index=False, name=None)]]
            moved = dict.fromkeys(BLOCK_COLUMNS, 0)
            for table, _, cols in blocks:
                moved[table] += int(np.isin(cols.steps, wanted).sum())
            event_body = {
                **body,
                "superseded": {
                    "steps": moved["step_blocks"],
                    "extra_values": moved["extra_blocks"],
                    "evals": at.to_dict("records"),
                },
            }
            first, last = (int(wanted[0]), int(wanted[-1])) if len(wanted) else (None, None)
            event = self.add_event(run, "warning", event_body, start_step=first, end_step=last, state="resolved")
            for table, block, cols in blocks:
                self._set_apart(run, run_id, event, table, block, cols, np.isin(cols.steps, wanted))
            self._db.executemany(
                "DELETE FROM evals WHERE run_id = ? AND step = ? AND portfolio = ? AND portfolio_version = ? "
                "AND task = ? AND metric = ?",
                [(run_id, *k) for k in keys],
            )
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return event

    def _set_apart(
        self, run: str, run_id: int, event: int, table: str, block: tuple[Any, Any, Any], cols: Any, later: Any
    ) -> None:
        """One block's steps marked in `later` (a bool array over its steps) into `superseded_blocks` under `event`;
        the others written back."""
        block_id, key_id, key = block
        gone, kept = take(cols, later), take(cols, ~later)
        self._db.execute(f"DELETE FROM {table} WHERE id = ?", (block_id,))
        head = (int(gone.steps[0]), int(gone.steps[-1]), len(gone), None, *encode(gone))
        self._db.execute(
            "INSERT INTO superseded_blocks (event_id, run_id, key_id, first_step, last_step, n, columns, "
            "data, missing, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (event, run_id, key_id, *head[:3], *head[4:], block_checksum(run_id, key, *head)),
        )
        if len(kept):
            scope = {"run_id": run_id} if key_id is None else {"run_id": run_id, "key_id": key_id}
            self._write_blocks(run, table, scope, kept, key)

    def superseded(self, run: str) -> pd.DataFrame:
        """Core step records that a resume or a replacing import set apart (`supersede`): event_id (the `resume` or
        `warning` event), step and the core columns, by event and step. They are not part of `steps(run)`."""
        run_id = self.run_id(run)
        rows = self._query(
            f"SELECT event_id, {BLOCK.replace('tokens_max', 'NULL')} FROM superseded_blocks WHERE run_id = ? "
            "AND key_id IS NULL ORDER BY event_id, first_step",
            (run_id,),
        )
        frames = []
        for event, *block in rows:
            cols = self._checked(run, run_id, None, block)
            n = len(cols)
            frame = {"event_id": np.full(n, event, dtype=np.int64), "step": cols.steps.astype(np.int64)}
            frame.update({k: np.where(m, np.nan, v) for k, (v, m) in cols.values.items()})
            frames.append(pd.DataFrame(frame))
        if not frames:
            return pd.DataFrame({"event_id": np.empty(0, np.int64), "step": np.empty(0, np.int64)})
        return pd.concat(frames, ignore_index=True)

    def _key_ids(self, keys: Iterable[str]) -> dict[str, int]:
        keys = list(keys)
        self._db.executemany("INSERT INTO extra_keys (key) VALUES (?) ON CONFLICT DO NOTHING", [(k,) for k in keys])
        found = self._db.execute(
            f"SELECT key, id FROM extra_keys WHERE key IN ({','.join('?' * len(keys))})", keys
        ).fetchall()
        return dict(found)

    def _blocks_streamed(
        self, run: str, run_id: int, want: list[str], bound: int
    ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]] | None:
        """The steps after `bound` and the `want` columns (values, missing), copied a block at a time, as the query
        yields them, into arrays sized beforehand: a million steps' blocks held whole beside the columns copied out
        of them were a second copy of the run (+100 MB at the peak of a run page). None when the blocks grew between
        the count and the read (a writer appended or merged): the caller reads again."""
        (count,) = self._query(
            "SELECT COALESCE(SUM(n), 0) FROM step_blocks WHERE run_id = ? AND last_step > ?", (run_id, bound)
        )
        total = int(count[0])
        steps = np.empty(total, dtype=np.int64)
        values = {name: (np.empty(total), np.ones(total, dtype=bool)) for name in want}
        at = 0
        rows = self._rows(
            f"SELECT {BLOCK} FROM step_blocks WHERE run_id = ? AND last_step > ? ORDER BY first_step", (run_id, bound)
        )
        try:
            for row in rows:
                part = self._checked(run, run_id, None, row, want)
                n = len(part)
                if at + n > total:
                    return None
                steps[at : at + n] = part.steps
                for name, (v, m) in part.values.items():
                    values[name][0][at : at + n] = v
                    values[name][1][at : at + n] = m
                at += n
        finally:
            rows.close()
        if at < total:  # a writer merged blocks meanwhile: what the read saw is whole, and shorter
            steps = steps[:at]
            values = {name: (v[:at], m[:at]) for name, (v, m) in values.items()}
        return steps, values

    def _blocks_at_once(
        self, run: str, run_id: int, want: list[str], bound: int
    ) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
        """What `_blocks_streamed` reads, all blocks held at once (a snapshot, whatever writers do meanwhile)."""
        blocks = self._query(
            f"SELECT {BLOCK} FROM step_blocks WHERE run_id = ? AND last_step > ? ORDER BY first_step", (run_id, bound)
        )
        parts = [self._checked(run, run_id, None, b, want) for b in blocks]
        steps = np.concatenate([p.steps for p in parts]).astype(np.int64) if parts else np.empty(0, dtype=np.int64)
        values = {}
        for name in want:
            vals, miss = np.empty(len(steps)), np.ones(len(steps), dtype=bool)
            at = 0
            for p in parts:
                if name in p.values:
                    vals[at : at + len(p)], miss[at : at + len(p)] = p.values[name]
                at += len(p)
            values[name] = (vals, miss)
        return steps, values

    def steps(
        self, run: str, columns: Sequence[str] | None = None, *, nullable: bool = False, after: int | None = None
    ) -> pd.DataFrame:
        """A run's core step records, one row per step in step order.

        `columns` picks core columns (default: all). Missing values are NaN; with `nullable=True` the
        columns are pandas nullable floats, where <NA> is "not recorded" and NaN is a recorded NaN.
        `after`: only the steps after this one, reading only the blocks that hold them (a live view's poll).
        """
        want = list(STEP_VALUE_COLUMNS) if columns is None else [c for c in columns if c != "step"]
        unknown = [c for c in want if c not in STEP_VALUE_COLUMNS]
        if unknown:
            raise InputError(f"unknown core column {unknown[0]!r}; core columns are {', '.join(STEP_VALUE_COLUMNS)}")
        run_id = self.run_id(run)
        bound = -(2**63) if after is None else int(after)
        read = None
        for _ in range(BLOCK_READ_TRIES):
            read = self._blocks_streamed(run, run_id, want, bound)
            if read is not None:
                break
        steps, values = read if read is not None else self._blocks_at_once(run, run_id, want, bound)
        out: dict[str, Any] = {"step": steps}
        for name in want:
            vals, miss = values.pop(name)
            if nullable:
                out[name] = pd.arrays.FloatingArray(np.where(miss, 0.0, vals), miss)
            else:
                vals[miss] = np.nan
                out[name] = vals
        frame = pd.DataFrame(out, copy=False)  # the columns are this call's own arrays: no second copy of a big run
        return frame if after is None else frame[frame["step"] > after].reset_index(drop=True)

    def extras(self, run: str, keys: Sequence[str] | None = None) -> pd.DataFrame:
        """A run's namespaced extras in long form: columns step, key, value (a recorded NaN is NaN)."""
        run_id = self.run_id(run)
        sql = (
            f"SELECT k.key, {', '.join('b.' + f for f in BLOCK.split(', '))} FROM extra_blocks b "
            "JOIN extra_keys k ON k.id = b.key_id WHERE b.run_id = ?"
        )
        params: list[Any] = [run_id]
        if keys is not None:
            sql += f" AND k.key IN ({','.join('?' * len(keys))})"
            params += list(keys)
        parts = [
            (key, self._checked(run, run_id, key, block))
            for key, *block in self._query(sql + " ORDER BY k.key, b.first_step", params)
        ]
        if not parts:
            return pd.DataFrame({"step": np.empty(0, np.int64), "key": np.empty(0, object), "value": np.empty(0)})
        return pd.DataFrame(
            {
                "step": np.concatenate([p.steps for _, p in parts]),
                "key": np.repeat([k for k, _ in parts], [len(p) for _, p in parts]),
                "value": np.concatenate([p.values["value"][0] for _, p in parts]),
            }
        )

    def extra_keys(self, run: str) -> list[str]:
        rows = self._query(
            "SELECT DISTINCT k.key FROM extra_blocks b JOIN extra_keys k ON k.id = b.key_id WHERE b.run_id = ? "
            "ORDER BY k.key",
            (self.run_id(run),),
        )
        return [r[0] for r in rows]
