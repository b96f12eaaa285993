"""A campaign's probe runs and each probe's scores, read from the ledger: what `analysis.campaign` ranks and
`analysis.attribution` attributes (the scores are described in `analysis.campaign`'s docstring)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from yieldgate.analysis.fit import BILLION
from yieldgate.ledger import Ledger

__all__ = ["probe_runs", "probe_scores", "scoring_steps"]

BPB = "bpb"
YIELD = "yield_per_btok"
STABLE_YIELD = "stable_yield_per_btok"
COOLDOWN_GAIN = "cooldown_gain"
HIGHER_IS_BETTER = (YIELD, STABLE_YIELD, COOLDOWN_GAIN)


def probe_runs(ledger: Ledger, campaign: str, *, ablations: bool = False) -> pd.DataFrame:
    """The campaign's probe runs: run, status, recipe, seed, tokens, model, error. Its leave-one-out probes
    (`probe.campaign.ablation`) are an attribution experiment, not recipes to rank: left out unless `ablations`,
    which adds the column `left_out` (the source a leave-one-out probe leaves out, None for the others)."""
    rows = []
    for name, status, meta in ledger.run_metas().itertuples(index=False):
        probe = meta.get("probe")
        if isinstance(probe, dict) and probe.get("campaign") == campaign and (ablations or not probe.get("ablation")):
            rows.append(
                {
                    "run": name,
                    "status": status,
                    "recipe": probe["recipe"],
                    "seed": probe["seed"],
                    "tokens": probe["tokens"],
                    "model": "{layers}x{width}".format(**probe["model"]),
                    "error": meta.get("error"),
                    **({"left_out": (probe.get("ablation") or {}).get("left_out")} if ablations else {}),
                }
            )
    columns = ["run", "status", "recipe", "seed", "tokens", "model", "error"]
    return pd.DataFrame(rows, columns=[*columns, "left_out"] if ablations else columns)


def _at(curve: pd.DataFrame, tokens: float) -> float:
    return float(np.interp(tokens, curve["tokens"], curve["value"]))


WINDOW_SLACK = 0.025
"""An evaluation stands for a share s of the budget when it lies within this share of the budget of s x budget."""


def scoring_steps(
    evals: pd.DataFrame, *, last_evals: int = 1, window: list[float] | None = None, budget: float | None = None
) -> list[int]:
    """The evaluation steps a probe's score averages: its last `last_evals`, or with a `window` (shares of the
    `budget`, or of the tokens it trained where a whole last step took it past the budget), for each share the
    evaluation nearest it, taken when within `WINDOW_SLACK` of the budget (none there: that share is missing; none
    at all: no score)."""
    steps = sorted(evals["step"].unique())
    if not window:
        return [int(x) for x in steps[-last_evals:]]
    if budget is None:
        raise ValueError("a score window needs the probe's budget")
    at = evals.groupby("step")["tokens"].max()
    length = max(float(budget), float(at.max()) if len(at) else 0.0)
    picked = set()
    for share in window:
        gap = (at - share * length).abs()
        if len(gap) and gap.min() <= WINDOW_SLACK * length:
            picked.add(int(gap.idxmin()))
    return sorted(picked)


def probe_scores(
    evals: pd.DataFrame,
    eval_sources: list[str] | None = None,
    steps: pd.DataFrame | None = None,
    *,
    last_evals: int = 1,
    window: list[float] | None = None,
    budget: float | None = None,
) -> dict[str, float]:
    """One probe's scores from its evaluations and (for the stable/cooldown split) its step records' `tokens` and
    `lr` (see the module docstring); NaN where a score is missing. `bpb`, and each evaluation key `<task>/<metric>`,
    is the mean over the scoring evaluations (`scoring_steps`: the last `last_evals`, fewer when the probe has fewer,
    or those of the score `window` of its `budget`)."""
    keys = [f"val/{s}/bpb" for s in eval_sources] if eval_sources else ["val/bpb"]
    at: list[float] = []
    by_key: dict[str, list[float]] = {}
    for step in scoring_steps(evals, last_evals=last_evals, window=window, budget=budget):
        here = evals[evals["step"] == step]
        value = {f"{t}/{m}": float(v) for t, m, v in zip(here["task"], here["metric"], here["value"], strict=True)}
        at.append(float(np.mean([value.get(k, math.nan) for k in keys])))
        for key, v in value.items():
            by_key.setdefault(key, []).append(v)
    out = {BPB: float(np.mean(at)) if at else math.nan}
    out.update({k: float(np.mean(v)) for k, v in by_key.items() if not k.startswith("val/loss")})
    loss = evals[(evals["task"] == "val") & (evals["metric"] == "loss")].sort_values("tokens")
    out["val/loss"] = float(loss["value"].iloc[-1]) if len(loss) else math.nan
    out[YIELD] = math.nan
    if len(loss) >= 2 and loss["tokens"].iloc[-1] > 0:
        end = float(loss["tokens"].iloc[-1])
        out[YIELD] = (_at(loss, end / 2) - _at(loss, end)) / (end / 2) * BILLION
        decay = _decay_tokens(steps)
        if decay is not None and 0 < decay < end:
            out[STABLE_YIELD] = (_at(loss, decay / 2) - _at(loss, decay)) / (decay / 2) * BILLION
            out[COOLDOWN_GAIN] = _at(loss, decay) - _at(loss, end)
    return out


def _decay_tokens(steps: pd.DataFrame | None) -> float | None:
    """Tokens at the first step after the LR's peak where it falls below 90% of it (None: no decay, or no LR)."""
    if steps is None or not {"lr", "tokens"} <= set(steps) or steps["lr"].isna().all():
        return None
    lr = steps.dropna(subset=["lr", "tokens"]).sort_values("step")
    if lr.empty:
        return None
    values = lr["lr"].to_numpy(dtype=float)
    peak_at = int(values.argmax())
    below = np.flatnonzero(values[peak_at:] < 0.9 * values[peak_at])
    return float(lr["tokens"].iloc[peak_at + below[0]]) if len(below) else None
