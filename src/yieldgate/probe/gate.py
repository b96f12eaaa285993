"""The stage gate: does the evidence in the ledger earn the target the next stage of compute?

`gate(ledger, target, policy)` reads the target's runs (a run, a seed group glob, or a campaign recipe
`{campaign}/{recipe}/*` whose probes span several budgets) and returns a `Decision`:

- approve: every requirement of the policy is met;
- hold: the interval is too wide, a non-data fault is open, or another requirement is unmet; the decision
  says what to run next;
- reject: even the optimistic bound of the forecast marginal yield is below the threshold: the data is
  exhausted for this purpose.

Checks, in the order that decides: an open diagnosis of a cause that is not the data's fault (schedule,
damaged update, infrastructure stall) holds, whatever the yield says; too few seeds hold; the optimistic
bound below the threshold rejects; then the interval's lower bound, hard-slice and capability regressions,
tokens per parameter of the next stage, the locked workflow past the exploration share, and the price per
dollar where the policy asks for it, each of which holds when unmet. Every check is kept in the decision.

The forecast (DESIGN.md): with final losses at three or more budgets, one power law over every seed's final
loss at each budget (`fit.forecast`, bootstrap over the points); with fewer, each seed's own stable-phase
fit, pooled over seeds. The pooled interval is mean ± t·se over the seeds' estimates, with se² the larger of
the between-seed variance and the seeds' mean bootstrap variance, over n: a t-interval is what says how
the mean of a few seeds can be off, and the floor keeps two seeds that agree by chance from claiming a
precision their fits do not have. A power law is monotone and cannot see a loss that has turned up (a
source repeated for many epochs), so the optimistic bound is also capped by the recently measured yield
(the slope over the last half of the stable phase, or between the two largest budgets): on a curve of
diminishing returns the next tokens yield no more than the last ones did.

`record(ledger, decision, policy)` stores the decision with the policy, its hash and the evidence.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

from yieldgate.analysis.compare import compare
from yieldgate.analysis.fit import BILLION, Forecast, forecast
from yieldgate.analysis.runs import load_run, match_runs, stable_points
from yieldgate.errors import InputError, RunNotFound
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest, diff, parse_manifest
from yieldgate.names import split_eval_key
from yieldgate.probe.policy import NewHardwareException, Policy, Stage

__all__ = ["Check", "Decision", "gate", "record", "workflow", "workflow_digest"]

RESOLUTION_FIELDS = re.compile(r"^(seed|name|data\.accepted_tokens|data\.sources\[[^]]+\]\.(unique|accepted)_tokens|"
                               r"data\.tokenizer\.(content_hash|bytes_per_token))$")
"""Manifest fields that say which run it is or how a recipe resolved on a seed's split, not what was asked."""
WORKFLOW = ("data", "model", "optimisation")
"""The manifest sections that make up the workflow locked past exploration."""
HARDWARE = ("hardware", "library_versions")
"""The sections the new-hardware exception allows to differ from the reference."""
BOOTS = 200
"""Bootstrap refits per forecast (fit.forecast's default is 400): the gate fits every seed, and the 10% and 90%
quantiles of 200 refits are steady to about two percentiles."""


@dataclass
class Check:
    """One requirement: passed (True/False), or None where it is a note (not applicable, not asked)."""

    name: str
    passed: bool | None
    detail: str


@dataclass
class Decision:
    """A gate decision with its evidence; `record` stores it in the ledger."""

    target: str
    decision: Literal["approve", "hold", "reject"]
    stage: str | None
    """The largest stage the evidence reached (None: not even the first)."""
    next_stage: str
    rationale: str
    """One line: the decision and its main reason."""
    axis: Literal["learning", "throughput"]
    """The axis that decided (throughput only under the new-hardware exception)."""
    evidence: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    what_to_run_next: str | None = None
    policy: str = ""
    """Policy name@version."""
    policy_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- reading the target ----------------------------------------------------------------------------------


def _target_runs(ledger: Ledger, target: str) -> list[str]:
    """The target's runs: a run name or glob; a campaign recipe `{campaign}/{recipe}` also as itself plus `/*`."""
    try:
        return match_runs(ledger, target)
    except RunNotFound:
        if any(c in target for c in "*?["):
            raise
        names = [n for n in ledger.runs()["name"] if fnmatch.fnmatchcase(n, f"{target}/*")]
        if not names:
            raise
        return names


