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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from yieldgate.analysis import stats
from yieldgate.errors import InputError
from yieldgate.gate.evidence import (
    WORKFLOW,
    budgets,
    cost_per_btok,
    forecast_yield,
    hardware_exception,
    manifest_fields,
    open_faults,
    regressions,
    stage_price,
    target_runs,
    workflow,
    workflow_digest,
)
from yieldgate.gate.findings import target_findings
from yieldgate.gate.policy import Policy, Stage
from yieldgate.gate.supply import stage_supply, worth
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest, parse_manifest

__all__ = ["Check", "Decision", "gate", "record"]


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
    """The stage decided on."""
    rationale: str
    """One line: the decision and its main reason."""
    axis: Literal["learning", "throughput"]
    """The axis that decided (throughput only under the new-hardware exception)."""
    evidence: dict[str, Any]
    """The numbers, runs, manifest hashes, open diagnoses and forecast behind the decision."""
    checks: list[Check] = field(default_factory=list)
    what_to_run_next: str | None = None
    """For a hold: what would settle it."""
    policy: str = ""
    """Policy name@version."""
    policy_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Draft:
    """A decision being made: the checks so far, and the context every outcome shares."""

    target: str
    policy: Policy
    current: Stage | None
    next: Stage
    evidence: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    suffix: str = ""
    """Appended to every rationale (the end of the new-hardware exception)."""

    def check(self, name: str, passed: bool | None, detail: str) -> bool | None:
        self.checks.append(Check(name, passed, detail))
        return passed

    def decide(
        self,
        decision: Literal["approve", "hold", "reject"],
        why: str,
        *,
        run_next: str | None = None,
        axis: Literal["learning", "throughput"] = "learning",
    ) -> Decision:
        head = f"{decision} {self.next.name} ({self.next.tokens:,} tokens)"
        return Decision(
            target=self.target,
            decision=decision,
            stage=self.current.name if self.current else None,
            next_stage=self.next.name,
            rationale=f"{head}: {why}{self.suffix}",
            axis=axis,
            evidence=self.evidence,
            checks=self.checks,
            what_to_run_next=run_next,
            policy=f"{self.policy.name}@{self.policy.version}",
            policy_hash=self.policy.content_hash(),
        )


def _stages(policy: Policy, reached: float) -> tuple[Stage | None, Stage]:
    done = [s for s in policy.stages if s.tokens <= reached]
    current = done[-1] if done else None
    if current is policy.stages[-1]:
        raise InputError(
            f"the evidence reached {reached:,.0f} tokens, the last stage {current.name!r} of policy "
            f"{policy.name!r}: there is no next stage to gate"
        )
    return current, policy.stages[len(done)]


def _locked(ledger: Ledger, target: str, digest: str | None, manifest: Manifest | None) -> tuple[bool, str]:
    """Past exploration: the workflow must be the one approved earlier for this target."""
    approved = [
        row
        for row in ledger.decisions(target).to_dict("records")
        if row["decision"] == "approve" and (row["evidence"] or {}).get("workflow")
    ]
    if not approved:
        return True, "no earlier approval for this target: this decision fixes its workflow"
    last = approved[-1]
    if last["evidence"]["workflow"] == digest:
        return True, f"the workflow approved in decision #{last['id']} is unchanged"
    changed = "data, mixture, model or optimisation"
    old = last["evidence"].get("workflow_fields")
    if old and manifest is not None:
        fields = manifest_fields(parse_manifest(old, "the approved workflow"), manifest, WORKFLOW)
        changed = ", ".join(fields[:4]) or changed
    return False, f"the workflow changed since decision #{last['id']} approved it ({changed})"


def _throughput_decision(
    draft: _Draft, exc: dict[str, Any], tolerance: float, faults: list[dict[str, Any]]
) -> Decision:
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


