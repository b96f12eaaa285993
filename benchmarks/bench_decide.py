"""Do probes at 10% of the compute pick the recipes the largest budget picks? Accuracy against a 10-seed reference.

The reference, every recipe of `examples/decide.yaml` at its largest budget with seeds 0..9, is computed once by
`benchmarks/decide_reference.py` and stored in `benchmarks/data/<campaign>-reference-<key>.json`, keyed by the hash of
the recipes, trainer and settings (issue #34). This benchmark (issue #47):

1. **Reads the stored reference** for the campaign's key; none for this key, or fewer than 10 seeds a recipe: it
   refuses to score (one line, exit 2) and says the command that computes or finishes it.
2. **Retrains one reference probe** (`--check RECIPE:SEED`, the first recipe's seed 0 by default) in a fresh ledger
   and checks it lies within a tolerance of the stored value derived from the reference's own seed noise: 1% of its
   recipe's seed standard deviation (`decide_scoring.tolerance`, 1.1e-4 bpb for base). Another CPU or torch build
   moves a probe by ~1e-7 bpb and is accepted, so the figures can be checked on any machine without the 159-minute
   recompute; a changed trainer moves it by a share of the seed noise and is refused. It prints which figures a
   drift of the tolerance on every reference probe could move (`decide_scoring.sensitivity`: on `decide.yaml` no
   pair's order, so neither the all-pairs nor the decided accuracy; the de-noised figure and the noise units by
   the bounds shown).
3. **Trains the probes' side**: the campaign's smaller budgets, their own seeds from 100 (disjoint from the
   reference's), each probe evaluated also at 0.9 and 0.95 of its budget (`probe.eval_at`), with `yieldgate probe`'s
   machinery (2 workers). The whole benchmark is held to 20 minutes on 2 cores.

**What it chooses, from the probes alone** (their signal-to-noise, the spread between recipes over the spread
between seeds: `decide_scoring.choose_*`; never by agreement with the reference they are then scored against):
the metric (bits per byte on the same bytes for every recipe: the mean over the eval sources, or one source's; a
per-token loss or accuracy depends on each recipe's tokenizer) and the scoring window (the last evaluation, or the
mean of the evaluations at 0.9, 0.95 and 1.0 of the budget, inside the learning rate's decay), by the mean
signal-to-noise over the smaller budgets; the **headline** budget, by signal-to-noise x sqrt(seeds affordable at
10% of the compute); and the adaptive mode's budget, the same way among the budgets that afford three or more seeds
(a first pass of two, then rounds).

**Figures** (`decide_scoring`'s docstring defines each), for every smaller budget and k of its seeds (compute =
budget x k / the largest budget), each the mean over every k-subset of its seeds: all-pairs accuracy with its
standard error over pairs (the headline, DataDecide's measure, printed beside DataDecide's anchors: about 80% at 2%,
82% at 8% and 85% at 24% of the target's compute, Magnusson et al. 2025); accuracy on the pairs decided beyond the
probes' own noise, and coverage; the de-noised accuracy (secondary); accuracy on the pairs >= 3 noise units apart,
with what they cover. Then the scoring window before and after, every candidate metric's accuracy beside its
signal-to-noise, and adaptive seeds beside uniform seeds at equal compute (`decide_scoring.adaptive_curve`).

**Target** (issue #47): all-pairs accuracy >= 80% at <= 10% of the compute, on the headline configuration and on
the adaptive mode at that compute; and the benchmark's wall time <= 20 minutes on 2 cores. Each says met or not met.

    .venv/bin/python benchmarks/bench_decide.py [--campaign examples/decide.yaml] [--workers 2] [--ledger PATH]
        [--check RECIPE:SEED] [--add-budget TOKENS:SEEDS ...] [--json]

`--json` writes every figure, the headline's as `all_pairs.accuracy`, `all_pairs.stderr`, `decided.accuracy`,
`coverage`, and the same keys under `adaptive`. `--ledger PATH` keeps the smaller budgets' probes (a re-run trains
only what it lacks); `--add-budget 15000:10` explores more seeds or budgets (seeds from 100), shown in the curve
but never chosen: the choices read the campaign's own budgets.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decide_reference as ref  # noqa: E402 - the reference's command, beside this file
import decide_scoring as sc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.80
COMPUTE = 0.10
WALL_S = 20 * 60
WINDOW = [0.9, 0.95, 1.0]
FIRST_SEEDS = 2
ANCHORS = ((0.02, 0.80), (0.08, 0.82), (0.24, 0.85))
"""DataDecide (Magnusson et al., 2025): decision accuracy over all pairs against the share of the target's compute."""


