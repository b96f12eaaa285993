"""The evidence the stage gate reads: a target's runs and budgets, their workflow, open faults, the forecast
marginal yield pooled over seeds, cost, regressions, and the new-hardware exception's two conditions.

Plain functions over the ledger; `gate.py` turns their results into a decision.

The forecast (DESIGN.md): with final losses at three or more budgets, one power law over every seed's final loss at
each budget (`fit.forecast`, bootstrap over the points); with fewer, each seed's own stable-phase fit, pooled over
seeds (`stats.pooled_mean`: mean ± t·se over the seeds' estimates, with se² the larger of the between-seed variance
and the seeds' mean bootstrap variance, over n). A power law is monotone and cannot see a loss that has turned up (a
source repeated for many epochs), so each bound is also capped by the recently measured yield (the slope over the
last half of the stable phase, or between the two largest budgets): on a curve of diminishing returns the next
tokens yield no more than the last ones did.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import re
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis import stats
from yieldgate.analysis.compare import RunData, compare
from yieldgate.analysis.fit import BILLION, Forecast, forecast
from yieldgate.analysis.listing import match_runs
from yieldgate.analysis.load import load_run, stable_points_of
from yieldgate.analysis.records import devices_in
from yieldgate.errors import InputError, RunNotFound
from yieldgate.gate.policy import NewHardwareException, Policy
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest, diff
from yieldgate.names import split_eval_key
from yieldgate.util.hashing import content_hash

__all__ = [
    "target_runs",
    "budgets",
    "workflow",
    "workflow_digest",
    "manifest_fields",
    "open_faults",
    "forecast_yield",
    "tokens_per_s",
    "cost_per_btok",
    "stage_price",
    "throughput",
    "hourly_price",
    "in_tokens",
    "regressions",
    "hardware_exception",
    "mixture_citation",
    "WORKFLOW",
]

RESOLUTION_FIELDS = re.compile(
    r"^(seed|name|data\.accepted_tokens|data\.sources\[[^]]+\]\.(unique|accepted)_tokens|"
    r"data\.tokenizer\.(content_hash|bytes_per_token))$"
)
"""Manifest fields that say which run it is or how a recipe resolved on a seed's split, not what was asked."""
WORKFLOW = ("data", "model", "optimisation")
"""The manifest sections that make up the workflow locked past exploration."""
HARDWARE = ("hardware", "library_versions")
"""The sections the new-hardware exception allows to differ from the reference."""
USABLE = ("finished", "imported", "held")
"""Run statuses whose evidence the gate reads; running, failed and killed runs are left out, and listed. A run its
governor held (`gate/live.py`) stopped cleanly where its policy said: its evidence is whole."""
MIXTURE_SHOWN = 0.01
"""A proposed mixture's sources below this weight are summed into `others` in the gate's one line."""
BOOTS = 200
"""Bootstrap refits per forecast (fit.forecast's default is 400): the gate fits every seed, and the 10% and 90%
quantiles of 200 refits are steady to about two percentiles."""


def target_runs(
    ledger: Ledger, target: str, listing: pd.DataFrame | None = None, usable: tuple[str, ...] = USABLE
) -> tuple[list[str], dict[str, str]]:
    """The target's runs (a run name or glob; a campaign recipe `{campaign}/{recipe}` also means its runs
    `{campaign}/{recipe}/*`), and those left out because they did not finish cleanly (run -> status): a run still
    going or cut short has not shown what its budget buys. `listing`: `ledger.runs()`, where read; `usable`: the
    statuses read (a run read as it stood at a step may be running still: `TargetEvidence.read`)."""
    listing = ledger.runs() if listing is None else listing
    try:
        names = match_runs(ledger, target)
    except RunNotFound:
        if any(c in target for c in "*?["):
            raise
        names = [n for n in listing["name"] if fnmatch.fnmatchcase(n, f"{target}/*")]
        if not names:
            raise
    status = listing.set_index("name")["status"]
    left_out = {n: str(status[n]) for n in names if status[n] not in usable}
    if len(left_out) == len(names):
        raise InputError(f"no finished run in {target!r}: " + ", ".join(f"{n} is {s}" for n, s in left_out.items()))
    return [n for n in names if n not in left_out], left_out


