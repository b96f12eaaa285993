"""Where a campaign stands at any time (`yieldgate campaign NAME`): its planned probes done, running, failed and
left, from the ledger alone. A probe's run recorded `running` whose writer is dead (`ledger.owners.liveness`: its
process gone, or no heartbeat for `STALE_AFTER_S`) is failed, not running: a probe killed with SIGKILL, or whose
worker was, never stays running. Each failure keeps its error and its output's tail (run meta `output_tail`)."""

from __future__ import annotations

from typing import Any

from yieldgate.errors import RunNotFound
from yieldgate.ledger import Ledger
from yieldgate.probe.campaign.spec import Campaign, plan

__all__ = ["campaign_status", "probe_status", "probe_statuses"]

DEAD = ("crashed", "stale")


def campaign_status(ledger: Ledger, name: str) -> dict[str, Any]:
    """{done, running, failed, killed, left, planned: counts; running_runs, done_runs: [run]; failures: {run: {error,
    tail}}}
    for the campaign's stored file (`Ledger.campaign`)."""
    spec = ledger.campaign(name)["spec"]
    specs = plan(Campaign.model_validate(spec))
    records = {r["name"]: r for r in ledger.run_records(totals=False)}
    metas = {run: meta for run, _status, meta in ledger.run_metas().itertuples(index=False)}
    out: dict[str, Any] = {"planned": len(specs), "done": 0, "running": 0, "failed": 0, "killed": 0, "left": 0}
    running: list[str] = []
    done: list[str] = []
    failures: dict[str, dict[str, str]] = {}
    for probe in specs:
        record, meta = records.get(probe.run), metas.get(probe.run, {})
        if record is None or (meta.get("probe") or {}).get("key") != probe.key:
            out["left"] += 1
            continue
        status = record["status"]
        if status == "finished":
            out["done"] += 1
            done.append(probe.run)
        elif status == "running":
            out["running"] += 1
            running.append(probe.run)
        elif status == "killed":
            out["killed"] += 1
        else:
            out["failed"] += 1
            error = meta.get("error") or (
                "its writer died without closing the run (killed, or out of memory): "
                + ("its process is gone" if status == "crashed" else "no heartbeat")
                if status in DEAD
                else f"run status {status}"
            )
            failures[probe.run] = {"error": error, "tail": meta.get("output_tail") or ""}
    out["running_runs"] = running
    out["done_runs"] = done
    out["failures"] = failures
    return out


def probe_statuses(ledger: Ledger) -> dict[tuple[str, str], str]:
    """(run, probe key) -> status, for every probe run in the ledger."""
    metas = ledger.run_metas()
    return {
        (name, meta["probe"].get("key")): status
        for name, status, meta in metas.itertuples(index=False)
        if isinstance(meta.get("probe"), dict)
    }


def probe_status(ledger: Ledger, run: str, key: str) -> str | None:
    """The recorded status of run `run` when it is probe `key`'s, else None: one run's record read, so that a probe's
    claim, inside its write transaction, does not read every run of a large ledger while other writers wait for the
    lock (a Tracker beside the campaign spilled at once)."""
    try:
        meta = ledger.meta(run)
    except RunNotFound:
        return None
    probe = meta.get("probe")
    if not isinstance(probe, dict) or probe.get("key") != key:
        return None
    return str(ledger.run_records(run, totals=False)[0]["recorded_status"])
