"""A campaign of imported results (`ingest.results`): for every smaller scale, how often it decides recipe pairs
as the largest scale does, and whether a law fitted across sizes decides them better.

- **Points**: each run's evaluations (run meta `results`: recipe, seed, params, and its run label where the table
  names runs of one size and seed by length: `run` or `tokens_multiplier`), one row per (recipe, seed, params, run,
  tokens, metric): value and reported standard error.
- **Scales**: a (params N, tokens D, run label) at which recipes were measured; a recipe's score there is its mean
  over seeds. A 5x longer run's point at D is another scale than the shorter run's final point at D (its learning
  rate is elsewhere in its schedule). The **largest** is the scale of most compute (6·N·D; the larger N on a tie).
- **Decision accuracy** of a smaller scale (`ranking.decision_accuracy`): the share of the recipe pairs both scales
  measured that it orders as the largest does, over all pairs (with its standard error over pairs) and over the
  pairs the largest separates beyond its noise. A smaller scale that shares fewer than two recipes with the largest
  (published small runs often use other mixtures than the large ones) is compared with the scale of most compute
  above it that shares two or more, and says which (`against`).
- **Deciding only beyond noise**: a pair is decided when its difference of means exceeds one noise unit of such a
  difference (`ranking.beyond_noise`), the noise of one run being, in this order: the seeds' spread where every
  recipe has two or more (`seeds`; a recipe's own with `ranking.OWN_NOISE_SEEDS` or more, else pooled), the spread
  of the recipes that were replicated, pooled, where only some were (`replicates`), the reported standard errors
  where every point has one (`stderr`), the noise supplied for the metric at import (`given`: a standard error of
  one run, for a single-seed published table). With none there is no noise: nothing is decided. Reported, as for a
  probe campaign: accuracy over all pairs, accuracy over the decided pairs, and coverage (the share decided).
- **Compute share**: 6·N·D of a recipe's runs at the smaller scale (its seeds) over one run at the reference scale.
- **Extrapolation** (`extrapolation`): each recipe's power law across the smaller sizes (at each size's final point,
  of the run label every size has) predicts its value at the largest size, and its order is set beside plain
  ranking at the largest smaller size, pair by pair. A law is fitted only through three or more sizes (`MIN_LAW_SIZES`:
  through two it passes through both, noise and all), or
  with an exponent declared at import; the one that orders more pairs right is the `default`, and says so.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.ranking import OWN_NOISE_SEEDS, beyond_noise, decision_accuracy, pooled_seed_std
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger

__all__ = [
    "POINT_COLUMNS",
    "result_points",
    "scale_decisions",
    "extrapolation",
    "summarise_results",
    "is_results",
    "mixtures_of",
    "mixture_regressions",
]

POINT_COLUMNS = ["run", "recipe", "seed", "params", "length", "tokens", "metric", "value", "stderr"]
KIND = "results"
TOP = 10
MIN_LAW_SIZES = 3
"""Sizes below the target a law across sizes is fitted through (unless its exponent is declared)."""


def is_results(record: dict[str, Any]) -> bool:
    """Whether a campaign record (`Ledger.campaign`) is an imported results campaign."""
    return (record.get("spec") or {}).get("kind") == KIND


def result_points(ledger: Ledger, campaign: str) -> pd.DataFrame:
    """The campaign's measured points (`POINT_COLUMNS`), metric as `<task>/<metric>` (a bare metric for task
    `results`)."""
    rows: list[tuple[Any, ...]] = []
    for name, _, meta in ledger.run_metas().itertuples(index=False):
        info = meta.get(KIND)
        if not (isinstance(info, dict) and info.get("campaign") == campaign):
            continue
        head = (name, info["recipe"], int(info["seed"]), int(info["params"]), str(info.get("run") or ""))
        evals = ledger.evals(name)
        for task, metric, tokens, value, stderr in zip(*(evals[c].tolist() for c in _EVAL), strict=True):
            key = metric if task == KIND else f"{task}/{metric}"
            rows.append((*head, float(tokens), key, float(value), float(stderr)))
    if not rows:
        raise InputError(
            f"campaign {campaign!r} has no imported runs in {ledger.location}; run `yieldgate import results`"
        )
    return pd.DataFrame(rows, columns=POINT_COLUMNS)


_EVAL = ("task", "metric", "tokens", "value", "stderr")


def _noise(points: pd.DataFrame, given: float | None) -> tuple[dict[str, float] | None, str | None]:
    """Recipe -> the standard deviation of one run's value, and what it was read from (module docstring); (None,
    None) when there is no noise to measure."""
    runs = {str(r): g["value"].tolist() for r, g in points.groupby("recipe")}
    replicated = {r: v for r, v in runs.items() if len(v) >= 2}
    if replicated:
        pooled = pooled_seed_std(replicated)
        own = {r: float(np.std(v, ddof=1)) for r, v in replicated.items() if len(v) >= OWN_NOISE_SEEDS}
        kind = "seeds" if len(replicated) == len(runs) else "replicates"
        return {r: own.get(r, pooled) for r in runs}, kind
    if not points["stderr"].isna().any():  # one run a recipe here: its reported standard error is its noise
        se = points.groupby("recipe")["stderr"].first()
        return {str(r): float(v) for r, v in se.items()}, "stderr"
    if given is not None:
        return dict.fromkeys(runs, float(given)), "given"
    return None, None


def _decided(points: pd.DataFrame, given: float | None = None) -> tuple[set[frozenset[str]] | None, str | None]:
    """The recipe pairs separated beyond one noise unit at one scale, and by what noise (`_noise`); (None, None)
    when there is no noise to measure."""
    noise, kind = _noise(points, given)
    if noise is None:
        return None, None
    grouped = points.groupby("recipe")["value"]
    means = {str(r): float(v) for r, v in grouped.mean().items()}
    counts = {str(r): int(v) for r, v in grouped.count().items()}
    return beyond_noise(means, counts, noise), kind


Scale = tuple[int, int, str]
"""(params N, tokens D, run label)."""


def _scales(points: pd.DataFrame) -> list[Scale]:
    """The (params, tokens, run label) of the metric's points, most compute last (the larger N on a tie)."""
    found = {
        (int(n), int(d), str(r)) for n, d, r in zip(points["params"], points["tokens"], points["length"], strict=True)
    }
    return sorted(found, key=lambda s: (s[0] * s[1], s[0], s[2]))