def _supply(draft: _Draft, manifest: Manifest | None, reached: float) -> float:
    """The next stage's data supply into the evidence (`supply`); return the factor the forecast yield is
    discounted by for repetition: the worth of the next stage's tokens over that of the tokens measured (1 where
    no repetition is expected, or unknown: no manifest, or one without a data section)."""
    if manifest is None or manifest.data is None or draft.evidence["workflow"] is None:
        return 1.0
    recipe, nxt = manifest.data, draft.next
    seen, coming = worth(recipe, 0, reached), worth(recipe, reached, nxt.tokens)
    factor = coming / seen if seen and coming is not None else 1.0
    if seen is None or coming is None:
        unknown = ", ".join(s.name for s in recipe.sources if s.unique_tokens is None)
        draft.check(
            "repetition discount",
            None,
            f"unique tokens unknown for {unknown}: the forecast yield is not "
            "discounted for repetition (record data.sources[].unique_tokens)",
        )
    draft.evidence["supply"] = {
        "stage": nxt.name,
        "sources": [r.to_dict() for r in stage_supply(recipe, nxt.name, reached, nxt.tokens)],
        "worth_measured": seen,
        "worth_next": coming,
        "discount": factor,
    }
    if factor < 1:
        draft.check(
            "repetition discount",
            None,
            f"{nxt.name}'s tokens are worth x{coming:.3g} new ones, the tokens "
            f"measured x{seen:.3g}: the forecast yield is discounted x{factor:.3g} (Muennighoff et al. 2023)",
        )
    return factor


def _epochs(draft: _Draft, holds: list[tuple[str, str]]) -> None:
    """The policy's `max_epochs` on each source of the next stage."""
    limit, supply, nxt = draft.policy.requirements.max_epochs, draft.evidence.get("supply"), draft.next
    if limit is None:
        return
    if supply is None:
        draft.check("data supply", False, "the target's recipe is unknown (no manifest, or several workflows)")
        holds.append(("the data supply is unknown", "record the recipe (manifest `data`) with the runs"))
        return
    unknown = [r["source"] for r in supply["sources"] if r["unique_tokens"] is None and r["drawn_tokens"] > 0]
    if unknown:
        draft.check("data supply", False, f"unique tokens unknown for {', '.join(unknown)}")
        holds.append(
            (
                f"the unique tokens of {', '.join(unknown)} are unknown",
                "record data.sources[].unique_tokens in the manifests",
            )
        )
        return
    over = sorted((r for r in supply["sources"] if r["epochs"] > limit), key=lambda r: -r["epochs"])
    passes = ", ".join(f"{r['source']} x{r['epochs']:.3g}" for r in supply["sources"])
    if draft.check("data supply", not over, f"{nxt.name} passes {passes}; the policy allows {limit:g}"):
        return
    for r in over:
        need = r["drawn_tokens"] / limit
        holds.append(
            (
                f"{nxt.name} would pass {r['source']} {r['epochs']:.3g} times (the policy allows {limit:g})",
                f"grow {r['source']} to at least {need:,.0f} unique tokens (it holds {r['unique_tokens']:,}), "
                "or lower its weight",
            )
        )


@dataclass(frozen=True)
class _Target:
    """The target's runs as the gate reads them: grouped by budget (`budgets`), each with its manifest."""

    runs: list[str]
    left_out: dict[str, str]
    groups: list[tuple[float, list[str]]]
    manifests: dict[str, Manifest | None]

    @property
    def reached(self) -> float:  # the largest budget's tokens
        return self.groups[-1][0]

    @property
    def last(self) -> list[str]:  # the largest budget's runs
        return self.groups[-1][1]

    @property
    def seeds(self) -> int:
        """Seeds behind the forecast: every budget's in a fit over three or more budgets, else the largest's."""
        return min(len(rs) for _, rs in self.groups) if len(self.groups) >= 3 else len(self.last)


@dataclass(frozen=True)
class _Bounds:
    """The forecast yield per billion tokens and its interval, discounted for repetition, against the threshold."""

    point: float
    lo: float
    hi: float
    threshold: float
    factor: float
    """The repetition discount (`_supply`); 1: none."""

    @property
    def discounted(self) -> str:
        return " (discounted for repetition)" if self.factor < 1 else ""


def _holds(
    draft: _Draft, ledger: Ledger, t: _Target, bounds: _Bounds, cost: tuple[float | None, str]
) -> list[tuple[str, str]]:
    """The requirements past the forecast's optimistic bound; each unmet one as (why, what to run next)."""
    holds: list[tuple[str, str]] = []
    _interval(draft, t, bounds, holds)
    _per_dollar(draft, bounds, cost, holds)
    _epochs(draft, holds)
    _regressions(draft, ledger, t, holds)
    _tokens_per_param(draft, t, holds)
    _workflow(draft, ledger, t, holds)
    return holds


