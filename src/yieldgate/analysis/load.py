"""Reading runs out of the ledger for analysis: a run as `RunData`, the metric a command reads and its unit.

The analysis modules take DataFrames; this is the one place that knows how a run's steps, evals, manifest
and measurement notes come out of the ledger. The commands built on it are `api`'s functions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import RunData
from yieldgate.analysis.conditions import HOST_KEYS
from yieldgate.analysis.confounders import unit_for
from yieldgate.analysis.fit import stable_phase
from yieldgate.analysis.listing import match_runs
from yieldgate.analysis.points import TRAIN_LOSS, eval_points
from yieldgate.analysis.records import assemble, devices_in
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest
from yieldgate.names import LOSS_METRIC, split_eval_key, stderr_of

__all__ = [
    "column_stats",
    "load_run",
    "objective_note",
    "metric_key",
    "devices_of",
    "default_metric",
    "comparison_unit",
    "stable_points",
    "stable_points_of",
]


def load_run(ledger: Ledger, name: str, *, per: str = "token") -> RunData:
    steps, evals, manifest = ledger.steps(name), ledger.evals(name), ledger.manifest(name)
    host = ledger.extras(name, keys=HOST_KEYS)
    return assemble(name, steps, evals, manifest, ledger.meta(name), ledger.extra_keys(name), host, per)


def objective_note(data: RunData, metric: str) -> str | None:
    """What a yield or forecast of the loss `metric` of a run whose loss is not a cross-entropy must say; None for any
    other metric or run."""
    if data.objective is None or metric != LOSS_METRIC:
        return None
    return (
        f"{data.name}'s loss is not a cross-entropy ({data.objective}): it is the fine-tuning objective as logged, not "
        "nats per token; a fall in it is the policy moving, not learning per token, and it has no perplexity or bits "
        "per byte"
    )


def metric_key(metric: str, per: str) -> tuple[str, str]:
    """(task, metric) of a `metric` argument: `val/loss`, `arc_easy/acc`, or `loss` (the training loss: task
    empty)."""
    if metric == TRAIN_LOSS:
        return "", TRAIN_LOSS
    try:
        task, name = split_eval_key(metric)
    except ValueError:
        raise InputError(
            f"metric must be an eval key '<task>/<metric>' (val/loss, arc_easy/acc) or 'loss' (the "
            f"training loss), got {metric!r}"
        ) from None
    measured = stderr_of(name)
    if measured is not None:
        raise InputError(
            f"{metric} is the standard error of {task}/{measured}, kept beside its values, not a metric of its own; "
            f"use {task}/{measured}"
        )
    return task, ("bpb" if per == "byte" and name == "loss" else name)


def devices_of(ledger: Ledger, run: str, manifest: Manifest | None) -> int | None:
    """The run's device count (`records.devices_in`) from the ledger."""
    hw = manifest.hardware if manifest else None
    if hw is not None and ("device_count" in hw.model_fields_set or hw.device_count > 1):
        return hw.device_count
    return devices_in(ledger.meta(run), manifest)


def default_metric(data: RunData, metric: str, per: str = "token") -> tuple[str, str | None]:
    """The metric a command uses when the user asked for the default `val/loss` and the run has none: the first
    held-out loss (`val/<source>/loss`, `test/loss`), else the first capability evaluation, else the training
    loss; with a note saying so. Any other `metric` is used as asked. `per`: how `data` was read (`load_run`):
    per byte its val/loss reads as val/bpb."""
    if metric != "val/loss":
        return metric, None
    keys = sorted({f"{t}/{m}" for t, m in zip(data.evals["task"], data.evals["metric"], strict=True)})
    trained = "loss" in data.steps and data.steps["loss"].notna().any()
    if ("val/bpb" if per == "byte" else "val/loss") in keys or (not keys and not trained):
        return metric, None
    held_out = [k for k in keys if k.endswith("/loss") and k.split("/")[0] in ("val", "test")]
    chosen = (held_out or keys or [TRAIN_LOSS])[0]
    return chosen, f"{data.name} has no val/loss evaluations; using {chosen}" + (
        " (the training loss)" if chosen == TRAIN_LOSS else ""
    ) + " (choose with metric=...)"


def comparison_unit(ledger: Ledger, a: str, b: str, per: str | None = None) -> tuple[str, str | None]:
    """`per` as asked, else the unit the two groups compare in (`confounders.unit_for`: bytes when their tokenizers
    differ), with the note that says so."""
    if per is not None:
        return per, None
    names = dict.fromkeys(n for pattern in (a, b) for n in match_runs(ledger, pattern))
    return unit_for({n: ledger.manifest(n) for n in names})


def stable_points(ledger: Ledger, run: str, metric: str = "val/loss") -> tuple[pd.DataFrame, np.ndarray, str | None]:
    """The run's evaluations of `metric` after the first token, the mask of those in its stable-LR phase
    (`fit.stable_phase`) and that function's note."""
    return stable_points_of(load_run(ledger, run), metric)


def stable_points_of(data: RunData, metric: str = "val/loss") -> tuple[pd.DataFrame, np.ndarray, str | None]:
    """`stable_points` of a run already read."""
    task, name = metric_key(metric, "token")
    points = eval_points(data.evals, data.steps, task, name).dropna(subset=["tokens"])
    points = points[points["tokens"] > 0]
    mask, note = stable_phase(data.steps, points["step"].to_numpy())
    return points, mask, note


def column_stats(steps: pd.DataFrame, column: str) -> dict[str, tuple[int, float]]:
    """(step, value) of a step column's first, last, smallest and largest recorded value (NaN and inf skipped
    for min and max)."""
    logged = steps[["step", column]].dropna()
    finite = logged[np.isfinite(logged[column].to_numpy(dtype=float))]
    pick = finite if len(finite) else logged

    def at(i: int, frame: pd.DataFrame) -> tuple[int, float]:
        return int(frame["step"].iloc[i]), float(frame[column].iloc[i])

    return {
        "first": at(0, logged),
        "last": at(-1, logged),
        "min": at(int(np.argmin(pick[column].to_numpy())), pick),
        "max": at(int(np.argmax(pick[column].to_numpy())), pick),
    }