def _at(points: pd.DataFrame, scale: Scale) -> pd.DataFrame:
    return points[(points["params"] == scale[0]) & (points["tokens"] == scale[1]) & (points["length"] == scale[2])]


def _compare(here: pd.DataFrame, ref: pd.DataFrame, given: float | None) -> dict[str, Any]:
    """`decision_accuracy`'s entry for `here` against `ref` (the pairs of recipes both measured)."""
    firm, _ = _decided(ref, given)
    decided, noise = _decided(here, given)
    means = {0: here.groupby("recipe")["value"].mean().to_dict(), 1: ref.groupby("recipe")["value"].mean().to_dict()}
    entry = decision_accuracy(means, firm or set(), resolved=None if decided is None else {0: decided})["0"]
    entry.pop("budget", None)
    entry.pop("share_of_largest", None)
    entry["noise"] = noise
    if firm is None:
        entry["resolved_pairs"], entry["accuracy_resolved"] = None, None
    return entry


def scale_decisions(points: pd.DataFrame, noise: float | None = None) -> dict[str, Any]:
    """One metric's points (`result_points` of one metric): the largest scale, and each smaller scale's decision
    accuracy, coverage and compute share against it (see the module docstring); `noise`: the standard error of one
    run supplied for the metric."""
    scales = _scales(points)
    largest = scales[-1]
    entries = []
    for k, scale in enumerate(scales[:-1]):
        here = _at(points, scale)
        recipes = set(here["recipe"])
        above = [s for s in scales[k + 1 :] if len(recipes & set(_at(points, s)["recipe"])) >= 2]
        seeds = int(here.groupby("recipe")["seed"].nunique().max())
        entry: dict[str, Any] = {"params": scale[0], "tokens": scale[1], "run": scale[2] or None, "seeds": seeds}
        if not above:
            entries.append(
                {
                    **entry,
                    "against": None,
                    "pairs": 0,
                    "accuracy": None,
                    "reason": "no larger scale measured two or more of its recipes",
                }
            )
            continue
        ref = largest if above[-1] == largest else above[-1]
        entry["against"] = {"params": ref[0], "tokens": ref[1], "run": ref[2] or None, "largest": ref == largest}
        entry["compute_share"] = seeds * scale[0] * scale[1] / (ref[0] * ref[1])
        entry.update(_compare(here, _at(points, ref), noise))
        entries.append(entry)
    top = _at(points, largest)
    return {
        "largest": {
            "params": largest[0],
            "tokens": largest[1],
            "run": largest[2] or None,
            "recipes": int(top["recipe"].nunique()),
        },
        "scales": entries,
    }


