"""System telemetry logged by other tools, joined onto a run by wall clock (`--join-on time`).

Such logs share no step counter with the run, only the clock. Read: `nvidia-smi --query-gpu=... --format=csv`
(units in the header, `45 %`, `[N/A]`), `nvidia-smi dmon` (`#`-prefixed header and unit lines, with
`-o DT` for date and time; comma- or space-separated), or any CSV with a time column (`timestamp`, `time`,
`date`, `_timestamp`: Unix seconds or milliseconds, or date-time text). Date-times without a UTC offset are
taken as this machine's local time, as nvidia-smi writes them.

Join: a sample taken `t` seconds after the run started belongs to the first step whose cumulative `wall_s`
is >= t (the step running then); the samples of one step are averaged. Samples before the run's start or
after its last step are dropped, counted in one warning. The run's start is the Unix time its importer
recorded (`start_unix` in the run's meta: TensorBoard and MLflow imports), else, for a run recorded live,
its creation time in the ledger.

GPU columns map onto the device extras, aggregated over GPUs per sample as the Tracker does:
utilization -> `device/gpu_util` (mean), power -> `device/power_w` (sum), memory used ->
`device/mem_used_gib` (sum), SM clock -> `device/sm_clock_mhz` (lowest), temperature -> `device/temp_c`
(hottest). Any other numeric column is kept as `imported/<name>` (mean).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.clean import read_lines, unix_seconds
from yieldgate.ingest.types import Warnings
from yieldgate.ledger import Ledger

__all__ = ["read_samples", "join_on_time", "run_start"]

# Source column -> (device extra, how GPUs combine, scale to the extra's unit).
_DEVICE = {
    "utilization.gpu": ("device/gpu_util", "mean", 1.0),
    "sm": ("device/gpu_util", "mean", 1.0),
    "power.draw": ("device/power_w", "sum", 1.0),
    "pwr": ("device/power_w", "sum", 1.0),
    "memory.used": ("device/mem_used_gib", "sum", 1 / 1024),
    "fb": ("device/mem_used_gib", "sum", 1 / 1024),
    "clocks.sm": ("device/sm_clock_mhz", "min", 1.0),
    "clocks.current.sm": ("device/sm_clock_mhz", "min", 1.0),
    "pclk": ("device/sm_clock_mhz", "min", 1.0),
    "temperature.gpu": ("device/temp_c", "max", 1.0),
    "gtemp": ("device/temp_c", "max", 1.0),
}
_TIME_NAMES = ("timestamp", "_timestamp", "time", "datetime", "date_time", "date")
_GPU_NAMES = ("index", "gpu", "idx", "gpu_index")
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


def _frame(path: Path, warnings: Warnings) -> pd.DataFrame:
    """The file as a table of strings, with nvidia-smi's header units and dmon's `#` header lines handled."""
    lines = read_lines(path, warnings, "a telemetry table")
    header = [ln for ln in lines if ln.startswith("#")]
    body = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    if header:  # dmon: names on the first `#` line, units on the second
        names = re.split(r"[,\s]+", header[0].lstrip("#").strip())
        sep = "," if "," in (body[0] if body else "") else r"\s+"
        text = "\n".join(body)
    else:
        if not lines:
            raise InputError(f"{path}: empty file; expected a CSV with a header line")
        names = [re.sub(r"\s*\[.*\]$", "", n.strip()) for n in lines[0].split(",")]  # `power.draw [W]`
        sep, text = ",", "\n".join(lines[1:])
    try:
        frame = pd.read_csv(
            io.StringIO(text + "\n"),
            sep=sep,
            header=None,
            names=names,
            dtype=str,
            skipinitialspace=True,
            keep_default_na=False,
            engine="python",
        )
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(f"{path}: not a telemetry table ({str(exc).strip()})") from None
    frame.columns = [c.lower() for c in frame.columns]
    if "date" in frame and "time" in frame:  # dmon -o DT: 20240501, 12:00:00
        frame["timestamp"] = frame.pop("date") + " " + frame.pop("time")
    return frame


def _times(path: Path, cells: pd.Series, column: str) -> np.ndarray:
    values = unix_seconds(cells)
    if np.isnan(values).any():
        bad = cells.iloc[int(np.argmax(np.isnan(values)))]
        raise InputError(f"{path}: column {column!r}: expected times (Unix seconds or date-times), got {bad!r}")
    return values


def read_samples(path: Path, warnings: Warnings) -> pd.DataFrame:
    """Samples of one telemetry file: `time` (Unix s) and one column per extra, GPUs already combined."""
    frame = _frame(path, warnings)
    time_col = next((c for c in _TIME_NAMES if c in frame), None)
    if time_col is None:
        raise InputError(f"{path}: no time column; expected one of {', '.join(_TIME_NAMES)}")
    out = pd.DataFrame({"time": _times(path, frame[time_col], time_col)})
    how: dict[str, str] = {}
    for col in frame.columns:
        if col == time_col or col in _GPU_NAMES:
            continue
        number = frame[col].str.extract(_NUMBER, expand=False)  # `45 %` -> 45; `[N/A]`, `-` -> absent
        values = pd.to_numeric(number, errors="coerce")
        if values.notna().sum() == 0:
            continue  # names, bus ids, `Not Supported`: not metrics
        key, agg, scale = _DEVICE.get(col, (f"imported/{col}", "mean", 1.0))
        if key in out:
            continue
        out[key] = values * scale
        how[key] = agg
    if len(how) == 0:
        raise InputError(f"{path}: no numeric columns besides the time")
    # One row per sample time: the GPUs of one query line up on the same timestamp.
    return out.groupby("time", sort=True).agg(how).reset_index()


def run_start(ledger: Ledger, run: str) -> float:
    """Unix time the run started: `start_unix` from its import, else its creation time if recorded live."""
    meta = ledger.meta(run)
    if "start_unix" in meta:
        return float(meta["start_unix"])
    info = ledger.run_info(run)
    if str(info["source"]).startswith("import:"):
        raise InputError(
            f"run {run!r} was imported from a log without absolute times, so its start is unknown; "
            "telemetry cannot be joined by time"
        )
    return float(info["created_at"])


def join_on_time(ledger: Ledger, run: str, paths: Sequence[Path], warnings: Warnings) -> pd.DataFrame:
    """Per-step extras of the telemetry files, joined onto `run`'s steps by wall clock (see module doc)."""
    start = run_start(ledger, run)
    steps = ledger.steps(run, ["wall_s"]).dropna()
    if steps.empty:
        raise InputError(f"run {run!r} records no wall_s; telemetry is joined by wall clock")
    samples = pd.concat([read_samples(p, warnings) for p in paths], ignore_index=True).sort_values("time")
    wall = steps["wall_s"].to_numpy()
    at = samples["time"].to_numpy() - start
    index = np.searchsorted(wall, at, side="left")
    inside = (at >= 0) & (index < len(wall))
    if not inside.all():
        warnings.add(
            "outside",
            f"{', '.join(map(str, paths))}: {int((~inside).sum())} of {len(at)} samples fall "
            "outside the run's time span; dropped",
        )
    if not inside.any():
        raise InputError(
            f"{', '.join(map(str, paths))}: no sample falls within run {run!r} "
            f"(started {datetime.fromtimestamp(start).astimezone():%Y-%m-%d %H:%M:%S %z}, "
            f"{wall[-1]:.0f} s long)"
        )
    joined = samples[inside].drop(columns="time").assign(step=steps["step"].to_numpy()[index[inside]])
    return joined.groupby("step", sort=True).mean().reset_index()
