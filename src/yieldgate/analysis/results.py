"""A campaign of imported results (`ingest.results`): for every smaller scale, how often it decides recipe pairs
as the largest scale does, and whether a law fitted across sizes decides them better.

- **Points**: each run's evaluations (run meta `results`: recipe, seed, params), one row per (recipe, seed, params,
  tokens, metric): value and reported standard error.
- **Scales**: a (params N, tokens D) at which recipes were measured; a recipe's score there is its mean over seeds.
  The **largest** is the scale of most compute (6·N·D; the larger N on a tie).
- **Decision accuracy** of a smaller scale (`ranking.decision_accuracy`): the share of the recipe pairs both scales
  measured that it orders as the largest does, over all pairs and over the pairs the largest separates beyond its
  noise. A smaller scale that shares fewer than two recipes with the largest (published small runs often use other
  mixtures than the large ones) is compared with the scale of most compute above it that shares two or more, and
  says which (`against`).
- **Abstaining within noise**: a pair is decided when its difference of means exceeds one noise unit: with two or
  more seeds per recipe the seeds' pooled spread (`ranking.beyond_seed_noise`), else with reported standard errors
  sqrt(se_a² + se_b²) (each recipe's standard error of its mean over seeds); with neither there is no abstention.
  Reported: the pairs decided, the share abstained on and the accuracy on the decided pairs.
- **Compute share**: 6·N·D of a recipe's runs at the smaller scale (its seeds) over one run at the reference scale.
- **Extrapolation** (three or more model sizes): each recipe's law across the smaller sizes (at each size's largest
  tokens: log value linear in log N, a power law; value linear in log N where a value is not positive) predicts
  its value at the largest size; the law's order is set beside plain ranking at the largest smaller size, pair by
  pair, on the recipes measured at every size (`extrapolation`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.ranking import beyond_seed_noise, decision_accuracy
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

POINT_COLUMNS = ["run", "recipe", "seed", "params", "tokens", "metric", "value", "stderr"]
KIND = "results"
TOP = 10


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
        head = (name, info["recipe"], int(info["seed"]), int(info["params"]))
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


def _by_recipe(points: pd.DataFrame) -> dict[str, dict[int, float]]:
    return {str(r): dict(zip(g["seed"], g["value"], strict=True)) for r, g in points.groupby("recipe")}


def _decided(points: pd.DataFrame) -> tuple[set[frozenset[str]] | None, str | None]:
    """The recipe pairs separated beyond one noise unit at one scale, and by what noise (`seeds`, `stderr`); (None,
    None) when there is no noise to measure."""
    by = _by_recipe(points)
    pairs = beyond_seed_noise(by)
    if pairs is not None:
        return pairs, "seeds"
    if points["stderr"].isna().any():
        return None, None
    grouped = points.groupby("recipe")
    mean = grouped["value"].mean()
    se = grouped["stderr"].apply(lambda s: math.sqrt(float(np.sum(np.square(s)))) / len(s))
    out = set()
    for a, b in itertools.combinations(sorted(mean.index), 2):
        if abs(mean[a] - mean[b]) > math.hypot(se[a], se[b]):
            out.add(frozenset((str(a), str(b))))
    return out, "stderr"


def _scales(points: pd.DataFrame) -> list[tuple[int, int]]:
    """The (params, tokens) of the metric's points, most compute last (the larger N on a tie)."""
    pairs = {(int(n), int(d)) for n, d in zip(points["params"], points["tokens"], strict=True)}
    return sorted(pairs, key=lambda s: (s[0] * s[1], s[0]))


def _at(points: pd.DataFrame, scale: tuple[int, int]) -> pd.DataFrame:
    return points[(points["params"] == scale[0]) & (points["tokens"] == scale[1])]


