"""Do probes at 10% of the compute pick the recipes the largest budget picks? Accuracy against a 10-seed reference.

Issue #34, "The built-in benchmark, restated": issue #22 showed that the 3-seed reference was the limit, not the
probes (its own noise capped a perfect probe's agreement near 94%). So the reference, every recipe of
`examples/decide.yaml` at its largest budget with seeds 0..9, is computed once by `benchmarks/decide_reference.py`
and stored in `benchmarks/data/<campaign>-reference-<key>.json`, keyed by the hash of the recipes, trainer and
settings. This benchmark:

1. **Reads the stored reference** for the campaign's key. None for this key (the recipes or settings changed, or it
   was never computed), or fewer than 10 seeds a recipe: it refuses to score (one line, exit 2) and says the command
   that computes or finishes it.
2. **Retrains one reference probe** (`--check RECIPE:SEED`, the first recipe's seed 0 by default) in a fresh ledger
   with the reference's threads, and checks it reproduces the stored bits per byte exactly (the same float); else
   it refuses to score (one line, exit 2): the trainer, its dependencies or the machine changed what a probe learns,
   and the reference must be computed again.
3. **Runs the probes' side**: the campaign's smaller budgets (15,000, 30,000 and 75,000 tokens, their own seeds from
   100, disjoint from the reference's: a probe shares its seed's initialisation and first data with the probe of the
   same seed at another budget, which would make small and large agree by construction), with `yieldgate probe`'s
   machinery (`probe.campaign.run_campaign`, 2 workers). Its wall time is the one held to 20 minutes; the
   reference's own time (the sum of its probes' training times) is printed beside it.

Then, for each smaller budget and number k of its seeds (compute = budget x k / the largest budget: all the probes
of a recipe against one run of the largest budget, the run they stand in for; training tokens only, every probe is
the same model), the mean over every k-subset of its seeds of the four figures, and the targets judged on the
**headline configuration**: the one at <= 10% of the compute with the most compute, then the most seeds (declared
before the run, not the best of several: 15,000 tokens x 2 seeds on `decide.yaml`):

- **All-pairs accuracy**: the share of the 21 recipe pairs the probes order as the reference's means do, printed
  beside DataDecide's anchors (Magnusson et al., 2025: about 80% at 2%, 82% at 8% and 85% at 24% of the target's
  compute). Always printed, whatever it is.
- **De-noised accuracy**: the accuracy against the true order, with the reference's own noise taken out. For each
  pair, q = Phi(d / (sigma sqrt(2 / n))) is the probability that n = 10 seeds order it the true way (d its
  difference of means, sigma the noise unit below; a plug-in estimate). A probe that orders a pair truly with
  probability p agrees with the reference with probability p q + (1 - p)(1 - q) = (1 - q) + p (2q - 1); solving
  over the pairs, p = sum(agreement - (1 - q)) / sum(2q - 1). A perfect probe scores 1 (its expected agreement is
  the mean q, the ceiling) and a coin 0.5, where accuracy / ceiling would give a coin 0.5 / ceiling > 0.5; and the
  pairs weigh by 2q - 1, what the reference can tell about them: a pair it orders at random says nothing about the
  probe. Clipped to [0, 1]. The plug-in q overstates the closest pairs' (their measured d is inflated by noise),
  which lowers this figure: it errs against the probes.
- **Accuracy on the pairs the reference separates by >= 3 noise units**, the noise unit sigma being the pooled seed
  standard deviation of the reference (sqrt of the mean over recipes of the variance of a recipe's bpb over its
  seeds): there the reference is all but certain (q > 0.9999 with 10 seeds), so a miss is the probes'.
- **Accuracy on the pairs decided while deciding at least half**: the probes decide the pairs beyond their own
  seeds' noise (`analysis.ranking.beyond_seed_noise`, one pooled noise unit: the benchmark's rule; a campaign's
  summary abstains on its ranking's ties), and, where that is fewer than half, also the pairs with the next largest
  differences of probe means until half are decided (ceil(21/2) = 11; with one seed, whose noise cannot be
  measured, the half with the largest differences): a team deciding on probes calls the pairs they separate most.

Targets: de-noised accuracy >= 0.85; >= 95% on the pairs >= 3 noise units apart; >= 90% on the decided pairs while
deciding >= half; the probes' side in <= 20 minutes on 2 CPU cores. Each says met or not met and why.
`tests/test_decide_reference.py` checks the scoring on exact small numbers, the keying and the refusals.

    .venv/bin/python benchmarks/bench_decide.py [--campaign examples/decide.yaml] [--workers 2] [--ledger PATH]
        [--check RECIPE:SEED] [--add-budget TOKENS:SEEDS ...] [--json]

`--ledger PATH` keeps the smaller budgets' probes (a re-run trains only what it lacks; the wall time then counts only
what it trained); `--add-budget 15000:10` explores more seeds or budgets beside the campaign's own (seeds from 100),
shown in the curve but not judged: the best of many configurations is partly luck.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decide_reference as ref  # noqa: E402 - the reference's command, beside this file

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"denoised": 0.85, "separated": 0.95, "separated_units": 3.0, "decided": 0.90, "decide_share": 0.5}
COMPUTE = 0.10
WALL_S = 20 * 60
ANCHORS = ((0.02, 0.80), (0.08, 0.82), (0.24, 0.85))
"""DataDecide (Magnusson et al., 2025): decision accuracy over all pairs against the share of the target's compute."""