def _interval(draft: _Draft, t: _Target, b: _Bounds, holds: list[tuple[str, str]]) -> None:
    """The forecast interval's lower bound above the threshold; else the seeds (or budgets) that would narrow it."""
    req = draft.policy.requirements
    if draft.check(
        "lower bound above threshold",
        b.lo > b.threshold,
        f"lower {b.lo:,.0f} vs {b.threshold:,.0f} per billion tokens{b.discounted}",
    ):
        return
    more = req.min_seeds
    if b.point > b.threshold and b.hi > b.lo:
        more = stats.seeds_for_margin(draft.evidence["seeds"], (b.hi - b.lo) / 2, b.point - b.threshold)
    three = (
        ""
        if len(t.groups) >= 3
        else f", or probes at {t.reached / 2:,.0f} and {t.reached * 2:,.0f} tokens to fit "
        "the final losses of three budgets"
    )
    holds.append(
        (
            f"the interval is too wide: {b.point:,.0f} per billion tokens{b.discounted}, "
            f"{draft.evidence['forecast']['interval_of']} [{b.lo:,.0f}, {b.hi:,.0f}], threshold {b.threshold:,.0f}",
            f"run {more} more seed{'s' * (more != 1)} at {t.reached:,.0f} tokens{three}",
        )
    )


def _per_dollar(draft: _Draft, b: _Bounds, cost: tuple[float | None, str], holds: list[tuple[str, str]]) -> None:
    """The lower bound per dollar above the policy's `min_yield_per_usd`, where it asks for one."""
    least = draft.policy.requirements.min_yield_per_usd
    usd, how = cost
    if least is None:
        return
    if usd is None:
        draft.check("yield per dollar", False, how)
        holds.append((f"yield per dollar asked for, but {how}", "record the price and wall time in the manifests"))
    elif not draft.check(
        "yield per dollar", b.lo / usd > least, f"lower {b.lo / usd:.4g} vs {least:g} per dollar ({how})"
    ):
        holds.append(
            (
                f"the yield per dollar's lower bound {b.lo / usd:.4g} is below {least:g}",
                "more seeds to narrow the interval, or cheaper hardware",
            )
        )


def _regressions(draft: _Draft, ledger: Ledger, t: _Target, holds: list[tuple[str, str]]) -> None:
    """No hard slice or capability task of the largest budget's runs worse than the tolerance below its best."""
    tolerance = draft.policy.requirements.regression_tolerance
    worse = draft.evidence["regressions"] = regressions(ledger, t.last)
    bad = {k: v for k, v in worse.items() if v > tolerance}
    if draft.check(
        "no regression",
        not bad,
        ", ".join(f"{k} worse by {v:.4f}" for k, v in bad.items())
        or f"hard slices and capability tasks within {tolerance} of their best",
    ):
        return
    key = max(bad, key=lambda k: bad[k])
    holds.append(
        (
            f"{key} regressed by {bad[key]:.4f} (tolerance {tolerance})",
            f"find what costs {key} (the mixture's share of that slice, a filter) before scaling up",
        )
    )


def _tokens_per_param(draft: _Draft, t: _Target, holds: list[tuple[str, str]]) -> None:
    """The next stage's tokens per model parameter at least the policy's `min_tokens_per_param`, where it asks."""
    least, nxt = draft.policy.requirements.min_tokens_per_param, draft.next
    if least <= 0:
        return
    params = max((m.model.params for m in t.manifests.values() if m and m.model and m.model.params), default=None)
    if params is None:
        draft.check("tokens per parameter", False, "model parameters unknown (manifest model.params)")
        holds.append(("model parameters unknown", "record model.params in the manifests"))
        return
    tpp = draft.evidence["next_tokens_per_param"] = nxt.tokens / params
    if not draft.check(
        "tokens per parameter", tpp >= least, f"{nxt.name}: {tpp:.3g} tokens per parameter, the policy needs {least:g}"
    ):
        holds.append(
            (
                f"{nxt.name} would leave the model undertrained ({tpp:.3g} tokens per parameter)",
                f"give {nxt.name} at least {least * params:,.0f} tokens, or a smaller model",
            )
        )


