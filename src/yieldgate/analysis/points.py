"""A run's curve as the analyses read it: one task/metric's evaluations (or the training loss) as points in step
order, with tokens from the record or the step table, the portfolio version each was taken with, and the same in
bits per byte and bytes (`to_per_byte`). `yields`, `compare`, `load` and the forecast read their points here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.names import LOSS_METRIC

__all__ = [
    "eval_points",
    "portfolio_curves",
    "portfolio_label",
    "train_loss_points",
    "to_per_byte",
    "cost_from_price",
    "exactly_at_steps",
    "sampled_at_steps",
    "TRAIN_LOSS",
    "UNVERSIONED",
]

TRAIN_LOSS = "loss"
"""The `metric` that means the training loss of the step table (not an evaluation)."""
_TRAIN_POINTS = 10  # tranches of a training-loss curve


def exactly_at_steps(steps: pd.DataFrame, column: str, at: np.ndarray) -> np.ndarray:
    """Values of a cumulative step column at exactly these steps (NaN where that step has no value)."""
    if column not in steps or steps[column].isna().all():
        return np.full(len(at), np.nan)
    s = steps.set_index("step")[column]
    return s.reindex(at).to_numpy(dtype=float)


def sampled_at_steps(steps: pd.DataFrame, column: str, at: np.ndarray) -> np.ndarray:
    """A cumulative counter read only now and then (energy: sampled once per ledger flush, ~1 s), at these
    steps: exact where read, linear between the two nearest readings, NaN outside the read range."""
    if column not in steps or steps[column].isna().all():
        return np.full(len(at), np.nan)
    read = steps[["step", column]].dropna()
    x, y = read["step"].to_numpy(dtype=float), read[column].to_numpy(dtype=float)
    inside = (at >= x[0]) & (at <= x[-1])
    return np.where(inside, np.interp(at, x, y), np.nan)


UNVERSIONED = "unversioned"
"""The portfolio label of evaluations that name no portfolio and no version (`portfolio_label`)."""


def portfolio_label(portfolio: str, version: str) -> str:
    """What tells one evaluation portfolio version from another: `<portfolio> <version>`, or `UNVERSIONED`."""
    return f"{portfolio} {version}".strip() or UNVERSIONED


def _portfolios(ev: pd.DataFrame) -> pd.Series:
    """Each evaluation's portfolio label (`portfolio_label`); `UNVERSIONED` for a frame without the columns."""
    if "portfolio" not in ev and "portfolio_version" not in ev:
        return pd.Series(UNVERSIONED, index=ev.index, dtype=object)
    name = ev["portfolio"].fillna("").astype(str) if "portfolio" in ev else pd.Series("", index=ev.index)
    version = ev["portfolio_version"].fillna("").astype(str) if "portfolio_version" in ev else ""
    return pd.Series([portfolio_label(n, v) for n, v in zip(name, version, strict=True)], index=ev.index, dtype=object)


def eval_points(
    evals: pd.DataFrame, steps: pd.DataFrame, task: str, metric: str, *, by_portfolio: bool = False
) -> pd.DataFrame:
    """One task/metric's evaluations in step order, with tokens (from the record, else the step table) and the
    portfolio version each was taken with (`portfolio`, `portfolio_label`). One point per step (the last stored),
    or with `by_portfolio` one per step and portfolio version: a step evaluated with two versions (the step a
    portfolio changed at) keeps both, the version that started earlier first, so that each version's points are
    contiguous (`portfolio_curves`)."""
    ev = evals[(evals["task"] == task) & (evals["metric"] == metric)].copy()
    ev["portfolio"] = _portfolios(ev)
    if by_portfolio:
        started = ev.groupby("portfolio")["step"].transform("min")
        ev = ev.assign(started=started).sort_values(["step", "started"], kind="stable")
        ev = ev.drop_duplicates(["step", "portfolio"], keep="last")
    else:
        ev = ev.sort_values("step").drop_duplicates("step", keep="last")
    tokens = ev["tokens"].to_numpy(dtype=float)
    from_steps = exactly_at_steps(steps, "tokens", ev["step"].to_numpy())
    tokens = np.where(np.isnan(tokens), from_steps, tokens)
    return pd.DataFrame(
        {
            "step": ev["step"].to_numpy(),
            "tokens": tokens,
            "value": ev["value"].to_numpy(dtype=float),
            "higher_is_better": ev["higher_is_better"].to_numpy(dtype=bool),
            "stderr": ev["stderr"].to_numpy(dtype=float) if "stderr" in ev else np.full(len(ev), np.nan),
            "portfolio": ev["portfolio"].to_numpy(dtype=object),
        }
    )