class Refused(Exception):
    """The benchmark will not score: one line, exit 2."""


def reference_pairs(by_recipe: dict[str, dict[int, float]]) -> tuple[list[dict[str, Any]], float]:
    """Every recipe pair at the largest budget, `a` the better (lower bpb) by the mean over its seeds: its difference
    `diff` (> = 0), in noise units `units` (the pooled seed std, returned), and `q`, the probability that the
    reference's seeds order a pair that far apart the true way (module docstring)."""
    sigma = ref_noise(by_recipe)
    means = {r: float(np.mean(list(v.values()))) for r, v in by_recipe.items()}
    pairs = []
    for x, y in itertools.combinations(sorted(by_recipe), 2):
        a, b = (x, y) if means[x] <= means[y] else (y, x)
        diff = means[b] - means[a]
        spread = sigma * math.sqrt(1 / len(by_recipe[a]) + 1 / len(by_recipe[b]))
        pairs.append(
            {
                "a": a,
                "b": b,
                "diff": diff,
                "units": diff / sigma,
                "q": float(norm.cdf(diff / spread)) if spread else 1.0,
            }
        )
    return sorted(pairs, key=lambda p: p["units"]), sigma


def ref_noise(by_recipe: dict[str, dict[int, float]]) -> float:
    """The noise unit: the pooled seed standard deviation of the reference."""
    return math.sqrt(float(np.mean([np.var(list(v.values()), ddof=1) for v in by_recipe.values()])))


def denoised(agreement: list[float], q: list[float]) -> float | None:
    """The accuracy against the true order: sum(agreement - (1 - q)) / sum(2q - 1), clipped to [0, 1] (module
    docstring); None when the reference orders every pair at random."""
    weight = sum(2 * x - 1 for x in q)
    if weight <= 0:
        return None
    return min(1.0, max(0.0, sum(a - (1 - x) for a, x in zip(agreement, q, strict=True)) / weight))


def decided_half(means: dict[str, float], beyond: set[frozenset[str]] | None, pairs: int) -> set[frozenset[str]]:
    """The pairs the probes decide: those beyond their seeds' noise (`beyond`, None with one seed), and, where fewer
    than half, the next largest differences of means until ceil(pairs / 2) are decided."""
    decided = set(beyond or ())
    need = math.ceil(pairs / 2)
    by_gap = sorted(itertools.combinations(sorted(means), 2), key=lambda p: -abs(means[p[0]] - means[p[1]]))
    for a, b in by_gap:
        if len(decided) >= need:
            break
        decided.add(frozenset((a, b)))
    return decided


def agrees(means: dict[str, float], pair: dict[str, Any]) -> float:
    """1 when the probes' means order the pair as the reference does, 0 when the other way, 0.5 on a tie."""
    d = means[pair["b"]] - means[pair["a"]]
    return 1.0 if d > 0 else 0.0 if d < 0 else 0.5


def score(probes: dict[str, dict[int, float]], pairs: list[dict[str, Any]], seeds: tuple[int, ...]) -> dict[str, Any]:
    """One configuration, the probes of `seeds`: per pair its agreement with the reference, and the decided pairs
    with their accuracy."""
    by_recipe = {r: {s: v[s] for s in seeds} for r, v in probes.items()}
    means = {r: float(np.mean(list(v.values()))) for r, v in by_recipe.items()}
    agreement = [agrees(means, p) for p in pairs]
    decided = decided_half(means, ref_beyond(by_recipe), len(pairs))
    on = [a for a, p in zip(agreement, pairs, strict=True) if frozenset((p["a"], p["b"])) in decided]
    return {"agreement": agreement, "decided": len(on) / len(pairs), "accuracy_decided": float(np.mean(on))}


