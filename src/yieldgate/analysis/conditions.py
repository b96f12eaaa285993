"""The host conditions a run trained under, as confounders of a comparison: host load, CPU use, GPU clocks and
throttling, and the share of each step spent waiting for data, each a median over the run's steps.

Two runs compared for time or throughput are compared on their hosts too: a run beside a noisy neighbour (load
7.9 against 0.4), on a throttled GPU, or starved by its data loader is slower for reasons that are not the change
under test. A signal **differs** between the sides when both record it, the larger is more than RATIO times the
smaller, and they are further apart than the signal's floor (`SIGNALS`): a ratio alone calls 0.01 against 0.02
a difference, a floor alone ignores scale.

Each side's value is the mean over its runs (seeds) of each run's median. Functions take `compare.RunData`'s
DataFrames: the core step table and the host extras (`RunData.host`, long form: step, key, value).

Apart from whether the sides differ, a host can be busy for both: `contention` measures how much the host held the
runs back (the share of wanted CPU time spent waiting on a run queue, CPU steal, the load per CPU, and the spread of
tokens/s across a side's seeds) and `contention_warnings` says, when it is high, that time-axis verdicts (time to
target, throughput, equal-time points) are unreliable, while the verdict at equal tokens, which load cannot change,
stands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "SIGNALS",
    "RATIO",
    "HOST_KEYS",
    "differ",
    "host_confounders",
    "Contention",
    "contention",
    "contention_warnings",
    "contention_summary",
    "CONTENTION_LIMITS",
]

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
HOST_KEYS = (
    "host/load_1m",
    "device/cpu_util",
    "device/sm_clock_mhz",
    "device/throttle_reasons",
    "host/cpus",
    "host/cpu_wait",
    "host/cpu_steal",
)
"""The extras the signals and `contention` read (`RunData.host`)."""


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


CONTENTION_LIMITS = {
    "cpu_wait_pct": 20.0,
    "cpu_steal_pct": 10.0,
    "load_per_cpu": 1.5,
    "tokens_per_s_spread": 0.25,
}
"""Past these the host is called contended: a fifth of the CPU time the run wanted spent waiting for a CPU
(`host/cpu_wait`), a tenth of the host's CPU time stolen by the hypervisor (`host/cpu_steal`), half again as many
runnable tasks as CPUs (`host/load_1m` / `host/cpus`, the run's own threads included), and a side's tokens/s
varying by a quarter across its seeds (coefficient of variation of each seed's median)."""

_WHAT = {
    "cpu_wait_pct": "{v:.0f}% of the CPU time the run wanted spent waiting for a CPU",
    "cpu_steal_pct": "{v:.0f}% of CPU time stolen by the hypervisor",
    "load_per_cpu": "load {v:.1f} per CPU",
    "tokens_per_s_spread": "tokens/s varying {v:.0%} across seeds",
}


@dataclass
class Contention:
    """How much the host held each side's runs back (`contention`): per side, each measure (the mean over its
    runs of each run's median; None where not recorded) and the measures past `CONTENTION_LIMITS`."""

    sides: dict[str, dict[str, float | None]]
    high: dict[str, list[str]]
    """Per side, the measures past their limits, said in words (empty: not contended, as far as recorded)."""

    @property
    def contended(self) -> bool:
        return any(self.high.values())

    def to_dict(self) -> dict[str, Any]:
        return {"sides": self.sides, "high": self.high, "contended": self.contended}


def _run_median(host: pd.DataFrame | None, key: str) -> float | None:
    if host is None:
        return None
    return _median_of(key)(pd.DataFrame(), host)


def _run_load_per_cpu(host: pd.DataFrame | None) -> float | None:
    load, cpus = _run_median(host, "host/load_1m"), _run_median(host, "host/cpus")
    return load / cpus if load is not None and cpus else None


def _spread(runs: list[tuple[pd.DataFrame, pd.DataFrame | None]]) -> float | None:
    """The coefficient of variation of each run's median tokens/s; None with fewer than two runs that logged it."""
    medians = []
    for steps, _ in runs:
        if "tokens_per_s" in steps:
            tps = steps["tokens_per_s"].to_numpy(dtype=float)
            tps = tps[np.isfinite(tps) & (tps > 0)]
            if len(tps):
                medians.append(float(np.median(tps)))
    if len(medians) < 2:
        return None
    return float(np.std(medians, ddof=1) / np.mean(medians))


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(known)) if known else None


def contention(sides: dict[str, list[tuple[pd.DataFrame, pd.DataFrame | None]]]) -> Contention:
    """How much the host held back each side's runs, from what they recorded: `sides` maps a side's name to its
    runs' (steps, host extras). A measure a side's runs did not record is None and judges nothing."""
    measures: dict[str, dict[str, float | None]] = {}
    high: dict[str, list[str]] = {}
    for name, runs in sides.items():
        m = {
            "cpu_wait_pct": _mean([_run_median(host, "host/cpu_wait") for _, host in runs]),
            "cpu_steal_pct": _mean([_run_median(host, "host/cpu_steal") for _, host in runs]),
            "load_per_cpu": _mean([_run_load_per_cpu(host) for _, host in runs]),
            "tokens_per_s_spread": _spread(runs),
        }
        measures[name] = {k: None if v is None else float(f"{v:.4g}") for k, v in m.items()}
        high[name] = [_WHAT[k].format(v=v) for k, v in m.items() if v is not None and v > CONTENTION_LIMITS[k]]
    return Contention(measures, high)


def contention_warnings(measured: Contention) -> list[str]:
    """What a comparison (and the demo) says of a contended host: the measures past their limits per side, that
    time-axis verdicts are unreliable, and that the verdict at equal tokens is not; nothing when not contended."""
    if not measured.contended:
        return []
    said = "; ".join(f"{side}: {', '.join(why)}" for side, why in measured.high.items() if why)
    return [
        f"the host was contended during these runs ({said}): time-axis verdicts (time to target, throughput, "
        "the speedup, equal-time points) are unreliable; rerun on a quiet machine before trusting them",
        "the verdict at equal tokens stands: host load changes how fast tokens pass, not what each token teaches",
    ]


def contention_summary(measured: Contention) -> list[str]:
    """`contention_warnings` when the host was contended; else one line with what was measured, so a reader knows
    the time axis was checked (or that nothing was recorded to check it with)."""
    if measured.contended:
        return contention_warnings(measured)
    waits = {s: m["cpu_wait_pct"] for s, m in measured.sides.items() if m["cpu_wait_pct"] is not None}
    if not waits:
        return ["host contention not recorded for these runs: time-axis verdicts unchecked against host load"]
    said = ", ".join(f"{side} {v:.0f}%" for side, v in waits.items())
    return [f"host quiet enough for time-axis verdicts: share of wanted CPU time spent waiting for a CPU: {said}"]