def _workflow(draft: _Draft, ledger: Ledger, t: _Target, holds: list[tuple[str, str]]) -> None:
    """One workflow among the target's runs, and past the exploration share the one approved earlier (`_locked`)."""
    evidence, nxt = draft.evidence, draft.next
    if evidence["workflow"] is None:
        first = t.manifests[t.runs[0]]
        fields = sorted({f for m in t.manifests.values() if m and first for f in manifest_fields(first, m, WORKFLOW)})
        draft.check("one workflow", False, f"the target's runs differ in {', '.join(fields[:4]) or 'their manifests'}")
        holds.append(("the target mixes workflows", "gate one recipe (one workflow) at a time"))
    elif not draft.policy.is_exploration(nxt):
        ok, why = _locked(ledger, draft.target, evidence["workflow"], t.manifests[t.runs[0]])
        evidence["locked"] = why
        if not draft.check("workflow locked", ok, why):
            holds.append((why, "restore the approved workflow, or explore the change as a new target"))
    else:
        draft.check(
            "workflow locked",
            None,
            f"{nxt.name} is within the exploration share ({draft.policy.exploration_share:.0%})",
        )


def gate(ledger: Ledger, target: str, policy: Policy, *, metric: str = "val/loss") -> Decision:
    """Decide whether `target`'s evidence earns its next stage under `policy`; see the module docstring."""
    req = policy.requirements
    runs, left_out = target_runs(ledger, target)
    t = _Target(runs, left_out, budgets(ledger, runs), {r: ledger.manifest(r) for r in runs})
    draft = _draft(t, target, policy)
    evidence = draft.evidence
    faults, stalls = _faults(draft, ledger, t)
    if policy.exception is not None:
        exc = evidence["exception"] = hardware_exception(
            ledger, t.runs, t.manifests, policy.exception, metric, req.level
        )
        if exc["applies"]:
            return _throughput_decision(draft, exc, policy.exception.throughput_tolerance, faults)
        draft.check("new-hardware exception", None, f"ended: {exc['reason']}; learning decides")
        draft.suffix = f"; new-hardware exception ended: {exc['reason']}"

    seeds = t.seeds
    enough = draft.check("seeds", seeds >= req.min_seeds, f"{seeds} per budget, the policy needs {req.min_seeds}")
    try:
        evidence["forecast"] = forecast_yield(ledger, t.groups, draft.next.tokens, req.level, metric)
    except InputError as err:
        evidence["forecast"] = None
        draft.check("forecast", False, f"no forecast: {err}")
    held = _held_before_forecast(draft, faults, stalls, enough, t, metric)
    if held is not None:
        return held
    fc = evidence["forecast"]
    factor = _supply(draft, t.manifests[t.runs[0]], t.reached)
    lo, hi = (v * factor for v in fc["interval"])
    bounds = _Bounds(fc["yield_per_btok"] * factor, lo, hi, req.min_yield_per_btok, factor)
    draft.check(
        "optimistic bound above threshold",
        hi >= bounds.threshold,
        f"upper {hi:,.0f} vs {bounds.threshold:,.0f} per billion tokens{bounds.discounted}",
    )
    usd, how = cost = cost_per_btok(ledger, t.last, {r: t.manifests[r] for r in t.last})
    evidence.update(cost_per_btok=usd, cost_basis=how)
    if usd is not None:
        evidence["yield_per_usd"] = {"yield_per_usd": bounds.point / usd, "interval": [lo / usd, hi / usd]}
    _price(draft, ledger, t, bounds)
    rejected = _rejected(draft, bounds, usd)
    if rejected is not None:
        return rejected
    holds = _holds(draft, ledger, t, bounds, cost)
    if holds:
        return draft.decide("hold", "; ".join(h[0] for h in holds), run_next="; ".join(h[1] for h in holds))
    return draft.decide(
        "approve",
        f"forecast yield {bounds.point:,.0f} per billion "
        f"tokens{bounds.discounted}, {fc['interval_of']} [{lo:,.0f}, {hi:,.0f}], above {bounds.threshold:,.0f} on "
        f"{seeds} seeds; no open fault or regression",
    )