def portfolio_curves(points: pd.DataFrame) -> list[pd.DataFrame]:
    """`eval_points(..., by_portfolio=True)` cut where the portfolio version changes: each piece one curve of one
    version, in step order. Two versions' values are two measurements (another held-out set, another harness): a
    difference across the change is the change of ruler, not learning."""
    if "portfolio" not in points or points.empty:
        return [points]
    label = points["portfolio"].to_numpy(dtype=object)
    cuts = [0, *(i for i in range(1, len(label)) if label[i] != label[i - 1]), len(label)]
    return [points.iloc[a:b].reset_index(drop=True) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def train_loss_points(steps: pd.DataFrame, n: int = _TRAIN_POINTS) -> pd.DataFrame:
    """`n + 1` points of the training loss curve in `eval_points`' shape, each the mean loss over the logged
    steps since the point before (a single step's loss is one batch's: too noisy to difference)."""
    logged = steps[["step", "loss"] + (["tokens"] if "tokens" in steps else [])].dropna(subset=["loss"])
    logged = logged[np.isfinite(logged["loss"].to_numpy(dtype=float))]
    if len(logged) < 2:
        return pd.DataFrame({"step": [], "tokens": [], "value": [], "higher_is_better": []})
    edges = np.unique(np.linspace(0, len(logged), min(n, len(logged) - 1) + 2).astype(int))
    rows = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        part = logged.iloc[a:b]
        last = part.iloc[-1]
        rows.append(
            (
                int(last["step"]),
                float(last["tokens"]) if "tokens" in part else np.nan,
                float(part["loss"].mean()),
                False,
            )
        )
    return pd.DataFrame(rows, columns=["step", "tokens", "value", "higher_is_better"])


def cost_from_price(wall_s: np.ndarray, devices: int, price_per_device_hour: float) -> np.ndarray:
    """Dollars spent by `wall_s` seconds on `devices` devices at the manifest's price per device-hour."""
    return np.asarray(wall_s, dtype=float) / 3600.0 * devices * price_per_device_hour


def to_per_byte(
    evals: pd.DataFrame, steps: pd.DataFrame, bytes_per_token: float | None, run: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Express losses in bits per byte and token counts in bytes, so runs with different tokenizers compare.

    loss (nats/token) / ln 2 / bytes-per-token = bits per byte; tokens x bytes-per-token = bytes.
    """
    if not bytes_per_token:
        raise InputError(f"run {run!r}: bits per byte need data.tokenizer.bytes_per_token in the run's manifest")
    converted = evals.loc[evals["metric"] == LOSS_METRIC, "task"].unique()
    # A recorded bpb of a task whose loss is converted would be a second, possibly different, figure.
    evals = evals[~((evals["metric"] == "bpb") & evals["task"].isin(converted))].copy()
    is_loss = evals["metric"] == LOSS_METRIC
    evals.loc[is_loss, "value"] = evals.loc[is_loss, "value"] / math.log(2) / bytes_per_token
    evals.loc[is_loss, "metric"] = "bpb"
    evals["tokens"] = evals["tokens"] * bytes_per_token
    steps = steps.copy()
    steps["tokens"] = steps["tokens"] * bytes_per_token
    return evals, steps
