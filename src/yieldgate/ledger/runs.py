"""The Ledger's runs: create, claim by an owner and keep alive, status, manifest and meta, the runs list with
their totals, and managing them (rename, tag, note, remove), refused while a live writer holds the run."""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from yieldgate import names
from yieldgate.errors import InputError, RunInUse, RunNotFound, RunReferenced
from yieldgate.ledger.checksum import (
    RECORD_FIELDS,
    group_checksum,
    group_columns,
    record_checksum,
    record_columns,
    verify_group,
    verify_record,
)
from yieldgate.ledger.owners import CLAIM, NO_CLAIM, STALE_AFTER_S, Owner, holder, liveness, shares_pids
from yieldgate.ledger.owners import claim_fields as _claim
from yieldgate.ledger.owners import stored_owner as _owner
from yieldgate.names import (
    RUN_STATUSES,
    check_note,
    check_run_name,
    check_tag,
    readable_name,
)
from yieldgate.util import lazy

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from yieldgate.manifest import Manifest
else:
    np = lazy.module("numpy")  # loaded by the first block read or written: listing runs needs neither
    pd = lazy.module("pandas")  # loaded by the first DataFrame built: listing runs builds none

from yieldgate.ledger.connection import LedgerConnection, inserted_id, json_body

__all__ = ["RunsMixin"]

# The fields of a run record read off its steps and evals, not off the runs table (`Ledger.add_totals`).
TOTAL_FIELDS = (
    "steps",
    "last_step",
    "tokens",
    "last_eval_task",
    "last_eval_metric",
    "last_eval_value",
    "last_eval_step",
    "duration_s",
)

# The fields of `Ledger.run_records()`, in the order of `Ledger.runs()`'s columns.
RUN_COLUMNS = (
    "name",
    "status",
    "source",
    "manifest_hash",
    "created_at",
    "updated_at",
    *TOTAL_FIELDS,
    "note",
    "tags",
    "owner",
    "heartbeat_at",
    "recorded_status",
)

# `add_totals` looks up to this many runs by name; over it, it reads every run's totals in one pass.
LOOKUP_RUNS = 1000


def _most(a: Any, b: Any) -> Any:
    """The larger of two values where either may be None (SQL's MAX over NULLs)."""
    return b if a is None else a if b is None else max(a, b)


