"""Reading runs out of the ledger for analysis: one function per CLI question, each returning plain data.

The analysis modules take DataFrames; this is the one place that knows how a run's steps, evals, manifest
and measurement notes come out of the ledger.
"""

from __future__ import annotations

import fnmatch

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import Axis, Comparison, RunData, compare
from yieldgate.analysis.fit import Forecast, forecast, stable_phase
from yieldgate.analysis.yields import YieldReport, eval_points, to_per_byte, tranche_yields
from yieldgate.errors import InputError, RunNotFound
from yieldgate.ledger import Ledger
from yieldgate.names import split_eval_key

__all__ = ["load_run", "match_runs", "yield_report", "compare_groups", "stable_points", "forecast_run", "forecast_check"]


def match_runs(ledger: Ledger, pattern: str) -> list[str]:
    """Run names matching `pattern`: the exact name if there is one, else a glob (`bs64-seed*`)."""
    names = ledger.runs()["name"].tolist()
    if pattern in names:
        return [pattern]
    found = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not found:
        raise RunNotFound(f"no run named or matching {pattern!r} in {ledger.location}; `yieldgate runs` lists them")
    return found


def load_run(ledger: Ledger, name: str, *, per: str = "token") -> RunData:
    steps, evals, manifest = ledger.steps(name), ledger.evals(name), ledger.manifest(name)
    if per == "byte":
        bpt = manifest.data.tokenizer.bytes_per_token if manifest and manifest.data and manifest.data.tokenizer else None
        evals, steps = to_per_byte(evals, steps, bpt, name)
    elif per != "token":
        raise InputError(f"--per must be 'token' or 'byte', got {per!r}")
    fpt = ledger.meta(name).get("mfu", {}).get("flops_per_token")
    if fpt is None and manifest and manifest.model:
        fpt = manifest.model.flops_per_token
    return RunData(name=name, steps=steps, evals=evals, manifest=manifest, flops_per_token=fpt)


def _metric(metric: str, per: str) -> tuple[str, str]:
    task, name = split_eval_key(metric)
    return task, ("bpb" if per == "byte" and name == "loss" else name)


def yield_report(ledger: Ledger, run: str, *, tranche_tokens: float | None = None, metric: str = "val/loss",
                 per: str = "token") -> YieldReport:
    data = load_run(ledger, run, per=per)
    task, name = _metric(metric, per)
    hw = data.manifest.hardware if data.manifest else None
    report = tranche_yields(run, data.steps, data.evals, task=task, metric=name, tranche_tokens=tranche_tokens,
                            devices=hw.device_count if hw else 1, price_per_device_hour=hw.price_per_device_hour if hw else None)
    if per == "byte":
        report.unit = "bits/byte, per billion bytes"
    return report


def compare_groups(ledger: Ledger, a: str, b: str, *, at: Axis = "tokens", target_loss: float | None = None,
                   metric: str = "val/loss", primary: str = "learning", per: str = "token") -> Comparison:
    task, name = _metric(metric, per)
    groups = [[load_run(ledger, n, per=per) for n in match_runs(ledger, p)] for p in (a, b)]
    return compare(groups[0], groups[1], names=(a, b), at=at, target_loss=target_loss, task=task, metric=name,
                   primary=primary)  # type: ignore[arg-type]


def stable_points(ledger: Ledger, run: str, metric: str = "val/loss") -> tuple[pd.DataFrame, np.ndarray, str | None]:
    """The run's evaluations of `metric` after the first token, the mask of those in its stable-LR phase
    (`fit.stable_phase`) and that function's note."""
    data = load_run(ledger, run)
    task, name = _metric(metric, "token")
    points = eval_points(data.evals, data.steps, task, name).dropna(subset=["tokens"])
    points = points[points["tokens"] > 0]
    mask, note = stable_phase(data.steps, points["step"].to_numpy())
    return points, mask, note


def forecast_run(ledger: Ledger, run: str, *, next_tokens: float, threshold_per_btok: float | None = None,
                 metric: str = "val/loss", level: float = 0.8) -> Forecast:
    """Forecast the next tranche from the run's stable-LR phase (see `fit.stable_phase`)."""
    points, mask, note = stable_points(ledger, run, metric)
    used = points[mask] if mask.sum() >= 3 else points
    result = forecast(used["tokens"].to_numpy(), used["value"].to_numpy(), next_tokens=next_tokens,
                      at_tokens=float(used["tokens"].iloc[-1]), level=level, threshold_per_btok=threshold_per_btok)
    result.notes.insert(0, f"fitted on evaluations at steps {', '.join(map(str, used['step'].astype(int)))}")
    if note:
        result.notes.insert(1, note)
    return result


def forecast_check(ledger: Ledger, run: str, *, fraction: float = 0.6, metric: str = "val/loss",
                   level: float = 0.8) -> dict[str, float | bool]:
    """Check a forecast against what the run then measured: fit the first `fraction` of its stable-phase
    evaluations, forecast the next tranche (up to the following stable-phase evaluation) and say whether the
    `level` interval holds the gain measured there."""
    points, mask, _ = stable_points(ledger, run, metric)
    stable = points[mask]
    n = int(len(stable) * fraction)
    if n < 3 or n >= len(stable):
        raise InputError(f"run {run!r}: {len(stable)} stable-phase evaluations leave no tranche to check a fit "
                         f"on {fraction:.0%} of them against")
    x, y = stable["tokens"].to_numpy(), stable["value"].to_numpy()
    result = forecast(x[:n], y[:n], next_tokens=float(x[n] - x[n - 1]), at_tokens=float(x[n - 1]), level=level)
    measured = float(y[n - 1] - y[n])  # a loss: the gain is its decrease
    lo, hi = result.interval
    return {"fitted": n, "stable": len(stable), "at_tokens": float(x[n - 1]), "next_tokens": float(x[n] - x[n - 1]),
            "forecast": result.gain, "low": lo, "high": hi, "measured": measured, "held": bool(lo <= measured <= hi)}
