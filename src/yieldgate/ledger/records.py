"""The Ledger's other records: evaluations (with their direction and standard error), events, gate decisions with
their evidence, and campaigns; and `EvalRecord`, one evaluation as written."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from yieldgate.errors import InputError
from yieldgate.ledger.checksum import group_checksum, record_checksum, record_columns, verify_group, verify_record
from yieldgate.names import (
    EVENT_KINDS,
    EVENT_STATES,
    metric_direction,
    stderr_of,
    unsafe_character,
)
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

else:
    np = lazy.module("numpy")  # loaded by the first block read or written: listing runs needs neither
    pd = lazy.module("pandas")  # loaded by the first DataFrame built: listing runs builds none

from yieldgate.ledger.connection import LedgerConnection, inserted_id, json_body

__all__ = ["RecordsMixin"]


def higher_is_better(metric: str) -> bool:
    """Default direction of a metric (`names.metric_direction`): False for losses, perplexities and error
    rates; a name that does not say is taken as higher-is-better unless its record says otherwise."""
    direction = metric_direction(metric)
    return True if direction is None else direction


@dataclass(frozen=True, kw_only=True)
class EvalRecord:
    """One evaluation result at a point of a run (data contract: task, metric, value, direction)."""

    step: int
    """Optimizer step the evaluation was taken at."""
    task: str
    """Task, e.g. `val`, `val/code`, `lambada_openai`."""
    metric: str
    """Metric, e.g. `loss`, `bpb`, `acc`."""
    value: float
    """The score (NaN is kept as NaN)."""
    tokens: float | None = None
    """Accepted tokens at that step, when known."""
    wall_s: float | None = None
    """Cumulative wall-clock seconds at that step, when known."""
    higher_is_better: bool | None = None
    """Direction; None takes the metric's default (`higher_is_better(metric)`)."""
    portfolio: str = ""
    """Eval portfolio name."""
    portfolio_version: str = ""
    """Eval portfolio version."""
    stderr: float | None = None
    """Standard error of `value`, where the evaluation reports one (lm-eval's `acc_stderr` beside `acc`)."""

    @property
    def key(self) -> tuple[int, str, str, str, str]:
        """What one stored evaluation is: (step, portfolio, portfolio version, task, metric)."""
        return self.step, self.portfolio, self.portfolio_version, self.task, self.metric


def _given(value: float | None) -> float | None:
    """A value, or None where none was given (None, or the NaN a frame holds for one; PostgreSQL would keep a NaN)."""
    return None if value is None or math.isnan(value) else float(value)


def fold_stderr(records: Iterable[EvalRecord]) -> tuple[list[EvalRecord], list[EvalRecord]]:
    """Records given as standard errors of other records' metrics (`acc_stderr` beside `acc`, `names.stderr_of`)
    set as those records' `stderr`: (the records with them folded in, the standard errors whose metric is not among
    the records). A standard error is never a metric of its own."""
    records = list(records)
    at = {r.key: i for i, r in enumerate(records) if stderr_of(r.metric) is None}
    alone = []
    for r in records:
        base = stderr_of(r.metric)
        if base is None:
            continue
        i = at.get((r.step, r.portfolio, r.portfolio_version, r.task, base))
        if i is None:
            alone.append(r)
        else:
            records[i] = replace(records[i], stderr=r.value)
    return [r for r in records if stderr_of(r.metric) is None], alone