def budgets(tokens: dict[str, float], metas: dict[str, dict[str, Any]]) -> list[tuple[float, list[str]]]:
    """Runs grouped by budget (run meta `probe.tokens`, else the run's final tokens: `tokens`, as the runs listing
    gives them), smallest first; budgets within 2% of each other are one (a budget rounded up to whole steps)."""
    budget = {}
    for run in metas:
        probe = metas[run].get("probe") or {}
        value = probe.get("tokens") if isinstance(probe, dict) else None
        budget[run] = float(value if value is not None else tokens.get(run, math.nan))
    unknown = [r for r, b in budget.items() if not b > 0]
    if unknown:
        raise InputError(f"run {unknown[0]!r} has recorded no tokens: the gate needs the tokens each run reached")
    groups: list[tuple[float, list[str]]] = []
    for run in sorted(metas, key=lambda r: budget[r]):
        if groups and budget[run] <= groups[-1][0] * 1.02:
            groups[-1][1].append(run)
        else:
            groups.append((budget[run], [run]))
    return groups


def workflow(manifest: Manifest | None) -> dict[str, Any]:
    """The workflow of a run: its manifest's data, model and optimisation, less the resolution fields."""
    if manifest is None:
        return {}
    dump = manifest.model_dump(mode="json")
    out = {k: dump.get(k) for k in WORKFLOW}
    data = out.get("data") or {}
    data.pop("accepted_tokens", None)
    for s in data.get("sources", []):
        s.pop("unique_tokens", None)
        s.pop("accepted_tokens", None)
    for key in ("content_hash", "bytes_per_token"):
        (data.get("tokenizer") or {}).pop(key, None)
    return out


def workflow_digest(manifest: Manifest | None) -> str | None:
    """sha256 of `workflow(manifest)`; None for a run without a manifest."""
    if manifest is None:
        return None
    return content_hash(workflow(manifest), spaced=True)


def manifest_fields(a: Manifest, b: Manifest, sections: tuple[str, ...] | None = None) -> list[str]:
    """Differing manifest fields, less the resolution fields; only `sections` when given."""
    out = [d.field for d in diff(a, b) if not RESOLUTION_FIELDS.match(d.field)]
    return [f for f in out if sections is None or f.split(".")[0].split("[")[0] in sections]


def open_faults(
    findings: list[dict[str, Any]], policy: Policy, causes: list[str] | None = None
) -> list[dict[str, Any]]:
    """The findings (`findings.target_findings`) whose cause the policy blocks on (or one of `causes`), above its
    confidence: each with its run, cause, confidence, steps, advice and the stored event (None: found by the gate)."""
    req = policy.requirements
    wanted = req.blocking_causes if causes is None else causes
    return [
        {
            "event": f.get("event"),
            "run": f["run"],
            "cause": f["cause"],
            "detector": f.get("detector"),
            "confidence": f.get("confidence"),
            "steps": [f.get("start_step"), f.get("end_step")],
            "advice": f.get("advice", ""),
        }
        for f in findings
        if f["cause"] in wanted
        and (1.0 if f.get("confidence") is None else float(f["confidence"])) > req.diagnosis_confidence
    ]


def _recent_yield(tokens: np.ndarray, losses: np.ndarray, level: float) -> tuple[float, float, float]:
    """Yield per billion tokens measured by a straight line through the points, with the slope's t-interval."""
    iv = stats.slope_interval(tokens, losses, level)
    return -iv.estimate * BILLION, -iv.high * BILLION, -iv.low * BILLION


def _pool(estimates: list[tuple[float, float, float]], level: float) -> tuple[float, float, float]:
    """Mean and interval over seeds of (point, low, high) estimates (`stats.pooled_mean`)."""
    iv = stats.pooled_mean(estimates, level)
    return iv.estimate, iv.low, iv.high


@functools.lru_cache(maxsize=256)
def _forecast_points(
    tokens: tuple[float, ...], losses: tuple[float, ...], at: float, next_tokens: float, level: float
) -> Forecast:
    """`fit.forecast` of these points; pure and deterministic, so kept by content: gating again after a diagnosis
    is resolved, or under another policy, does not refit the same evaluations."""
    # Several seeds share each budget's token count in a fit over final losses: the difference-based eval noise
    # is undefined there (0/0). The gate reads the fit's interval, which does not use it.
    with np.errstate(invalid="ignore", divide="ignore"):
        return forecast(
            np.array(tokens), np.array(losses), next_tokens=next_tokens - at, at_tokens=at, level=level, boots=BOOTS
        )