def ref_beyond(by_recipe: dict[str, dict[int, float]]) -> set[frozenset[str]] | None:
    from yieldgate.analysis.ranking import beyond_seed_noise

    return beyond_seed_noise(by_recipe)


def configuration(
    probes: dict[str, dict[int, float]], pairs: list[dict[str, Any]], k: int, budget: int, largest: int
) -> dict[str, Any]:
    """The four figures for `budget` with k seeds, each the mean over every k-subset of its seeds."""
    seeds = sorted(set.intersection(*(set(v) for v in probes.values())))
    runs = [score(probes, pairs, subset) for subset in itertools.combinations(seeds, k)]
    per_pair = [float(np.mean(col)) for col in zip(*(r["agreement"] for r in runs), strict=True)]
    far = [a for a, p in zip(per_pair, pairs, strict=True) if p["units"] >= TARGETS["separated_units"]]
    return {
        "budget": budget,
        "seeds": k,
        "subsets": len(runs),
        "compute_share": budget * k / largest,
        "accuracy": float(np.mean(per_pair)),
        "accuracy_min": float(min(np.mean(r["agreement"]) for r in runs)),
        "denoised": denoised(per_pair, [p["q"] for p in pairs]),
        "separated_pairs": len(far),
        "accuracy_separated": float(np.mean(far)) if far else None,
        "decided": float(np.mean([r["decided"] for r in runs])),
        "accuracy_decided": float(np.mean([r["accuracy_decided"] for r in runs])),
        "accuracy_decided_min": float(min(r["accuracy_decided"] for r in runs)),
        "per_pair": per_pair,
    }


def curve(
    smaller: dict[int, dict[str, dict[int, float]]], pairs: list[dict[str, Any]], largest: int
) -> list[dict[str, Any]]:
    """Every smaller budget with k = 1..all of its seeds, by compute."""
    rows = []
    for budget, probes in smaller.items():
        seeds = set.intersection(*(set(v) for v in probes.values()))
        rows += [configuration(probes, pairs, k, budget, largest) for k in range(1, len(seeds) + 1)]
    return sorted(rows, key=lambda r: (r["compute_share"], r["budget"]))


def headline(rows: list[dict[str, Any]], budgets: list[int] | None = None) -> dict[str, Any] | None:
    """The configuration the targets are judged on: at <= 10% of the compute, the most compute, then the most seeds;
    of the campaign's own `budgets` (those added with --add-budget are explored, not judged)."""
    cheap = [r for r in rows if r["compute_share"] <= COMPUTE + 1e-9 and (budgets is None or r["budget"] in budgets)]
    return max(cheap, key=lambda r: (r["compute_share"], r["seeds"]), default=None)


def anchor(share: float) -> float | None:
    """DataDecide's all-pairs accuracy at `share` of the compute, interpolated between its anchors; None outside
    them (2-24%)."""
    if not ANCHORS[0][0] <= share <= ANCHORS[-1][0]:
        return None
    return float(np.interp(share, [s for s, _ in ANCHORS], [a for _, a in ANCHORS]))