def _law(params: np.ndarray, values: np.ndarray, target: float, exponent: float | None = None) -> float:
    """A power law's value at `target` N (log value linear in log N; with a declared `exponent`, only its constant
    fitted); linear in log N when a value is <= 0."""
    x = np.log(params)
    if exponent is not None:
        return float(np.exp(np.mean(np.log(values) - exponent * x) + exponent * math.log(target)))
    if (values > 0).all():
        slope, icpt = np.polyfit(x, np.log(values), 1)
        return float(np.exp(icpt + slope * math.log(target)))
    slope, icpt = np.polyfit(x, values, 1)
    return float(icpt + slope * math.log(target))


def _common_length(points: pd.DataFrame) -> str | None:
    """The run label every model size has (the unlabelled runs first, then by name); None when there is none."""
    labels = [set(g["length"]) for _, g in points.groupby("params")]
    common = set.intersection(*labels) if labels else set()
    return min(common, key=lambda r: (r != "", r)) if common else None


def extrapolation(points: pd.DataFrame, higher_is_better: bool, exponent: float | None = None) -> dict[str, Any]:
    """Where a law across sizes can be fitted (`MIN_LAW_SIZES` sizes below the largest, or two sizes and a declared
    `exponent`): each recipe's law over the smaller sizes predicts its value at the largest (at each size's final
    point of the run label every size has), and its order and plain ranking at the largest smaller size are scored
    pair by pair against the largest size's; the better is the `default` (plain ranking on a tie: it costs less).
    Otherwise why not, plain ranking the default."""
    sizes = sorted(int(n) for n in points["params"].unique())
    need = 1 if exponent is not None else MIN_LAW_SIZES
    if len(sizes) - 1 < need:
        how = f"with exponent {exponent:g}, one" if exponent is not None else f"{MIN_LAW_SIZES} or more"
        return {
            "available": False,
            "reason": f"{len(sizes)} model size(s); a law across sizes needs {how} below the largest "
            "(or a declared exponent)",
            "default": "plain",
        }
    length = _common_length(points)
    if length is None:
        return {"available": False, "reason": "no run length is measured at every model size", "default": "plain"}
    mine = points[points["length"] == length]
    final = mine[mine["tokens"] == mine.groupby("params")["tokens"].transform("max")]
    table = final.groupby(["recipe", "params"])["value"].mean().unstack("params").dropna()
    if len(table) < 2:
        return {
            "available": False,
            "reason": "fewer than two recipes are measured at every model size",
            "default": "plain",
        }
    if exponent is not None and not (table.to_numpy() > 0).all():
        return {"available": False, "reason": "a declared exponent needs values > 0", "default": "plain"}
    small, target = sizes[:-1], sizes[-1]
    tokens = final.groupby("params")["tokens"].max()
    truth = table[target]
    law = pd.Series(
        {r: _law(np.array(small, float), table.loc[r, small].to_numpy(float), target, exponent) for r in table.index}
    )
    plain = table[small[-1]]
    law_right = plain_right = law_only = plain_only = 0
    pairs = list(itertools.combinations(table.index, 2))
    for a, b in pairs:
        t = np.sign(truth[a] - truth[b])
        x, y = np.sign(law[a] - law[b]) == t, np.sign(plain[a] - plain[b]) == t
        law_right += int(x)
        plain_right += int(y)
        law_only += int(x and not y)
        plain_only += int(y and not x)
    best = (max if higher_is_better else min)(law.index, key=lambda r: law[r])
    return {
        "available": True,
        "sizes": sizes,
        "run": length or None,
        "exponent": exponent,
        "recipes": len(table),
        "pairs": len(pairs),
        "law_accuracy": law_right / len(pairs),
        "plain_accuracy": plain_right / len(pairs),
        "law_only": law_only,
        "plain_only": plain_only,
        "beats": law_right > plain_right,
        "default": "law" if law_right > plain_right else "plain",
        "law_compute_share": sum(n * tokens[n] for n in small) / (target * tokens[target]),
        "plain_compute_share": small[-1] * tokens[small[-1]] / (target * tokens[target]),
        "law_best": str(best),
    }