def _finite_points(data: RunData, metric: str) -> tuple[Any, np.ndarray, str | None]:
    """`stable_points_of`, refused when an evaluation is NaN or infinite: a diverged run has no curve to forecast from
    (its diagnosis, a damaged update, says why), and one NaN made every interval NaN."""
    run = data.name
    points, mask, note = stable_points_of(data, metric)
    if points.empty:
        raise InputError(f"run {run!r} has no evaluation of {metric}")
    bad = points[~np.isfinite(points["value"].to_numpy(dtype=float))]
    if len(bad):
        raise InputError(
            f"run {run!r} evaluated {metric} to NaN or infinity at {len(bad)} of {len(points)} evaluations (first at "
            f"step {int(bad['step'].iloc[0]):,}): a diverged run leaves no curve to forecast"
        )
    return points, mask, note


def _final_point(data: RunData, metric: str) -> tuple[float, float]:
    points, _, _ = _finite_points(data, metric)
    return float(points["tokens"].iloc[-1]), float(points["value"].iloc[-1])


def _gap_yield(
    before: list[tuple[float, float]], after: list[tuple[float, float]], level: float
) -> tuple[float, float, float]:
    """Yield per billion tokens measured between two budgets' final (tokens, loss) points, mean over seeds, with
    the t-interval of the difference of the means (`stats.difference`; unbounded with one seed at each)."""
    la, lb = np.array([p[1] for p in before]), np.array([p[1] for p in after])
    span = float(np.mean([p[0] for p in after]) - np.mean([p[0] for p in before])) / BILLION
    iv = stats.difference(lb, la, level)  # la - lb: the loss the larger budget gained
    gain = float(la.mean() - lb.mean())
    if iv is None:
        return gain / span, -math.inf, math.inf
    return gain / span, iv.low / span, iv.high / span


