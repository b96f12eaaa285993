"""A run read once: its stored records (`RunRecords`), and the two views analyses take of them, built without reading
again: `RunData` (yields, fits, comparisons: `load.load_run`'s view) and `RunSignals` (the detectors').

A command that needs both views of a run, as the gate does (it diagnoses each run, then forecasts, prices and checks
it), reads the run's steps, extras, evaluations, manifest, meta and resume events once here (`read_records`) and hands
the views to pure functions; it read a run's steps six times before (issue #44).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import RunData
from yieldgate.analysis.conditions import HOST_KEYS
from yieldgate.analysis.detectors import RunSignals
from yieldgate.analysis.objective import not_cross_entropy
from yieldgate.analysis.points import to_per_byte
from yieldgate.errors import InputError, check_choice
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest
from yieldgate.names import PER_UNITS, STEP_UNIT

__all__ = ["RunRecords", "read_records", "assemble", "run_data", "signals", "devices_in"]


@dataclass(frozen=True, kw_only=True)
class RunRecords:
    """One run as the ledger holds it, read once."""

    name: str
    steps: pd.DataFrame
    """Core step records with nullable floats (`Ledger.steps(nullable=True)`): <NA> not recorded, NaN a recorded NaN."""
    extras: pd.DataFrame
    """The namespaced extras, long (step, key, value)."""
    evals: pd.DataFrame
    manifest: Manifest | None
    meta: dict[str, Any] = field(default_factory=dict)
    resumes: list[dict[str, Any]] = field(default_factory=list)
    """Bodies of the run's `resume` events, oldest first."""

    def upto(self, step: int) -> RunRecords:
        """The run as it stood at `step`: its step records, extras and evaluations up to it, nothing after. The gate
        inside a run decides on what the run had recorded by the evaluation that asks (`gate/live.py`), while the
        loop goes on writing; read afterwards up to that step, the run gives the same evidence."""
        return replace(
            self,
            steps=self.steps[self.steps["step"] <= step].reset_index(drop=True),
            extras=self.extras[self.extras["step"] <= step].reset_index(drop=True) if len(self.extras) else self.extras,
            evals=self.evals[self.evals["step"] <= step].reset_index(drop=True),
        )


def read_records(ledger: Ledger, name: str) -> RunRecords:
    """Every record of `name` the gate and the detectors read, each read once."""
    return RunRecords(
        name=name,
        steps=ledger.steps(name, nullable=True),
        extras=ledger.extras(name),
        evals=ledger.evals(name),
        manifest=ledger.manifest(name),
        meta=ledger.meta(name),
        resumes=list(ledger.events(name, kind="resume").sort_values("id")["body"]),
    )


def assemble(
    name: str,
    steps: pd.DataFrame,
    evals: pd.DataFrame,
    manifest: Manifest | None,
    meta: dict[str, Any],
    extra_keys: list[str],
    host: pd.DataFrame,
    per: str = "token",
) -> RunData:
    """A run's `RunData` from its frames (`load.load_run` reads them; `run_data` takes them from `RunRecords`): the
    loss's objective, bits per byte where asked, FLOPs per token and the step unit."""
    logged = [*extra_keys, *(f"{t}/{m}" for t, m in zip(evals["task"], evals["metric"], strict=True))]
    objective = not_cross_entropy(logged, steps["loss"].to_numpy(dtype=float) if "loss" in steps else None)
    check_choice("per", per, PER_UNITS)
    if per == "byte" and objective is not None:
        raise InputError(f"run {name!r}: its loss is not a cross-entropy ({objective}), so it has no bits per byte")
    if per == "byte":
        tokenizer = manifest.data.tokenizer if manifest and manifest.data else None
        bpt = tokenizer.bytes_per_token if tokenizer else None
        evals, steps = to_per_byte(evals, steps, bpt, name)
    fpt = meta.get("mfu", {}).get("flops_per_token")
    if fpt is None and manifest and manifest.model:
        fpt = manifest.model.flops_per_token
    return RunData(
        name=name,
        steps=steps,
        evals=evals,
        manifest=manifest,
        flops_per_token=fpt,
        epochs=meta.get(STEP_UNIT) == "epoch",
        objective=objective,
        host=host,
    )


def run_data(records: RunRecords, per: str = "token") -> RunData:
    """`load.load_run`'s view of the run, from its records."""
    steps = records.steps.astype({c: float for c in records.steps.columns if c != "step"})
    keys = sorted(set(records.extras["key"])) if len(records.extras) else []
    host = records.extras[records.extras["key"].isin(HOST_KEYS)] if len(records.extras) else records.extras
    return assemble(records.name, steps, records.evals, records.manifest, records.meta, keys, host, per)


def signals(
    records: RunRecords,
    peers: dict[str, pd.Series] | None = None,
    cooldowns: dict[str, pd.DataFrame] | None = None,
) -> RunSignals:
    """The detectors' view of the run, from its records: core columns and extras side by side, the recorded NaNs
    apart (a NaN gradient norm is a finding, a value never recorded is not)."""
    nullable = records.steps
    recorded_nan = {
        c: nullable["step"].to_numpy()[np.isnan(nullable[c].to_numpy(dtype=float, na_value=0.0))]
        for c in ("loss", "grad_norm")
        if c in nullable
    }
    steps = nullable.astype({c: float for c in nullable.columns if c != "step"})
    if len(records.extras):
        wide = records.extras.pivot_table(index="step", columns="key", values="value", aggfunc="last", dropna=False)
        steps = steps.merge(wide.reset_index(), on="step", how="outer").sort_values("step", ignore_index=True)
    return RunSignals(
        steps=steps,
        evals=records.evals,
        manifest=records.manifest,
        meta=records.meta,
        recorded_nan=recorded_nan,
        peers=peers or {},
        cooldowns=cooldowns or {},
        resumes=records.resumes,
    )


def devices_in(meta: dict[str, Any], manifest: Manifest | None) -> int | None:
    """The run's device count: the manifest's `hardware.device_count` when it sets one, else the count its import
    read from the log (or was given), else a Tracker's world size; None when nothing says."""
    hw = manifest.hardware if manifest else None
    if hw is not None and ("device_count" in hw.model_fields_set or hw.device_count > 1):
        return hw.device_count
    if isinstance(meta.get("devices"), dict) and isinstance(meta["devices"].get("count"), int):
        return int(meta["devices"]["count"])
    return hw.device_count if hw is not None else None