class Refused(Exception):
    """The benchmark will not score: one line, exit 2."""


def anchor(share: float) -> float | None:
    """DataDecide's all-pairs accuracy at `share` of the compute, interpolated between its anchors; None outside
    them (2-24%)."""
    if not ANCHORS[0][0] <= share <= ANCHORS[-1][0]:
        return None
    return float(np.interp(share, [s for s, _ in ANCHORS], [a for _, a in ANCHORS]))


def stored_reference(
    campaign: Any, ledger_hint: str, *, folder: Path = ref.DATA, path: Path | None = None
) -> dict[str, Any]:
    """The complete stored reference of the campaign's key (in `folder`, or the file `path`); Refused when there is
    none for this key or it lacks probes."""
    key = ref.reference_key(campaign)
    path = path or ref.reference_path(campaign, folder)
    finish = f"python benchmarks/decide_reference.py --campaign {campaign_arg(campaign)} --ledger {ledger_hint}"
    reference = ref.load_reference(path)
    if reference is None:
        others = sorted(p.name for p in path.parent.glob(f"{campaign.name}-reference-*.json"))
        stale = f" ({', '.join(others)} holds another key: the recipes, trainer or settings changed)" if others else ""
        raise Refused(f"no stored reference for this campaign's key {key} at {path}{stale}; compute it with: {finish}")
    if reference.get("key") != key:
        raise Refused(
            f"{path} holds the reference of key {reference.get('key')}, not this campaign's {key}: the recipes, "
            f"trainer or settings changed; compute it with: {finish}"
        )
    lacking = ref.missing(reference, list(campaign.recipes))
    if lacking:
        count = sum(map(len, lacking.values()))
        where = "; ".join(f"{r}: {len(s)}" for r, s in lacking.items())
        raise Refused(
            f"the stored reference {path.name} lacks {count} of {len(campaign.recipes) * ref.REFERENCE_SEEDS} probes "
            f"({where}): it needs {ref.REFERENCE_SEEDS} seeds a recipe; finish it with: {finish}"
        )
    return reference


def campaign_arg(campaign: Any) -> str:
    return "examples/decide.yaml" if campaign.name == "decide" else f"<{campaign.name}'s file>"


def reproduce(campaign: Any, reference: dict[str, Any], check: tuple[str, int], workers: int = 1) -> dict[str, Any]:
    """Retrain one reference probe in a fresh ledger, with the reference's threads; Refused unless it lies within
    the tolerance of the stored value (`check_value`)."""
    recipe, seed = check
    stored = reference["probes"].get(recipe, {}).get(str(seed))
    if stored is None:
        raise Refused(f"the stored reference has no probe {recipe} seed {seed} to retrain; pick one it has")
    one = ref.reference_campaign(campaign, [seed])
    one = one.model_copy(update={"recipes": {recipe: one.recipes[recipe]}})
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-decide-check-") as tmp:
        ledger = str(Path(tmp) / "check.db")
        counts = ref.train(one, ledger, workers=workers, threads=int(reference["threads"]))
        if counts["finished"] != 1:
            raise Refused(f"retraining the reference probe {recipe} seed {seed} failed; see `yieldgate show` on it")
        from yieldgate.ledger import Ledger

        with Ledger(ledger) as led:
            value = ref.probe_score(led, f"{one.name}/{recipe}/s{seed}/t{max(campaign.budgets)}", campaign)
    tol = check_value(recipe, seed, value, stored["bpb"], by_recipe(reference))
    return {
        "recipe": recipe,
        "seed": seed,
        "bpb": value,
        "stored": stored["bpb"],
        "tolerance": tol,
        "seconds": time.perf_counter() - start,
    }


