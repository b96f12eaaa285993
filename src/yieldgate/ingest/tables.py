"""Readers of row-per-step tables: CSV, JSONL, Parquet (Lightning's CSVLogger and W&B's chart exports among
them). Plain-text logs are `yieldgate.ingest.textlog`'s.

Each returns `Rows` under the source's own metric names; `yieldgate.ingest.core` maps and cleans them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.clean import check_columns, clip, concat, parse_json, read_lines, unix_seconds
from yieldgate.ingest.core import pick_step
from yieldgate.ingest.epochfiles import in_order, is_record, read_array, read_columns, read_record, record_files
from yieldgate.ingest.mapping import LogMapping, computed_step
from yieldgate.ingest.sniff import SPACES, delimiter, describe, split_fields, table_format
from yieldgate.ingest.stepcount import cumulative_beside, infer_step
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.util.inputs import check_regular

__all__ = ["read_table", "rows_from_columns", "numeric_column"]

_NONFINITE = {"nan", "-nan", "inf", "+inf", "-inf", "infinity", "-infinity", "+infinity"}
# A plain decimal number (one way to split it: linear to match). pandas reads a whole number of more than
# 4,300 digits as nothing (Python's int limit); Python's float reads it, as inf past float range.
_DECIMAL = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def rows_from_columns(
    source: str, columns: Mapping[str, tuple[np.ndarray, np.ndarray]], where: Sequence[str], step_name: str
) -> Rows:
    """`Rows` from {name: (float values, present)}, the step taken from `step_name` (rows without one are
    errors: a table row must say which step it is); an `epoch` column as the step makes the steps count epochs."""
    values, present = columns[step_name]
    # Past 2**53 a float no longer holds every whole number: such a "step" is a misread column, not a step.
    bad = ~present | ~np.isfinite(values) | (values != np.round(values)) | (np.abs(values) > 2.0**53)
    if bad.any():
        i = int(np.argmax(bad))
        got = "nothing" if not present[i] else f"{float(values[i])!r}"
        raise InputError(f"{where[i]}: expected a whole step number in {step_name!r}, got {got}")
    if (values < 0).any():
        i = int(np.argmax(values < 0))
        raise InputError(
            f"{where[i]}: step {int(values[i])} in {step_name!r} is negative, and a step counts from 0 (a marker, "
            "such as -1 for 'the end of an epoch'?); name the column that counts the steps with map step=COLUMN",
            parameter="map",
        )
    rows = Rows(source, values.astype(np.int64), list(where), epochs=step_name.lower() == "epoch")
    for name, (v, p) in columns.items():
        if name != step_name:
            rows.values[name], rows.present[name] = v, p
    return rows


_DURATION = re.compile(r"^(?:(?P<days>\d+) days?, )?(?P<h>\d+):(?P<m>[0-5]\d):(?P<s>[0-5]\d(?:\.\d+)?)$")
# ms-swift's `elapsed_time`: `6s`, `1m 42s`, `2h 3m 4s` (and days as `1d`)
_UNIT_DURATION = re.compile(
    r"^(?=\d)(?:(?P<days>\d+)d\s*)?(?:(?P<h>\d+)h\s*)?(?:(?P<m>\d+)m\s*)?(?:(?P<s>\d+(?:\.\d+)?)s)?$"
)
# A progress count `done/total` (ms-swift's `global_step/max_steps`: `10/438`)
_PROGRESS = re.compile(r"^(?P<done>\d+)/(?P<total>\d+)$")


def _durations(text: pd.Series) -> np.ndarray | None:
    """Seconds of cells that are all `[D day(s), ]H:MM:SS[.f]` durations (LLaMA-Factory's `elapsed_time`, Python's
    str(timedelta)) or all `[Nh ][Nm ]Ns` ones (ms-swift's); None when any is not."""
    for pattern in (_DURATION, _UNIT_DURATION):
        parts = text.str.extract(pattern)
        if parts.notna().any(axis=1).all():
            numbers = parts.apply(pd.to_numeric, errors="coerce").fillna(0.0)
            seconds = numbers["days"] * 86400 + numbers["h"] * 3600 + numbers["m"] * 60 + numbers["s"]
            return seconds.to_numpy(dtype=np.float64)
    return None


def _progress(name: str, cells: pd.Series) -> tuple[str, tuple[np.ndarray, np.ndarray]] | None:
    """A column `A/B` whose every cell is a count `done/total` (ms-swift's `global_step/max_steps`): the counts
    done, under the name `A`; None for any other column."""
    if name.count("/") != 1:
        return None
    text = cells.fillna("").astype(str).str.strip()
    present = (text != "").to_numpy()
    parts = text[present].str.extract(_PROGRESS)
    if not present.any() or parts["done"].isna().any():
        return None
    values = np.full(len(text), np.nan)
    values[present] = parts["done"].astype(float).to_numpy()
    return name.split("/")[0], (values, present)


def numeric_column(
    name: str, cells: pd.Series, where: Sequence[str], warnings: Warnings, source: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, present) of a column of strings; None for a column with no numbers at all (not a metric)."""
    text = cells.fillna("").astype(str).str.strip()
    present = (text != "").to_numpy()
    values = pd.to_numeric(text.where(present), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan).copy()
    bad = present & np.isnan(values) & ~text.str.lower().isin(_NONFINITE).to_numpy()
    for j in np.nonzero(bad)[0]:  # few: cells pandas did not read
        if _DECIMAL.fullmatch(text.iloc[j]):
            values[j], bad[j] = float(text.iloc[j]), False
    if not present.any():
        return None
    if bad[present].all():
        durations = _durations(text[present])
        if durations is not None:  # `5:39:46`, `1 day, 2:03:04.5`: elapsed time, in seconds
            values[present] = durations
            return values, present
        warnings.add("column", f"{source}: column {name!r} holds no numbers; not imported")
        return None
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{where[i]}: column {name!r}: expected a number, got {clip(text.iloc[i])}")
    lowered = text.str.lower()
    values[(lowered.isin(["inf", "+inf", "infinity", "+infinity"])).to_numpy()] = np.inf
    values[(lowered.isin(["-inf", "-infinity"])).to_numpy()] = -np.inf
    return values, present


def _whole_row(lines: list[str]) -> bool:
    """A last line without a line end is whole when it has the header's number of fields and ends in a closing quote
    (W&B quotes every field of its exports), or, unquoted, its last column is printed to one width on every row and
    the last row's field has it (Flair writes each row's line end before it, so its loss.tsv ends without one, its
    F1 always to four places); a field of another width may have lost digits."""
    if len(lines) < 2:
        return False
    text = [line.rstrip("\r\n") for line in (lines[0], *lines[1:][-2000:])]
    split = split_fields(text, delimiter(text) or ",")
    if not split or len(split[-1]) != len(split[0]):
        return False
    if lines[-1].endswith('"'):
        return lines[-1].count('"') % 2 == 0
    widths = {len(row[-1].strip()) for row in split[1:-1] if len(row) == len(split[0])}
    return widths == {len(split[-1][-1].strip())}


def _read_csv(path: Path, warnings: Warnings) -> tuple[pd.DataFrame, list[str]]:
    """A delimited table whatever its delimiter (`sniff.delimiter`: tab, comma, semicolon, aligned spaces; a comma
    where none splits its lines alike, and pandas says what is wrong)."""
    lines = read_lines(path, warnings, "a CSV table", complete=_whole_row)
    if not lines:
        raise InputError(f"{path}: no complete line; expected a CSV header line and rows")
    sep = delimiter(lines[:2000]) or ","
    if sep == SPACES:  # an aligned table: numbers and names hold no comma
        lines, sep = [",".join(line.split()) for line in lines], ","
    try:
        check_columns(len(next(csv.reader([lines[0]], delimiter=sep))), str(path))  # before pandas builds them
    except (csv.Error, StopIteration):
        pass  # pandas says what is wrong with the header
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(lines) + "\n"), sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=False
        )
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a CSV table ({str(exc).strip()})") from None
    # Early YOLOv8 pads every name and cell to a fixed width (`                  epoch,  train/box_loss,`)
    frame.columns = [str(c).strip() for c in frame.columns]
    # One row per line after the header (the files we read have no quoted line breaks); blank lines go.
    where = [f"{path}:{i + 2}" for i in range(len(frame))]
    blank = (frame == "").all(axis=1).to_numpy() if len(frame.columns) else np.zeros(len(frame), dtype=bool)
    return frame[~blank].reset_index(drop=True), [w for w, b in zip(where, blank, strict=True) if not b]


def _read_jsonl(path: Path, warnings: Warnings) -> tuple[pd.DataFrame, list[str]]:
    records, where = [], []
    keys: dict[str, None] = {}
    for i, line in enumerate(read_lines(path, warnings, "a JSON Lines table"), start=1):
        if not line.strip():
            continue
        try:
            rec = parse_json(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path}:{i}: expected one JSON object per line ({exc.msg} at column {exc.colno})"
            ) from None
        if not isinstance(rec, dict):
            raise InputError(f"{path}:{i}: expected a JSON object, got {type(rec).__name__}")
        if isinstance(rec.get("log_history"), list):  # ms-swift ends its log with the Trainer's state
            warnings.add("state", f"{path}:{i}: the Trainer's state (log_history), a copy of the rows: not a row")
            continue
        if _SUMMARY_KEYS <= rec.keys():  # a Trainer's end-of-training summary: its train_loss is the run's mean
            rec = {k if k in _PROGRESS_KEYS else f"summary/{k}": v for k, v in rec.items()}
        keys.update(dict.fromkeys(rec))
        check_columns(len(keys), f"{path}:{i}")
        records.append({k: _cell(v) for k, v in rec.items()})
        where.append(f"{path}:{i}")
    return pd.DataFrame.from_records(records).fillna("") if records else pd.DataFrame(), where


# A Trainer's end-of-training summary row (`train_runtime` beside `train_loss`: DeiT's per-epoch `train_loss` is no
# summary), and the keys of it that keep their names: the step and the progress fields ms-swift adds to every row
_SUMMARY_KEYS = frozenset({"train_runtime", "train_loss"})
_PROGRESS_KEYS = frozenset(
    {"step", "global_step", "global_step/max_steps", "epoch", "percentage", "elapsed_time", "remaining_time"}
    | {"memory(GiB)", "train_speed(iter/s)"}
)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)  # 'nan', 'inf', '-inf'
    return str(v) if not isinstance(v, (dict, list)) else "<nested>"


def _read_parquet(path: Path, warnings: Warnings) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        check_columns(len(pq.read_schema(path)), str(path))
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        # Arrow's messages repeat the path and run over lines: the first line of the cause, without the path.
        cause = " ".join(str(exc).replace(f"'{path}'", "").split())
        raise InputError(f"{path}: not a Parquet file ({cause})") from None
    out = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type)):
            warnings.add("column", f"{path}: column {name!r} is {col.type}, not numbers; not imported")
            continue
        present = ~pc.is_null(col, nan_is_null=False).to_numpy(zero_copy_only=False)
        # Unsafe: an integer past 2**53 becomes the nearest float (a step that large is refused later) instead
        # of an ArrowInvalid escaping.
        values = pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        out[name] = (np.asarray(values, dtype=np.float64), np.asarray(present, dtype=bool))
    return out, [f"{path}:row {i}" for i in range(table.num_rows)]


# A W&B chart's CSV export: `Step`, then `<run> - <metric>` with `__MIN` / `__MAX`, the bounds of each
# plotted bucket, for every run on the chart.
_CHART_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<bound>__MIN|__MAX)?$")
# Clock columns that hold date-times or Unix times: read as seconds since the table's first row.
_CLOCKS = ("timestamp", "datetime", "date_time")


def _by_run(
    columns: dict[str, tuple[np.ndarray, np.ndarray]], step: str, path: Path, warnings: Warnings
) -> dict[str | None, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """{None: columns}, or for a W&B chart export {run: its columns under the metrics' own names}."""
    matched = {n: _CHART_COLUMN.match(n) for n in columns if n != step}
    others = {n: m for n, m in matched.items() if m is not None}
    if not others or len(others) < len(matched):
        return {None: columns}
    runs: dict[str | None, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    bounds = 0
    for name, m in others.items():
        if m["bound"]:
            bounds += 1
            continue
        runs.setdefault(m["run"], {step: columns[step]})[m["metric"]] = columns[name]
    if bounds:
        warnings.add(
            "chart",
            f"{path}: a W&B chart export; its {bounds} __MIN/__MAX column(s) (the bounds of "
            "each plotted bucket, not values) are not imported",
        )
    return runs


def _clock(name: str, cells: pd.Series, where: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """A `timestamp` / `datetime` column of date-times or Unix times, as seconds since its first value."""
    text = cells.fillna("").astype(str).str.strip()
    present = (text != "").to_numpy()
    if not present.any():
        return None
    numeric = pd.to_numeric(text.where(present), errors="coerce")
    if numeric[present].notna().all() and np.nanmedian(numeric) < 1e9:
        return None  # a count of seconds already: the mapping reads it
    of_day = _times_of_day(text[present])
    if of_day is not None:
        values = np.full(len(text), np.nan)
        values[present] = of_day
        return values - of_day[0], present
    values = unix_seconds(text)
    bad = present & np.isnan(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{where[i]}: column {name!r}: expected a date-time or Unix time, got {clip(text.iloc[i])}")
    return values - np.nanmin(values[present]), present


# A time of day without its date (Flair's loss.tsv: `12:33:21`)
_TIME_OF_DAY = re.compile(r"^(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d(?:\.\d+)?))?$")
_DAY_S = 86400.0


def _times_of_day(text: pd.Series) -> np.ndarray | None:
    """Seconds of cells that are all times of day without a date, in row order, a day added wherever the time falls
    by more than half a day (the run went on past midnight); None when any cell is not one."""
    parts = text.str.extract(_TIME_OF_DAY)
    if parts["h"].isna().any():
        return None
    seconds = (
        parts["h"].astype(float) * 3600 + parts["m"].astype(float) * 60 + parts["s"].fillna("0").astype(float)
    ).to_numpy()
    days = np.cumsum(np.r_[0.0, np.diff(seconds) < -_DAY_S / 2])
    return seconds + days * _DAY_S


_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def _format_of(path: Path) -> str:
    """`parquet`, `jsonl`, `csv` or `record` (one JSON object, one row: `ingest.epochfiles`): by the content where the
    name does not say (`metrics.json`, `log.txt`) or says otherwise; refused, with what the content looks like, when
    it is no table."""
    gz = path.suffix.lower() == ".gz"  # read_lines decompresses CSV and JSONL
    suffix = Path(path.stem).suffix.lower() if gz else path.suffix.lower()
    by_name = _SUFFIXES.get(suffix)
    if by_name is not None:
        return by_name  # its reader says what is wrong, at which line
    found = table_format(path)
    if found is not None:
        return found
    raise InputError(
        f"{path}: not a table: its content is {describe(path)}; a table is CSV, JSON lines, Parquet or JSON records "
        "one per file (whatever its name); for a printed log use yieldgate import textlog (or auto)"
    )


def _columns(path: Path, warnings: Warnings) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    """The numeric columns of one table file and where each row came from."""
    fmt = _format_of(path)
    if fmt == "parquet":
        return _read_parquet(path, warnings)
    readers = {"jsonl": _read_jsonl, "record": read_record, "columns": read_columns, "array": read_array}
    reader = readers.get(fmt, _read_csv)
    frame, where = reader(path, warnings)
    columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in frame.columns:
        progress = _progress(str(name), frame[name])
        if progress is not None:
            counted, (values, present) = progress
            if counted in columns:  # beside a plain column of that name: one column, the counts where it has none
                old_values, old_present = columns[counted]
                values, present = np.where(present, values, old_values), present | old_present
            columns[counted] = (values, present)
            continue
        col = (_clock(str(name), frame[name], where) if str(name).lower() in _CLOCKS else None) or numeric_column(
            str(name), frame[name], where, warnings, str(path)
        )
        if col is not None:
            if str(name) in columns:  # the counts of a `done/total` column read before it
                values, present = columns[str(name)]
                col = (np.where(present, values, col[0]), present | col[1])
            columns[str(name)] = col
    return columns, where


def _counting_step(
    columns: dict[str, tuple[np.ndarray, np.ndarray]],
    mapping: LogMapping,
    path: Path,
    prefer_step: Sequence[str],
    warnings: Warnings,
) -> str:
    """The column `pick_step` finds; where it holds a negative value (sentence-transformers writes `steps` -1 for an
    evaluation at the end of an epoch) and the mapping did not name it, the next usual step column that holds none,
    said in a warning. A step column named by the mapping, or without another, is refused at its negative value
    (`rows_from_columns`)."""
    step = pick_step(columns, mapping.names, str(path), prefer_step)
    values, present = columns[step]
    negative = present & (values < 0)
    if not negative.any() or "step" in mapping.names.values():
        return step
    rest = {n: c for n, c in columns.items() if n != step}
    try:
        other = pick_step(rest, {}, str(path), prefer_step)
    except InputError:
        return step
    values, present = rest[other]
    if (present & (values < 0)).any():
        return step
    warnings.add(
        "step",
        f"{path}: column {step!r} holds a negative value on {int(negative.sum())} row(s) (a marker, not a step): the "
        f"rows are stepped by {other!r}",
    )
    return other


def _step_of(
    columns: dict[str, tuple[np.ndarray, np.ndarray]],
    mapping: LogMapping,
    path: Path,
    prefer_step: Sequence[str],
    warnings: Warnings,
) -> str:
    """The step column: the mapping's computed step (`StepRule`: epoch, iteration, iterations per epoch), stored
    as `step` with the rows that have none left out, or the column `pick_step` finds."""
    rule = mapping.step
    counted = infer_step(columns, str(path)) if rule is None and "step" not in mapping.names.values() else None
    if counted is not None:  # an epoch and a count within it (`stepcount`)
        columns["step"] = (counted.step, counted.present)
        warnings.reading.setdefault("step", counted.how)
        return "step"
    if rule is None or rule.epoch is None:
        found = _counting_step(columns, mapping, path, prefer_step, warnings)
        counted_on = cumulative_beside(columns, found) if rule is None and not prefer_step else None
        if counted_on is not None and "step" not in mapping.names.values():
            how = (
                f"the field {counted_on!r}, a count that rises beside {found!r} (which counts the rows: kept as an "
                "extra)"
            )
            warnings.add("step", f"{path}: the step is {how}; name another with map step=COLUMN")
            warnings.reading.setdefault("step", how)
            found = counted_on
        warnings.reading.setdefault("step_field", found)
        return found
    step, present = computed_step(columns, rule, str(path))
    for name in mapping.step_columns():
        if name != rule.epoch:
            columns.pop(name, None)
    columns["step"] = (step, present)
    return "step"


def _say_epochs(path: Path, step: str, mapping: LogMapping, warnings: Warnings, said: set[Path]) -> None:
    """That the rows count epochs, once per file (once per folder of records: one row per file)."""
    where = path.parent if path.suffix.lower() == ".json" and is_record(path) else path
    if where in said:
        return
    said.add(where)
    if mapping.epochs:
        warnings.add("epoch", f"{where}: the mapping says each row is an epoch: steps in this run count epochs")
    elif step.lower() == "epoch":
        warnings.add(
            "epoch",
            f"{where}: no step column; each row is an epoch (column {step!r}), and steps in this run count epochs",
        )


def read_table(
    paths: Sequence[Path],
    warnings: Warnings,
    overrides: Mapping[str, str] | LogMapping,
    prefer_step: Sequence[str] = (),
) -> dict[str | None, Rows]:
    """Rows of one or more CSV / JSONL / Parquet files (several files of one resumed run, in order): {None:
    rows}, or one entry per run for a W&B chart export that holds several. The format is the content's (a
    JSON-lines `metrics.json` or `log.txt` is read). The step column is the mapping's (`--map step=...`, or
    its step rule), else the first of `prefer_step`, then of the usual names, present."""
    mapping = overrides if isinstance(overrides, LogMapping) else LogMapping(names=dict(overrides))
    parts: dict[str | None, list[Rows]] = {}
    said: set[Path] = set()
    for folder in (p for p in paths if p.is_dir()):
        if not record_files(folder, warnings):
            raise InputError(
                f"{folder}: is a directory without numbered JSON records (one object per file: metrics_epoch_0.json, "
                "...); give the table file itself"
            )
    for path in in_order(paths):
        check_regular(path, "a CSV, JSONL or Parquet table")  # a FIFO or /dev/zero is refused, not waited on
        columns, where = _columns(path, warnings)
        if not where:
            warnings.add("empty", f"{path}: no rows")
            continue
        step = _step_of(columns, mapping, path, prefer_step, warnings)
        if mapping.step is not None and mapping.step.epoch is not None:
            kept = columns["step"][1]
            columns = {n: (v[kept], p[kept]) for n, (v, p) in columns.items()}
            where = [w for w, k in zip(where, kept, strict=True) if k]
        _say_epochs(path, step, mapping, warnings, said)
        for run, cols in _by_run(columns, step, path, warnings).items():
            rows = rows_from_columns(str(path), cols, where, step)
            rows.epochs = rows.epochs or mapping.epochs
            logged = np.zeros(len(rows), dtype=bool)
            for present in rows.present.values():
                logged |= present
            parts.setdefault(run, []).append(rows.take(logged) if run is not None else rows)
    if not parts:
        raise InputError(f"{', '.join(map(str, paths))}: no rows to import")
    return {run: concat(p) for run, p in parts.items()}
