"""Exporters: a run's records, yields and diagnoses back into the tools people already watch.

- `table` (CSV or Parquet, by DEST's extension): one row per step, canonical column names (`step`, `tokens`,
  `wall_s`, `loss`, ...), then extras (`signals/gns`, `imported/epoch`) and eval keys (`val/loss`,
  `lambada_openai/acc`) as further columns — the names the importers map onto, so `yieldgate import
  table` reads it back unchanged.
- `tensorboard` (DEST: a log folder): every column as a scalar tag under `yieldgate/`, with tokens as the
  step axis when the run records tokens (the optimizer step is the tag `yieldgate/step`); tranche yields
  as `yield/<figure>` at each tranche's end; diagnoses as text.
- `mlflow` (DEST: a store folder or tracking URI): one MLflow run named after the run, metrics with step =
  tokens (else the optimizer step), yields as metrics, diagnoses as a JSON artifact.
- `wandb` (DEST: a folder): an offline W&B run (`wandb sync` uploads it), with `tokens` defined as the
  x-axis of every metric, yields logged against it too, diagnoses in the run summary.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import InputError, YieldgateError, check_choice
from yieldgate.ledger import Ledger
from yieldgate.names import stderr_name

__all__ = ["ExportResult", "export_run", "run_table", "TARGETS"]


@dataclass
class ExportResult:
    """What an export wrote."""

    run: str
    to: str
    dest: str
    rows: int
    columns: list[str]
    x_axis: str
    """`tokens` or `step`: the axis the metrics were written against."""
    yields: int = 0
    diagnoses: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def run_table(ledger: Ledger, run: str) -> pd.DataFrame:
    """A run as one wide table: a row per step (step records and eval steps), core columns with data, then
    extras, then eval keys `<task>/<metric>`, then their standard errors `<task>/<metric>_stderr` where recorded
    (an import reads them back as standard errors). Missing values are NaN."""
    steps = ledger.steps(run, nullable=True)
    steps = steps[["step"] + [c for c in steps.columns if c != "step" and steps[c].notna().any()]]
    frame = steps.set_index("step")
    extras = ledger.extras(run)
    if len(extras):
        frame = frame.join(extras.pivot(index="step", columns="key", values="value"), how="outer")
    evals = ledger.evals(run)
    if len(evals):
        # One value per step and key: an eval of the same task/metric in two portfolios keeps the last.
        evals = evals.assign(key=evals["task"] + "/" + evals["metric"]).drop_duplicates(["step", "key"], keep="last")
        values = evals.pivot(index="step", columns="key", values="value")
        errors = evals.dropna(subset=["stderr"])
        if len(errors):
            errors = errors.assign(key=errors["task"] + "/" + errors["metric"].map(stderr_name))
            values = values.join(errors.pivot(index="step", columns="key", values="stderr"), how="outer")
        frame = frame.join(values, how="outer")
    frame.index.name = "step"
    return frame.reset_index().astype({"step": np.int64})


def _yields(ledger: Ledger, run: str, notes: list[str]) -> list[tuple[int, float, dict[str, float]]]:
    """(end step, end tokens, {figure: value}) per tranche of the run's val/loss yields."""
    from yieldgate.analysis.runs import yield_report

    try:
        report = yield_report(ledger, run)
    except YieldgateError as exc:  # a run without validation evals has no yields: say so, export the rest
        notes.append(f"no yields: {exc}")
        return []
    out = []
    for t in report.tranches:
        figures = {
            "per_btok": t.yield_per_btok,
            "per_device_hour": t.yield_per_device_hour,
            "per_dollar": t.yield_per_dollar,
            "per_kwh": t.yield_per_kwh,
        }
        out.append((t.end_step, t.end_tokens, {k: v for k, v in figures.items() if v is not None}))
    return out


def _diagnoses(ledger: Ledger, run: str) -> list[dict[str, Any]]:
    events = ledger.events(run, kind="diagnosis")
    return [
        {
            "id": int(e["id"]),
            "start_step": None if pd.isna(e["start_step"]) else int(e["start_step"]),
            "end_step": None if pd.isna(e["end_step"]) else int(e["end_step"]),
            "state": e["state"],
            **e["body"],
        }
        for _, e in events.iterrows()
    ]


def _axis(table: pd.DataFrame) -> tuple[str, np.ndarray]:
    """Tokens as the x-axis when every row has them (and they never decrease), else the optimizer step."""
    if "tokens" in table:
        tokens = table["tokens"].to_numpy(dtype=float, na_value=np.nan)
        if len(tokens) and np.isfinite(tokens).all() and (np.diff(tokens) >= 0).all():
            return "tokens", tokens.astype(np.int64)
    return "step", table["step"].to_numpy(dtype=np.int64)