def _compare(here: pd.DataFrame, ref: pd.DataFrame) -> dict[str, Any]:
    """`decision_accuracy`'s entry for `here` against `ref` (the pairs of recipes both measured)."""
    firm, _ = _decided(ref)
    decided, noise = _decided(here)
    means = {0: here.groupby("recipe")["value"].mean().to_dict(), 1: ref.groupby("recipe")["value"].mean().to_dict()}
    entry = decision_accuracy(means, firm or set(), resolved=None if decided is None else {0: decided})["0"]
    entry.pop("budget", None)
    entry.pop("share_of_largest", None)
    entry["noise"] = noise
    if firm is None:
        entry["resolved_pairs"], entry["accuracy_resolved"] = None, None
    return entry


def scale_decisions(points: pd.DataFrame) -> dict[str, Any]:
    """One metric's points (`result_points` of one metric): the largest scale, and each smaller scale's decision
    accuracy, abstention and compute share against it (see the module docstring)."""
    scales = _scales(points)
    largest = scales[-1]
    entries = []
    for k, scale in enumerate(scales[:-1]):
        here = _at(points, scale)
        recipes = set(here["recipe"])
        above = [s for s in scales[k + 1 :] if len(recipes & set(_at(points, s)["recipe"])) >= 2]
        seeds = int(here.groupby("recipe")["seed"].nunique().max())
        entry: dict[str, Any] = {"params": scale[0], "tokens": scale[1], "seeds": seeds}
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
        entry["against"] = {"params": ref[0], "tokens": ref[1], "largest": ref == largest}
        entry["compute_share"] = seeds * scale[0] * scale[1] / (ref[0] * ref[1])
        entry.update(_compare(here, _at(points, ref)))
        entries.append(entry)
    top = _at(points, largest)
    return {
        "largest": {"params": largest[0], "tokens": largest[1], "recipes": int(top["recipe"].nunique())},
        "scales": entries,
    }


def _law(params: np.ndarray, values: np.ndarray, target: float) -> float:
    """A power law's value at `target` N (log value linear in log N); linear in log N when a value is <= 0."""
    x = np.log(params)
    if (values > 0).all():
        slope, icpt = np.polyfit(x, np.log(values), 1)
        return float(np.exp(icpt + slope * math.log(target)))
    slope, icpt = np.polyfit(x, values, 1)
    return float(icpt + slope * math.log(target))


def extrapolation(points: pd.DataFrame, higher_is_better: bool) -> dict[str, Any]:
    """Where three or more model sizes exist: each recipe's law over the smaller sizes predicts its value at the
    largest size (at that size's largest tokens); its order and plain ranking at the largest smaller size are
    scored pair by pair against the largest size's (see the module docstring)."""
    sizes = sorted(int(n) for n in points["params"].unique())
    if len(sizes) < 3:
        return {"available": False, "reason": f"{len(sizes)} model size(s); a law across sizes needs 3 or more"}
    final = points[points["tokens"] == points.groupby("params")["tokens"].transform("max")]
    table = final.groupby(["recipe", "params"])["value"].mean().unstack("params")
    table = table.dropna()
    if len(table) < 2:
        return {"available": False, "reason": "fewer than two recipes are measured at every model size"}
    small, target = sizes[:-1], sizes[-1]
    tokens = final.groupby("params")["tokens"].max()
    truth = table[target]
    law = pd.Series({r: _law(np.array(small, float), table.loc[r, small].to_numpy(float), target) for r in table.index})
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
        "recipes": len(table),
        "pairs": len(pairs),
        "law_accuracy": law_right / len(pairs),
        "plain_accuracy": plain_right / len(pairs),
        "law_only": law_only,
        "plain_only": plain_only,
        "beats": law_right > plain_right,
        "law_compute_share": sum(n * tokens[n] for n in small) / (target * tokens[target]),
        "plain_compute_share": small[-1] * tokens[small[-1]] / (target * tokens[target]),
        "law_best": str(best),
    }


def _ranking(points: pd.DataFrame, scale: tuple[int, int], higher_is_better: bool) -> list[dict[str, Any]]:
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
        decisions = scale_decisions(mine)
        largest = (decisions["largest"]["params"], decisions["largest"]["tokens"])
        metrics[metric] = {
            "higher_is_better": bool(higher),
            **decisions,
            "ranking": _ranking(mine, largest, higher),
            "extrapolation": extrapolation(mine, higher),
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
