"""A campaign's results: recipes ranked per budget, ties the seeds cannot resolve, decision accuracy, forecasts.

Read from the ledger's probe runs (meta `probe`: campaign, recipe, seed, tokens), finished ones only.

- **Scores** per probe: final bits per byte (`bpb`: the mean of `val/<source>/bpb` over the campaign's
  eval sources at the last evaluation, the same held-out text for every recipe; `val/bpb`, the recipe's own
  held-out text, when the campaign names none; with the campaign's `last_evals` N > 1, the mean of that over the
  last N evaluations, which averages out some of the noise of where one evaluation catches the weights), yield
  (validation loss gained per billion tokens over the probe's second half: loss at half the budget minus the final loss,
  over half the budget), and the final bits per byte of each hard slice (`hard/<slice>/bpb`). A probe trained
  with a warmup-stable-decay schedule (its LR falls below 90% of the peak before the end: `fit.stable_phase`'s
  rule) has a second half that holds the cooldown, whose gain is annealing, not data: it also gets
  `stable_yield_per_btok` (the same yield over the second half of the stable phase: the loss at half the tokens
  where the decay starts minus the loss there, per billion tokens) and `cooldown_gain` (the validation loss
  gained from the decay's start to the end, in nats; never per token). Losses between evaluations are read off
  the straight line between them.
- **Rankings** per budget and score (`ranking.rank`), each recipe with its mean and interval over seeds
  (`stats.mean_interval`, Student t at the campaign's level). Two recipes are compared **paired by seed** (a seed fixes
  the model's initialisation and the sampler, so the per-seed difference removes what the seeds share); the pair is
  resolved when the t-interval of the mean difference (`stats.difference`, paired) excludes 0 at the campaign's level
  held family-wise over the ranking's pairs (Bonferroni), and a **tie** otherwise (also with fewer than two shared
  seeds). Ties are marked, never broken by guessing.
- **Decision accuracy** (DataDecide, Magnusson et al. 2025): for each smaller budget, the share of recipe
  pairs it orders (by mean final bits per byte) the same way as the largest budget; also over the pairs the
  largest budget resolves; and, abstaining on the pairs the smaller budget's own ranking ties (the one rule of the
  screen, `ranking.resolved_pairs`: the ranking's ties and the decision accuracy's abstentions are the same pairs;
  with one seed there is no noise to measure, and no abstention), the share of pairs it abstains on and its accuracy
  on the pairs it decides. Its compute is the tokens of all its probes of a recipe (budget x seeds) as a share of
  one probe of the largest budget: the full-scale run the probes stand in for (the largest budget's other seeds only
  make the reference order trustworthy).
- **Forecasts** per recipe with three or more budgets: loss = E + B * tokens^-beta fitted to every seed's final
  validation loss at each budget (DESIGN.md: final losses of runs at several budgets, not a within-run fit
  across a decaying learning rate), and the gain and yield of going to the next budget, with the interval
  where the gain measured as the mean over the campaign's seeds should fall.
- **Across model sizes** (`campaign_sizes`): each recipe's L(N, D) law over three or more sizes, and rank transfer:
  how often each smaller size orders the recipes as the largest does.
- **Which data is paying** (`attribution`): the recipe x capability table and each source's effect from the
  campaign's leave-one-out probes, which the rankings, decision accuracy and forecasts leave out (`probe_runs`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.campaign_sizes import recipe_laws, sizes_of, transfer_by_budget
from yieldgate.analysis.fit import BILLION, forecast
from yieldgate.analysis.metric_choice import metric_report
from yieldgate.analysis.probe_scores import (
    BPB,
    HIGHER_IS_BETTER,
    probe_runs,
    probe_scores,
)
from yieldgate.analysis.ranking import decision_accuracy, rank, resolved_pairs
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.util.hashing import canonical_json

__all__ = [
    "CampaignSummary",
    "screen_accuracy",
    "summarise",
    "campaign_scores",
    "probe_scores",
]


@dataclass
class CampaignSummary:
    campaign: str
    level: float
    budgets: list[int]
    rankings: dict[str, dict[str, Any]]
    """Budget -> score -> ranking (`rank`'s result)."""
    decision_accuracy: dict[str, Any]
    forecasts: dict[str, Any]
    """Recipe -> the next budget's forecast (or why there is none)."""
    probes: dict[str, int]
    """Counts by status."""
    scaling: dict[str, Any] = field(default_factory=dict)
    """Recipe -> its L(N, D) law with intervals (or why there is none), for a campaign of several model sizes
    (`campaign_sizes.recipe_laws`)."""
    rank_transfer: dict[str, Any] = field(default_factory=dict)
    """Budget -> smaller size's N -> how often it orders recipe pairs (by bits per byte) as the largest size does
    (`campaign_sizes.rank_transfer`)."""
    failed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    attribution: dict[str, Any] | None = None
    """The recipe x capability table and each source's marginal effect (`attribution.attribution`; None without two
    recipes' finished probes at one budget)."""
    rank_by: dict[str, Any] = field(default_factory=lambda: {"metric": BPB, "higher_is_better": False})
    """The metric that ranks and decides, with its direction (the campaign's `rank_by`)."""
    scored_by: str = "the last evaluation"
    """How a probe's score is read off its evaluations (the last N, or a window of its budget)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Every candidate metric's signal-to-noise and decision accuracy, and the recommended one
    (`metric_choice.metric_report`)."""
    adaptive: dict[str, Any] | None = None
    """A campaign with adaptive seeds: its budget, each recipe's seeds there, the compute spent and its cap, and
    whether every pair is decided (`adaptive_state`)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarise(
    ledger: Ledger, campaign: str, *, level: float | None = None, next_budget: int | None = None, boots: int = 100
) -> CampaignSummary:
    """Rank the campaign's finished probes; see the module docstring (and `campaign_sizes`' for a campaign of
    several model sizes; `boots`: its L(N, D) fits' bootstrap refits)."""
    record = ledger.campaign(campaign)
    spec = record["spec"]
    level = level if level is not None else float(spec.get("level", 0.9))
    runs = probe_runs(ledger, campaign)
    if runs.empty:
        raise InputError(f"campaign {campaign!r} has no probe runs in {ledger.location}; run `yieldgate probe` first")
    notes = []
    if (
        not spec.get("eval_sources")
        and not spec.get("trainer")  # the team's trainer scores by its own evaluation (docs/own-trainer.md)
        and len({json.dumps(sorted(s["name"] for s in r["sources"])) for r in spec["recipes"].values()}) > 1
    ):
        notes.append(
            "the recipes train on different sources and the campaign names no eval_sources: each is scored on "
            "its own held-out text, so their bits per byte are not on one yardstick"
        )
    models = sorted(runs["model"].unique())
    if len(models) > 1:
        notes.append(f"{len(models)} model sizes: recipes are ranked per size as `recipe@size`")
    if spec.get("eval_sources") and not spec.get("probe", {}).get("eval_documents") and len(_tokenizer_texts(spec)) > 1:
        notes.append(
            "the recipes' tokenizers are trained on different text (their sources, filters or dedup differ), so "
            "eval windows drawn at token positions fall on different held-out text for each: set "
            "probe.eval_documents to score every recipe on the same bytes"
        )
    scores, finals = _gather(ledger, runs, spec)
    metric, higher = rank_metric(spec)
    rankings: dict[str, dict[str, Any]] = {}
    for budget in sorted(scores):
        rankings[str(budget)] = {
            key: rank(
                by_recipe, lower_is_better=not higher if key == metric else key not in HIGHER_IS_BETTER, level=level
            )
            for key, by_recipe in sorted(scores[budget].items())
            if key in (BPB, metric, *HIGHER_IS_BETTER) or (key.startswith("hard/") and key.endswith("/bpb"))
        }
    accuracy = screen_accuracy(rankings, metric)
    missing = sorted({b for b, by_key in scores.items() if metric not in by_key}, key=int)
    if missing:
        notes.append(
            f"no probe at {', '.join(f'{b:,}' for b in missing)} tokens has {metric}: nothing ranked by it there"
        )
    budgets = sorted(int(b) for b in scores)
    target = next_budget or spec.get("next_budget") or (2 * max(budgets) if budgets else None)
    forecasts = {recipe: _forecast(points, target, level) for recipe, points in finals.items()}
    failed = {r.run: r.error or "" for r in runs.itertuples(index=False) if r.status == "failed"}
    sizes = sizes_of(ledger, runs) if len(models) > 1 else {}
    return CampaignSummary(
        campaign=campaign,
        level=level,
        budgets=budgets,
        rankings=rankings,
        decision_accuracy=accuracy,
        forecasts=forecasts,
        probes={str(k): int(v) for k, v in runs["status"].value_counts().items()},
        failed=failed,
        notes=notes,
        scaling=recipe_laws(ledger, runs, level=level, target_tokens=target, boots=boots) if sizes else {},
        rank_transfer=transfer_by_budget(scores, sizes, BPB, level=level) if sizes else {},
        attribution=_attribution(ledger, campaign, level),
        rank_by={"metric": metric, "higher_is_better": higher},
        scored_by=scored_by(spec),
        metrics=metric_report(scores, metric, higher, bytes_only=len(_tokenizer_texts(spec)) > 1),
        adaptive=adaptive_state(scores, spec, metric),
    )


def adaptive_state(scores: Scores, spec: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """An adaptive campaign's state at its budget: each recipe's seeds, the compute spent (probes x budget over
    recipes x the largest budget) and its cap, and the recipes still in a pair within noise (`adaptive.
    close_recipes`): `decided` when none is, else `compute` when the cap is spent, else `open`."""
    from yieldgate.analysis.adaptive import close_recipes

    adaptive = spec.get("adaptive")
    if not adaptive or not scores:
        return None
    budget, largest = int(adaptive["budget"]), max(int(b) for b in spec["budgets"])
    by_recipe = scores.get(budget, {}).get(metric, {})
    seeds = {r: len(v) for r, v in by_recipe.items()}
    spent = budget * sum(seeds.values()) / (largest * max(len(spec["recipes"]), 1))
    close = close_recipes(by_recipe) if by_recipe else sorted(spec["recipes"])
    cap = float(adaptive["compute"])
    one_more = budget / (largest * max(len(spec["recipes"]), 1))  # the compute of one more probe
    state = "decided" if not close else "compute" if spent + one_more > cap + 1e-12 else "open"
    return {"budget": budget, "seeds": seeds, "compute_share": spent, "compute": cap, "close": close, "state": state}


def rank_metric(spec: dict[str, Any]) -> tuple[str, bool]:
    """The campaign's `rank_by` metric and whether higher is better (`bpb`, lower, by default)."""
    rank_by = spec.get("rank_by") or {}
    return str(rank_by.get("metric", BPB)), bool(rank_by.get("higher_is_better", False))


def scored_by(spec: dict[str, Any]) -> str:
    """How the campaign reads a probe's score off its evaluations, in words."""
    window = spec.get("score_window")
    if window:
        return f"the mean of its evaluations at {', '.join(f'{x:g}' for x in window)} of its budget"
    last = int(spec.get("last_evals", 1))
    return "the last evaluation" if last == 1 else f"the mean of its last {last} evaluations"


def screen_accuracy(rankings: dict[str, dict[str, Any]], score: str = BPB) -> dict[str, Any]:
    """Decision accuracy of the smaller budgets (`ranking.decision_accuracy`) from the rankings of `score` per budget
    (`rank`'s results, by budget as text), with one noise rule on the screen: a pair is decided at a budget when that
    budget's ranking resolves it (not a tie), the largest and the smaller ones alike (`ranking.resolved_pairs`); a
    budget with a recipe of one seed abstains on nothing (no noise to measure)."""
    ranked = {int(b): r[score] for b, r in rankings.items() if score in r}
    if not ranked:
        return {}
    means = {b: {e["recipe"]: e["mean"] for e in r["order"]} for b, r in sorted(ranked.items())}
    largest = max(ranked)
    seeds = {b: max(e["seeds"] for e in r["order"]) for b, r in ranked.items()}
    decided = {
        b: resolved_pairs(r) for b, r in ranked.items() if b != largest and min(e["seeds"] for e in r["order"]) >= 2
    }
    return decision_accuracy(means, resolved_pairs(ranked[largest]), resolved=decided, seeds=seeds)


def _attribution(ledger: Ledger, campaign: str, level: float) -> dict[str, Any] | None:
    from yieldgate.analysis.attribution import attribution

    return attribution(ledger, campaign, level=level)


Scores = dict[int, dict[str, dict[str, dict[int, float]]]]
"""budget -> score -> recipe (`recipe@size` with several model sizes) -> seed -> value."""


def campaign_scores(
    ledger: Ledger, campaign: str, *, last_evals: int | None = None, window: list[float] | None = None
) -> Scores:
    """Every finished probe's scores (`probe_scores`, scored as the campaign says unless `last_evals` or a `window`
    is given), by budget, score, recipe and seed: what `summarise` ranks."""
    spec = ledger.campaign(campaign)["spec"]
    if last_evals is not None or window is not None:
        spec = {**spec, "last_evals": last_evals or 1, "score_window": window or []}
    return _gather(ledger, probe_runs(ledger, campaign), spec)[0]


def _gather(
    ledger: Ledger, runs: pd.DataFrame, spec: dict[str, Any]
) -> tuple[Scores, dict[str, list[tuple[float, float]]]]:
    """(scores, recipe -> [(tokens, final val loss)] for the forecasts) over the finished probes of `runs`, each
    scored by the spec's `last_evals` or `score_window`."""
    last_evals, window = int(spec.get("last_evals", 1)), spec.get("score_window") or None
    several = runs["model"].nunique() > 1
    scores: Scores = {}
    finals: dict[str, list[tuple[float, float]]] = {}
    for row in runs[runs["status"] == "finished"].itertuples(index=False):
        recipe = f"{row.recipe}@{row.model}" if several else row.recipe
        evals = ledger.evals(row.run)
        if evals.empty:
            continue
        scored = probe_scores(
            evals,
            spec.get("eval_sources"),
            ledger.steps(row.run, ["tokens", "lr"]),
            last_evals=last_evals,
            window=window,
            budget=row.tokens,
        )
        for key, value in scored.items():
            scores.setdefault(row.tokens, {}).setdefault(key, {}).setdefault(recipe, {})[row.seed] = value
        last = evals[(evals["task"] == "val") & (evals["metric"] == "loss")].sort_values("tokens")
        if len(last):
            finals.setdefault(recipe, []).append((float(last["tokens"].iloc[-1]), float(last["value"].iloc[-1])))
    return scores, finals


def _tokenizer_texts(spec: dict[str, Any]) -> set[str]:
    """The distinct texts the campaign's recipes train their tokenizers on, as what decides them: the sources
    (with the eval sources, added to every recipe), filters and dedup."""
    extra = set(spec.get("eval_sources") or [])
    return {
        canonical_json([sorted({s["name"] for s in r["sources"]} | extra), r.get("filters", []), r.get("dedup", {})])
        for r in spec["recipes"].values()
    }


def _forecast(points: list[tuple[float, float]], target: float | None, level: float) -> dict[str, Any]:
    budgets = sorted({round(t) for t, _ in points})
    if len(budgets) < 3 or target is None:
        return {
            "available": False,
            "reason": f"{len(budgets)} budget(s) finished; a forecast needs final losses at 3 or more",
        }
    tokens, losses = zip(*sorted(points), strict=True)
    at = float(max(tokens))
    try:
        seeds = max(1, len(points) // len(budgets))
        f = forecast(
            np.array(tokens),
            np.array(losses),
            next_tokens=float(target) - at,
            at_tokens=at,
            level=level,
            replicates=seeds,
        )
    except InputError as exc:
        return {"available": False, "reason": str(exc)}
    per = BILLION / f.next_tokens
    return {
        "available": True,
        "from_tokens": at,
        "to_tokens": float(target),
        "seeds": seeds,
        "gain": f.gain,
        "gain_interval": list(f.interval),
        "yield_per_btok": f.yield_per_btok,
        "yield_interval": [f.interval[0] * per, f.interval[1] * per],
        "fit": f.fit.to_dict(),
        "notes": f.notes,
    }