def by_recipe(reference: dict[str, Any]) -> sc.Probes:
    return {r: {int(s): p["bpb"] for s, p in v.items()} for r, v in reference["probes"].items()}


def check_value(recipe: str, seed: int, value: float, stored: float, reference: sc.Probes) -> float:
    """The tolerance (`decide_scoring.tolerance`: 1% of the recipe's seed std in the reference); Refused unless the
    retrained value lies within it of the stored one."""
    _, noise = sc.reference_pairs(reference)
    tol = sc.tolerance(noise, recipe)
    if not abs(value - stored) <= tol:
        raise Refused(
            f"the reference probe {recipe} seed {seed} retrains to {value!r} bpb, the stored reference holds "
            f"{stored!r}: {abs(value - stored):.3g} apart, past the tolerance of {tol:.3g} bpb (1% of {recipe}'s seed "
            "std): the trainer or its environment changed what a probe learns; recompute the reference "
            "(python benchmarks/decide_reference.py) before scoring"
        )
    return tol


def probes_side(campaign: Any, ledger: str, workers: int) -> tuple[sc.Variants, Any]:
    """Train the campaign's smaller budgets (not the largest: the reference is stored; an adaptive budget's whole
    pool, which the adaptive mode draws from) and score every probe each way: `metric@last` and `metric@window`
    for bpb and each eval source's bpb."""
    from yieldgate.analysis.campaign import campaign_scores
    from yieldgate.ledger import Ledger
    from yieldgate.probe.campaign import quiet_mfu_warnings, run_campaign

    largest = max(campaign.budgets)
    small = campaign.model_copy(update={"budgets": [b for b in campaign.budgets if b != largest], "adaptive": None})
    with quiet_mfu_warnings():
        done = run_campaign(small, ledger, workers=workers)
    with Ledger(ledger) as led:
        scored = {
            "last": campaign_scores(led, small.name, last_evals=1),
            "window": campaign_scores(led, small.name, window=WINDOW),
        }
    metrics = ["bpb", *(f"val/{s}/bpb" for s in campaign.eval_sources)]
    # Only this campaign's budgets and seeds: a kept ledger may hold other probes of a campaign of the same name.
    variants = {
        f"{metric}@{how}": {
            b: {r: {s: v for s, v in seeds.items() if s in small.seeds_of(b)} for r, seeds in scores[b][metric].items()}
            for b in small.budgets
        }
        for how, scores in scored.items()
        for metric in metrics
    }
    return variants, done


def with_budgets(campaign: Any, extra: list[str]) -> Any:
    """The campaign with more budgets, each `TOKENS:SEEDS` with its own seeds from 100 (the probes it already has
    keep their keys: a ledger's finished ones are not trained again)."""
    from yieldgate.probe.campaign import Campaign

    if not extra:
        return campaign
    spec = campaign.model_dump()
    for item in extra:
        tokens, seeds = (int(x) for x in item.split(":"))
        spec["budgets"] = sorted({*spec["budgets"], tokens})
        spec["budget_seeds"][tokens] = list(range(100, 100 + seeds))
    return Campaign.model_validate(spec)


