"""What the evidence must show past the forecast's optimistic bound, each a check on the decision's `Draft` and, when
unmet, a hold with what to run next: the interval's lower bound, the yield per dollar, the data supply of the next
stage (and the repetition discount of its forecast), no regression, tokens per parameter, one workflow, locked past
exploration to the one approved earlier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yieldgate.analysis import stats
from yieldgate.gate.draft import Bounds, Draft
from yieldgate.gate.evidence import WORKFLOW, manifest_fields, regressions
from yieldgate.gate.supply import stage_supply, worth
from yieldgate.manifest import Manifest, parse_manifest

if TYPE_CHECKING:
    from yieldgate.gate.target import TargetEvidence

__all__ = ["holds", "supply_discount"]


def _locked(approvals: list[dict[str, Any]], digest: str | None, manifest: Manifest | None) -> tuple[bool, str]:
    """Past exploration: the workflow must be the one approved earlier for this target (`approvals`: its approve
    decisions, oldest first)."""
    approved = [row for row in approvals if row["decision"] == "approve" and (row["evidence"] or {}).get("workflow")]
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


def supply_discount(draft: Draft, manifest: Manifest | None, reached: float) -> float:
    """The next stage's data supply into the evidence (`supply`); return the factor the forecast yield is
    discounted by for repetition: the worth of the next stage's tokens over that of the tokens measured (1 where
    no repetition is expected, or unknown: no manifest, or one without a data section)."""
    if manifest is None or manifest.data is None or draft.evidence["workflow"] is None:
        return 1.0
    recipe, nxt = manifest.data, draft.next
    seen, coming = worth(recipe, 0, reached), worth(recipe, reached, nxt.token_budget)
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
        "sources": [r.to_dict() for r in stage_supply(recipe, nxt.name, reached, nxt.token_budget)],
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


def _epochs(draft: Draft, holds: list[tuple[str, str]]) -> None:
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
    drawn = [r for r in supply["sources"] if r["drawn_tokens"] > 0]  # a source of weight 0 is passed no times
    over = sorted((r for r in drawn if r["epochs"] > limit), key=lambda r: -r["epochs"])
    passes = ", ".join(f"{r['source']} x{r['epochs']:.3g}" for r in drawn)
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


def holds(draft: Draft, t: TargetEvidence, bounds: Bounds, cost: tuple[float | None, str]) -> list[tuple[str, str]]:
    """The requirements past the forecast's optimistic bound; each unmet one as (why, what to run next)."""
    holds: list[tuple[str, str]] = []
    _interval(draft, t, bounds, holds)
    _per_dollar(draft, bounds, cost, holds)
    _epochs(draft, holds)
    _regressions(draft, t, holds)
    _tokens_per_param(draft, t, holds)
    _workflow(draft, t, holds)
    return holds


def _interval(draft: Draft, t: TargetEvidence, b: Bounds, holds: list[tuple[str, str]]) -> None:
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


def _per_dollar(draft: Draft, b: Bounds, cost: tuple[float | None, str], holds: list[tuple[str, str]]) -> None:
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


def _regressions(draft: Draft, t: TargetEvidence, holds: list[tuple[str, str]]) -> None:
    """No hard slice or capability task of the largest budget's runs worse than the tolerance below its best."""
    tolerance = draft.policy.requirements.regression_tolerance
    worse = draft.evidence["regressions"] = regressions(t.last_data())
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


def _tokens_per_param(draft: Draft, t: TargetEvidence, holds: list[tuple[str, str]]) -> None:
    """The next stage's tokens per model parameter at least the policy's `min_tokens_per_param`, where it asks."""
    least, nxt = draft.policy.requirements.min_tokens_per_param, draft.next
    if least <= 0:
        return
    params = max((m.model.params for m in t.manifests.values() if m and m.model and m.model.params), default=None)
    if params is None:
        draft.check("tokens per parameter", False, "model parameters unknown (manifest model.params)")
        holds.append(("model parameters unknown", "record model.params in the manifests"))
        return
    tpp = draft.evidence["next_tokens_per_param"] = nxt.token_budget / params
    if not draft.check(
        "tokens per parameter", tpp >= least, f"{nxt.name}: {tpp:.3g} tokens per parameter, the policy needs {least:g}"
    ):
        holds.append(
            (
                f"{nxt.name} would leave the model undertrained ({tpp:.3g} tokens per parameter)",
                f"give {nxt.name} at least {least * params:,.0f} tokens, or a smaller model",
            )
        )


def _workflow(draft: Draft, t: TargetEvidence, holds: list[tuple[str, str]]) -> None:
    """One workflow among the target's runs, and past the exploration share the one approved earlier (`_locked`)."""
    evidence, nxt = draft.evidence, draft.next
    if evidence["workflow"] is None:
        first = t.manifests[t.runs[0]]
        fields = sorted({f for m in t.manifests.values() if m and first for f in manifest_fields(first, m, WORKFLOW)})
        draft.check("one workflow", False, f"the target's runs differ in {', '.join(fields[:4]) or 'their manifests'}")
        holds.append(("the target mixes workflows", "gate one recipe (one workflow) at a time"))
    elif not draft.policy.is_exploration(nxt):
        ok, why = _locked(t.approvals, evidence["workflow"], t.manifests[t.runs[0]])
        evidence["locked"] = why
        if not draft.check("workflow locked", ok, why):
            holds.append((why, "restore the approved workflow, or explore the change as a new target"))
    else:
        draft.check(
            "workflow locked",
            None,
            f"{nxt.name} is within the exploration share ({draft.policy.exploration_share:.0%})",
        )
