"""MLflow runs, read through MLflow's own client (`MlflowClient.get_metric_history`), from a local store or
any tracking URI.

SOURCE: the store (a folder such as `./mlruns`, or a URI: `file:...`, `sqlite:///...`, `http://...`) and then
run ids; with `--tracking-uri`, every SOURCE is a run id. With `--experiment`, the ids are experiment
names (or ids) and each of their runs becomes run `PREFIX/<its MLflow run name>`.

Each metric's history is (step, value, timestamp); values of one step form one row, and the timestamps
(ms) become `wall_s`, counted from the run's first logged value.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from yieldgate.errors import InputError
from yieldgate.ingest.clean import own_export, pivot
from yieldgate.ingest.types import Rows, Warnings

__all__ = ["read", "read_run", "store_uri", "metric_name", "source_name"]

# MLflow takes metric names of letters, digits, `_ - . /` and spaces. Any other character (lm-eval's
# `exact_match,strict-match`, `pass@1`) is written `._xx` (its code in hex; `._uxxxx` past 255), and a `.`
# followed by `_` is escaped too, so names come back exactly.
_MLFLOW_OK = re.compile(r"[\w\-. /]")
_ESCAPED = re.compile(r"\._(u[0-9a-f]{4}|[0-9a-f]{2})")


def metric_name(name: str) -> str:
    """`name` as MLflow accepts it, reversibly (`source_name` undoes it)."""
    out = []
    for i, ch in enumerate(name):
        plain = ch.isascii() and _MLFLOW_OK.fullmatch(ch) and not (ch == "." and name[i + 1 : i + 2] == "_")
        out.append(ch if plain else (f"._{ord(ch):02x}" if ord(ch) < 256 else f"._u{ord(ch):04x}"))
    return "".join(out)


def source_name(name: str) -> str:
    """The name `metric_name` was given."""
    return _ESCAPED.sub(lambda m: chr(int(m[1].lstrip("u"), 16)), name)


def store_uri(source: str, *, create: bool = False) -> str:
    """The tracking URI of a store given as a URI, a folder (`./mlruns`) or a `.db` file.

    With `create`, a folder that does not exist yet is made (an export's destination).
    """
    path = Path(source)
    if "://" in source or source.startswith("file:"):
        uri = source
    elif path.suffix in (".db", ".sqlite") and (path.is_file() or create):
        uri = f"sqlite:///{path.resolve()}"
    elif path.is_dir() or (create and not path.exists()):
        path.mkdir(parents=True, exist_ok=True)
        uri = path.resolve().as_uri()
    elif path.exists():
        raise InputError(f"{source}: a file, not an MLflow store; {_STORES}")
    else:
        raise InputError(f"{source}: no such MLflow store; {_STORES}")
    _refuse_other_database(source, uri)
    os.environ.setdefault("MLFLOW_ENABLE_TELEMETRY", "false")
    if uri.startswith("file:"):
        # MLflow 3 refuses folder stores unless told otherwise; months of runs live in them.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return uri


def _refuse_other_database(source: str, uri: str) -> None:
    """MLflow creates or upgrades its tables in whatever SQLite file it is given, on import as on export: a
    yieldgate ledger or another program's database named by mistake would be changed. Such a file (tables, none
    of them MLflow's `experiments`) is refused before MLflow opens it."""
    path = Path(uri.removeprefix("sqlite:///"))
    if not uri.startswith("sqlite:///") or not path.is_file() or path.stat().st_size == 0:
        return
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{source}: not an MLflow store ({exc}); {_STORES}") from None
    if tables and "experiments" not in tables:
        what = "a yieldgate ledger" if "schema_migrations" in tables else "an SQLite database of another program"
        raise InputError(f"{source}: {what}, not an MLflow store, left as it is; {_STORES}")


_STORES = "give an MLflow store: a folder (./mlruns), its .db file or a tracking URI"


def read_run(client, run_id: str, warnings: Warnings) -> tuple[str, Rows, float | None]:
    """(the run's MLflow name, its metrics as rows, the Unix time of its first value)."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        raise InputError(f"mlflow run {run_id!r}: {exc.message.splitlines()[0]}") from None
    except ValueError as exc:  # a folder store's metric file that does not parse (MLflow raises ValueError)
        raise InputError(
            f"mlflow run {run_id!r}: {str(exc).splitlines()[0]}; the store's metric file is damaged"
        ) from None
    steps, names, values, times = [], [], [], []
    for key in sorted(run.data.metrics):
        try:
            history = client.get_metric_history(run_id, key)
        except MlflowException as exc:
            raise InputError(f"mlflow run {run_id!r}: metric {key!r}: {exc.message.splitlines()[0]}") from None
        except ValueError as exc:  # a folder store's metric file that does not parse (MLflow raises ValueError)
            raise InputError(
                f"mlflow run {run_id!r}: metric {key!r}: {str(exc).splitlines()[0]}; the store's metric file is damaged"
            ) from None
        for m in history:
            if not (-(2**63) <= m.step < 2**63 and -(2**63) <= m.timestamp < 2**63):  # a damaged metric file
                raise InputError(
                    f"mlflow run {run_id!r}: metric {key!r}: step {m.step} or timestamp {m.timestamp} is "
                    "out of range; the store's metric file is damaged"
                )
            steps.append(m.step)
            names.append(source_name(key))
            values.append(m.value)
            times.append(m.timestamp / 1000.0)
    order = np.lexsort((np.array(steps), np.array(times))) if steps else np.empty(0, dtype=np.int64)
    step = np.array(steps, dtype=np.int64)[order]
    label = [f"mlflow run {run_id} step {steps[i]}" for i in order]
    rows = pivot(
        f"mlflow run {run_id}",
        np.zeros(len(step), dtype=np.int64),
        step,
        [names[i] for i in order],
        np.array(values, dtype=np.float64)[order],
        np.array(times, dtype=np.float64)[order],
        lambda i: label[i],
        warnings,
    )
    axis = run.data.tags.get("yieldgate.x_axis")
    if axis is not None:  # `yieldgate export --to mlflow`: stepped by tokens (the step is its own series) or steps
        rows = own_export(rows, warnings, step="step" if axis == "tokens" else None)
    return run.info.run_name or run_id, rows, (min(times) if times else None)


def _runs_of_experiment(client, ref: str) -> list[str]:
    exp = client.get_experiment_by_name(ref)
    if exp is None and ref.isdigit():
        exp = client.get_experiment(ref)
    if exp is None:
        raise InputError(f"mlflow experiment {ref!r}: not found; give its name or id")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    if not runs:
        raise InputError(f"mlflow experiment {ref!r}: has no runs")
    return [r.info.run_id for r in runs]


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: one run per MLflow run id (or per run of each experiment)."""
    from mlflow.tracking import MlflowClient

    from yieldgate.ingest import Read

    if opts.tracking_uri:
        uri, ids = store_uri(opts.tracking_uri), list(sources)
    else:
        uri, ids = store_uri(sources[0]), list(sources[1:])
    if not ids:
        raise InputError(
            "mlflow: give the store and then a run id (or, with experiment, an experiment name), e.g. ./mlruns RUN_ID",
            parameter="experiment",
        )
    client = MlflowClient(tracking_uri=uri)
    if opts.experiment:
        ids = [r for ref in ids for r in _runs_of_experiment(client, ref)]
    out = []
    for run_id in ids:
        name, rows, start = read_run(client, run_id, warnings)
        if not len(rows):
            warnings.add("empty", f"mlflow run {run_id}: no metrics logged")
        out.append(Read(f"mlflow:{uri}#{run_id}", rows, suffix=name if opts.experiment else None, start_unix=start))
    if not opts.experiment and len(out) > 1:
        raise InputError(
            "mlflow: several run ids go to several runs; import them one by one, or use experiment",
            parameter="experiment",
        )
    return out