def _ranking(points: pd.DataFrame, scale: Scale, higher_is_better: bool) -> list[dict[str, Any]]:
    here = _at(points, scale).groupby("recipe")["value"].agg(["mean", "count"])
    here = here.sort_values("mean", ascending=not higher_is_better).head(TOP)
    return [{"recipe": str(r), "mean": float(m), "seeds": int(c)} for r, (m, c) in here.iterrows()]


def summarise_results(ledger: Ledger, campaign: str, *, level: float | None = None) -> dict[str, Any]:
    """The stored summary of a results campaign: per metric, its direction, the largest scale's best recipes,
    each smaller scale's decisions (`scale_decisions`) and the extrapolation across sizes (`extrapolation`)."""
    spec = ledger.campaign(campaign)["spec"]
    points = result_points(ledger, campaign)
    metrics: dict[str, Any] = {}
    for metric, higher in sorted(spec["metrics"].items()):
        mine = points[points["metric"] == metric]
        if mine.empty:
            continue
        noise = (spec.get("noise") or {}).get(metric)
        decisions = scale_decisions(mine, noise)
        big = decisions["largest"]
        metrics[metric] = {
            "higher_is_better": bool(higher),
            "noise_given": noise,
            **decisions,
            "ranking": _ranking(mine, (big["params"], big["tokens"], big["run"] or ""), higher),
            "extrapolation": extrapolation(mine, higher, (spec.get("exponents") or {}).get(metric)),
        }
    return {
        "campaign": campaign,
        "kind": KIND,
        "level": float(level if level is not None else spec.get("level", 0.9)),
        "runs": int(points["run"].nunique()),
        "recipes": int(points["recipe"].nunique()),
        "metrics": metrics,
        "notes": [],
    }


def mixtures_of(spec: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Recipe -> source -> weight, from a results campaign's spec."""
    return {r: {s["name"]: float(s["weight"]) for s in v["sources"]} for r, v in spec.get("recipes", {}).items()}


def mixture_regressions(ledger: Ledger, campaign: str, *, level: float | None = None) -> dict[str, Any]:
    """Per metric, the mixture regression of a results campaign (`mixture.mixture_report`): scored where larger
    sizes measured other mixtures, and the proposed mixture."""
    from yieldgate.analysis.mixture import mixture_report

    record = ledger.campaign(campaign)
    if not is_results(record):
        raise InputError(
            f"campaign {campaign!r} is a probe campaign; a mixture regression reads an imported results campaign "
            "(`yieldgate import results`, its table with w:<source> weight columns)"
        )
    spec = record["spec"]
    level = float(level if level is not None else spec.get("level", 0.9))
    points, mixtures = result_points(ledger, campaign), mixtures_of(spec)
    return {
        "campaign": campaign,
        "level": level,
        "metrics": {
            metric: mixture_report(
                points[points["metric"] == metric], mixtures, higher_is_better=bool(higher), level=level
            )
            for metric, higher in sorted(spec["metrics"].items())
        },
    }