def verdicts(row: dict[str, Any], pairs: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """Each target on the headline configuration: (name, met, why)."""
    out = []
    d = row["denoised"]
    out.append(
        (
            "de-noised accuracy",
            d is not None and d >= TARGETS["denoised"],
            f"{'-' if d is None else f'{d:.3f}'} (target >= {TARGETS['denoised']:.2f}; raw {row['accuracy']:.1%})"
            + ("" if d is None or d >= TARGETS["denoised"] else f": {_misses(row, pairs, 0.0)}"),
        )
    )
    sep = row["accuracy_separated"]
    n = row["separated_pairs"]
    out.append(
        (
            f"pairs >= {TARGETS['separated_units']:.0f} noise units apart",
            sep is not None and sep >= TARGETS["separated"],
            "no pair that far apart"
            if sep is None
            else f"{sep:.1%} of {n} pairs (target >= 95%)"
            + ("" if sep >= TARGETS["separated"] else f": {_misses(row, pairs, TARGETS['separated_units'])}"),
        )
    )
    ok = row["accuracy_decided"] >= TARGETS["decided"] and row["decided"] >= TARGETS["decide_share"]
    out.append(
        (
            "decided pairs, deciding >= half",
            ok,
            f"{row['accuracy_decided']:.1%} of the pairs decided, deciding {row['decided']:.1%} (target >= 90%, "
            f"deciding >= half; worst seed subset {row['accuracy_decided_min']:.1%})",
        )
    )
    return out


def _misses(row: dict[str, Any], pairs: list[dict[str, Any]], units: float) -> str:
    """The pairs (at least `units` apart at the reference) the probes order wrong most often."""
    wrong = sorted(
        ((1 - a, p) for a, p in zip(row["per_pair"], pairs, strict=True) if p["units"] >= units and a < 1),
        key=lambda x: -x[0],
    )
    return "misordered most: " + ", ".join(
        f"{p['a']} < {p['b']} ({p['units']:.1f} units) wrong in {w:.0%} of seed subsets" for w, p in wrong[:3]
    )


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
    """Retrain one reference probe in a fresh ledger, with the reference's threads; Refused unless it gives the
    stored value exactly."""
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
    check_value(recipe, seed, value, stored["bpb"])
    return {"recipe": recipe, "seed": seed, "bpb": value, "seconds": time.perf_counter() - start}


def check_value(recipe: str, seed: int, value: float, stored: float) -> None:
    """Refused unless the retrained value is the stored one, to the bit."""
    if value != stored:
        raise Refused(
            f"the reference probe {recipe} seed {seed} retrains to {value!r} bpb, the stored reference holds "
            f"{stored!r}: the trainer or its environment changed; recompute the reference "
            "(python benchmarks/decide_reference.py) before scoring"
        )


def probes_side(campaign: Any, ledger: str, workers: int) -> tuple[dict[int, dict[str, dict[int, float]]], Any]:
    """Train the campaign's smaller budgets (not the largest: the reference is stored) and score them."""
    from yieldgate.analysis.campaign import BPB, campaign_scores
    from yieldgate.ledger import Ledger
    from yieldgate.probe.campaign import quiet_mfu_warnings, run_campaign

    largest = max(campaign.budgets)
    small = campaign.model_copy(update={"budgets": [b for b in campaign.budgets if b != largest]})
    with quiet_mfu_warnings():
        done = run_campaign(small, ledger, workers=workers)
    with Ledger(ledger) as led:
        scores = campaign_scores(led, small.name)
    # Only this campaign's budgets and seeds: a kept ledger may hold other probes of a campaign of the same name.
    bpb = {
        b: {r: {s: v for s, v in by_seed.items() if s in small.seeds_of(b)} for r, by_seed in scores[b][BPB].items()}
        for b in small.budgets
    }
    return bpb, done


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
        help="also probe TOKENS per probe with SEEDS seeds (100, 101, ...), shown in the curve but not judged "
        "(repeatable)",
    )
    args = parser.parse_args()
    logging.getLogger("yieldgate").setLevel(logging.ERROR)
    from yieldgate.probe.campaign import load_campaign

    campaign = load_campaign(args.campaign)
    try:
        reference = stored_reference(campaign, "/tmp/decide-reference.db", path=args.reference)
        checked = reproduce(campaign, reference, parse_check(args.check, campaign))
    except Refused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-decide-") as tmp:
        explored = with_budgets(campaign, args.add_budget)
        smaller, done = probes_side(explored, args.ledger or str(Path(tmp) / "decide.db"), args.workers)
    wall = time.perf_counter() - start
    result = report(campaign, reference, checked, smaller, done, wall, args.workers)
    if args.json:
        print(json.dumps(result))
    else:
        show(campaign, reference, smaller, result)


def report(
    campaign: Any,
    reference: dict[str, Any],
    checked: dict[str, Any],
    smaller: dict[int, dict[str, dict[int, float]]],
    done: Any,
    wall: float,
    workers: int,
) -> dict[str, Any]:
    """Everything the benchmark found, as printed (and as --json writes it)."""
    largest = int(reference["tokens"])
    by_recipe = {r: {int(s): p["bpb"] for s, p in v.items()} for r, v in reference["probes"].items()}
    pairs, sigma = reference_pairs(by_recipe)
    rows = curve(smaller, pairs, largest)
    top = headline(rows, campaign.budgets)
    checks = verdicts(top, pairs) if top else [("compute", False, "no configuration at <= 10% of the compute")]
    trained_all = len(done.finished) == done.planned
    checks.append(
        (
            "probes' wall time",
            wall <= WALL_S and trained_all,
            f"{wall / 60:.1f} min on {workers} workers, training {len(done.finished)} of the {done.planned} probes "
            "(target <= 20 min, training all)",
        )
    )
    return {
        "campaign": campaign.name,
        "reference": {
            "key": reference["key"],
            "tokens": largest,
            "seeds": min(len(v) for v in by_recipe.values()),
            "noise_unit_bpb": sigma,
            "seconds": ref.reference_seconds(reference),
            "ceiling": float(np.mean([p["q"] for p in pairs])),
            "check": checked,
        },
        "pairs": pairs,
        "separated_pairs": sum(p["units"] >= TARGETS["separated_units"] for p in pairs),
        "curve": [{k: v for k, v in r.items() if k != "per_pair"} for r in rows],
        "headline": None if top is None else {k: v for k, v in top.items() if k != "per_pair"},
        "anchors": {f"{s:.0%}": a for s, a in ANCHORS},
        "probes": {"planned": done.planned, "trained": len(done.finished), "skipped": len(done.skipped)},
        "wall_s": wall,
        "checks": {name: {"met": ok, "what": what} for name, ok, what in checks},
        "pass": all(ok for _, ok, _ in checks),
    }