def _series(table: pd.DataFrame):
    """(column, row indices with a value, values) for each column but `step`."""
    for col in table.columns:
        if col == "step":
            continue
        values = table[col].to_numpy(dtype=float, na_value=np.nan)
        present = ~table[col].isna().to_numpy()
        yield col, np.nonzero(present)[0], values


def export_table(ledger: Ledger, run: str, dest: Path) -> ExportResult:
    """CSV or Parquet, by the extension of `dest`."""
    table = run_table(ledger, run)
    suffix = dest.suffix.lower()
    if suffix == ".csv":
        table.to_csv(dest, index=False, na_rep="")
    elif suffix == ".parquet":
        table.to_parquet(dest, index=False)
    else:
        raise InputError(f"{dest}: a table export writes .csv or .parquet; got {suffix or 'no extension'}")
    return ExportResult(run, "table", str(dest), len(table), list(table.columns), "step")


def export_tensorboard(ledger: Ledger, run: str, dest: Path) -> ExportResult:
    """Scalars under `yieldgate/`, stepped by tokens when known; yields and diagnoses beside them."""
    from torch.utils.tensorboard import SummaryWriter

    table = run_table(ledger, run)
    axis, x = _axis(table)
    notes: list[str] = []
    yields, diagnoses = _yields(ledger, run, notes), _diagnoses(ledger, run)
    writer = SummaryWriter(str(dest), max_queue=100_000, flush_secs=3600)
    try:
        if axis == "tokens":
            for i in range(len(table)):
                writer.add_scalar("yieldgate/step", float(table["step"].iat[i]), int(x[i]))
        for col, rows, values in _series(table):
            for i in rows:
                writer.add_scalar(f"yieldgate/{col}", values[i], int(x[i]))
        for end_step, end_tokens, figures in yields:
            for name, value in figures.items():
                writer.add_scalar(f"yield/{name}", value, int(end_tokens if axis == "tokens" else end_step))
        for d in diagnoses:
            writer.add_text("diagnosis", "```\n" + json.dumps(d, indent=2, default=str) + "\n```", d["start_step"] or 0)
    finally:
        writer.close()
    return ExportResult(
        run, "tensorboard", str(dest), len(table), list(table.columns), axis, len(yields), len(diagnoses), notes
    )


def export_mlflow(ledger: Ledger, run: str, dest: str) -> ExportResult:
    """An MLflow run (in experiment `yieldgate`) named after the run; metrics stepped by tokens when known."""
    from yieldgate.ingest.mlflow import metric_name, store_uri

    uri = store_uri(dest, create=True)  # a destination that is no MLflow store: refused before MLflow loads

    from mlflow.entities import Metric, Param
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    table = run_table(ledger, run)
    axis, x = _axis(table)
    notes: list[str] = []
    yields, diagnoses = _yields(ledger, run, notes), _diagnoses(ledger, run)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("yieldgate")
    exp_id = exp.experiment_id if exp is not None else client.create_experiment("yieldgate")
    mlrun = client.create_run(exp_id, run_name=run, tags={"yieldgate.x_axis": axis})
    try:
        manifest = ledger.manifest(run)
        if manifest is not None:  # the manifest as the run's parameters: MLflow's place for how a run was made
            params = [Param(k[:250], v[:6000]) for k, v in _flat(manifest.model_dump(mode="json"), "manifest").items()]
            for start in range(0, len(params), 100):  # MLflow's log_batch limit for params
                client.log_batch(mlrun.info.run_id, params=params[start : start + 100])
        now = 0  # timestamps: the run's own wall clock when recorded, else 0 (MLflow needs one)
        wall = (
            table["wall_s"].to_numpy(dtype=float, na_value=np.nan) if "wall_s" in table else np.full(len(table), np.nan)
        )
        metrics = []
        for col, rows, values in _series(table):
            name = metric_name(col)  # MLflow refuses `,` `@` and others: escaped reversibly
            metrics += [
                Metric(name, float(values[i]), int(wall[i] * 1000) if math.isfinite(wall[i]) else now, int(x[i]))
                for i in rows
            ]
        if axis == "tokens":
            metrics += [Metric("step", float(s), 0, int(t)) for s, t in zip(table["step"], x, strict=True)]
        for end_step, end_tokens, figures in yields:
            metrics += [
                Metric(f"yield/{k}", float(v), 0, int(end_tokens if axis == "tokens" else end_step))
                for k, v in figures.items()
            ]
        for start in range(0, len(metrics), 1000):  # MLflow's log_batch limit
            client.log_batch(mlrun.info.run_id, metrics=metrics[start : start + 1000])
        if diagnoses:
            client.log_text(mlrun.info.run_id, json.dumps(diagnoses, indent=2, default=str), "yieldgate/diagnoses.json")
        client.set_terminated(mlrun.info.run_id)
    except MlflowException as exc:
        # A name MLflow refuses (`a/../b` resolves to another name; one of more than 250 characters): the run
        # made for the export goes, so no half-exported run stays in the store.
        client.delete_run(mlrun.info.run_id)
        raise InputError(
            f"{dest}: MLflow refused run {run!r} ({exc.message.splitlines()[0]}); the MLflow run made "
            "for it was deleted: export it to TensorBoard or to a table instead"
        ) from None
    return ExportResult(
        run,
        "mlflow",
        f"{uri}#{mlrun.info.run_id}",
        len(table),
        list(table.columns),
        axis,
        len(yields),
        len(diagnoses),
        notes,
    )


