"""Which data is paying (issue #31 item 9): each source's marginal effect on the followed metric and on each
capability, and a recipe x capability table that shows a mixture improving one capability while displacing another.

- **Columns**: the followed metric, `bpb` (the campaign's score: the mean of `val/<source>/bpb` over its eval
  sources, `campaign.probe_scores`), and each **capability**: `val/<source>/bpb` of each eval source (each source a
  probe is evaluated on when the campaign names none), each the mean over the campaign's last `last_evals`
  evaluations. Lower is better.
- **The base** is the recipe the leave-one-out probes ablate, read from their run meta (`probe.ablation.base`): the
  one asked for, else the first in the campaign's order that has such probes, else the campaign's first recipe. Of
  its leave-one-out probes, those of one way of leaving a source out are read: the rest renormalised in proportion
  (the default, where there are any), or each source's weight moved to one baseline source (`ablation.by`).
- **Where**: at the budget of those leave-one-out probes (`probe.campaign.ablation`: the campaign's smallest, on its
  first model size), or at its largest budget when it has none; on one model size (the leave-one-out probes', else
  the smallest). Other bases' leave-one-out probes are left out of the table.
- **The table**: a row per recipe, the **base** first. The base's
  cells are its mean over seeds with a Student t interval (`stats.mean_interval`); every other cell is the recipe
  minus the base, paired by seed (`stats.difference`, paired), its t-interval at the campaign's level held
  family-wise over the row's columns (Bonferroni: one row's cells are read together). A cell is **better** or
  **worse** when that interval excludes 0 (lower or higher bits per byte than the base); a row **displaces** when it
  is better on one capability and worse on another, and those cells are marked.
- **A source's marginal effect** (leave-one-out): the base minus `<base>-minus-<source>` (what adding the source to
  the rest changes), the same paired interval, family-wise over the columns: negative bits per byte is a source
  that **helps**, positive one that **hurts**, an interval holding 0 **within noise**. Beside it, the weights the
  two recipes trained on (each run's manifest, normalised to sum to 1), before and after: leaving a source out
  renormalises the rest, so every other source's share grows (a source of 30% left out takes another of 30% to
  43%), and the contrast holds that growth too; moved to a baseline source (`<base>-minus-<source>+<by>`), only the
  baseline's share changes.
- **The mixture regression's effect** (`mixture.fit_mixture`, issue #34), where the budget holds enough mixtures:
  recipes that differ from the base only in their sources' weights (filters, dedup, tokenizer, curriculum and each
  source's other settings equal), one point per probe, at least `FOLDS` x 2 probes and more distinct mixtures than
  sources. Per source and column: the fit's prediction at the base mixture minus at the leave-one-out mixture the
  probes trained on (the ablation's contrast, read off the fit), with a percentile interval over `BOOTS` refits on
  probes resampled with
  replacement, and the fit's derivative at the base mixture w along adding that source s (its weight up, the
  others' scaled down in proportion: d/de f((1 - e)·w + e·1_s) at e = 0; for a linear fit, the leave-one-out
  contrast is w_s / (1 - w_s) times it).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.analysis.mixture import FOLDS, fit_mixture, refit_mixture
from yieldgate.analysis.probe_scores import BPB, probe_runs, probe_scores
from yieldgate.analysis.results import is_results
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger

__all__ = [
    "BOOTS",
    "Values",
    "attribution",
    "capability_table",
    "cell_verdict",
    "mixture_effects",
    "source_effects",
]

BOOTS = 200
"""Bootstrap refits of the mixture regression behind each of its effects' intervals."""

Values = dict[str, dict[str, dict[int, float]]]
"""recipe -> column -> seed -> value."""


def cell_verdict(diff: stats.Interval | None, *, lower_is_better: bool = True) -> str | None:
    """`better` or `worse` than the base when the interval of (recipe - base) excludes 0, else `within noise`;
    None without an interval."""
    if diff is None:
        return None
    if not diff.excludes(0.0):
        return "within noise"
    return "better" if (diff.estimate < 0) == lower_is_better else "worse"


