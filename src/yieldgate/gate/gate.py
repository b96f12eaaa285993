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
bound below the threshold rejects; then the interval's lower bound, the yield per dollar where the policy
asks for it, the data supply (no source passed more than the policy's `max_epochs` at the next stage),
hard-slice and capability regressions, tokens per parameter of the next stage, and the locked workflow past
the exploration share, each of which holds when unmet. The checks made are kept in the decision.

The forecast yield is discounted for the repetition the next stage would add (`supply.py`): the worth of its
tokens as new ones, over that of the tokens the evidence was measured on. A source with few unique tokens
cannot show in probes that each pass once what the next stage would do to it; the discount and `max_epochs`
see it before any compute is spent.

Under the new-hardware exception (the policy's `exception`), throughput decides while the target's manifest
differs from the reference's only in hardware and library versions and its loss curve matches within noise;
otherwise the exception ends, the rationale says why, and learning decides. How the evidence is read and the
forecast pooled over seeds: `evidence.py`. `record(ledger, decision, policy)` stores a decision.

Where the target's runs come from an imported results campaign with mixture weights, the evidence cites its mixture
regression (`evidence.mixture_citation`: the proposed mixture, its predicted value and interval, the cross-validated
rho), shown as a note among the checks: it decides nothing.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from yieldgate.errors import InputError
from yieldgate.gate.draft import Bounds, Check, Decision, Draft
from yieldgate.gate.evidence import (
    cost_per_btok,
    forecast_yield,
    in_tokens,
    open_faults,
    stage_price,
    workflow,
    workflow_digest,
)
from yieldgate.gate.policy import Policy, Stage
from yieldgate.gate.requirements import holds, supply_discount
from yieldgate.gate.shared import is_shared
from yieldgate.gate.target import TargetEvidence
from yieldgate.ledger import Ledger

__all__ = ["Check", "Decision", "gate", "decide", "record"]


def _stages(policy: Policy, reached: float) -> tuple[Stage | None, Stage]:
    done = [s for s in policy.stages if s.token_budget <= reached]
    current = done[-1] if done else None
    if current is policy.stages[-1]:
        raise InputError(
            f"the evidence reached {reached:,.0f} tokens, the last stage {current.name!r} of policy "
            f"{policy.name!r}: there is no next stage to gate"
        )
    return current, policy.stages[len(done)]


def _throughput_decision(draft: Draft, exc: dict[str, Any], tolerance: float, faults: list[dict[str, Any]]) -> Decision:
    ratio, floor = exc["throughput_ratio"], 1 - tolerance
    draft.check(
        "new-hardware exception",
        None,
        "holds: only hardware differs and the loss curve matches the reference within noise; throughput decides",
    )
    fast = draft.check(
        "throughput not worse",
        ratio >= floor,
        f"{exc['tokens_per_s']:,.0f} vs "
        f"{exc['reference_tokens_per_s']:,.0f} tokens/s (x{ratio:.3f}, floor x{floor:.2f})",
    )
    if faults:
        causes = ", ".join(sorted({f["cause"] for f in faults}))
        return draft.decide(
            "hold",
            f"open {causes} diagnosis on the new hardware",
            axis="throughput",
            run_next="fix it, rerun, and run `yieldgate diagnose` again",
        )
    if fast:
        return draft.decide(
            "approve", f"same recipe on new hardware, same learning curve, x{ratio:.3f} tokens/s", axis="throughput"
        )
    return draft.decide(
        "hold",
        f"the new hardware moves x{ratio:.3f} the reference's tokens/s (floor x{floor:.2f})",
        axis="throughput",
        run_next="find the throughput loss (data wait, precision, layout) first",
    )


def gate(
    ledger: Ledger, target: str, policy: Policy, *, metric: str = "val/loss", at_step: int | None = None
) -> Decision:
    """Decide whether `target`'s evidence earns its next stage under `policy`; see the module docstring. The evidence
    is read once (`TargetEvidence.read`; `at_step`: as it stood at that step, as the gate inside a run read it);
    `decide` reads nothing."""
    return decide(TargetEvidence.read(ledger, target, policy, metric, at_step=at_step), policy, metric=metric)


def decide(t: TargetEvidence, policy: Policy, *, metric: str = "val/loss") -> Decision:
    """The decision on evidence read already (`TargetEvidence`): pure. Evidence read live (one run, as its governor
    reads it: `TargetEvidence.live`) is decided by the same rules; what it cannot check is said, and a decision that
    does not approve prices the compute left unspent if the run stops there (`_unspent`)."""
    tokens = in_tokens(policy, t.last_data(), t.metas)
    decision = _decide(t, tokens, metric)
    if tokens is not policy:  # the stages as written: the decision names that policy
        decision.policy_hash = policy.content_hash()
        decision.evidence["stage_budgets"] = {
            "unit": policy.unit,
            "written": [s.budget for s in policy.stages],
            "tokens": [s.token_budget for s in tokens.stages],
        }
        decision.checks.append(
            Check(
                "stage budgets in tokens",
                None,
                f"the stages' {policy.unit.replace('_', '-')} ("
                + ", ".join(f"{s.name} {s.budget:.4g}" for s in policy.stages)
                + ") read as "
                + ", ".join(f"{s.token_budget:,}" for s in tokens.stages)
                + " tokens at the measured throughput",
            )
        )
    if t.live and decision.decision != "approve":
        _unspent(decision, t, tokens)
    return decision


def _decide(t: TargetEvidence, policy: Policy, metric: str) -> Decision:
    req = policy.requirements
    draft = _draft(t, t.target, policy)
    evidence = draft.evidence
    cited, line = t.citation
    if cited is not None:
        evidence["mixture_regression"] = cited
        draft.check("mixture regression", None, line or "")
    faults, stalls = _faults(draft, t)
    if policy.exception is not None and t.exception is not None:
        exc = evidence["exception"] = t.exception
        if exc["applies"]:
            return _throughput_decision(draft, exc, policy.exception.throughput_tolerance, faults)
        draft.check("new-hardware exception", None, f"ended: {exc['reason']}; learning decides")
        draft.suffix = f"; new-hardware exception ended: {exc['reason']}"

    seeds = t.seeds
    if t.live and seeds < req.min_seeds:  # other seeds are other runs: a run governed alone has none
        enough = draft.check("seeds", None, f"not checked live: one run, the policy needs {req.min_seeds} seeds")
    else:
        enough = draft.check("seeds", seeds >= req.min_seeds, f"{seeds} per budget, the policy needs {req.min_seeds}")
    try:
        evidence["forecast"] = forecast_yield(t.data, t.groups, draft.next.token_budget, req.level, metric)
    except InputError as err:
        evidence["forecast"] = None
        draft.check("forecast", False, f"no forecast: {err}")
    held = _held_before_forecast(draft, faults, stalls, enough, t, metric)
    if held is not None:
        return held
    fc = evidence["forecast"]
    factor = supply_discount(draft, t.manifests[t.runs[0]], t.reached)
    lo, hi = (v * factor for v in fc["interval"])
    bounds = Bounds(fc["yield_per_btok"] * factor, lo, hi, req.min_yield_per_btok, factor)
    draft.check(
        "optimistic bound above threshold",
        hi >= bounds.threshold,
        f"upper {hi:,.0f} vs {bounds.threshold:,.0f} per billion tokens{bounds.discounted}",
    )
    usd, how = cost = cost_per_btok(t.last_data(), {r: t.manifests[r] for r in t.last})
    evidence.update(cost_per_btok=usd, cost_basis=how)
    if usd is not None:
        evidence["yield_per_usd"] = {"yield_per_usd": bounds.point / usd, "interval": [lo / usd, hi / usd]}
    _price(draft, t, bounds)
    rejected = _rejected(draft, bounds, usd)
    if rejected is not None:
        return rejected
    unmet = holds(draft, t, bounds, cost)
    if unmet:
        return draft.decide("hold", "; ".join(h[0] for h in unmet), run_next="; ".join(h[1] for h in unmet))
    return draft.decide(
        "approve",
        f"forecast yield {bounds.point:,.0f} per billion "
        f"tokens{bounds.discounted}, {fc['interval_of']} [{lo:,.0f}, {hi:,.0f}], above {bounds.threshold:,.0f} on "
        f"{seeds} seeds; no open fault or regression",
    )


def _unspent(decision: Decision, t: TargetEvidence, policy: Policy) -> None:
    """The compute a run read live leaves unspent if it stops at this decision: the tokens from where it stands to the
    policy's last stage, priced as the next stage is (`stage_price`: device-hours, dollars and kWh at the run's
    measured throughput and the prices), kept in the evidence (`unspent`) and noted among the checks."""
    planned = float(policy.stages[-1].token_budget)
    price = stage_price(t.last_data(), t.metas, max(planned - t.reached, 0.0), policy)
    decision.evidence["unspent"] = {**price, "at_tokens": t.reached, "planned_tokens": planned, "at_step": t.at_step}
    parts = [
        "? device-hours" if price["device_hours"] is None else f"{price['device_hours']:.3g} device-hours",
        "$?" if price["usd"] is None else f"${price['usd']:.3g}",
        "? kWh" if price["kwh"] is None else f"{price['kwh']:.3g} kWh",
    ]
    unknown = "; ".join(price["missing"].values())
    decision.checks.append(
        Check(
            "compute saved by stopping",
            None,
            f"{price['tokens']:,.0f} of the {planned:,.0f} planned tokens ({price['tokens'] / planned:.0%}), "
            f"{', '.join(parts)} at the measured throughput" + (f" ({unknown})" if unknown else ""),
        )
    )


def _price(draft: Draft, t: TargetEvidence, b: Bounds) -> None:
    """The next stage's price beside the learning it is forecast to buy (a note: the price decides only through
    the policy's `min_yield_per_usd`)."""
    nxt = draft.next
    price = draft.evidence["next_stage_price"] = stage_price(
        t.last_data(), {r: t.metas[r] for r in t.last}, float(nxt.token_budget), draft.policy
    )
    gain = b.point * nxt.token_budget / 1e9
    price["forecast_gain"] = gain
    parts = [f"{nxt.token_budget:,} tokens"]
    parts.append("? device-hours" if price["device_hours"] is None else f"{price['device_hours']:.3g} device-hours")
    parts.append("$?" if price["usd"] is None else f"${price['usd']:.3g}")
    parts.append("? kWh" if price["kwh"] is None else f"{price['kwh']:.3g} kWh")
    unknown = "; ".join(price["missing"].values())
    draft.check(
        "next stage's price",
        None,
        f"{nxt.name}: {', '.join(parts)} at the measured throughput, for a forecast {gain:.3g} drop in "
        f"{draft.evidence['forecast']['metric']}" + (f" ({unknown})" if unknown else ""),
    )


def _draft(t: TargetEvidence, target: str, policy: Policy) -> Draft:
    """The decision's draft, its evidence started with the runs, budgets, manifests and workflow."""
    current, nxt = _stages(policy, t.reached)
    digests = {workflow_digest(m) for m in t.manifests.values()}
    one = len(digests) == 1
    read_at = {} if t.at_step is None else {"at_step": t.at_step}  # read as the runs stood at that step
    return Draft(
        target,
        policy,
        current,
        nxt,
        evidence={
            "runs": t.runs,
            "left_out": t.left_out,
            "budgets": [{"tokens": tokens, "runs": rs} for tokens, rs in t.groups],
            "seeds": t.seeds,
            "reached_tokens": t.reached,
            "next_stage_tokens": nxt.token_budget,
            "primary": policy.primary,
            "manifests": {r: (m.content_hash() if m else None) for r, m in t.manifests.items()},
            "workflow": next(iter(digests)) if one else None,
            "workflow_fields": workflow(t.manifests[t.runs[0]]) if one else None,
            **read_at,
        },
    )


def _faults(draft: Draft, t: TargetEvidence) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The target's diagnoses (`findings`: stored and found by the gate's own run of the detectors) kept in the
    evidence; return the open ones of a cause that is not the data's fault, and the stalls of undetermined cause,
    each checked."""
    req = draft.policy.requirements
    found = draft.evidence["diagnosed"] = t.findings
    shared = t.shared
    draft.evidence["shared_conditions"] = shared.to_dict()
    faults = draft.evidence["open_diagnoses"] = open_faults(
        [f for f in found if not is_shared(f, shared)], draft.policy
    )
    stalls = draft.evidence["undetermined_stalls"] = open_faults(found, draft.policy, ["stalled"])
    looked = f"the detectors ran on {len(t.runs)} run{'s' * (len(t.runs) != 1)}"
    draft.check(
        "no open non-data fault",
        not faults,
        f"open: {_opened(faults)}"
        if faults
        else f"no diagnosis of {', '.join(req.blocking_causes)} above confidence {req.diagnosis_confidence} ({looked})",
    )
    set_aside = sorted({cause for cause, _ in shared.keys if cause in req.blocking_causes})
    if set_aside:
        draft.check(
            "shared condition",
            None,
            f"{' and '.join(set_aside)} on every recipe of campaign {shared.campaign} ({len(shared.recipes)} "
            "recipes): it moves them all alike, so it decides nothing between them; fix it before the next stage",
        )
    holding = req.undetermined_stall != "reject"
    draft.check(
        "no stall of unknown cause",
        not stalls if holding else None,
        f"learning stalled at constant LR on {', '.join(sorted({f['run'] for f in stalls}))}: schedule or data, "
        "not yet told apart"
        if stalls
        else "no plateau at constant LR without a cooldown after it",
    )
    return faults, stalls if holding else []


def _opened(faults: list[dict[str, Any]]) -> str:
    """The open faults, each cause once with each of its runs once, a run's stored events beside it: `schedule on
    a/s0 (events 3, 5), a/s1`; `(found by the gate)` when none is stored. Three findings of one cause on one run
    read `s0, s0, s0` before."""
    by_cause: dict[str, dict[str, set[int]]] = {}
    for f in faults:
        events = by_cause.setdefault(f["cause"], {}).setdefault(f["run"], set())
        if f["event"] is not None:
            events.add(int(f["event"]))

    def label(run: str, events: set[int]) -> str:
        if not events:
            return run
        return f"{run} (event{'s' * (len(events) > 1)} {', '.join(map(str, sorted(events)))})"

    found = " (found by the gate)" if all(f["event"] is None for f in faults) else ""
    listed = (f"{cause} on {', '.join(label(r, e) for r, e in runs.items())}" for cause, runs in by_cause.items())
    return "; ".join(listed) + found


def _held_before_forecast(
    draft: Draft,
    faults: list[dict[str, Any]],
    stalls: list[dict[str, Any]],
    enough: bool | None,
    t: TargetEvidence,
    metric: str,
) -> Decision | None:
    """A hold before the forecast is read: an open fault, a stall of unknown cause, too few seeds, or no forecast;
    None: none of those."""
    req = draft.policy.requirements
    if faults:
        causes = sorted({f["cause"] for f in faults})
        advice = faults[0]["advice"] or "see the diagnosis"
        return draft.decide(
            "hold",
            f"open {', '.join(causes)} diagnosis: a learning problem that is not the data's fault",
            run_next=f"fix the {' and '.join(causes)} ({advice}), rerun, and run `yieldgate "
            "diagnose` again; the yield of these runs says nothing about the data",
        )
    if stalls:
        runs = sorted({f["run"] for f in stalls})
        return draft.decide(
            "hold",
            f"learning stalled at constant LR on {', '.join(runs)}, cause not known: the LR's noise floor "
            "(schedule) or the data; the flat curve neither earns the next stage nor shows the data exhausted",
            run_next=f"the cooldown probe: continue {runs[0]} with its LR cooled down over ~10% of its tokens "
            f"(`yieldgate train RECIPE --resume-from {runs[0]} --cooldown-tokens N`) and evaluate; a drop means the "
            "schedule was the limit, no drop means the data; then gate again",
        )
    if enough is False:
        seeds, more = t.seeds, req.min_seeds - t.seeds
        return draft.decide(
            "hold",
            f"{seeds} seed{'s' * (seeds != 1)}, the policy needs {req.min_seeds} for an interval",
            run_next=f"run {more} more seed{'s' * (more != 1)} at {t.reached:,.0f} tokens",
        )
    if draft.evidence["forecast"] is None:
        return draft.decide("hold", draft.checks[-1].detail, run_next=f"record evaluations of {metric}")
    return None