def show(
    campaign: Any,
    reference: dict[str, Any],
    smaller: dict[int, dict[str, dict[int, float]]],
    result: dict[str, Any],
) -> None:
    console = Console(width=120)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    r = result["reference"]
    largest = r["tokens"]
    means = {p: float(np.mean([x["bpb"] for x in v.values()])) for p, v in reference["probes"].items()}
    table = Table(title=f"{campaign.name}: the stored reference, {largest:,} tokens x {r['seeds']} seeds (bpb)")
    for column in ("recipe", "bpb", *(f"{b:,} tok" for b in sorted(smaller))):
        table.add_column(column, justify="right")
    for recipe in sorted(means, key=means.__getitem__):
        table.add_row(
            recipe,
            f"{means[recipe]:.4f}",
            *(f"{np.mean(list(smaller[b][recipe].values())):.4f}" for b in sorted(smaller)),
        )
    console.print(table)
    table = Table(title=f"Each pair at {largest:,} tokens (noise unit: pooled seed std {r['noise_unit_bpb']:.4f} bpb)")
    for column in ("better", "worse", "diff (bpb)", "noise units", "P(10 seeds order it truly)"):
        table.add_column(column, justify="right")
    for p in result["pairs"]:
        table.add_row(p["a"], p["b"], f"{p['diff']:+.4f}", f"{p['units']:.2f}", f"{p['q']:.3f}")
    console.print(table)
    table = Table(
        title="Against compute (share of one largest-budget run; mean over seed subsets; * the headline: most "
        "compute at <= 10%)"
    )
    for column in (
        "compute",
        "budget",
        "seeds",
        "all pairs",
        "DataDecide",
        "de-noised",
        ">= 3 units",
        "decided",
        "acc. decided",
    ):
        table.add_column(column, justify="right")
    top = result["headline"]
    for row in result["curve"]:
        star = "*" if top and (row["budget"], row["seeds"]) == (top["budget"], top["seeds"]) else ""
        table.add_row(
            f"{row['compute_share']:.1%}{star}",
            f"{row['budget']:,}",
            str(row["seeds"]),
            f"{row['accuracy']:.1%}",
            "-" if (a := anchor(row["compute_share"])) is None else f"~{a:.0%}",
            "-" if row["denoised"] is None else f"{row['denoised']:.3f}",
            "-" if row["accuracy_separated"] is None else f"{row['accuracy_separated']:.1%}",
            f"{row['decided']:.1%}",
            f"{row['accuracy_decided']:.1%}",
        )
    console.print(table)
    c = r["check"]
    say(
        f"reference: {len(means)} recipes x {r['seeds']} seeds at {largest:,} tokens, key {r['key']}, its own time "
        f"{r['seconds'] / 60:.1f} min of probe training; a perfect probe would agree with it on {r['ceiling']:.1%} of "
        f"the pairs; {result['separated_pairs']} of {len(result['pairs'])} pairs >= 3 noise units apart"
    )
    say(f"reproduced: {c['recipe']} seed {c['seed']} retrained to {c['bpb']!r} bpb, as stored ({c['seconds']:.0f} s)")
    if top:
        say(
            f"headline, {top['budget']:,} tokens x {top['seeds']} seeds ({top['compute_share']:.1%} of the compute): "
            f"{top['accuracy']:.1%} of all pairs (worst seed subset {top['accuracy_min']:.1%}); DataDecide: ~80% at "
            "2%, 82% at 8%, 85% at 24% of the compute"
        )
    p = result["probes"]
    say(f"probes' side: {p['planned']} probes planned, {p['trained']} trained, {p['skipped']} already in the ledger")
    for name, check in result["checks"].items():
        say(f"{'MET    ' if check['met'] else 'NOT MET'}  {name}: {check['what']}")


if __name__ == "__main__":
    main()