def _budgets(ledger: Ledger, runs: list[str]) -> list[tuple[float, list[str]]]:
    """Runs grouped by budget (run meta `probe.tokens`, else the run's final tokens), smallest first; budgets
    within 2% of each other are one (a budget rounded up to whole steps)."""
    tokens = ledger.runs().set_index("name")["tokens"]
    budget = {}
    for run in runs:
        probe = ledger.meta(run).get("probe") or {}
        value = probe.get("tokens") if isinstance(probe, dict) else None
        budget[run] = float(value if value is not None else tokens.get(run, math.nan))
    unknown = [r for r, b in budget.items() if not b > 0]
    if unknown:
        raise InputError(f"run {unknown[0]!r} has recorded no tokens: the gate needs the tokens each run reached")
    groups: list[tuple[float, list[str]]] = []
    for run in sorted(runs, key=lambda r: budget[r]):
        if groups and budget[run] <= groups[-1][0] * 1.02:
            groups[-1][1].append(run)
        else:
            groups.append((budget[run], [run]))
    return groups


def _stages(policy: Policy, reached: float) -> tuple[Stage | None, Stage]:
    done = [s for s in policy.stages if s.tokens <= reached]
    current = done[-1] if done else None
    if current is policy.stages[-1]:
        raise InputError(f"the evidence reached {reached:,.0f} tokens, the last stage {current.name!r} of policy "
                         f"{policy.name!r}: there is no next stage to gate")
    return current, policy.stages[len(done)]


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
    return hashlib.sha256(json.dumps(workflow(manifest), sort_keys=True).encode()).hexdigest()


def _fields(a: Manifest, b: Manifest, sections: tuple[str, ...] | None = None) -> list[str]:
    """Differing manifest fields, less the resolution fields; only `sections` when given."""
    out = [d.field for d in diff(a, b) if not RESOLUTION_FIELDS.match(d.field)]
    return [f for f in out if sections is None or f.split(".")[0].split("[")[0] in sections]


# -- the evidence ----------------------------------------------------------------------------------------


def _open_faults(ledger: Ledger, runs: list[str], policy: Policy) -> list[dict[str, Any]]:
    req = policy.requirements
    found = []
    for run in runs:
        events = ledger.events(run, kind="diagnosis", state="open")
        for eid, body, start, end in zip(events["id"], events["body"], events["start_step"], events["end_step"],
                                         strict=True):
            if body.get("cause") in req.blocking_causes and float(body.get("confidence", 1.0)) > req.diagnosis_confidence:
                found.append({"event": int(eid), "run": run, "cause": body["cause"], "confidence": body.get("confidence"),
                              "steps": [None if start is None else int(start), None if end is None else int(end)],
                              "advice": body.get("advice", "")})
    return found


def _recent_yield(tokens: np.ndarray, losses: np.ndarray, level: float) -> tuple[float, float, float]:
    """Yield per billion tokens measured by a straight line through the points, with its t-interval."""
    fit = stats.linregress(tokens, losses)
    half = float(stats.t.ppf(0.5 + level / 2, len(tokens) - 2) * fit.stderr) if len(tokens) > 2 else math.inf
    return -fit.slope * BILLION, -(fit.slope + half) * BILLION, -(fit.slope - half) * BILLION


def _pool(estimates: list[tuple[float, float, float]], level: float) -> tuple[float, float, float]:
    """Mean and interval over seeds of (point, low, high) estimates; see the module docstring."""
    if len(estimates) == 1:
        return estimates[0]
    points = np.array([e[0] for e in estimates])
    z = stats.norm.ppf(0.5 + level / 2)
    within = float(np.mean([((hi - lo) / (2 * z)) ** 2 for _, lo, hi in estimates]))
    se = math.sqrt(max(float(points.var(ddof=1)), within) / len(points))
    half = float(stats.t.ppf(0.5 + level / 2, len(points) - 1)) * se
    mean = float(points.mean())
    return mean, mean - half, mean + half


