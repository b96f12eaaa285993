"""The host conditions a run trained under, as confounders of a comparison: host load, CPU use, GPU clocks and
throttling, and the share of each step spent waiting for data, each a median over the run's steps.

Two runs compared for time or throughput are compared on their hosts too: a run beside a noisy neighbour (load
7.9 against 0.4), on a throttled GPU, or starved by its data loader is slower for reasons that are not the change
under test. A signal **differs** between the sides when both record it, the larger is more than RATIO times the
smaller, and they are further apart than the signal's floor (`SIGNALS`): a ratio alone calls 0.01 against 0.02
a difference, a floor alone ignores scale.

Each side's value is the mean over its runs (seeds) of each run's median. Functions take `compare.RunData`'s
DataFrames: the core step table and the host extras (`RunData.host`, long form: step, key, value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["SIGNALS", "RATIO", "HOST_KEYS", "differ", "host_confounders"]

RATIO = 1.5
"""Sides differ in a signal when the larger value is more than this many times the smaller (and past its floor)."""


@dataclass(frozen=True)
class Signal:
    """One host condition: how a run's value is read, and the least difference that counts."""

    field: str
    """The confounder's name, as `compare` lists it."""
    read: Callable[[pd.DataFrame, pd.DataFrame], float | None]
    """(steps, host extras) -> the run's value; None where it did not record it."""
    floor: float
    """Differences at or below this are not counted, whatever their ratio (in the signal's unit)."""


def _median_of(key: str) -> Callable[[pd.DataFrame, pd.DataFrame], float | None]:
    def read(steps: pd.DataFrame, host: pd.DataFrame) -> float | None:
        values = host.loc[host["key"] == key, "value"].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        return float(np.median(values)) if len(values) else None

    return read


def _wait_share(steps: pd.DataFrame, host: pd.DataFrame) -> float | None:
    """The median share of a step's time spent waiting for the next batch (`data_wait_s` / `step_s`)."""
    if "data_wait_s" not in steps or "step_s" not in steps:
        return None
    wait, step = steps["data_wait_s"].to_numpy(dtype=float), steps["step_s"].to_numpy(dtype=float)
    ok = np.isfinite(wait) & np.isfinite(step) & (step > 0)
    return float(np.median(np.clip(wait[ok] / step[ok], 0.0, 1.0))) if ok.any() else None


def _throttled_share(steps: pd.DataFrame, host: pd.DataFrame) -> float | None:
    """The share of telemetry samples at which NVML reported any clock-throttle reason."""
    bits = host.loc[host["key"] == "device/throttle_reasons", "value"].to_numpy(dtype=float)
    bits = bits[np.isfinite(bits)]
    return float(np.mean(bits > 0)) if len(bits) else None


SIGNALS = (
    Signal("host.load_1m (median)", _median_of("host/load_1m"), floor=1.0),  # one more runnable task
    Signal("data_wait_share (median)", _wait_share, floor=0.05),  # 5% of a step's time
    Signal("device.cpu_util (median)", _median_of("device/cpu_util"), floor=25.0),  # a quarter of a core
    Signal("device.sm_clock_mhz (median)", _median_of("device/sm_clock_mhz"), floor=100.0),
    Signal("device.throttled_share", _throttled_share, floor=0.1),  # a tenth of the samples
)
"""The host conditions compared, with their floors: a load of one runnable task, 5% of step time, a quarter of a
core, 100 MHz of SM clock, a tenth of the samples throttled."""
HOST_KEYS = ("host/load_1m", "device/cpu_util", "device/sm_clock_mhz", "device/throttle_reasons")
"""The extras the signals read (`RunData.host`)."""


def _side(runs: list[tuple[pd.DataFrame, pd.DataFrame | None]], signal: Signal) -> float | None:
    """The mean over a side's runs of each run's value; None unless every run recorded it."""
    host_empty = pd.DataFrame({"step": [], "key": [], "value": []})
    values = [signal.read(steps, host if host is not None else host_empty) for steps, host in runs]
    known = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(known)) if known and len(known) == len(values) else None


def differ(a: float, b: float, floor: float) -> bool:
    """The module docstring's rule: the larger more than RATIO times the smaller, and further apart than `floor`."""
    low, high = sorted((abs(a), abs(b)))
    return abs(a - b) > floor and (low == 0 or high / low > RATIO)


def host_confounders(
    a: list[tuple[pd.DataFrame, pd.DataFrame | None]], b: list[tuple[pd.DataFrame, pd.DataFrame | None]]
) -> list[dict[str, Any]]:
    """The host conditions in which side A's runs and side B's differ (`differ`), as compare's confounder rows
    {"field", "a", "b"}: each side's (steps, host extras) per run."""
    rows = []
    for signal in SIGNALS:
        va, vb = _side(a, signal), _side(b, signal)
        if va is not None and vb is not None and differ(va, vb, signal.floor):
            rows.append({"field": signal.field, "a": float(f"{va:.4g}"), "b": float(f"{vb:.4g}")})
    return rows