def _paired(a: dict[int, float] | None, b: dict[int, float] | None, level: float, family: int) -> stats.Interval | None:
    """mean(b) - mean(a), paired by seed (None where a side is missing or fewer than two seeds are shared)."""
    if not a or not b:
        return None
    return stats.difference(a, b, level, paired=True, family=family)


def capability_table(
    values: Values, base: str, columns: list[str], *, level: float, lower_is_better: bool = True
) -> list[dict[str, Any]]:
    """One row per recipe, the base first (see the module docstring): its cells by column and whether it displaces
    (better on one capability, worse on another; `columns[0]` is the followed metric, the rest capabilities)."""
    family = len(columns)
    rows = []
    for recipe in [base, *sorted(r for r in values if r != base)]:
        cells: dict[str, dict[str, Any]] = {}
        for column in columns:
            seeds = values[recipe].get(column)
            if not seeds:
                continue
            mean = stats.mean_interval(list(seeds.values()), level)
            cell: dict[str, Any] = {
                "mean": float(np.mean(list(seeds.values()))),
                "interval": None if mean is None else [mean.low, mean.high],
                "seeds": len(seeds),
            }
            if recipe != base:
                diff = _paired(values[base].get(column), seeds, level, family)
                cell.update(
                    diff=None if diff is None else diff.estimate,
                    diff_interval=None if diff is None else [diff.low, diff.high],
                    verdict=cell_verdict(diff, lower_is_better=lower_is_better),
                )
            cells[column] = cell
        verdicts = {c: cells[c].get("verdict") for c in columns[1:] if c in cells}
        displaces = "better" in verdicts.values() and "worse" in verdicts.values()
        for column, verdict in verdicts.items():
            cells[column]["mark"] = verdict if displaces and verdict in ("better", "worse") else None
        rows.append({"recipe": recipe, "base": recipe == base, "cells": cells, "displaces": displaces})
    return rows


def source_effects(
    values: Values,
    base: str,
    ablations: dict[str, str],
    columns: list[str],
    *,
    level: float,
    lower_is_better: bool = True,
) -> dict[str, dict[str, Any]]:
    """Source -> its leave-one-out recipe and, per column, the base minus that recipe with its paired interval and
    `helps`, `hurts` or `within noise` (see the module docstring). `ablations`: source -> leave-one-out recipe."""
    out: dict[str, dict[str, Any]] = {}
    for source, recipe in ablations.items():
        effects: dict[str, Any] = {}
        for column in columns:
            iv = _paired(values.get(recipe, {}).get(column), values[base].get(column), level, len(columns))
            if iv is None:
                effects[column] = None
                continue
            helps = (iv.estimate < 0) == lower_is_better
            effects[column] = {
                **iv.to_dict(),
                "verdict": ("helps" if helps else "hurts") if iv.excludes(0.0) else "within noise",
            }
        out[source] = {"recipe": recipe, "effects": effects}
    return out


def _without(w: np.ndarray, i: int) -> np.ndarray:
    out = w.copy()
    out[i] = 0.0
    return out / out.sum()