def _price(draft: _Draft, ledger: Ledger, t: _Target, b: _Bounds) -> None:
    """The next stage's price beside the learning it is forecast to buy (a note: the price decides only through
    the policy's `min_yield_per_usd`)."""
    nxt = draft.next
    price = draft.evidence["next_stage_price"] = stage_price(
        ledger, t.last, {r: t.manifests[r] for r in t.last}, float(nxt.tokens), draft.policy
    )
    gain = b.point * nxt.tokens / 1e9
    price["forecast_gain"] = gain
    parts = [f"{nxt.tokens:,} tokens"]
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


def _draft(t: _Target, target: str, policy: Policy) -> _Draft:
    """The decision's draft, its evidence started with the runs, budgets, manifests and workflow."""
    current, nxt = _stages(policy, t.reached)
    digests = {workflow_digest(m) for m in t.manifests.values()}
    one = len(digests) == 1
    return _Draft(
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
            "next_stage_tokens": nxt.tokens,
            "primary": policy.primary,
            "manifests": {r: (m.content_hash() if m else None) for r, m in t.manifests.items()},
            "workflow": next(iter(digests)) if one else None,
            "workflow_fields": workflow(t.manifests[t.runs[0]]) if one else None,
        },
    )


def _faults(draft: _Draft, ledger: Ledger, t: _Target) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The target's diagnoses (`findings`: stored and found by the gate's own run of the detectors) kept in the
    evidence; return the open ones of a cause that is not the data's fault, and the stalls of undetermined cause,
    each checked."""
    req = draft.policy.requirements
    found = draft.evidence["diagnosed"] = target_findings(ledger, t.runs)
    faults = draft.evidence["open_diagnoses"] = open_faults(found, draft.policy)
    stalls = draft.evidence["undetermined_stalls"] = open_faults(found, draft.policy, ["stalled"])
    opened = ", ".join(f"{f['cause']} on {f['run']} ({_origin(f)})" for f in faults)
    looked = f"the detectors ran on {len(t.runs)} run{'s' * (len(t.runs) != 1)}"
    draft.check(
        "no open non-data fault",
        not faults,
        f"open: {opened}"
        if faults
        else f"no diagnosis of {', '.join(req.blocking_causes)} above confidence {req.diagnosis_confidence} ({looked})",
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


def _origin(f: dict[str, Any]) -> str:
    return "found by the gate" if f["event"] is None else f"event {f['event']}"


def _held_before_forecast(
    draft: _Draft,
    faults: list[dict[str, Any]],
    stalls: list[dict[str, Any]],
    enough: bool | None,
    t: _Target,
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
    if not enough:
        seeds, more = t.seeds, req.min_seeds - t.seeds
        return draft.decide(
            "hold",
            f"{seeds} seed{'s' * (seeds != 1)}, the policy needs {req.min_seeds} for an interval",
            run_next=f"run {more} more seed{'s' * (more != 1)} at {t.reached:,.0f} tokens",
        )
    if draft.evidence["forecast"] is None:
        return draft.decide("hold", draft.checks[-1].detail, run_next=f"record evaluations of {metric}")
    return None


def _rejected(draft: _Draft, b: _Bounds, usd: float | None) -> Decision | None:
    """A reject: even the forecast's optimistic bound is below the threshold (per billion tokens, or per dollar where
    the policy asks); None otherwise."""
    least_usd, fc, nxt = draft.policy.requirements.min_yield_per_usd, draft.evidence["forecast"], draft.next
    if b.hi < b.threshold:
        per = f"{b.hi:,.0f} per billion tokens{b.discounted}, below {b.threshold:,.0f}"
    elif least_usd is not None and usd is not None and b.hi / usd < least_usd:
        per = f"{b.hi / usd:.4g} per dollar, below {least_usd:g}"
    else:
        return None
    turned = fc["capped_by_recent"] and fc["recent"]["yield_per_btok"] < 0
    why = (
        " (the loss has turned up)"
        if turned
        else (f" at {nxt.name}'s repetition" if fc["interval"][1] >= b.threshold else "")
    )
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
        policy=policy.model_dump(mode="json"),
        policy_hash=decision.policy_hash,
    )