def parse_check(text: str | None, campaign: Any) -> tuple[str, int]:
    if text is None:
        return next(iter(campaign.recipes)), 0
    recipe, _, seed = text.rpartition(":")
    return recipe, int(seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", type=Path, default=ROOT / "examples" / "decide.yaml")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ledger", help="keep the smaller budgets' probes in this ledger (default: a temporary one)")
    parser.add_argument("--reference", type=Path, help="the stored reference (default: the campaign key's file)")
    parser.add_argument("--check", metavar="RECIPE:SEED", help="the reference probe to retrain (default: first:0)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--add-budget",
        action="append",
        default=[],
        metavar="TOKENS:SEEDS",
        help="also probe TOKENS per probe with SEEDS seeds (100, 101, ...), shown in the curve but never chosen "
        "(repeatable)",
    )
    args = parser.parse_args()
    logging.getLogger("yieldgate").setLevel(logging.ERROR)
    from yieldgate.probe.campaign import load_campaign

    start = time.perf_counter()
    campaign = load_campaign(args.campaign)
    try:
        reference = stored_reference(campaign, "/tmp/decide-reference.db", path=args.reference)
        checked = reproduce(campaign, reference, parse_check(args.check, campaign))
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    with tempfile.TemporaryDirectory(prefix="bench-decide-") as tmp:
        explored = with_budgets(campaign, args.add_budget)
        variants, done = probes_side(explored, args.ledger or str(Path(tmp) / "decide.db"), args.workers)
    result = evaluate(campaign, reference, variants)
    result.update(run_facts(checked, done, time.perf_counter() - start, args.workers))
    result["sensitivity"] = sc.sensitivity(result["pairs"], checked["tolerance"])
    result["checks"] = {name: {"met": ok, "what": what} for name, ok, what in checks(result)}
    result["pass"] = all(c["met"] for c in result["checks"].values())
    if args.json:
        print(json.dumps(result))
    else:
        show(campaign.name, result)


def evaluate(campaign: Any, reference: dict[str, Any], variants: sc.Variants, *, orders: int = 100) -> dict[str, Any]:
    """Everything scored, from the stored reference and the probes' scores of each variant (`probes_side`): the
    choices, the curve, the headline, the window before and after, the candidate metrics and the adaptive mode
    (over `orders` random orders of its seeds)."""
    largest = int(reference["tokens"])
    truth = by_recipe(reference)
    pairs, noise = sc.reference_pairs(truth)
    own = [b for b in campaign.budgets if b != largest]
    choice = sc.choose_variant({n: {b: v for b, v in by.items() if b in own} for n, by in variants.items()})
    chosen = variants[choice["chosen"]]
    metric = choice["chosen"].rpartition("@")[0]
    pick = sc.choose_budget({b: chosen[b] for b in own}, largest, COMPUTE)
    rows = sc.curve(chosen, pairs, largest)
    top = (
        None if pick is None else next(r for r in rows if (r["budget"], r["seeds"]) == (pick["budget"], pick["seeds"]))
    )
    adaptive = sc.choose_budget({b: chosen[b] for b in own}, largest, COMPUTE, first=FIRST_SEEDS + 1)
    moving = (
        []
        if adaptive is None
        else sc.adaptive_curve(
            chosen[adaptive["budget"]], pairs, adaptive["budget"], largest, first=FIRST_SEEDS, orders=orders
        )
    )
    at_cap = next((r for r in moving if r["seeds"] == adaptive["seeds"]), None) if adaptive else None
    return {
        "campaign": campaign.name,
        "reference": {
            "key": reference["key"],
            "tokens": largest,
            "seeds": min(len(v) for v in truth.values()),
            "noise_bpb": noise,
            "seconds": ref.reference_seconds(reference),
            "ceiling": float(np.mean([p["q"] for p in pairs])),
            "separated": sc.separated_cover(pairs, {r: x.model_dump(mode="json") for r, x in campaign.recipes.items()}),
        },
        "pairs": pairs,
        "choice": {**choice, "metric": metric, "budget": pick, "adaptive_budget": adaptive},
        "curve": [_row(r) for r in rows],
        "headline": None if top is None else _row(top),
        **_figures(top),
        "window": _before_after(variants, pairs, metric, largest, own),
        "metrics": _per_metric(variants, pairs, choice, top, largest),
        "adaptive_curve": moving,
        "adaptive": None
        if at_cap is None
        else {
            **_figures(at_cap["adaptive"]),
            "budget": at_cap["budget"],
            "seeds_uniform": at_cap["seeds"],
            "compute_share": at_cap["adaptive"]["compute_share"],
            "uniform": _figures(at_cap["uniform"]),
        },
    }


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "per_pair"}