def forecast_yield(
    data: dict[str, RunData], groups: list[tuple[float, list[str]]], next_tokens: float, level: float, metric: str
) -> dict[str, Any]:
    """The marginal yield per billion tokens forecast from the evidence's tokens to `next_tokens` (see the
    module docstring), with the fit's and the measured yield's own estimates beside it."""
    finals = {r: _final_point(data[r], metric) for _, runs in groups for r in runs}  # run -> (tokens, loss)
    last = groups[-1][1]
    at = float(np.mean([finals[r][0] for r in last]))
    per_seed: list[dict[str, Any]] = []
    if len(groups) >= 3:
        x, y = zip(*finals.values(), strict=True)
        f = _forecast_points(x, y, at, next_tokens, level)
        fitted = (f.yield_per_btok, *f.yield_interval)
        recent = _gap_yield([finals[r] for r in groups[-2][1]], [finals[r] for r in last], level)
        method = f"one power law over the final losses of {len(finals)} runs at {len(groups)} budgets"
        notes = list(f.notes)
    else:
        fits, recents, notes = [], [], []
        for run in last:
            points, mask, note = _finite_points(data[run], metric)
            used = points[mask] if mask.sum() >= 3 else points
            f = _forecast_points(
                tuple(used["tokens"].tolist()), tuple(used["value"].tolist()), finals[run][0], next_tokens, level
            )
            tail = used.iloc[len(used) // 2 :] if len(used) >= 6 else used.iloc[-3:]
            fits.append((f.yield_per_btok, *f.yield_interval))
            recents.append(_recent_yield(tail["tokens"].to_numpy(), tail["value"].to_numpy(), level))
            per_seed.append(
                {
                    "run": run,
                    "yield_per_btok": fits[-1][0],
                    "interval": list(fits[-1][1:]),
                    "recent_yield_per_btok": recents[-1][0],
                    "recent_interval": list(recents[-1][1:]),
                    "fit": f.fit.to_dict(),
                    "stable_phase": note,
                }
            )
            notes += [f"{run}: {n}" for n in f.notes]
        fitted, recent = _pool(fits, level), _pool(recents, level)
        method = (
            f"each seed's stable-phase fit, pooled over {len(last)} seed{'s' * (len(last) != 1)} (mean, t-interval)"
        )
    # The measured yield caps the fit's optimism: where its upper bound is the lower, its estimate and interval
    # decide, whole. One interval, named, never bounds taken from two (the minimum of each bound mixed a fit's
    # bootstrap interval with a t-interval of measured slopes, an interval of nothing).
    capped = recent[2] < fitted[2]
    point, lower, upper = recent if capped else fitted
    if len(groups) >= 3:
        named = (
            f"the {level:.0%} t-interval of the yield measured between the last two budgets"
            if capped
            else f"the fitted forecast's {level:.0%} bootstrap interval"
        )
    else:
        seeds = "one seed's" if len(last) == 1 else f"the {level:.0%} t-interval over {len(last)} seeds of their"
        named = (
            f"{seeds} recent measured yield{'s' * (len(last) > 1)}"
            if capped
            else f"{seeds} fitted forecast{'s' * (len(last) > 1)}"
        )
        if len(last) == 1:
            named += f", {level:.0%} interval"
    return {
        "method": method,
        "metric": metric,
        "at_tokens": at,
        "next_tokens": float(next_tokens),
        "level": level,
        "yield_per_btok": point,
        "interval": [lower, upper],
        "interval_of": named,
        "forecast": {"yield_per_btok": fitted[0], "interval": list(fitted[1:])},
        "recent": {"yield_per_btok": recent[0], "interval": list(recent[1:])},
        "capped_by_recent": capped,
        "per_seed": per_seed,
        "notes": notes,
    }


def tokens_per_s(data: RunData) -> float | None:
    """A run's tokens over its wall-clock time, end to end (evaluations included); None without wall time."""
    if "tokens" not in data.steps or "wall_s" not in data.steps:
        return None
    steps = data.steps[["tokens", "wall_s"]].dropna()
    if steps.empty or not steps["wall_s"].iloc[-1] > 0:
        return None
    return float(steps["tokens"].iloc[-1] / steps["wall_s"].iloc[-1])


def cost_per_btok(runs: list[RunData], manifests: dict[str, Manifest | None]) -> tuple[float | None, str]:
    """USD per billion tokens on the target's hardware at its measured tokens/s, and how (or why unknown)."""
    hourly = [
        m.hardware.price_per_device_hour * m.hardware.device_count
        for m in manifests.values()
        if m and m.hardware and m.hardware.price_per_device_hour is not None
    ]
    if not manifests or len(hourly) < len(manifests):
        return None, "no price: set hardware.price_per_device_hour in the manifests"
    rates = [r for r in (tokens_per_s(run) for run in runs) if r is not None]
    if len(rates) < len(runs):
        return None, "no wall-clock time recorded: tokens/s unknown"
    tps = float(np.mean(rates))
    usd = float(np.mean(hourly))
    return BILLION / tps / 3600 * usd, f"{tps:,.0f} tokens/s at ${usd:g} per hour"


def throughput(runs: list[RunData], metas: dict[str, dict[str, Any]]) -> tuple[float | None, int]:
    """The target's measured tokens/s (`tokens_per_s` of each run, mean over runs; None where a run has no wall
    time) and its device count (the most any run names, else 1)."""
    rates = [r for r in (tokens_per_s(run) for run in runs) if r is not None]
    devices = [devices_in(metas.get(r.name, {}), r.manifest) for r in runs]
    count = max((d for d in devices if d is not None), default=1)
    return (float(np.mean(rates)) if len(rates) == len(runs) and rates else None), count


def hourly_price(runs: list[RunData], policy: Policy) -> float | None:
    """Dollars per device-hour: the policy's price, else the manifests' (mean), else None."""
    prices = policy.prices
    if prices and prices.per_device_hour:
        return prices.per_device_hour
    listed = [r.manifest.hardware.price_per_device_hour for r in runs if r.manifest and r.manifest.hardware]
    if listed and all(p is not None for p in listed):
        return float(np.mean([p for p in listed if p is not None]))
    return None


def in_tokens(policy: Policy, runs: list[RunData], metas: dict[str, dict[str, Any]]) -> Policy:
    """`policy` with its stages in tokens (`Policy.in_tokens`), a budget in device-hours or dollars read at the
    runs' measured throughput and price."""
    if policy.unit == "tokens":
        return policy
    tps, count = throughput(runs, metas)
    return policy.in_tokens(None if tps is None else tps * 3600 / count, hourly_price(runs, policy))


def stage_price(runs: list[RunData], metas: dict[str, dict[str, Any]], tokens: float, policy: Policy) -> dict[str, Any]:
    """A stage's `tokens` priced at the target's measured throughput (tokens over wall-clock time, per run, mean
    over runs): device-hours, dollars (the policy's price per device-hour, else the manifests'), and kWh from the
    energy the runs recorded per token (`energy_j`), with dollars for it where the policy prices a kWh. A figure
    that cannot be had is None, and `missing` says why."""
    missing: dict[str, str] = {}
    tps, count = throughput(runs, metas)
    hours = None if tps is None else tokens / tps / 3600 * count
    if tps is None:
        missing["device_hours"] = "no wall-clock time recorded: tokens/s unknown"
    prices = policy.prices
    hourly = hourly_price(runs, policy)
    usd = None if hours is None or hourly is None else hours * hourly
    if hourly is None:
        missing["usd"] = "no price: set prices.per_device_hour in the policy or hardware.price_per_device_hour"
    per_token = [_joules_per_token(run) for run in runs]
    kwh = None
    if all(j is not None for j in per_token) and per_token:
        kwh = tokens * float(np.mean([j for j in per_token if j is not None])) / 3.6e6
    else:
        missing["kwh"] = "no energy recorded (energy_j) by the runs"
    energy_usd = kwh * prices.per_kwh if kwh is not None and prices and prices.per_kwh else None
    return {
        "tokens": tokens,
        "tokens_per_s": tps,
        "devices": count,
        "device_hours": hours,
        "usd": usd,
        "usd_per_device_hour": hourly,
        "kwh": kwh,
        "energy_usd": energy_usd,
        "missing": missing,
    }


def _joules_per_token(data: RunData) -> float | None:
    if "tokens" not in data.steps or "energy_j" not in data.steps:
        return None
    steps = data.steps[["tokens", "energy_j"]].dropna()
    if steps.empty or not steps["tokens"].iloc[-1] > 0:
        return None
    first = steps.iloc[0]
    spent, tokens = steps["energy_j"].iloc[-1] - first["energy_j"], steps["tokens"].iloc[-1] - first["tokens"]
    return float(spent / tokens) if tokens > 0 and spent >= 0 else None


def regressions(runs: list[RunData]) -> dict[str, float]:
    """Per hard-slice or capability key, the mean over runs of how far the final value is worse than the run's best."""
    worse: dict[str, list[float]] = {}
    for run in runs:
        evals = run.evals
        evals = evals[(evals["task"] != "val") & ~evals["task"].str.startswith("val/")]
        for task, by_task in evals.groupby("task"):
            metrics = ["bpb"] if "bpb" in set(by_task["metric"]) else sorted(set(by_task["metric"]))
            for metric in metrics:
                series = by_task[by_task["metric"] == metric].sort_values("step")
                values = series["value"].to_numpy(dtype=float)
                if len(values) < 2:
                    continue
                higher = bool(series["higher_is_better"].iloc[-1])
                best = np.nanmax(values) if higher else np.nanmin(values)
                worse.setdefault(f"{task}/{metric}", []).append(
                    float(best - values[-1] if higher else values[-1] - best)
                )
    return {k: float(np.mean(v)) for k, v in sorted(worse.items())}


def hardware_exception(
    ledger: Ledger,
    runs: list[RunData],
    manifests: dict[str, Manifest | None],
    exc: NewHardwareException,
    metric: str,
    level: float = 0.8,
) -> dict[str, Any]:
    """Whether the new-hardware exception holds, and if not why: the manifests differ from the reference's only in
    hardware and library versions, and the validation loss at equal tokens (`compare.compare`'s aligned points)
    stays within noise of the reference's at every point: within the half-width of `compare`'s interval of the
    difference (`stats.difference`, Welch t; a single target seed borrows the reference's spread and degrees of
    freedom) at the gate's `level`, each point on its own (not family-wise: here "within noise" is the claim acted
    on, and widening for the family would hide a departure), or `exc.loss_tolerance`, whichever is wider; with one
    seed a side, the tolerance alone. Points identical by construction (the untrained model) are left out.
    With `applies`, the tokens/s of both sides (tokens over wall-clock time, end to end)."""
    reference = match_runs(ledger, exc.reference)
    out: dict[str, Any] = {"reference": reference, "applies": False}
    if {r.name for r in runs} & set(reference):
        out["reason"] = "the target is its own reference"
        return out
    ref_manifest = ledger.manifest(reference[0])
    known = [m for m in manifests.values() if m is not None]
    if ref_manifest is None or len(known) < len(manifests):
        out["reason"] = "a manifest is missing, so the diff against the reference is unknown"
        return out
    other = sorted({f for m in known for f in manifest_fields(ref_manifest, m) if f.split(".")[0] not in HARDWARE})
    out["differs"] = other
    if other:
        out["reason"] = f"the manifest differs from the reference beyond hardware: {', '.join(other[:4])}"
        return out
    task, name = split_eval_key(metric)
    references = [load_run(ledger, r) for r in reference]
    points = compare(
        references,
        runs,
        at="tokens",
        task=task,
        metric=name,
        level=level,
        family_wise=False,
    ).points
    worst = None
    for p in [p for p in points if not p["identical_by_construction"]]:
        half = 0.0 if p["interval"] is None else (p["interval"][1] - p["interval"][0]) / 2
        p["allowed"] = max(exc.loss_tolerance, half)
        if worst is None or abs(p["diff"]) - p["allowed"] > abs(worst["diff"]) - worst["allowed"]:
            worst = p
    out["curve"] = {
        "points": points,
        "level": points[0]["level"] if points else None,
        "interval_kind": points[0]["interval_kind"] if points else None,
        "loss_tolerance": exc.loss_tolerance,
    }
    if worst is None or abs(worst["diff"]) > worst["allowed"]:
        out["reason"] = (
            "no aligned points to compare the loss curves at"
            if worst is None
            else f"the loss curve departs from the reference by {worst['diff']:+.4f} at "
            f"{worst['tokens']:,.0f} tokens (allowed ±{worst['allowed']:.4f})"
        )
        return out
    rates = [[rate for rate in (tokens_per_s(r) for r in group) if rate is not None] for group in (references, runs)]
    if len(rates[0]) < len(reference) or len(rates[1]) < len(runs):
        out["reason"] = "no wall-clock time recorded: tokens/s unknown"
        return out
    ref_tps, tps = (float(np.mean(group)) for group in rates)
    out.update(applies=True, tokens_per_s=tps, reference_tokens_per_s=ref_tps, throughput_ratio=tps / ref_tps)
    return out


def mixture_citation(
    ledger: Ledger, metas: dict[str, dict[str, Any]], metric: str
) -> tuple[dict[str, Any] | None, str | None]:
    """(evidence, one line) of the mixture regression (`analysis.mixture`) of the imported results campaign the
    target's runs come from: its proposed mixture, the predicted `metric` there and its interval, and the fit's
    cross-validated Spearman rho. (None, None) where the runs are not of one results campaign, it carries no mixture
    weights or does not measure `metric`; the evidence says why there is no regression where it has too few
    mixtures (the regression decides: `mixture.fit_mixture`)."""
    from yieldgate.analysis.mixture import mixture_report
    from yieldgate.analysis.results import KIND, is_results, mixtures_of, result_points

    names = {(meta.get(KIND) or {}).get("campaign") for meta in metas.values()}
    name = next(iter(names)) if len(names) == 1 else None
    if not isinstance(name, str):
        return None, None
    record = ledger.campaign(name)
    spec = record["spec"]
    mixtures = mixtures_of(spec)
    if not is_results(record) or not mixtures or metric not in spec.get("metrics", {}):
        return None, None
    points = result_points(ledger, name)
    level = float(spec.get("level", 0.9))
    higher = bool(spec["metrics"][metric])
    report = mixture_report(points[points["metric"] == metric], mixtures, higher_is_better=higher, level=level)
    if not report["available"]:
        return {"campaign": name, "metric": metric, "available": False, "reason": report["reason"]}, (
            f"campaign {name}: no mixture regression ({report['reason']})"
        )
    p = report["proposal"]
    cited = {
        "campaign": name,
        "metric": metric,
        "available": True,
        "model": report["fit"]["model"],
        "runs": report["runs"],
        "params": report["params"],
        "cv_rho": report["cv_rho"],
        "mixture": p["mixture"],
        "predicted": p["predicted"],
        "interval": p["interval"],
        "level": p["level"],
    }
    lo, hi = p["interval"]
    line = (
        f"campaign {name}: {cited['model']} fit over {cited['runs']} mixtures at N = {cited['params']:,} "
        f"(cross-validated rho {cited['cv_rho']:.3f}) proposes {_shown(p['mixture'])}, {metric} predicted "
        f"{p['predicted']:.4g} [{lo:.4g}, {hi:.4g}] at {p['level']:.0%} (at N = {cited['params']:,}: it ranks "
        "mixtures, it does not forecast the large run)"
    )
    return cited, line


def _shown(mixture: dict[str, float]) -> str:
    shown = sorted(((w, s) for s, w in mixture.items() if w >= MIXTURE_SHOWN), reverse=True)
    rest = sum(w for w in mixture.values() if w < MIXTURE_SHOWN)
    return ", ".join([f"{s} {w:.2f}" for w, s in shown] + ([f"others {rest:.2f}"] if rest > 0 else []))