class RecordsMixin(LedgerConnection):
    # -- evals ----------------------------------------------------------------------------------------

    def append_evals(self, run: str, records: Iterable[EvalRecord | Mapping[str, Any]]) -> int:
        """Add eval records; a record for the same (step, portfolio, task, metric) replaces the old one, keeping its
        standard error when the new one has none. A record of a standard error (`acc_stderr`, `names.stderr_of`) is
        stored as its metric's `stderr`, beside the value given with it or stored before (or still to come: a row of
        the metric with no value until then). Returns the records given."""
        given, safe = [], set()
        for i, rec in enumerate(records):
            try:
                r = rec if isinstance(rec, EvalRecord) else EvalRecord(**rec)
            except TypeError as exc:
                raise InputError(f"eval record {i}: {exc}") from None
            if not r.task or not r.metric:
                raise InputError(f"eval record {i}: task and metric must be non-empty, got {r.task!r}/{r.metric!r}")
            names = f"{r.task}/{r.metric}/{r.portfolio}/{r.portfolio_version}"
            if names not in safe:  # a few names over many steps: each looked at once
                unsafe = unsafe_character(names)
                if unsafe is not None:
                    raise InputError(f"eval record {i}: {r.task!r}/{r.metric!r} is not allowed: it holds {unsafe}")
                safe.add(names)
            given.append(r)
        folded, alone = fold_stderr(given)

        def given_direction(r: EvalRecord) -> bool:
            return higher_is_better(r.metric) if r.higher_is_better is None else bool(r.higher_is_better)

        def row(r: EvalRecord, metric: str, value: float | None, hib: bool, stderr: float | None) -> list[Any]:
            tokens = None if r.tokens is None else float(r.tokens)
            wall = None if r.wall_s is None else float(r.wall_s)
            step, portfolio, version = int(r.step), r.portfolio, r.portfolio_version
            return [run_id, step, tokens, wall, portfolio, version, r.task, metric, value, int(hib), stderr]

        with self.transaction():
            run_id = self.run_id(run)
            # Each stored record these replace or complete, merged here (not by the upsert), so that the row written
            # is known whole and its checksum with it; a stored one is checked before it is merged.
            stored = self._stored_evals(run, run_id, [r.step for r in given])
            rows: dict[tuple[int, str, str, str, str], list[Any]] = {}

            def current(key: tuple[int, str, str, str, str]) -> list[Any] | None:
                if key in rows:
                    return rows[key]
                if key not in stored:
                    return None
                checksum, values = stored[key]
                verify_record(self.location, "evals", checksum, values, run)
                return values

            for r in folded:
                old = current(r.key)
                stderr = _given(r.stderr)
                stderr = old[10] if stderr is None and old is not None else stderr
                rows[r.key] = row(r, r.metric, float(r.value), given_direction(r), stderr)
            # A standard error whose metric is not among these records: its metric's row (stored, or one with no
            # value yet) takes it.
            for r in alone:
                metric = str(stderr_of(r.metric))
                key = (r.step, r.portfolio, r.portfolio_version, r.task, metric)
                old = current(key)
                new = row(r, metric, None, higher_is_better(metric), None) if old is None else old
                rows[key] = [*new[:10], _given(r.value)]
            fields = record_columns("evals")
            self._db.executemany(
                f"INSERT INTO evals ({fields}, checksum) VALUES ({', '.join('?' * 12)}) ON CONFLICT "
                "(run_id, step, portfolio, portfolio_version, task, metric) DO UPDATE SET tokens = excluded.tokens, "
                "wall_s = excluded.wall_s, value = excluded.value, higher_is_better = excluded.higher_is_better, "
                "stderr = excluded.stderr, checksum = excluded.checksum",
                [(*values, record_checksum("evals", values)) for values in rows.values()],
            )
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return len(given)

    def _stored_evals(
        self, run: str, run_id: int, steps: list[int]
    ) -> dict[tuple[int, str, str, str, str], tuple[Any, list[Any]]]:
        """The run's stored evaluations between the least and the largest of `steps`, by key (`EvalRecord.key`):
        (checksum, their `RECORD_FIELDS["evals"]`), not yet checked."""
        if not steps:
            return {}
        rows = self._db.execute(
            f"SELECT checksum, {record_columns('evals')} FROM evals WHERE run_id = ? AND step >= ? AND step <= ?",
            (run_id, int(min(steps)), int(max(steps))),
        ).fetchall()
        return {(v[1], v[4], v[5], v[6], v[7]): (checksum, v) for checksum, *v in rows}

    def evals(self, run: str) -> pd.DataFrame:
        """A run's eval records: step, tokens, wall_s, portfolio, portfolio_version, task, metric, value,
        higher_is_better, stderr (the value's standard error, NaN where none was given); ordered by task, metric,
        step."""
        run_id = self.run_id(run)
        rows = self._query(
            f"SELECT checksum, {record_columns('evals')} FROM evals WHERE run_id = ? ORDER BY task, metric, step",
            (run_id,),
        )
        for checksum, *values in rows:
            verify_record(self.location, "evals", checksum, values, run)
        frame = pd.DataFrame(
            [row[2:] for row in rows],
            columns=[
                "step",
                "tokens",
                "wall_s",
                "portfolio",
                "portfolio_version",
                "task",
                "metric",
                "value",
                "higher_is_better",
                "stderr",
            ],
        )
        for c in ("tokens", "wall_s", "value", "stderr"):
            frame[c] = frame[c].astype(np.float64)
        frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
        return frame

    # -- events and decisions -------------------------------------------------------------------------

    def add_event(
        self,
        run: str | None,
        kind: str,
        body: Mapping[str, Any],
        *,
        start_step: int | None = None,
        end_step: int | None = None,
        state: str = "open",
    ) -> int:
        """Record an event (a diagnosis finding, a gate note, a warning, a fault); return its id."""
        if kind not in EVENT_KINDS:
            raise InputError(f"event kind must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        if state not in EVENT_STATES:
            raise InputError(f"event state must be one of {', '.join(EVENT_STATES)}, got {state!r}")
        text = json_body(body, "event body")
        first, last = (None if s is None else int(s) for s in (start_step, end_step))
        with self.transaction():
            run_id = self.run_id(run) if run is not None else None
            values = (run_id, kind, first, last, text, state, time.time(), None)
            checksum = record_checksum("events", values)
            cur = self._db.execute(
                f"INSERT INTO events ({record_columns('events')}, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "RETURNING id",
                (*values, checksum),
            )
            return self._stamp_id("events", inserted_id(cur), checksum)

    def _stamp_id(self, table: str, row_id: int, checksum: str) -> int:
        """A new event's or decision's id under its checksum (`checksum.FIELD_GROUPS`): `event #12` is read as
        written. Known only once the row is in, so stamped in the same transaction."""
        stamp = group_checksum(f"{table}.id", (row_id, checksum))
        self._db.execute(f"UPDATE {table} SET id_checksum = ? WHERE id = ?", (stamp, row_id))
        return row_id

    def resolve_event(self, event_id: int) -> None:
        with self.transaction():
            rows = self._db.execute(
                f"SELECT e.checksum, e.id_checksum, r.name, {record_columns('events', 'e')} FROM events e "
                "LEFT JOIN runs r ON r.id = e.run_id WHERE e.id = ?",
                (event_id,),
            ).fetchall()
            if not rows:
                raise InputError(f"no event with id {event_id} in {self.location}")
            checksum, id_checksum, run, *values = rows[0]
            verify_record(self.location, "events", checksum, values, run, event_id)
            verify_group(self.location, "events.id", id_checksum, (event_id, checksum), run, f"event #{event_id}'s id")
            values[5:] = ["resolved", values[6], time.time()]
            checksum = record_checksum("events", values)
            self._db.execute(
                "UPDATE events SET state = ?, resolved_at = ?, checksum = ?, id_checksum = ? WHERE id = ?",
                (values[5], values[7], checksum, group_checksum("events.id", (event_id, checksum)), event_id),
            )

    def events(self, run: str | None = None, *, kind: str | None = None, state: str | None = None) -> pd.DataFrame:
        """Events, oldest first: id, run, kind, start_step, end_step, body (dict), state, created_at."""
        sql = (
            f"SELECT e.id, r.name, e.checksum, e.id_checksum, {record_columns('events', 'e')} "
            "FROM events e LEFT JOIN runs r ON r.id = e.run_id WHERE 1 = 1"
        )
        params: list[Any] = []
        if run is not None:
            sql += " AND e.run_id = ?"
            params.append(self.run_id(run))
        for column, value in (("kind", kind), ("state", state)):
            if value is not None:
                sql += f" AND e.{column} = ?"
                params.append(value)
        rows = []
        for event_id, name, checksum, id_checksum, *values in self._query(sql + " ORDER BY e.id", params):
            verify_record(self.location, "events", checksum, values, name, event_id)
            verify_group(self.location, "events.id", id_checksum, (event_id, checksum), name, f"event #{event_id}'s id")
            rows.append((event_id, name, *values[1:]))
        frame = pd.DataFrame(
            rows, columns=["id", "run", "kind", "start_step", "end_step", "body", "state", "created_at", "resolved_at"]
        )
        frame["body"] = [json.loads(b) for b in frame["body"]]
        return frame

    def add_decision(
        self,
        target: str,
        decision: Literal["approve", "hold", "reject"],
        *,
        evidence: Mapping[str, Any],
        rationale: str,
        run: str | None = None,
        stage: str | None = None,
        policy: Mapping[str, Any] | None = None,
        policy_hash: str | None = None,
    ) -> int:
        """Record a gate decision with its evidence, policy and one-line rationale; return its id."""
        if decision not in ("approve", "hold", "reject"):
            raise InputError(f"decision must be approve, hold or reject, got {decision!r}")
        with self.transaction():
            run_id = self.run_id(run) if run is not None else None
            values = (
                target,
                run_id,
                stage,
                decision,
                policy_hash,
                None if policy is None else json_body(policy, "policy"),
                json_body(evidence, "evidence"),
                rationale,
                time.time(),
            )
            checksum = record_checksum("decisions", values)
            cur = self._db.execute(
                f"INSERT INTO decisions ({record_columns('decisions')}, checksum) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (*values, checksum),
            )
            return self._stamp_id("decisions", inserted_id(cur), checksum)

    def decisions(self, target: str | None = None) -> pd.DataFrame:
        """Gate decisions, oldest first: the audit trail."""
        sql = (
            f"SELECT d.id, r.name, d.checksum, d.id_checksum, {record_columns('decisions', 'd')} FROM decisions d "
            "LEFT JOIN runs r ON r.id = d.run_id"
        )
        params: list[Any] = []
        if target is not None:
            sql += " WHERE d.target = ?"
            params.append(target)
        rows = []
        for decision_id, run, checksum, id_checksum, *values in self._query(sql + " ORDER BY d.id", params):
            verify_record(self.location, "decisions", checksum, values, run, decision_id)
            what = f"decision #{decision_id}'s id"
            verify_group(self.location, "decisions.id", id_checksum, (decision_id, checksum), run, what)
            target_, _, stage, decision, policy_hash, policy, evidence, rationale, created = values
            policy_ = None if policy is None else json.loads(policy)
            rows.append(
                (decision_id, target_, stage, decision, policy_hash, policy_, json.loads(evidence), rationale, created)
            )
        # Object columns: pandas' string dtype would turn a decision's missing stage or policy hash into NaN.
        frame = pd.DataFrame(
            rows,
            columns=[
                "id",
                "target",
                "stage",
                "decision",
                "policy_hash",
                "policy",
                "evidence",
                "rationale",
                "created_at",
            ],
            dtype=object,
        )
        return frame.astype({"id": "int64", "created_at": "float64"})

    # -- campaigns ------------------------------------------------------------------------------------

    def put_campaign(self, name: str, spec: Mapping[str, Any], spec_hash: str) -> None:
        """Record a campaign's spec (kept across re-runs: a changed spec replaces it, its summary is cleared)."""
        text = json_body(spec, "campaign spec")
        now = time.time()
        with self.transaction():
            row = self._campaign_row(name)
            if row is None:
                self._put_campaign_row(name, [name, spec_hash, text, None, now, now], insert=True)
            elif row[1] != spec_hash:
                self._put_campaign_row(name, [name, spec_hash, text, None, row[4], now])

    def set_campaign_summary(self, name: str, summary: Mapping[str, Any]) -> None:
        """Store the latest summary of a campaign's results (rankings, decision accuracy, forecasts)."""
        text = json_body(summary, "campaign summary")
        with self.transaction():
            row = self._campaign_row(name)
            if row is None:
                raise InputError(f"no campaign named {name!r} in {self.location}")
            self._put_campaign_row(name, [*row[:3], text, row[4], time.time()])

    def _campaign_row(self, name: str) -> list[Any] | None:
        """A campaign's stored `RECORD_FIELDS["campaigns"]`, once they pass their checksum; None if there is none."""
        rows = self._query(f"SELECT checksum, {record_columns('campaigns')} FROM campaigns WHERE name = ?", (name,))
        if not rows:
            return None
        checksum, *values = rows[0]
        verify_record(self.location, "campaigns", checksum, values, None)
        return values

    def _put_campaign_row(self, name: str, values: list[Any], *, insert: bool = False) -> None:
        checksum = record_checksum("campaigns", values)
        if insert:
            self._db.execute(
                f"INSERT INTO campaigns ({record_columns('campaigns')}, checksum) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*values, checksum),
            )
        else:
            self._db.execute(
                "UPDATE campaigns SET spec_hash = ?, spec = ?, summary = ?, updated_at = ?, checksum = ? "
                "WHERE name = ?",
                (values[1], values[2], values[3], values[5], checksum, name),
            )

    def campaign(self, name: str) -> dict[str, Any]:
        """A campaign's record: name, spec_hash, spec, summary (None before it was summarised), timestamps."""
        row = self._campaign_row(name)
        if row is None:
            known = [r[0] for r in self._query("SELECT name FROM campaigns ORDER BY name")]
            raise InputError(
                f"no campaign named {name!r} in {self.location}"
                + (f"; campaigns: {', '.join(known)}" if known else "; run `yieldgate probe CAMPAIGN.yaml`")
            )
        n, h, spec, summary, created, updated = row
        return {
            "name": n,
            "spec_hash": h,
            "spec": json.loads(spec),
            "summary": None if summary is None else json.loads(summary),
            "created_at": created,
            "updated_at": updated,
        }

    def campaigns(self) -> list[str]:
        return [r[0] for r in self._query("SELECT name FROM campaigns ORDER BY created_at, name")]