def _flat(value: Any, prefix: str) -> dict[str, str]:
    """A nested mapping as {dotted.key: text}, empty values left out."""
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}.{key}").items()}
    if value is None or value == [] or value == {}:
        return {}
    return {prefix: value if isinstance(value, str) else json.dumps(value)}


def export_wandb(ledger: Ledger, run: str, dest: Path) -> ExportResult:
    """An offline W&B run under `dest` with `tokens` as every metric's x-axis (`wandb sync` uploads it)."""
    import wandb

    table = run_table(ledger, run)
    axis, x = _axis(table)
    notes: list[str] = []
    yields, diagnoses = _yields(ledger, run, notes), _diagnoses(ledger, run)
    dest.mkdir(parents=True, exist_ok=True)
    wb = wandb.init(
        mode="offline",
        dir=str(dest),
        name=run,
        project="yieldgate",
        reinit="create_new",
        settings=wandb.Settings(silent=True, console="off", x_disable_stats=True),
    )
    try:
        if axis == "tokens":
            wb.define_metric("tokens")
            wb.define_metric("*", step_metric="tokens")
        # W&B takes steps in increasing order only: a tranche's yields go into its end step's row.
        at_step = {int(end_step): {f"yield/{k}": v for k, v in figures.items()} for end_step, _, figures in yields}
        columns = list(_series(table))
        for i, step in enumerate(table["step"].to_numpy()):
            row = {col: float(values[i]) for col, rows, values in columns if not table[col].isna().iat[i]}
            wb.log({**row, **at_step.get(int(step), {})}, step=int(step))
        if diagnoses:
            wb.summary["yieldgate/diagnoses"] = json.dumps(diagnoses, default=str)
        folder = Path(wb.dir).parent
    finally:
        wb.finish()
    _wait_for_exit(folder)
    return ExportResult(
        run, "wandb", str(folder), len(table), list(table.columns), axis, len(yields), len(diagnoses), notes
    )


def _wait_for_exit(folder: Path, timeout_s: float = 30.0) -> None:
    """Wait until wandb's core process has written the whole offline log (it does so after `finish()`)."""
    import time

    from yieldgate.ingest.wandb import finished

    deadline = time.monotonic() + timeout_s
    logs = list(folder.glob("*.wandb"))
    while not (logs and all(finished(p) for p in logs)):
        if time.monotonic() > deadline:
            raise YieldgateError(f"{folder}: wandb did not finish writing the run within {timeout_s:.0f} s")
        time.sleep(0.05)
        logs = list(folder.glob("*.wandb"))


TARGETS: dict[str, Callable[..., ExportResult]] = {
    "table": lambda ledger, run, dest: export_table(ledger, run, Path(dest)),
    "tensorboard": lambda ledger, run, dest: export_tensorboard(ledger, run, Path(dest)),
    "mlflow": lambda ledger, run, dest: export_mlflow(ledger, run, dest),
    "wandb": lambda ledger, run, dest: export_wandb(ledger, run, Path(dest)),
}


def export_run(ledger: Ledger, run: str, to: str, dest: str) -> ExportResult:
    """Export one run `to` tensorboard, mlflow, wandb or table at `dest`."""
    check_choice("to", to, TARGETS)
    ledger.run_id(run)  # RunNotFound before anything is written
    return TARGETS[to](ledger, run, dest)