def mixture_effects(
    sources: list[str],
    weights: np.ndarray,
    ys: dict[str, np.ndarray],
    base: np.ndarray,
    *,
    level: float,
    boots: int = BOOTS,
    ablated: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The mixture regression's per-source effect at the `base` mixture, per column (see the module docstring):
    `weights` is probes x sources (each row summing to 1), `ys` column -> the probes' values, `ablated` source -> the
    mixture its leave-one-out probes trained on (default: each source of the base at 0, the rest renormalised)."""
    distinct = len({tuple(np.round(row, 9)) for row in weights})
    if len(weights) < 2 * FOLDS or distinct <= len(sources):
        return {
            "available": False,
            "reason": f"{len(weights)} probes of {distinct} distinct mixtures of {len(sources)} sources; the mixture "
            f"regression needs {2 * FOLDS} or more probes and more than {len(sources)} mixtures",
        }
    rng = np.random.default_rng(0)
    picks = [rng.integers(0, len(weights), len(weights)) for _ in range(boots)]
    if ablated is None:
        ablated = {sources[i]: _without(base, i) for i, w in enumerate(base) if w > 0}
    trained = [sources.index(name) for name in ablated]
    contrasts = np.array([np.vstack([base, ablated[sources[i]]]) for i in trained])  # sources x 2 x sources

    def effects(model: Any) -> np.ndarray:
        """The model's prediction at the base minus at each leave-one-out mixture."""
        predicted = model.predict(contrasts.reshape(-1, len(sources))).reshape(len(trained), 2)
        return np.asarray(predicted[:, 0] - predicted[:, 1])

    columns: dict[str, Any] = {}
    for column, y in ys.items():
        try:
            fit = fit_mixture(sources, weights, y)
        except InputError as exc:
            columns[column] = {"available": False, "reason": str(exc)}
            continue

        point = effects(fit)
        draws = np.array([effects(refit_mixture(fit, weights[p], y[p])) for p in picks])  # boots x sources
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
        step = 1e-4  # a central difference: exact for ridge's polynomials up to rounding
        by_source = {}
        for k, i in enumerate(trained):
            toward = np.eye(len(sources))[i] - base  # more of source i, the others scaled down in proportion
            ends = fit.predict(np.vstack([base + step * toward, base - step * toward]))
            slope = float((ends[0] - ends[1]) / (2 * step))
            by_source[sources[i]] = {
                "estimate": float(point[k]),
                "interval": [float(min(lo[k], point[k])), float(max(hi[k], point[k]))],
                "derivative": slope,
            }
        columns[column] = {"available": True, "fit": fit.to_dict(), "effects": by_source}
    return {
        "available": True,
        "probes": len(weights),
        "mixtures": distinct,
        "sources": sources,
        "interval": f"bootstrap percentile over {boots} refits on probes resampled with replacement",
        "level": level,
        "columns": columns,
    }


def _column_values(evals: pd.DataFrame, eval_sources: list[str], last_evals: int) -> dict[str, float]:
    """One probe's followed metric (`bpb`) and its `val/<source>/bpb`, each the mean over its last `last_evals`
    evaluations."""
    out = {BPB: probe_scores(evals, eval_sources or None, last_evals=last_evals)[BPB]}
    bpb = evals[(evals["metric"] == "bpb") & evals["task"].str.match(r"^val/.+")]
    last = sorted(bpb["step"].unique())[-last_evals:]
    for task, group in bpb[bpb["step"].isin(last)].groupby("task"):
        if not eval_sources or str(task).removeprefix("val/") in eval_sources:
            out[f"{task}/bpb"] = float(group["value"].mean())
    return out


def _model_size(model: str) -> tuple[int, int]:
    layers, width = model.split("x")
    return int(layers), int(width)


def _mixture_setting(recipe: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """What a recipe is besides its weights: (everything but its sources, source -> its settings but the weight),
    over the sources it trains on."""
    rest = json.dumps({k: v for k, v in recipe.items() if k != "sources"}, sort_keys=True)
    trained = {
        s["name"]: json.dumps({k: v for k, v in s.items() if k != "weight"}, sort_keys=True)
        for s in recipe["sources"]
        if s.get("weight", 1.0) > 0
    }
    return rest, trained


def _mixtures(recipes: dict[str, Any], base: str, trained: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Recipe -> its normalised training weights, for the base, its leave-one-out recipes (`trained`: recipe -> the
    weights its probes trained on) and the campaign's recipes that differ from the base only in their weights."""
    rest, settings = _mixture_setting(recipes[base])
    out = {}
    for name, recipe in recipes.items():
        theirs, their_settings = _mixture_setting(recipe)
        if theirs != rest or recipe.get("curriculum", {}).get("kind", "shuffled") != "shuffled":
            continue
        if any(settings.get(s, v) != v for s, v in their_settings.items()):
            continue
        total = sum(s.get("weight", 1.0) for s in recipe["sources"] if s["name"] in their_settings)
        out[name] = {s["name"]: s.get("weight", 1.0) / total for s in recipe["sources"] if s["name"] in their_settings}
    if base in out:
        out.update({recipe: {s: w for s, w in weights.items() if w > 0} for recipe, weights in trained.items()})
    return out


def _ablations(ledger: Ledger, runs: pd.DataFrame) -> pd.DataFrame:
    """The leave-one-out runs among `runs`, with the recipe each ablates (`base`) and the source that took the left-out
    weight (`by`, None where the rest was renormalised), from each run's `probe.ablation` meta."""
    rows = runs[runs["left_out"].notna()].copy()
    metas = [ledger.meta(run)["probe"]["ablation"] for run in rows["run"]]
    rows["base"] = [m.get("base") for m in metas]
    rows["by"] = [m.get("by") for m in metas]
    return rows


def _chosen(ablations: pd.DataFrame, recipes: list[str], base: str | None, by: str | None) -> tuple[str, str | None]:
    """The base and the way of leaving out read (see the module docstring)."""
    if base is None:
        bases = set(ablations["base"])
        base = next((r for r in recipes if r in bases), recipes[0])
    if base not in recipes:
        raise InputError(f"the campaign has no recipe {base!r}; its recipes: {', '.join(recipes)}")
    ways = ablations.loc[ablations["base"] == base, "by"]
    if by is None and len(ways) and ways.notna().all():
        by = sorted(ways.unique())[0]
    return base, by


def _trained_weights(ledger: Ledger, here: pd.DataFrame, recipes: list[str]) -> dict[str, dict[str, float] | None]:
    """Recipe -> the weights its probes trained on (the first probe's manifest, normalised to sum to 1; None without
    one)."""
    out: dict[str, dict[str, float] | None] = {}
    for recipe in recipes:
        runs = here.loc[here["recipe"] == recipe, "run"]
        manifest = ledger.manifest(str(runs.iloc[0])) if len(runs) else None
        sources = manifest.data.sources if manifest is not None and manifest.data is not None else []
        total = sum(s.weight for s in sources)
        out[recipe] = {s.name: s.weight / total for s in sources} if total > 0 else None
    return out


def _source_entries(
    effects: dict[str, dict[str, Any]], base: str, by: str | None, weights: dict[str, dict[str, float] | None]
) -> dict[str, dict[str, Any]]:
    """Each source's effect with how it was left out: `by` (None: the rest renormalised) and the weights before
    (the base's) and after (its leave-one-out recipe's)."""
    out = {}
    for source, entry in effects.items():
        before, after = weights.get(base), weights.get(entry["recipe"])
        moved = None if before is None or after is None else {"before": before, "after": after}
        out[source] = {"recipe": entry["recipe"], "by": by, "weights": moved, "effects": entry["effects"]}
    return out


def attribution(
    ledger: Ledger, campaign: str, *, level: float | None = None, base: str | None = None, by: str | None = None
) -> dict[str, Any] | None:
    """A probe campaign's recipe x capability table, its sources' leave-one-out effects and, with enough mixtures,
    the mixture regression's (see the module docstring), for recipe `base` and its leave-one-out probes that move each
    weight to `by` (defaults: the module docstring's); None for imported results or a campaign without two recipes
    with finished probes at one budget. InputError for a `base` that is no recipe of the campaign."""
    record = ledger.campaign(campaign)
    if is_results(record):
        return None
    spec = record["spec"]
    level = level if level is not None else float(spec.get("level", 0.9))
    runs = probe_runs(ledger, campaign, ablations=True)
    runs = runs[runs["status"] == "finished"]
    if runs.empty:
        return None
    ablations = _ablations(ledger, runs)
    base, by = _chosen(ablations, list(spec["recipes"]), base, by)
    ablated = ablations[(ablations["base"] == base) & (ablations["by"].isna() if by is None else ablations["by"] == by)]
    runs = runs[runs["left_out"].isna() | runs["run"].isin(ablated["run"])]  # other bases' and ways' left out
    model = str(ablated["model"].iloc[0]) if len(ablated) else min(runs["model"].unique(), key=_model_size)
    budget = int(ablated["tokens"].min()) if len(ablated) else int(runs["tokens"].max())
    here = runs[(runs["tokens"] == budget) & (runs["model"] == model)]
    eval_sources = list(spec.get("eval_sources") or [])
    last_evals = int(spec.get("last_evals", 1))
    values: Values = {}
    for row in here.itertuples(index=False):
        evals = ledger.evals(row.run)
        if evals.empty:
            continue
        for column, value in _column_values(evals, eval_sources, last_evals).items():
            if math.isfinite(value):
                values.setdefault(row.recipe, {}).setdefault(column, {})[int(row.seed)] = value
    if base not in values or len(values) < 2:
        return None
    found = sorted({c for by_column in values.values() for c in by_column if c != BPB})
    capabilities = [f"val/{s}/bpb" for s in eval_sources if f"val/{s}/bpb" in found] or found
    columns = [BPB, *capabilities]
    left = {str(r.left_out): str(r.recipe) for r in ablated.drop_duplicates("recipe").itertuples(index=False)}
    weights = _trained_weights(ledger, here, [base, *left.values()]) if left else {}
    effects = source_effects(values, base, left, columns, level=level)
    return {
        "campaign": campaign,
        "budget": budget,
        "model": model,
        "base": base,
        "level": level,
        "followed": BPB,
        "capabilities": capabilities,
        "lower_is_better": True,
        "interval": f"recipe minus base, paired by seed, Student t, held family-wise over the row's {len(columns)} "
        "columns (Bonferroni); the base's cells: its mean over seeds, Student t",
        "table": capability_table(values, base, columns, level=level),
        "sources": _source_entries(effects, base, by, weights),
        "regression": _regression(here, values, spec["recipes"], base, left, weights, columns, level),
    }


def _regression(
    here: pd.DataFrame,
    values: Values,
    recipes: dict[str, Any],
    base: str,
    ablations: dict[str, str],
    weights: dict[str, dict[str, float] | None],
    columns: list[str],
    level: float,
) -> dict[str, Any]:
    """`mixture_effects` over the probes of `here` whose recipes are mixtures of the base (`_mixtures`), each source's
    contrast the mixture its leave-one-out probes trained on (`weights`: recipe -> those weights)."""
    trained = {recipe: w for recipe in ablations.values() if (w := weights.get(recipe)) is not None}
    mixtures = _mixtures(recipes, base, trained)
    if not ablations or base not in mixtures or len(trained) < len(ablations):
        return {"available": False, "reason": "no leave-one-out probes of a mixture to read the regression beside"}
    sources = list(mixtures[base]) + sorted({s for m in mixtures.values() for s in m} - set(mixtures[base]))
    points = [
        (recipe, int(seed))
        for recipe, seed in here[["recipe", "seed"]].itertuples(index=False)
        if recipe in mixtures and all(int(seed) in values[recipe].get(c, {}) for c in columns)
    ]
    weights_of = np.array([[mixtures[r].get(s, 0.0) for s in sources] for r, _ in points], dtype=float).reshape(
        len(points), len(sources)
    )
    ys = {c: np.array([values[r][c][seed] for r, seed in points], dtype=float) for c in columns}
    base_w = np.array([mixtures[base].get(s, 0.0) for s in sources], dtype=float)
    ablated = {s: np.array([mixtures[r].get(name, 0.0) for name in sources]) for s, r in ablations.items()}
    return mixture_effects(sources, weights_of, ys, base_w, level=level, ablated=ablated)
