"""One probe: claim its run, resolve its recipe (once per worker process), train it into the ledger, and record a
failure rather than raise it. Runs in a worker process (`executors`) or in the caller's."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from yieldgate.errors import RunInUse, RunNotFound
from yieldgate.ledger import Ledger
from yieldgate.ledger.owners import Owner
from yieldgate.probe.campaign.spec import ProbeSpec
from yieldgate.probe.campaign.status import probe_status, probe_statuses

__all__ = ["claim_probe", "run_probe", "probe_status", "probe_statuses", "record_failure"]

_RESOLVED: dict[str, Any] = {}
"""Resolved recipes of this worker process, by recipe hash: a worker resolves each recipe once."""


def run_probe(
    spec: ProbeSpec,
    ledger: str,
    *,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    devices: str | None = None,
) -> dict[str, Any]:
    """Train one probe into the ledger. Never raises for a failing probe: returns its status and error. A campaign's
    own trainer runs through `own.run_own_probe` (`devices`: its CUDA_VISIBLE_DEVICES, None to leave it as is)."""
    if spec.trainer is not None:
        from yieldgate.probe.campaign.own import run_own_probe

        return run_own_probe(spec, ledger, progress=progress, devices=devices)
    from yieldgate.data.recipe import resolve
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.trainer import train_probe

    # Claimed in one write transaction with the check, so two `yieldgate probe` commands on one campaign share the
    # work: a probe another live process trains, or finished since this one planned, is skipped, never restarted
    # under it. A fresh run: a half-written one of an earlier attempt (its writer dead) is dropped.
    try:
        with Ledger(ledger) as led:
            if not claim_probe(led, spec.run, spec.key, spec.meta()):
                return {"run": spec.run, "key": spec.key, "status": "skipped", "reason": "finished by another process"}
    except RunInUse as exc:
        return {"run": spec.run, "key": spec.key, "status": "skipped", "reason": str(exc)}
    started = time.perf_counter()
    try:
        data = _RESOLVED.get(spec.recipe_hash)
        if data is None:
            data = _RESOLVED[spec.recipe_hash] = resolve(
                spec.recipe,
                held_out=spec.data.held_out,
                seed=0,
                stdlib_bytes=spec.data.stdlib_bytes,
                max_chars_per_source=spec.data.max_chars_per_source,
            )
        cfg = ProbeConfig(
            tokens=spec.tokens,
            seed=spec.seed,
            layers=spec.model.layers,
            width=spec.model.width,
            heads=spec.model.heads,
            threads=threads,
            eval_sources=spec.eval_sources,
            **spec.probe.model_dump(),
        )
        final = train_probe(data, cfg, run=spec.run, ledger=ledger, progress=progress, resume=True)
        return {
            "run": spec.run,
            "key": spec.key,
            "status": "finished",
            "final": final,
            "seconds": time.perf_counter() - started,
        }
    except Exception as exc:  # noqa: BLE001 - a failing probe is recorded, the campaign goes on
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        record_failure(ledger, spec, error)
        return {
            "run": spec.run,
            "key": spec.key,
            "status": "failed",
            "error": error,
            "seconds": time.perf_counter() - started,
        }


def claim_probe(led: Ledger, run: str, key: str, meta: dict[str, Any]) -> bool:
    """Claim probe `key`'s run `run` for this process, fresh, in one write transaction with the check: False when the
    probe is finished already. RunInUse when another live process trains it. The transaction reads this run's record
    only (`probe_status`), so it holds the lock for milliseconds whatever the ledger holds (it read every run's
    record: a second on 10,000 runs, and a Tracker beside the campaign spilled)."""
    with led.transaction():
        if probe_status(led, run, key) == "finished":
            return False
        existed = led.claim_run(run, owner=Owner.this_process(), resume=True, takeover=True, source="probe")
        before = led.meta(run) if existed else {}
        led.create_run(run, status="running", source="probe", if_exists="replace")
        led.set_meta(run, "probe", meta)
        # Trainings of this probe, this one included (an earlier attempt's count when it was the same probe).
        same = (before.get("probe") or {}).get("key") == key
        led.set_meta(run, "attempts", (int(before.get("attempts", 0)) if same else 0) + 1)
    return True


def record_failure(ledger: str, spec: ProbeSpec, error: str) -> None:
    """The probe's run ends `failed`, with `error` in its meta (`error`), and its attempt's claim ends. A probe that
    never started (its job cancelled while it waited) has its run made here, `failed`, so the ledger tells of it."""
    with Ledger(ledger) as led, led.transaction():
        try:
            led.set_status(spec.run, "failed")
        except RunNotFound:
            led.create_run(spec.run, status="failed", source="probe")
        led.set_meta(spec.run, "error", error)
        led.release_claim(spec.run)  # a trainer of this attempt still alive writes the run no more