@functools.lru_cache(maxsize=256)
def _forecast_points(tokens: tuple[float, ...], losses: tuple[float, ...], at: float, next_tokens: float,
                     level: float) -> Forecast:
    """`fit.forecast` of these points; pure and deterministic, so kept by content: gating again after a diagnosis
    is resolved, or under another policy, does not refit the same evaluations."""
    # Several seeds share each budget's token count in a fit over final losses: the difference-based eval noise
    # is undefined there (0/0). The gate reads the fit's interval, which does not use it.
    with np.errstate(invalid="ignore", divide="ignore"):
        return forecast(np.array(tokens), np.array(losses), next_tokens=next_tokens - at, at_tokens=at, level=level,
                        boots=BOOTS)


def _final_point(ledger: Ledger, run: str, metric: str) -> tuple[float, float]:
    points, _, _ = stable_points(ledger, run, metric)
    if points.empty:
        raise InputError(f"run {run!r} has no evaluation of {metric}")
    return float(points["tokens"].iloc[-1]), float(points["value"].iloc[-1])


def _forecast(ledger: Ledger, groups: list[tuple[float, list[str]]], next_tokens: float, level: float,
              metric: str) -> dict[str, Any]:
    """The forecast marginal yield per billion tokens from the evidence's tokens to `next_tokens`."""
    if len(groups) >= 3:
        finals = [(_final_point(ledger, r, metric), r) for _, runs in groups for r in runs]
        x = np.array([p[0][0] for p in finals])
        y = np.array([p[0][1] for p in finals])
        at = float(np.mean([_final_point(ledger, r, metric)[0] for r in groups[-1][1]]))
        f = _forecast_points(tuple(x.tolist()), tuple(y.tolist()), at, next_tokens, level)
        # Measured: the mean final loss of the second-largest budget minus the largest's, per token, Welch interval.
        (ta, ra), (tb, rb) = groups[-2], groups[-1]
        la = np.array([_final_point(ledger, r, metric)[1] for r in ra])
        lb = np.array([_final_point(ledger, r, metric)[1] for r in rb])
        xa = float(np.mean([_final_point(ledger, r, metric)[0] for r in ra]))
        span = (at - xa) / BILLION
        var = (la.var(ddof=1) / len(la) if len(la) > 1 else 0.0) + (lb.var(ddof=1) / len(lb) if len(lb) > 1 else 0.0)
        half = float(stats.t.ppf(0.5 + level / 2, max(len(la) + len(lb) - 2, 1)) * math.sqrt(var)) if var > 0 else math.inf
        gain = float(la.mean() - lb.mean())
        recent = (gain / span, (gain - half) / span, (gain + half) / span)
        fitted = (f.yield_per_btok, *f.yield_interval)
        per_seed = []
        method = f"one power law over the final losses of {len(finals)} runs at {len(groups)} budgets"
        notes = list(f.notes)
    else:
        per_seed, fits, recents, notes = [], [], [], []
        for run in groups[-1][1]:
            points, mask, note = stable_points(ledger, run, metric)
            used = points[mask] if mask.sum() >= 3 else points
            at = float(points["tokens"].iloc[-1])
            f = _forecast_points(tuple(used["tokens"].tolist()), tuple(used["value"].tolist()), at, next_tokens, level)
            tail = used.iloc[len(used) // 2:] if len(used) >= 6 else used.iloc[-3:]
            recent_run = _recent_yield(tail["tokens"].to_numpy(), tail["value"].to_numpy(), level)
            fits.append((f.yield_per_btok, *f.yield_interval))
            recents.append(recent_run)
            per_seed.append({"run": run, "yield_per_btok": fits[-1][0], "interval": list(fits[-1][1:]),
                             "recent_yield_per_btok": recent_run[0], "recent_interval": list(recent_run[1:]),
                             "fit": f.fit.to_dict(), "stable_phase": note})
            notes += [f"{run}: {n}" for n in f.notes]
        fitted, recent = _pool(fits, level), _pool(recents, level)
        at = float(np.mean([_final_point(ledger, r, metric)[0] for r in groups[-1][1]]))
        method = (f"each seed's stable-phase fit, pooled over {len(per_seed)} seed{'s' * (len(per_seed) != 1)} "
                  "(mean, t-interval)")
    # Each bound is the smaller of the fit's and the measured one's: the measured yield caps the fit's optimism.
    point, lower, upper = (min(a, b) for a, b in zip(fitted, recent, strict=True))
    return {"method": method, "metric": metric, "at_tokens": at, "next_tokens": float(next_tokens), "level": level,
            "yield_per_btok": point, "interval": [lower, upper],
            "forecast": {"yield_per_btok": fitted[0], "interval": list(fitted[1:])},
            "recent": {"yield_per_btok": recent[0], "interval": list(recent[1:])},
            "capped_by_recent": recent[2] < fitted[2], "per_seed": per_seed, "notes": notes}


def _tokens_per_s(ledger: Ledger, run: str) -> float | None:
    steps = ledger.steps(run, ["tokens", "wall_s"]).dropna()
    if steps.empty or not steps["wall_s"].iloc[-1] > 0:
        return None
    return float(steps["tokens"].iloc[-1] / steps["wall_s"].iloc[-1])


def _cost_per_btok(ledger: Ledger, runs: list[str], manifests: dict[str, Manifest | None]) -> tuple[float | None, str]:
    """USD per billion tokens on the target's hardware at its measured tokens/s, and how (or why unknown)."""
    hw = [m.hardware if m else None for m in manifests.values()]
    if not hw or any(h is None or h.price_per_device_hour is None for h in hw):
        return None, "no price: set hardware.price_per_device_hour in the manifests"
    rates = [_tokens_per_s(ledger, r) for r in runs]
    if any(r is None for r in rates):
        return None, "no wall-clock time recorded: tokens/s unknown"
    tps = float(np.mean(rates))
    usd = float(np.mean([h.price_per_device_hour * h.device_count for h in hw]))
    return BILLION / tps / 3600 * usd, f"{tps:,.0f} tokens/s at ${usd:g} per hour"


def _regressions(ledger: Ledger, runs: list[str]) -> dict[str, float]:
    """Per hard-slice or capability key, the mean over runs of how far the final value is worse than the run's best."""
    worse: dict[str, list[float]] = {}
    for run in runs:
        evals = ledger.evals(run)
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
                worse.setdefault(f"{task}/{metric}", []).append(float(best - values[-1] if higher else values[-1] - best))
    return {k: float(np.mean(v)) for k, v in sorted(worse.items())}


def _locked(ledger: Ledger, target: str, digest: str | None, manifest: Manifest | None) -> tuple[bool, str]:
    """Past exploration: the workflow must be the one approved earlier for this target."""
    approved = [row for row in ledger.decisions(target).to_dict("records")
                if row["decision"] == "approve" and (row["evidence"] or {}).get("workflow")]
    if not approved:
        return True, "no earlier approval for this target: this decision fixes its workflow"
    last = approved[-1]
    if last["evidence"]["workflow"] == digest:
        return True, f"the workflow approved in decision #{last['id']} is unchanged"
    changed = "data, mixture, model or optimisation"
    old = last["evidence"].get("workflow_fields")
    if old and manifest is not None:
        changed = ", ".join(_fields(parse_manifest(old, "the approved workflow"), manifest, WORKFLOW)[:4]) or changed
    return False, f"the workflow changed since decision #{last['id']} approved it ({changed})"


def _exception(ledger: Ledger, runs: list[str], manifests: dict[str, Manifest | None], exc: NewHardwareException,
               metric: str) -> dict[str, Any]:
    """Whether the new-hardware exception holds: only hardware differs, and the curve matches the reference."""
    reference = match_runs(ledger, exc.reference)
    out: dict[str, Any] = {"reference": reference, "applies": False}
    if set(runs) & set(reference):
        out["reason"] = "the target is its own reference"
        return out
    ref_manifest = ledger.manifest(reference[0])
    if ref_manifest is None or any(m is None for m in manifests.values()):
        out["reason"] = "a manifest is missing, so the diff against the reference is unknown"
        return out
    other = sorted({f for m in manifests.values() for f in _fields(ref_manifest, m) if f.split(".")[0] not in HARDWARE})
    out["differs"] = other
    if other:
        out["reason"] = f"the manifest differs from the reference beyond hardware: {', '.join(other[:4])}"
        return out
    task, name = split_eval_key(metric)
    cmp = compare([load_run(ledger, r) for r in reference], [load_run(ledger, r) for r in runs], at="tokens",
                  task=task, metric=name)
    worst = None
    for p in cmp.points:
        allowed = max(exc.loss_tolerance, 0.0 if p["interval"] is None else (p["interval"][1] - p["interval"][0]) / 2)
        excess = abs(p["diff"]) - allowed
        if worst is None or excess > worst[0]:
            worst = (excess, p, allowed)
    out["curve"] = {"points": cmp.points, "loss_tolerance": exc.loss_tolerance}
    if worst is None or worst[0] > 0:
        out["reason"] = ("no aligned points to compare the loss curves at" if worst is None else
                         f"the loss curve departs from the reference by {worst[1]['diff']:+.4f} at "
                         f"{worst[1]['tokens']:,.0f} tokens (allowed ±{worst[2]:.4f})")
        return out
    rates = [[_tokens_per_s(ledger, r) for r in group] for group in (reference, runs)]
    if any(r is None for group in rates for r in group):
        out["reason"] = "no wall-clock time recorded: tokens/s unknown"
        return out
    ref_tps, tps = (float(np.mean(group)) for group in rates)
    out.update(applies=True, tokens_per_s=tps, reference_tokens_per_s=ref_tps, throughput_ratio=tps / ref_tps)
    return out


# -- the decision ----------------------------------------------------------------------------------------


def gate(ledger: Ledger, target: str, policy: Policy, *, metric: str = "val/loss") -> Decision:
    """Decide whether `target`'s evidence earns its next stage under `policy`; see the module docstring."""
    req = policy.requirements
    runs = _target_runs(ledger, target)
    groups = _budgets(ledger, runs)
    reached, last = groups[-1]
    current, nxt = _stages(policy, reached)
    manifests = {r: ledger.manifest(r) for r in runs}
    digests = {workflow_digest(m) for m in manifests.values()}
    evidence: dict[str, Any] = {
        "runs": runs, "budgets": [{"tokens": t, "runs": rs} for t, rs in groups], "seeds": min(len(rs) for _, rs in groups),
        "reached_tokens": reached, "next_stage_tokens": nxt.tokens,
        "manifests": {r: (m.content_hash() if m else None) for r, m in manifests.items()},
        "workflow": next(iter(digests)) if len(digests) == 1 else None, "primary": policy.primary,
        "workflow_fields": workflow(manifests[runs[0]]) if len(digests) == 1 else None}
    checks: list[Check] = []

    def check(name: str, passed: bool | None, detail: str) -> bool | None:
        checks.append(Check(name, passed, detail))
        return passed

    def decide(decision: str, why: str, axis: str = "learning", run_next: str | None = None) -> Decision:
        head = f"{decision} {nxt.name} ({nxt.tokens:,} tokens)"
        return Decision(target=target, decision=decision, stage=current.name if current else None,  # type: ignore[arg-type]
                        next_stage=nxt.name, rationale=f"{head}: {why}", axis=axis, evidence=evidence,  # type: ignore[arg-type]
                        checks=checks, what_to_run_next=run_next, policy=f"{policy.name}@{policy.version}",
                        policy_hash=policy.content_hash())

    faults = _open_faults(ledger, runs, policy)
    evidence["open_diagnoses"] = faults
    causes = sorted({f["cause"] for f in faults})
    opened = ", ".join(f"{f['cause']} on {f['run']} (event {f['event']})" for f in faults)
    check("no open non-data fault", not faults, f"open: {opened}" if faults else f"no open diagnosis of {', '.join(req.blocking_causes)} above confidence {req.diagnosis_confidence}")

    if policy.exception is not None:
        exc = _exception(ledger, runs, manifests, policy.exception, metric)
        evidence["exception"] = exc
        if exc["applies"]:
            ratio, floor = exc["throughput_ratio"], 1 - policy.exception.throughput_tolerance
            check("new-hardware exception", None, "holds: only hardware differs and the loss curve matches the "
                                                  "reference within noise; throughput decides")
            fast = check("throughput not worse", ratio >= floor,
                         f"{exc['tokens_per_s']:,.0f} vs {exc['reference_tokens_per_s']:,.0f} tokens/s "
                         f"(x{ratio:.3f}, floor x{floor:.2f})")
            if faults:
                return decide("hold", f"open {', '.join(causes)} diagnosis on the new hardware", "throughput",
                              "fix it, rerun, and run `yieldgate diagnose` again")
            if fast:
                return decide("approve", f"same recipe on new hardware, same learning curve, x{ratio:.3f} tokens/s",
                              "throughput")
            return decide("hold", f"the new hardware moves x{ratio:.3f} the reference's tokens/s (floor x{floor:.2f})",
                          "throughput", "find the throughput loss (data wait, precision, layout) before scaling up")
        check("new-hardware exception", None, f"ended: {exc['reason']}; learning decides")

    seeds = evidence["seeds"]
    enough_seeds = check("seeds", seeds >= req.min_seeds, f"{seeds} per budget, the policy needs {req.min_seeds}")
    try:
        fc = _forecast(ledger, groups, nxt.tokens, req.level, metric)
    except InputError as exc_:
        fc = None
        check("forecast", False, f"no forecast: {exc_}")
    evidence["forecast"] = fc
    ended = f"; new-hardware exception ended: {evidence['exception']['reason']}" if policy.exception else ""

    if faults:
        return decide("hold", f"open {', '.join(causes)} diagnosis: a learning problem that is not the data's fault"
                      + ended, run_next=f"fix the {' and '.join(causes)} ({faults[0]['advice'] or 'see the diagnosis'}), "
                      "rerun, and run `yieldgate diagnose` again; the yield of these runs says nothing about the data")
    if not enough_seeds:
        return decide("hold", f"{seeds} seed{'s' * (seeds != 1)}, the policy needs {req.min_seeds} for an interval" + ended,
                      run_next=f"run {req.min_seeds - seeds} more seed{'s' * (req.min_seeds - seeds != 1)} at "
                               f"{reached:,.0f} tokens")
    if fc is None:
        return decide("hold", checks[-1].detail + ended, run_next="record evaluations of " + metric)

    lo, hi = fc["interval"]
    thr = req.min_yield_per_btok
    span = f"{fc['yield_per_btok']:,.0f} per billion tokens, {req.level:.0%} interval [{lo:,.0f}, {hi:,.0f}]"
    check("optimistic bound above threshold", hi >= thr, f"upper {hi:,.0f} vs {thr:,.0f} per billion tokens")
    cost, how = _cost_per_btok(ledger, last, {r: manifests[r] for r in last})
    evidence["cost_per_btok"] = cost
    evidence["cost_basis"] = how
    if cost is not None:
        evidence["yield_per_usd"] = {"yield_per_usd": fc["yield_per_btok"] / cost, "interval": [lo / cost, hi / cost]}
    low_usd = req.min_yield_per_usd is not None and cost is not None and hi / cost < req.min_yield_per_usd
    if hi < thr or low_usd:
        per = (f"{hi:,.0f} per billion tokens, below {thr:,.0f}" if hi < thr
               else f"{hi / cost:.4g} per dollar, below {req.min_yield_per_usd:g}")  # type: ignore[operator]
        return decide("reject", f"even the optimistic bound of the forecast yield, {per}: the data is exhausted for "
                      f"this purpose{' (the loss has turned up)' if fc['capped_by_recent'] and fc['recent']['yield_per_btok'] < 0 else ''}"
                      + ended)

    holds: list[tuple[str, str]] = []
    if not check("lower bound above threshold", lo > thr, f"lower {lo:,.0f} vs {thr:,.0f} per billion tokens"):
        more = req.min_seeds
        if fc["yield_per_btok"] > thr and hi > lo:
            needed = seeds * ((hi - lo) / 2 / (fc["yield_per_btok"] - thr)) ** 2
            more = max(1, min(math.ceil(needed) - seeds, 4 * seeds))
        holds.append((f"the interval is too wide: {span}, threshold {thr:,.0f}",
                      f"run {more} more seed{'s' * (more != 1)} at {reached:,.0f} tokens"
                      + ("" if len(groups) >= 3 else
                         f", or probes at {reached / 2:,.0f} and {reached * 2:,.0f} tokens to fit the final losses of "
                         "three budgets")))
    if req.min_yield_per_usd is not None:
        if cost is None:
            check("yield per dollar", False, how)
            holds.append((f"yield per dollar asked for, but {how}", "record the price and wall time in the manifests"))
        elif not check("yield per dollar", lo / cost > req.min_yield_per_usd,
                       f"lower {lo / cost:.4g} vs {req.min_yield_per_usd:g} per dollar ({how})"):
            holds.append((f"yield per dollar's lower bound {lo / cost:.4g} is below {req.min_yield_per_usd:g}",
                          "more seeds to narrow the interval, or cheaper hardware"))
    regressions = _regressions(ledger, last)
    evidence["regressions"] = regressions
    bad = {k: v for k, v in regressions.items() if v > req.regression_tolerance}
    if not check("no regression", not bad, ", ".join(f"{k} worse by {v:.4f}" for k, v in bad.items())
                 or f"hard slices and capability tasks within {req.regression_tolerance} of their best"):
        key = max(bad, key=bad.get)  # type: ignore[arg-type]
        holds.append((f"{key} regressed by {bad[key]:.4f} (tolerance {req.regression_tolerance})",
                      f"find what costs {key} (the mixture's share of that slice, a filter) before scaling up"))
    params = [m.model.params for m in manifests.values() if m and m.model and m.model.params]
    if req.min_tokens_per_param > 0:
        if not params:
            check("tokens per parameter", False, "model parameters unknown (manifest model.params)")
            holds.append(("model parameters unknown", "record model.params in the manifests"))
        else:
            tpp = nxt.tokens / max(params)
            evidence["next_tokens_per_param"] = tpp
            if not check("tokens per parameter", tpp >= req.min_tokens_per_param,
                         f"{nxt.name}: {tpp:.3g} tokens per parameter, the policy needs {req.min_tokens_per_param:g}"):
                holds.append((f"{nxt.name} would leave the model undertrained ({tpp:.3g} tokens per parameter)",
                              f"give {nxt.name} at least {req.min_tokens_per_param * max(params):,.0f} tokens, or a "
                              "smaller model"))
    if len(digests) > 1:
        ref = manifests[runs[0]]
        fields = sorted({f for m in manifests.values() if m and ref for f in _fields(ref, m, WORKFLOW)})
        check("one workflow", False, f"the target's runs differ in {', '.join(fields[:4]) or 'their manifests'}")
        holds.append(("the target mixes workflows", "gate one recipe (one workflow) at a time"))
    elif not policy.is_exploration(nxt):
        ok, why = _locked(ledger, target, evidence["workflow"], manifests[runs[0]])
        evidence["locked"] = why
        if not check("workflow locked", ok, why):
            holds.append((why, "restore the approved workflow, or explore the change as a new target"))
    else:
        check("workflow locked", None, f"{nxt.name} is within the exploration share ({policy.exploration_share:.0%})")

    if holds:
        return decide("hold", "; ".join(h[0] for h in holds) + ended, run_next="; ".join(h[1] for h in holds))
    return decide("approve", f"forecast yield {span}, above {thr:,.0f} on {seeds} seeds; no open fault or regression"
                  + ended)


def record(ledger: Ledger, decision: Decision, policy: Policy) -> int:
    """Store the decision with the policy, its hash, the evidence and the checks; return its id. The ledger's
    `stage` is the stage decided on (the next one); the stage the evidence reached is in the evidence."""
    evidence = {**decision.evidence, "checks": [asdict(c) for c in decision.checks],
                "what_to_run_next": decision.what_to_run_next, "axis": decision.axis, "reached_stage": decision.stage,
                "policy_name": policy.name, "policy_version": policy.version}
    return ledger.add_decision(decision.target, decision.decision, evidence=evidence, rationale=decision.rationale,
                               run=decision.evidence["runs"][0] if len(decision.evidence["runs"]) == 1 else None,
                               stage=decision.next_stage, policy=policy.model_dump(mode="json"),
                               policy_hash=decision.policy_hash)