def _figures(row: dict[str, Any] | None) -> dict[str, Any]:
    """The figures under the keys the issue names: all_pairs.accuracy, all_pairs.stderr, decided.accuracy, coverage."""
    if row is None:
        return {"all_pairs": None, "decided": None, "coverage": None}
    return {
        "all_pairs": {"accuracy": row["accuracy"], "stderr": row["stderr"]},
        "decided": {"accuracy": row["accuracy_decided"]},
        "coverage": row["coverage"],
        "denoised": row["denoised"],
        "accuracy_separated": row["accuracy_separated"],
    }


def _before_after(
    variants: sc.Variants, pairs: list[dict[str, Any]], metric: str, largest: int, own: list[int]
) -> list[dict[str, Any]]:
    """The chosen metric scored by its last evaluation and by the decay window's mean, at each of the campaign's
    smaller budgets and seed counts."""
    out = []
    for budget in own:
        last, window = variants[f"{metric}@last"][budget], variants[f"{metric}@window"][budget]
        for k in range(1, min(len(v) for v in last.values()) + 1):
            a = sc.configuration(last, pairs, k, budget, largest)
            b = sc.configuration(window, pairs, k, budget, largest)
            out.append(
                {
                    "budget": budget,
                    "seeds": k,
                    "compute_share": a["compute_share"],
                    "last": {
                        "accuracy": a["accuracy"],
                        "accuracy_decided": a["accuracy_decided"],
                        "coverage": a["coverage"],
                    },
                    "window": {
                        "accuracy": b["accuracy"],
                        "accuracy_decided": b["accuracy_decided"],
                        "coverage": b["coverage"],
                    },
                }
            )
    return sorted(out, key=lambda r: (r["compute_share"], r["budget"]))


def _per_metric(
    variants: sc.Variants, pairs: list[dict[str, Any]], choice: dict[str, Any], top: dict[str, Any] | None, largest: int
) -> dict[str, Any]:
    """Every candidate (metric and window) at the headline configuration: its all-pairs accuracy beside its
    signal-to-noise (reported, never used to choose)."""
    if top is None:
        return {}
    return {
        name: {
            "snr_mean": choice["snr_mean"][name],
            "accuracy": sc.configuration(by[top["budget"]], pairs, top["seeds"], top["budget"], largest)["accuracy"],
        }
        for name, by in variants.items()
    }


def run_facts(checked: dict[str, Any], done: Any, wall: float, workers: int) -> dict[str, Any]:
    return {
        "check": checked,
        "probes": {"planned": done.planned, "trained": len(done.finished), "skipped": len(done.skipped)},
        "wall_s": wall,
        "workers": workers,
    }


