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
        given = []
        for i, rec in enumerate(records):
            try:
                r = rec if isinstance(rec, EvalRecord) else EvalRecord(**rec)
            except TypeError as exc:
                raise InputError(f"eval record {i}: {exc}") from None
            if not r.task or not r.metric:
                raise InputError(f"eval record {i}: task and metric must be non-empty, got {r.task!r}/{r.metric!r}")
            unsafe = unsafe_character(f"{r.task}/{r.metric}/{r.portfolio}/{r.portfolio_version}")
            if unsafe is not None:
                raise InputError(f"eval record {i}: {r.task!r}/{r.metric!r} is not allowed: it holds {unsafe}")
            given.append(r)
        folded, alone = fold_stderr(given)

        def given_direction(r: EvalRecord) -> bool:
            return higher_is_better(r.metric) if r.higher_is_better is None else bool(r.higher_is_better)

        def row(r: EvalRecord, metric: str, value: float | None, stderr: float | None, hib: bool) -> tuple[Any, ...]:
            tokens = None if r.tokens is None else float(r.tokens)
            wall = None if r.wall_s is None else float(r.wall_s)
            return (
                int(r.step),
                tokens,
                wall,
                r.portfolio,
                r.portfolio_version,
                r.task,
                metric,
                value,
                int(hib),
                stderr,
            )

        columns = (
            "run_id, step, tokens, wall_s, portfolio, portfolio_version, task, metric, value, higher_is_better, stderr"
        )
        insert = f"INSERT INTO evals ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
        insert += "(run_id, step, portfolio, portfolio_version, task, metric) DO UPDATE SET "
        with self.transaction():
            run_id = self.run_id(run)
            self._db.executemany(
                insert + "tokens = excluded.tokens, wall_s = excluded.wall_s, value = excluded.value, "
                "higher_is_better = excluded.higher_is_better, stderr = COALESCE(excluded.stderr, evals.stderr)",
                [(run_id, *row(r, r.metric, float(r.value), _given(r.stderr), given_direction(r))) for r in folded],
            )
            # A standard error whose metric is not among these records: its metric's row (stored, or one with no
            # value yet) takes it.
            if alone:
                metrics = [str(stderr_of(r.metric)) for r in alone]
                self._db.executemany(
                    insert + "stderr = excluded.stderr",
                    [
                        (run_id, *row(r, m, None, _given(r.value), higher_is_better(m)))
                        for r, m in zip(alone, metrics, strict=True)
                    ],
                )
            self._db.execute("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))
        return len(given)

    def evals(self, run: str) -> pd.DataFrame:
        """A run's eval records: step, tokens, wall_s, portfolio, portfolio_version, task, metric, value,
        higher_is_better, stderr (the value's standard error, NaN where none was given); ordered by task, metric,
        step."""
        rows = self._query(
            "SELECT step, tokens, wall_s, portfolio, portfolio_version, task, metric, value, higher_is_better, "
            "stderr FROM evals WHERE run_id = ? ORDER BY task, metric, step",
            (self.run_id(run),),
        )
        frame = pd.DataFrame(
            rows,
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
        with self.transaction():
            run_id = self.run_id(run) if run is not None else None
            cur = self._db.execute(
                "INSERT INTO events (run_id, kind, start_step, end_step, body, state, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, kind, start_step, end_step, text, state, time.time()),
            )
            return inserted_id(cur)

    def resolve_event(self, event_id: int) -> None:
        with self.transaction():
            cur = self._db.execute(
                "UPDATE events SET state = 'resolved', resolved_at = ? WHERE id = ?", (time.time(), event_id)
            )
            if cur.rowcount == 0:
                raise InputError(f"no event with id {event_id} in {self.location}")

    def events(self, run: str | None = None, *, kind: str | None = None, state: str | None = None) -> pd.DataFrame:
        """Events, oldest first: id, run, kind, start_step, end_step, body (dict), state, created_at."""
        sql = (
            "SELECT e.id, r.name, e.kind, e.start_step, e.end_step, e.body, e.state, e.created_at, e.resolved_at "
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
        rows = self._query(sql + " ORDER BY e.id", params)
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
            cur = self._db.execute(
                "INSERT INTO decisions (target, run_id, stage, decision, policy_hash, policy, evidence, rationale, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    target,
                    run_id,
                    stage,
                    decision,
                    policy_hash,
                    None if policy is None else json_body(policy, "policy"),
                    json_body(evidence, "evidence"),
                    rationale,
                    time.time(),
                ),
            )
            return inserted_id(cur)

    def decisions(self, target: str | None = None) -> pd.DataFrame:
        """Gate decisions, oldest first: the audit trail."""
        sql = "SELECT id, target, stage, decision, policy_hash, policy, evidence, rationale, created_at FROM decisions"
        params: list[Any] = []
        if target is not None:
            sql += " WHERE target = ?"
            params.append(target)
        rows = [
            (*row[:5], None if row[5] is None else json.loads(row[5]), json.loads(row[6]), *row[7:])
            for row in self._query(sql + " ORDER BY id", params)
        ]
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
            row = self._db.execute("SELECT spec_hash FROM campaigns WHERE name = ?", (name,)).fetchone()
            if row is None:
                self._db.execute(
                    "INSERT INTO campaigns (name, spec_hash, spec, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (name, spec_hash, text, now, now),
                )
            elif row[0] != spec_hash:
                self._db.execute(
                    "UPDATE campaigns SET spec_hash = ?, spec = ?, summary = NULL, updated_at = ? WHERE name = ?",
                    (spec_hash, text, now, name),
                )

    def set_campaign_summary(self, name: str, summary: Mapping[str, Any]) -> None:
        """Store the latest summary of a campaign's results (rankings, decision accuracy, forecasts)."""
        with self.transaction():
            cur = self._db.execute(
                "UPDATE campaigns SET summary = ?, updated_at = ? WHERE name = ?",
                (json_body(summary, "campaign summary"), time.time(), name),
            )
            if cur.rowcount == 0:
                raise InputError(f"no campaign named {name!r} in {self.location}")

    def campaign(self, name: str) -> dict[str, Any]:
        """A campaign's record: name, spec_hash, spec, summary (None before it was summarised), timestamps."""
        rows = self._query(
            "SELECT name, spec_hash, spec, summary, created_at, updated_at FROM campaigns WHERE name = ?", (name,)
        )
        if not rows:
            known = [r[0] for r in self._query("SELECT name FROM campaigns ORDER BY name")]
            raise InputError(
                f"no campaign named {name!r} in {self.location}"
                + (f"; campaigns: {', '.join(known)}" if known else "; run `yieldgate probe CAMPAIGN.yaml`")
            )
        n, h, spec, summary, created, updated = rows[0]
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