class RunsMixin(LedgerConnection):
    # -- runs -----------------------------------------------------------------------------------------

    def _put_manifest(self, manifest: Manifest) -> str:
        digest = manifest.content_hash()
        body, now = manifest.to_json(), time.time()
        self._db.execute(
            "INSERT INTO manifests (hash, body, created_at, checksum) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (hash) DO NOTHING",
            (digest, body, now, record_checksum("manifests", (digest, body, now))),
        )
        return digest

    def _run_record(self, run_id: int) -> dict[str, Any]:
        """The run's checksummed fields (`RECORD_FIELDS["runs"]`) as stored, once they pass their checksum
        (BlockDamaged otherwise)."""
        *values, checksum = self._query(f"SELECT {record_columns('runs')}, checksum FROM runs WHERE id = ?", (run_id,))[
            0
        ]
        verify_record(self.location, "runs", checksum, values, values[0])
        return dict(zip((name for name, _ in RECORD_FIELDS["runs"]), values, strict=True))

    def _update_run(self, run_id: int, record: dict[str, Any] | None = None, **changes: Any) -> None:
        """Set columns of a run's row with its checksum, in one statement. The stored record is checked first
        (`record`: as `_run_record` just read it), so that damage is never sealed under a new checksum."""
        record = dict(self._run_record(run_id) if record is None else record)
        record.update((k, v) for k, v in changes.items() if k in record)
        self._db.execute(
            f"UPDATE runs SET {', '.join(f'{k} = ?' for k in changes)}, checksum = ? WHERE id = ?",
            (*changes.values(), record_checksum("runs", list(record.values())), run_id),
        )

    def create_run(
        self,
        name: str,
        *,
        manifest: Manifest | None = None,
        status: str = "running",
        source: str = "api",
        if_exists: Literal["error", "reuse", "replace"] = "error",
    ) -> int:
        """Add a run and return its id.

        `if_exists`: `error` (default), `reuse` (keep the run and its records: a resumed run), or
        `replace` (drop its records first: a re-import).
        """
        check_run_name(name)
        if status not in RUN_STATUSES:
            raise InputError(f"run status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self.transaction():
            digest = self._put_manifest(manifest) if manifest is not None else None
            row = self._db.execute("SELECT id FROM runs WHERE name = ?", (name,)).fetchone()
            now = time.time()
            if row is not None:
                if if_exists == "error":
                    raise InputError(f"run {name!r} already exists in {self.location}; pick another name")
                run_id = int(row[0])
                changes: dict[str, Any] = {"status": status, "source": source, "updated_at": now}
                if digest is not None:
                    changes["manifest_hash"] = digest
                if if_exists == "replace":
                    for table in ("step_blocks", "extra_blocks", "evals", "events"):
                        self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
                    changes["meta"] = "{}"
                self._update_run(run_id, **changes)
                return run_id
            cur = self._db.execute(
                "INSERT INTO runs (name, status, manifest_hash, source, created_at, updated_at, meta, checksum, "
                "claim_checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    name,
                    status,
                    digest,
                    source,
                    now,
                    now,
                    "{}",
                    record_checksum("runs", (name, status, source, digest, now, "{}", None)),
                    NO_CLAIM,
                ),
            )
            return inserted_id(cur)

    def claim_run(
        self,
        name: str,
        *,
        owner: Owner,
        manifest: Manifest | None = None,
        resume: bool = False,
        takeover: bool = False,
        source: str = "tracker",
    ) -> bool:
        """Make `owner` the one writer of run `name`, creating the run if it is new; return whether it existed.

        Check and claim are one write transaction, so two processes claiming at once cannot both succeed. An
        existing run needs `resume`; one still `running` under another owner is refused (RunInUse) while that
        owner lives, and taken over with `takeover` once it is dead (`yieldgate.ledger.owners.liveness`; the takeover
        is kept as a `warning` event)."""
        with self.transaction():
            row = self._db.execute(f"SELECT status, {CLAIM} FROM runs WHERE name = ?", (name,)).fetchone()
            if row is not None:
                row = (row[0], *_claim(self.location, name, row[1:]))
            if row is not None and not resume:
                raise InputError(
                    f"run {name!r} already exists in {self.location}; pass resume=True to continue it, "
                    "or pick another name"
                )
            previous = _owner(*row[1:5]) if row is not None and row[1] else None
            if row is not None and row[0] == "running" and previous is not None and previous != owner:
                state = liveness(previous, row[5])
                beat = "no heartbeat" if row[5] is None else f"last heartbeat {time.time() - row[5]:.0f} s ago"
                if state == "live":
                    raise RunInUse(
                        f"run {name!r} in {self.location} is being written by {previous}, {beat}; a second writer "
                        f"would splice two runs into one: wait for it to end (takeover=True takes over only a writer "
                        f"that is dead: its process gone, or no heartbeat for {STALE_AFTER_S:.0f} s"
                        f"{'' if shares_pids(previous) else '; its pid is not visible from here, only its heartbeat'})"
                    )
                if not takeover:
                    raise RunInUse(
                        f"run {name!r} in {self.location} was being written by {previous}, which stopped without "
                        f"closing it ({'its process is gone' if state == 'crashed' else beat}); pass takeover=True "
                        "to take it over"
                    )
            self.create_run(name, manifest=manifest, status="running", source=source, if_exists="reuse")
            claim = (owner.host, owner.pid, owner.started, owner.namespace, time.time())
            self._db.execute(
                "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_started = ?, owner_ns = ?, heartbeat_at = ?, "
                "claim_checksum = ? WHERE name = ?",
                (*claim, group_checksum("runs.claim", claim), name),
            )
            if row is not None and row[0] == "running" and previous is not None and previous != owner:
                self.add_event(
                    name, "warning", {"source": "tracker", "takeover": {"from": str(previous), "by": str(owner)}}
                )
        return row is not None

    def heartbeat(self, run: str, owner: Owner) -> None:
        """Stamp the run's heartbeat for its writer `owner`; RunInUse when the run is no longer its own (taken
        over by another process)."""
        with self.transaction():
            claim = (owner.host, owner.pid, owner.started, owner.namespace, time.time())
            cur = self._db.execute(
                "UPDATE runs SET heartbeat_at = ?, claim_checksum = ? WHERE name = ? AND owner_host = ? AND "
                "owner_pid = ? AND owner_started = ? AND COALESCE(owner_ns, '') = ?",
                (
                    claim[4],
                    group_checksum("runs.claim", claim),
                    run,
                    owner.host,
                    owner.pid,
                    owner.started,
                    owner.namespace or "",
                ),
            )
            if cur.rowcount == 0:
                row = self._db.execute(
                    "SELECT owner_host, owner_pid, owner_started, owner_ns FROM runs WHERE name = ?", (run,)
                ).fetchone()
                now = "gone from the ledger" if row is None else holder(row)
                raise RunInUse(f"run {run!r} in {self.location} is no longer this process's to write: it is {now}")

    def release_claim(self, run: str) -> None:
        """End the claim on `run` of the attempt whose end the campaign recorded: a writer of it still alive (an
        orphaned trainer) is refused from then on (RunInUse; its Tracker spills), never ending the run itself."""
        with self.transaction():
            self.run_id(run)
            self._db.execute(
                "UPDATE runs SET owner_host = NULL, owner_pid = NULL, owner_started = NULL, owner_ns = NULL, "
                "heartbeat_at = NULL, claim_checksum = ? WHERE name = ?",
                (NO_CLAIM, run),
            )

    def run_id(self, run: str) -> int:
        row = self._query("SELECT id FROM runs WHERE name = ?", (run,))
        if not row:
            raise RunNotFound(f"no run named {run!r} in {self.location}; `yieldgate runs` lists them")
        return int(row[0][0])

    def set_status(self, run: str, status: str) -> None:
        if status not in RUN_STATUSES:
            raise InputError(f"run status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self.transaction():
            self._update_run(self.run_id(run), status=status, updated_at=time.time())

    def set_manifest(self, run: str, manifest: Manifest) -> str:
        with self.transaction():
            digest = self._put_manifest(manifest)
            self._update_run(self.run_id(run), manifest_hash=digest, updated_at=time.time())
        return digest

    def set_meta(self, run: str, key: str, value: Any) -> None:
        """Record how the run's figures were measured under `key` (e.g. `mfu`: formula, peak, dtype)."""
        with self.transaction():
            run_id = self.run_id(run)
            record = self._run_record(run_id)
            meta = json.loads(record["meta"])
            meta[key] = value
            self._update_run(run_id, record, meta=json_body(meta, "run meta"))

    def meta(self, run: str) -> dict[str, Any]:
        """What `set_meta` recorded for the run."""
        return json.loads(self._run_record(self.run_id(run))["meta"])

    def manifest(self, run: str) -> Manifest | None:
        """The run's manifest, or None when it has none."""
        digest = self._run_record(self.run_id(run))["manifest_hash"]
        rows = self._query(f"SELECT {record_columns('manifests')}, checksum FROM manifests WHERE hash = ?", (digest,))
        if not rows:
            return None
        *values, checksum = rows[0]
        verify_record(self.location, "manifests", checksum, values, run)
        from yieldgate.manifest import parse_manifest  # pydantic: only the commands that read manifests load it

        return parse_manifest(json.loads(values[1]), origin=f"manifest of run {run!r}")

    def runs(self) -> pd.DataFrame:
        """One row per run (`run_records`, as a DataFrame), oldest first."""
        return pd.DataFrame(self.run_records(), columns=list(RUN_COLUMNS))

    def run_records(
        self,
        name: str | None = None,
        *,
        totals: bool = True,
        offset: int = 0,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[dict[str, Any]]:
        """One dict per run: name, status, source, manifest_hash, created_at, updated_at, steps, last_step, tokens,
        last eval, duration_s (the largest recorded `wall_s`: the run's wall clock), tags (a sorted list), note,
        and its writer: owner, heartbeat_at, recorded_status; oldest first. A value not recorded is None.

        `status` is computed at read time for a run recorded `running` by a Tracker: `crashed` once its writer's
        process is gone (same host), `stale` once its heartbeat is older than `owners.STALE_AFTER_S` (a dead
        host, or a hung process); `held` for a `finished` run its governor held (`names.held_by_governor`);
        `recorded_status` is what the ledger holds. Builds no DataFrame: `yieldgate runs` lists runs without loading
        pandas. `name`: that run's record alone ([] if there is none).

        `totals=False` leaves the fields read off steps and evals (`TOTAL_FIELDS`) None, for a listing that
        chooses its runs first and fills those of the ones it shows with `add_totals`. A page: `limit` runs from the
        `offset`-th on, oldest first or `newest` first; only the page's records are read and checked."""
        order = "created_at DESC, id DESC" if newest else "created_at, id"
        params: tuple[Any, ...]
        if name is not None:
            only, params = "WHERE name = ?", (name,)
        elif limit is not None:
            only, params = f"WHERE id IN (SELECT id FROM runs ORDER BY {order} LIMIT ? OFFSET ?)", (limit, offset)
        else:
            only, params = "", ()
        runs = self._query(
            f"SELECT {record_columns('runs')}, checksum, updated_at, {CLAIM} FROM runs {only} ORDER BY {order}", params
        )
        if limit is None and offset:
            runs = runs[offset:]
        tags: dict[str, list[str]] = collections.defaultdict(list)
        for run, run_id, tag, checksum in self._query(
            "SELECT r.name, t.run_id, t.tag, t.checksum FROM run_tags t JOIN runs r ON r.id = t.run_id "
            + only.replace("WHERE name", "WHERE r.name").replace("WHERE id", "WHERE r.id")
            + " ORDER BY t.tag",
            params,
        ):
            verify_record(self.location, "run_tags", checksum, (run_id, tag), run)
            tags[run].append(tag)
        now = time.time()
        out = []
        for row in runs:
            verify_record(self.location, "runs", row[7], row[:7], row[0])
            run, recorded, source, digest, created, meta, note = row[:7]
            updated = row[8]
            host, pid, started, namespace, beat = _claim(self.location, run, row[9:])
            owner = _owner(host, pid, started, namespace) if host is not None else None
            status = names.HELD_STATUS if recorded == "finished" and names.held_by_governor(meta) else recorded
            if recorded == "running" and owner is not None:
                state = liveness(owner, beat, now)
                status = recorded if state == "live" else state
            out.append(
                {
                    "name": run,
                    "status": status,
                    "source": source,
                    "manifest_hash": digest,
                    "created_at": created,
                    "updated_at": updated,
                    **dict.fromkeys(TOTAL_FIELDS),
                    "note": note,
                    "tags": tags.get(run, []),
                    "owner": None if owner is None else str(owner),
                    "heartbeat_at": beat,
                    "recorded_status": recorded,
                }
            )
        return self.add_totals(out) if totals else out

    def add_totals(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`records` (of `run_records(totals=False)`) with their `TOTAL_FIELDS` filled in, in place: the run's
        steps, last step, tokens and wall clock summed from its blocks' index entries (0009_listing_index: no
        block is read), and its last evaluation (the latest step's; `val/loss` first among equals)."""
        if not records:
            return records
        sums: dict[str, tuple[Any, ...]] = {}
        last: dict[str, tuple[Any, ...]] = {}
        names = [r["name"] for r in records]
        # A page of a listing looks its runs up by name, 500 at a time; more runs are read in one pass per table.
        chunks = [None] if len(names) > LOOKUP_RUNS else [names[i : i + 500] for i in range(0, len(names), 500)]
        for chunk in chunks:
            only = "" if chunk is None else f"WHERE r.name IN ({', '.join('?' * len(chunk))})"
            params = () if chunk is None else tuple(chunk)
            # Block by block from the covering index (0012_more_checksums), each summary checked: a flipped bit in a
            # block's wall clock changed a run's duration here while `check` said whole.
            for run, checksum, *summary in self._query(
                f"SELECT r.name, b.summary_checksum, {group_columns('step_blocks.summary', 'b')} "
                f"FROM step_blocks b JOIN runs r ON r.id = b.run_id {only}",
                params,
            ):
                what = f"core step records of steps {summary[1]}-{summary[2]} (their count, tokens and wall clock)"
                verify_group(self.location, "step_blocks.summary", checksum, summary, run, what)
                _, _, last_step, n, tokens, wall = summary
                held = sums.get(run, (0, None, None, None))
                sums[run] = (
                    held[0] + n,
                    *(_most(a, b) for a, b in zip(held[1:], (last_step, tokens, wall), strict=True)),
                )
            fields = record_columns("evals")
            for run, checksum, *values in self._query(
                f"SELECT name, checksum, {fields} FROM (SELECT r.name, e.checksum, {record_columns('evals', 'e')}, "
                "ROW_NUMBER() OVER (PARTITION BY e.run_id ORDER BY e.step DESC, "
                "(e.task = 'val' AND e.metric = 'loss') DESC, e.id DESC) AS k "
                f"FROM evals e JOIN runs r ON r.id = e.run_id {only}) latest WHERE k = 1",
                params,
            ):
                verify_record(self.location, "evals", checksum, values, run)
                _, step, _, _, _, _, task, metric, value, _, _ = values
                last[run] = (task, metric, value, step)
        for r in records:
            steps, r["last_step"], r["tokens"], r["duration_s"] = sums.get(r["name"], (0, None, None, None))
            r["steps"] = steps or 0
            r["last_eval_task"], r["last_eval_metric"], r["last_eval_value"], r["last_eval_step"] = last.get(
                r["name"], (None, None, None, None)
            )
        return records

    def run_count(self) -> int:
        """How many runs the ledger holds."""
        return int(self._query("SELECT COUNT(*) FROM runs")[0][0])

    def run_names(self) -> list[str]:
        """Every run's name, oldest first (the order of `runs()`), read off one column: what a command matches names
        and globs against inside its write transaction, kept short. Not checked against the records' checksums:
        the commands check the record of each run they change (`tag_run`, `rename_run`, `set_note`)."""
        return [r[0] for r in self._query("SELECT name FROM runs ORDER BY created_at, id")]

    def run_metas(self) -> pd.DataFrame:
        """One row per run: name, status, meta (dict), oldest first. Campaigns find their probes here."""
        rows = self._query(f"SELECT {record_columns('runs')}, checksum FROM runs ORDER BY created_at, id")
        for *values, checksum in rows:
            verify_record(self.location, "runs", checksum, values, values[0])
        return pd.DataFrame([(r[0], r[1], json.loads(r[5])) for r in rows], columns=["name", "status", "meta"])

    def run_info(self, run: str) -> dict[str, Any]:
        """The `run_records()` record of one run (RunNotFound if there is none)."""
        self.run_id(run)
        return self.run_records(run)[0]

    # -- managing runs --------------------------------------------------------------------------------
    # Remove, rename, tag and note runs. Nothing here touches a run a live Tracker writes (RunInUse, naming the
    # writer), and nothing removes or renames what a gate decision cites (RunReferenced): the audit trail keeps
    # every run it names. Tags and notes describe a run; they do not move its `updated_at`.

    def _live_writer(self, run: str) -> Owner | None:
        """The live process writing `run`, or None (no Tracker holds it, or its writer is dead)."""
        row = self._db.execute(f"SELECT status, {CLAIM} FROM runs WHERE name = ?", (run,)).fetchone()
        if row is None:
            return None
        claim = _claim(self.location, run, row[1:])
        if row[0] != "running" or claim[0] is None:
            return None
        owner = _owner(*claim[:4])
        return owner if liveness(owner, claim[4]) == "live" else None

    def _refuse_if_held(self, run: str, doing: str) -> None:
        """RunInUse when a live Tracker writes `run`; RunReferenced when a gate decision cites it."""
        writer = self._live_writer(run)
        if writer is not None:
            raise RunInUse(
                f"cannot {doing} run {run!r} in {self.location}: it is being written by {writer}; wait "
                "for its Tracker to close"
            )
        run_id = self.run_id(run)
        citing = []
        for i, checksum, *values in self._query(
            f"SELECT id, checksum, {record_columns('decisions')} FROM decisions ORDER BY id"
        ):
            # A damaged decision cannot say which runs it cites: it holds every removal and rename (BlockDamaged).
            verify_record(self.location, "decisions", checksum, values, None, i)
            target, rid, evidence = values[0], values[1], values[6]
            if rid == run_id or run in (json.loads(evidence).get("runs") or []):
                citing.append((int(i), target))
        if citing:
            which = ", ".join(f"#{i} (target {t!r})" for i, t in citing[:3]) + (" ..." if len(citing) > 3 else "")
            many = len(citing) > 1
            raise RunReferenced(
                f"cannot {doing} run {run!r} in {self.location}: gate decision{'s' * many} {which} "
                f"cite{'' if many else 's'} it as evidence, and the audit trail keeps every run a "
                "decision names"
            )

    def remove_runs(self, runs: Sequence[str]) -> list[dict[str, Any]]:
        """Delete runs with their steps, extras, evals and events, all in one transaction: if any one is refused
        (RunNotFound, RunInUse, RunReferenced) nothing is deleted. Returns, per run, what went with it: name,
        steps, extra_values, evals, events."""
        removed = []
        with self.transaction():
            for run in dict.fromkeys(runs):
                self._refuse_if_held(run, "remove")
            for run in dict.fromkeys(runs):
                run_id = self.run_id(run)
                count: dict[str, Any] = {"name": run}
                for label, sql in (
                    ("steps", "SELECT COALESCE(SUM(n), 0) FROM step_blocks WHERE run_id = ?"),
                    ("extra_values", "SELECT COALESCE(SUM(n), 0) FROM extra_blocks WHERE run_id = ?"),
                    ("evals", "SELECT COUNT(*) FROM evals WHERE run_id = ?"),
                    ("events", "SELECT COUNT(*) FROM events WHERE run_id = ?"),
                ):
                    count[label] = int(self._db.execute(sql, (run_id,)).fetchone()[0])
                # Children first, so that no backend needs cascading foreign keys to get this right.
                for table in ("superseded_blocks", "events", "evals", "extra_blocks", "step_blocks", "run_tags"):
                    self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
                self._db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
                removed.append(count)
        return removed

    def rename_run(self, run: str, new: str) -> None:
        """Give run `run` the name `new` (validated as any run name; a name already taken is refused). Its records
        keep their place: they belong to the run, not to its name."""
        check_run_name(new)
        with self.transaction():
            self.run_id(run)
            if new == run:
                return
            if self._db.execute("SELECT 1 FROM runs WHERE name = ?", (new,)).fetchone() is not None:
                raise InputError(
                    f"cannot rename run {run!r} to {new!r}: a run named {new!r} is already in "
                    f"{self.location}; pick another name"
                )
            self._refuse_if_held(run, "rename")
            self._update_run(self.run_id(run), name=new)

    def tag_run(self, run: str, tags: Iterable[str]) -> list[str]:
        """Add tags to a run (one already there is kept once); return its tags, sorted."""
        wanted = [check_tag(t) for t in tags]
        with self.transaction():
            run_id = self.run_id(run)
            self._run_record(run_id)  # a damaged run's record is said, not tagged over
            self._db.executemany(
                "INSERT INTO run_tags (run_id, tag, checksum) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [(run_id, t, record_checksum("run_tags", (run_id, t))) for t in wanted],
            )
            return self.tags(run)

    def untag_run(self, run: str, tags: Iterable[str]) -> list[str]:
        """Take tags off a run; a tag it does not carry is refused (InputError naming the ones it has), so a typo
        does not pass for done. Returns its tags, sorted."""
        unwanted = [check_tag(t) for t in tags]
        with self.transaction():
            have = self.tags(run)
            missing = [t for t in unwanted if t not in have]
            if missing:
                raise InputError(f"run {run!r} has no tag {missing[0]!r}; its tags: {', '.join(have) or 'none'}")
            run_id = self.run_id(run)
            self._db.executemany("DELETE FROM run_tags WHERE run_id = ? AND tag = ?", [(run_id, t) for t in unwanted])
            return self.tags(run)

    def tags(self, run: str) -> list[str]:
        """The run's tags, sorted."""
        run_id = self.run_id(run)
        rows = self._query("SELECT tag, checksum FROM run_tags WHERE run_id = ? ORDER BY tag", (run_id,))
        for tag, checksum in rows:
            verify_record(self.location, "run_tags", checksum, (run_id, tag), run)
        return [r[0] for r in rows]

    def set_note(self, run: str, text: str) -> None:
        """Keep a free-text note with the run (it replaces the one before; empty text removes it)."""
        note = check_note(text)
        with self.transaction():
            self._update_run(self.run_id(run), note=note or None)

    def note(self, run: str) -> str | None:
        """The run's note, or None."""
        note: str | None = self._run_record(self.run_id(run))["note"]
        return note

    def free_name(self, base: str) -> str:
        """`base` when no run has that name, else the first free of `base-2`, `base-3`, ... (a re-run script's
        next run). Call it inside the transaction that creates the run, so that no other writer takes the name
        in between."""
        check_run_name(base)
        # LIKE may match more than `base-N` (`_` is its wildcard, ASCII case is ignored): only exact names count.
        taken = {r[0] for r in self._query("SELECT name FROM runs WHERE name = ? OR name LIKE ?", (base, base + "-%"))}
        n = 1
        name = base
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        return name

    def readable_name(self) -> str:
        """A free run name a person can say (`brisk-otter-7`: `names.readable_name`, numbered by the runs so
        far). Like `free_name`, call it inside the transaction that creates the run."""
        number = int(self._query("SELECT COUNT(*) FROM runs")[0][0]) + 1
        for _ in range(8):
            name = readable_name(number)
            if not self._query("SELECT 1 FROM runs WHERE name = ?", (name,)):
                return name
        return self.free_name(name)