def checks(result: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Each target: (name, met, what)."""
    out = []
    for name, figures in (("headline", result), ("adaptive at equal compute", result.get("adaptive"))):
        acc = (figures or {}).get("all_pairs")
        if acc is None:
            out.append((name, False, f"no configuration at <= {COMPUTE:.0%} of the compute"))
            continue
        se = "-" if acc["stderr"] is None else f"{acc['stderr']:.1%}"
        out.append(
            (
                f"{name}: all pairs >= {TARGET:.0%} at <= {COMPUTE:.0%} of the compute",
                acc["accuracy"] >= TARGET,
                f"{acc['accuracy']:.1%} ± {se} of {len(result['pairs'])} pairs",
            )
        )
    p = result["probes"]
    out.append(
        (
            "wall time",
            result["wall_s"] <= WALL_S and p["trained"] + p["skipped"] == p["planned"],
            f"{result['wall_s'] / 60:.1f} min on {result['workers']} workers, the reference check and "
            f"{p['trained']} of {p['planned']} probes trained ({p['skipped']} already in the ledger; target <= 20 min)",
        )
    )
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def show(name: str, result: dict[str, Any]) -> None:
    console = Console(width=120)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    r = result["reference"]
    table = Table(title=f"Each pair at {r['tokens']:,} tokens ({r['seeds']} seeds; noise per recipe)")
    for column in ("better", "worse", "diff (bpb)", "noise units", "P(10 seeds order it truly)"):
        table.add_column(column, justify="right")
    for p in result["pairs"]:
        table.add_row(p["a"], p["b"], f"{p['diff']:+.4f}", f"{p['units']:.2f}", f"{p['q']:.3f}")
    console.print(table)
    c = result["choice"]
    snr = sorted(c["snr_mean"].items(), key=lambda kv: -kv[1])
    say(
        "chosen from the probes' signal-to-noise (spread between recipes over spread between seeds, mean over the "
        f"smaller budgets): {c['chosen']} (" + ", ".join(f"{n} {x:.2f}" for n, x in snr) + ")"
    )
    if c["budget"]:
        opts = ", ".join(f"{int(b):,} x {o['seeds']}: {o['separation']:.2f}" for b, o in c["budget"]["options"].items())
        say(f"headline budget by signal-to-noise x sqrt(seeds at {COMPUTE:.0%}): {c['budget']['budget']:,} ({opts})")
    console.print(_curve_table(name, result))
    console.print(_window_table(result))
    top = result["headline"]
    if result["metrics"] and top:
        ranked = sorted(result["metrics"].items(), key=lambda kv: -kv[1]["snr_mean"])
        say(
            f"candidates at the headline ({top['budget']:,} x {top['seeds']}): "
            + "; ".join(f"{n}: snr {m['snr_mean']:.2f}, all pairs {m['accuracy']:.1%}" for n, m in ranked)
        )
    if result["adaptive_curve"]:
        console.print(_adaptive_table(result))
    for line in _facts(result):
        say(line)


def _curve_table(name: str, result: dict[str, Any]) -> Table:
    table = Table(
        title=f"{name}: against compute ({result['choice']['chosen']}; share of one largest-budget run; mean over seed "
        "subsets; * the headline)"
    )
    columns = ("compute", "budget", "seeds", "all pairs ± se", "DataDecide", "decided", "coverage", "de-noised")
    for column in (*columns, ">= 3 units"):
        table.add_column(column, justify="right")
    top = result["headline"]
    for row in result["curve"]:
        star = "*" if top and (row["budget"], row["seeds"]) == (top["budget"], top["seeds"]) else ""
        table.add_row(
            f"{row['compute_share']:.1%}{star}",
            f"{row['budget']:,}",
            str(row["seeds"]),
            f"{row['accuracy']:.1%} ± {_pct(row['stderr'])}",
            "-" if (a := anchor(row["compute_share"])) is None else f"~{a:.0%}",
            _pct(row["accuracy_decided"]),
            f"{row['coverage']:.0%}",
            "-" if row["denoised"] is None else f"{row['denoised']:.3f}",
            _pct(row["accuracy_separated"]),
        )
    return table


def _window_table(result: dict[str, Any]) -> Table:
    table = Table(
        title=f"Scoring window: {result['choice']['metric']} by the last evaluation, or the mean at 0.9, 0.95 and 1.0 "
        "of the budget"
    )
    for column in ("compute", "budget", "seeds", "all: last", "window", "decided: last", "window", "coverage: last"):
        table.add_column(column, justify="right")
    table.add_column("window", justify="right")
    for row in result["window"]:
        a, b = row["last"], row["window"]
        table.add_row(
            f"{row['compute_share']:.1%}",
            f"{row['budget']:,}",
            str(row["seeds"]),
            _pct(a["accuracy"]),
            _pct(b["accuracy"]),
            _pct(a["accuracy_decided"]),
            _pct(b["accuracy_decided"]),
            f"{a['coverage']:.0%}",
            f"{b['coverage']:.0%}",
        )
    return table


def _adaptive_table(result: dict[str, Any]) -> Table:
    budget = result["choice"]["adaptive_budget"]["budget"]
    table = Table(
        title=f"Adaptive seeds at {budget:,} tokens (first pass {FIRST_SEEDS} seeds, then rounds for the recipes still "
        "close) beside uniform seeds, at equal compute"
    )
    for column in ("compute", "uniform: all", "decided", "coverage", "adaptive: all", "decided", "coverage", "spent"):
        table.add_column(column, justify="right")
    for row in result["adaptive_curve"]:
        u, a = row["uniform"], row["adaptive"]
        table.add_row(
            f"{row['compute_share']:.1%}",
            _pct(u["accuracy"]),
            _pct(u["accuracy_decided"]),
            f"{u['coverage']:.0%}",
            _pct(a["accuracy"]),
            _pct(a["accuracy_decided"]),
            f"{a['coverage']:.0%}",
            f"{a['compute_share']:.1%}",
        )
    return table


def _facts(result: dict[str, Any]) -> list[str]:
    r, k, sep = result["reference"], result["check"], result["reference"]["separated"]
    noise = ", ".join(f"{n} {v:.4f}" for n, v in sorted(r["noise_bpb"].items(), key=lambda kv: kv[1]))
    lines = [
        f"all pairs: the share of the {len(result['pairs'])} pairs ordered as the reference orders them, ± its "
        "standard error over pairs; "
        "decided: accuracy on the pairs beyond the probes' own seed noise, coverage their share; de-noised "
        "(secondary): the accuracy against the true order, the reference's noise taken out, sum(agreement - (1 - q)) "
        "/ sum(2q - 1) over the pairs (decide_scoring.py); >= 3 units: accuracy on the pairs that far apart",
        f"reference: {len(r['noise_bpb'])} recipes x {r['seeds']} seeds at {r['tokens']:,} tokens, key {r['key']}, "
        f"its own time {r['seconds'] / 60:.1f} min of probe training; seed std per recipe {noise} bpb; a perfect "
        f"probe would agree with it on {r['ceiling']:.1%} of the pairs",
        f"separated pairs (>= 3 noise units): {sep['pairs']} of {len(result['pairs'])}, differing by "
        + ", ".join(f"{kind} ({n})" for kind, n in sorted(sep["kinds"].items(), key=lambda kv: -kv[1]))
        + f"; a pair differing by one kind alone: {', '.join(sep['alone']) or 'none'}",
        f"reproduced: {k['recipe']} seed {k['seed']} retrained to {k['bpb']!r} bpb, stored {k['stored']!r} "
        f"({abs(k['bpb'] - k['stored']):.2g} apart; tolerance {k['tolerance']:.2g}, 1% of its seed std; "
        f"{k['seconds']:.0f} s)",
    ]
    sens = result.get("sensitivity")
    if sens:
        lines.append(
            f"a drift of the tolerance on every reference probe would move: {', '.join(sens['moves'])} (noise units "
            f"by <= {sens['units_at_most']:.3f}, q by <= {sens['q_at_most']:.3f}); pairs whose order could flip: "
            f"{', '.join(sens['flippable_pairs']) or 'none'} (the closest {sens['closest_bpb']:.4f} bpb apart)"
        )
    return lines + [f"{'MET    ' if c['met'] else 'NOT MET'}  {n}: {c['what']}" for n, c in result["checks"].items()]


if __name__ == "__main__":
    main()