def _rejected(draft: Draft, b: Bounds, usd: float | None) -> Decision | None:
    """A reject: even the forecast's optimistic bound is below the threshold (per billion tokens, or per dollar where
    the policy asks); None otherwise."""
    least_usd, fc, nxt = draft.policy.requirements.min_yield_per_usd, draft.evidence["forecast"], draft.next
    undiscounted = fc["interval"][1]  # the optimistic bound before the next stage's repetition discount
    if b.hi < b.threshold:
        per = f"{b.hi:,.0f} per billion tokens{b.discounted}, below {b.threshold:,.0f}"
        repetition = undiscounted >= b.threshold
    elif least_usd is not None and usd is not None and b.hi / usd < least_usd:
        per = f"{b.hi / usd:.4g} per dollar, below {least_usd:g}"
        repetition = undiscounted / usd >= least_usd
    else:
        return None
    # Repetition is to blame only where the bar that rejected would have passed without the discount.
    turned = fc["capped_by_recent"] and fc["recent"]["yield_per_btok"] < 0
    why = " (the loss has turned up)" if turned else (f" at {nxt.name}'s repetition" if repetition else "")
    return draft.decide(
        "reject",
        f"even the optimistic bound of the forecast yield, {per}: the data is exhausted for this purpose{why}",
    )


def record(ledger: Ledger, decision: Decision, policy: Policy) -> int:
    """Store the decision with the policy, its hash, the evidence and the checks; return its id. The ledger's
    `stage` is the stage decided on (the next one); the stage the evidence reached is in the evidence."""
    evidence = {
        **decision.evidence,
        "checks": [asdict(c) for c in decision.checks],
        "what_to_run_next": decision.what_to_run_next,
        "axis": decision.axis,
        "reached_stage": decision.stage,
        "policy_name": policy.name,
        "policy_version": policy.version,
    }
    runs = decision.evidence["runs"]
    return ledger.add_decision(
        decision.target,
        decision.decision,
        evidence=evidence,
        rationale=decision.rationale,
        run=runs[0] if len(runs) == 1 else None,
        stage=decision.next_stage,
        policy=policy.stored(),
        policy_hash=decision.policy_hash,
    )
