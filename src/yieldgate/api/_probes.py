"""Probes and campaigns: one training of the reference GPT, the batch check, a campaign run and its stored record,
progress, proposals and attribution."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yieldgate.errors import InputError

if TYPE_CHECKING:
    from yieldgate.probe.batch import BatchCheckReport
    from yieldgate.probe.campaign.executors import CampaignProbes
    from yieldgate.probe.trainer import ProbeTraining


from yieldgate.api._common import LedgerArg, LocationArg, _location, _open


def campaign_proposals(name: str, *, ledger: LedgerArg = None, level: float | None = None) -> dict[str, Any]:
    """The mixture regression of a results campaign and the mixture it proposes, per metric (`yieldgate campaign
    NAME --propose`; `analysis.results.mixture_regressions`)."""
    from yieldgate.analysis.results import mixture_regressions

    with _open(ledger, readonly=True) as led:
        return mixture_regressions(led, name, level=level)


def campaigns(*, ledger: LedgerArg = None) -> list[str]:
    """The names of the ledger's campaigns (`yieldgate campaign`)."""
    with _open(ledger, readonly=True) as led:
        return led.campaigns()


def campaign(name: str, *, ledger: LedgerArg = None) -> dict[str, Any]:
    """A campaign's stored record: its spec, and the summary `yieldgate probe` last stored (None before one)."""
    with _open(ledger, readonly=True) as led:
        return led.campaign(name)


def campaign_progress(name: str, *, ledger: LedgerArg = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A campaign's record (`campaign`) and its progress (`probe.campaign.status.campaign_status`: done, running,
    failed, left; None for imported results, which have no probes to run); while probes are left, the record's
    summary is the decision so far, from the probes done."""
    from yieldgate.analysis.campaign import summarise
    from yieldgate.analysis.results import is_results
    from yieldgate.probe.campaign.status import campaign_status

    with _open(ledger, readonly=True) as led:
        record = led.campaign(name)
        if is_results(record):
            return record, None
        try:
            status = campaign_status(led, name)
        except ValueError:  # a stored spec this version cannot plan again (pydantic's errors are ValueErrors)
            return record, None
        if status["done"] and status["done"] < status["planned"]:
            record = {**record, "summary": summarise(led, name).to_dict()}
        else:
            # The stored ranking is shown only while the records it was drawn from are whole: each probe's
            # evaluations and steps are read through their checksums (BlockDamaged names the damage).
            for run in status["done_runs"]:
                led.evals(run)
                led.steps(run, ["tokens"])
    return record, status


def campaign_attribution(
    name: str, *, ledger: LedgerArg = None, level: float | None = None, base: str | None = None, by: str | None = None
) -> dict[str, Any] | None:
    """A probe campaign's recipe x capability table and its sources' marginal effects: leave-one-out probes and, with
    enough mixtures, the mixture regression's (`analysis.attribution.attribution`), read afresh from the ledger at
    `level` (default: the campaign's), for recipe `base` (default: the first with leave-one-out probes, else the first)
    and its leave-one-out probes that move each weight to `by` (default: those that renormalise the rest, where
    there are any); the summary `yieldgate probe` stores holds the same (`attribution`). None for imported results,
    or without two recipes' finished probes at one budget."""
    from yieldgate.analysis.attribution import attribution

    with _open(ledger, readonly=True) as led:
        return attribution(led, name, level=level, base=base, by=by)


def train(
    recipe: str | os.PathLike[str],
    *,
    tokens: int | None = None,
    seed: int = 0,
    run: str | None = None,
    resume_from: str | None = None,
    cooldown_tokens: int | None = None,
    ledger: LocationArg = None,
    on_stage: Callable[[str, str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ProbeTraining:
    """Train one probe of the reference GPT on a recipe file, `tokens` long, into the ledger (`yieldgate train`); or
    continue probe `resume_from` from its checkpoint for `cooldown_tokens`, its LR cooled down linearly to 0, as a
    new run. `run` defaults to RECIPE/s<seed>/t<tokens> (RESUME_FROM/cooldown<N>). `on_stage(run, stage)` hears
    "preparing data", then "training"; `progress(step, steps)` as it trains."""
    if (resume_from is None) != (cooldown_tokens is None):
        raise InputError("resume_from and cooldown_tokens go together", parameter=("resume_from", "cooldown_tokens"))
    if resume_from is None and tokens is None:
        raise InputError(
            "give tokens (the probe's budget), or resume_from with cooldown_tokens",
            parameter=("tokens", "resume_from", "cooldown_tokens"),
        )
    # Checked before these imports: a call that cannot train says so without loading torch.
    from yieldgate.data.recipe import resolve
    from yieldgate.manifest import load_recipe
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.cooldown import cooldown_probe
    from yieldgate.probe.trainer import ProbeTraining, train_probe

    parsed = load_recipe(Path(recipe))
    name = run or (
        f"{resume_from}/cooldown{cooldown_tokens}" if resume_from else f"{Path(recipe).stem}/s{seed}/t{tokens}"
    )
    stage = on_stage or (lambda run, what: None)
    stage(name, "preparing data")
    data = resolve(parsed, seed=seed)
    stage(name, "training")
    if resume_from is not None and cooldown_tokens is not None:  # given together (checked above)
        final = cooldown_probe(
            data,
            source_run=resume_from,
            cooldown_tokens=cooldown_tokens,
            run=name,
            ledger=_location(ledger),
            progress=progress,
        )
    else:
        assert tokens is not None  # checked above
        final = train_probe(
            data, ProbeConfig(tokens=tokens, seed=seed), run=name, ledger=_location(ledger), progress=progress
        )
    return ProbeTraining(name, final)


def batch_check(
    *,
    run: str | None = None,
    ledger: LocationArg = None,
    progress: Callable[[int, int], None] | None = None,
    **setup: Any,
) -> BatchCheckReport:
    """The small-batch baseline check (`yieldgate batch-check`): does a bigger batch, accumulation or lower
    precision change what is learned per token? `setup`: `probe.batch.BatchCheckSetup`'s fields
    (`candidate_batch=`, `precision=`, `seeds=`, ...). With `run`, the result is kept with that run (created if
    absent), where `diagnose` reads it. `progress(done, total)` once the setup is checked (done 0), then after
    each training."""
    from yieldgate.probe.batch import BatchCheckReport, BatchCheckSetup, run_batch_check

    checked = BatchCheckSetup(**setup)
    if progress is not None:
        progress(0, 2 * checked.seeds)
    result = run_batch_check(checked, ledger=_location(ledger), run=run, progress=progress)
    return BatchCheckReport(checked, result, run)


CampaignDisplay = Callable[[int], AbstractContextManager[tuple[Any, Any]]]
"""`probe`'s `display`: given the number of probes planned, a context manager held open while they train that gives
`(progress, on_result)` for `run_campaign` (`report.console.CampaignProgress`)."""


def probe(
    campaign_file: str | os.PathLike[str],
    *,
    ledger: LocationArg = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    ablate_sources: bool = False,
    ablate_recipe: str | None = None,
    ablate_by: str | None = None,
    display: CampaignDisplay | None = None,
) -> CampaignProbes:
    """Run a probe campaign (`yieldgate probe`): every recipe x seed x budget the ledger does not already hold, on
    `executor` (local, ray or slurm; `workers` at once; Ray at `address`), then rank the recipes over every finished
    probe and store that summary with the campaign. With `ablate_sources`, also one leave-one-out recipe per source
    of recipe `ablate_recipe` (default: the first) at the smallest budget, the rest renormalised or, with `ablate_by`,
    the source's weight moved to that baseline source (`probe.campaign.ablation`; a base with nothing to leave out is
    refused), and the summary's attribution is that base's. The file is read and checked before any probe trains, and
    before `display` is called."""
    from yieldgate.analysis.attribution import attribution
    from yieldgate.analysis.campaign import summarise
    from yieldgate.probe.campaign import load_campaign, run_campaign
    from yieldgate.probe.campaign import plan as planned
    from yieldgate.probe.campaign.ablation import ablation_plan
    from yieldgate.probe.campaign.executors import CampaignProbes, preflight_campaign

    if not ablate_sources and (ablate_recipe is not None or ablate_by is not None):
        raise InputError(
            "ablate_recipe and ablate_by say which leave-one-out probes to train: give them with ablate_sources",
            parameter=("ablate_recipe", "ablate_by", "ablate_sources"),
        )
    campaign = preflight_campaign(load_campaign(Path(campaign_file)), executor)
    extra = list(ablation_plan(campaign, ablate_recipe, ablate_by)) if ablate_sources else []
    location = _location(ledger)
    shown = display(len(planned(campaign)) + len(extra)) if display is not None else nullcontext((None, None))
    with shown as (on_step, on_result):
        done = run_campaign(
            campaign,
            location,
            executor=executor,  # type: ignore[arg-type]  # checked by preflight_campaign
            workers=workers,
            address=address,
            progress=on_step,
            on_result=on_result,
            extra=extra,
        )
    if campaign.adaptive is not None:  # rounds of more seeds for the recipes still close (`probe.campaign.adaptive`)
        from yieldgate.probe.campaign.adaptive import adapt

        def round_(specs: list[Any]) -> None:
            more = display(len(planned(campaign)) + len(specs)) if display is not None else nullcontext((None, None))
            with more as (on_step, on_result):
                run_campaign(
                    campaign,
                    location,
                    executor=executor,  # type: ignore[arg-type]  # checked by preflight_campaign
                    workers=workers,
                    address=address,
                    progress=on_step,
                    on_result=on_result,
                    extra=specs,
                )

        adapt(campaign, location, round_)
    with _open(location, readonly=False) as led:
        summary = summarise(led, campaign.name)
        base = extra[0].ablation if extra and extra[0].ablation else None
        read = summary.attribution
        if base is not None and read is not None and (read["base"], read.get("by")) != (base["base"], base.get("by")):
            # The summary reads the first recipe's leave-one-out probes by default; these are another base's.
            found = attribution(led, campaign.name, level=summary.level, base=base["base"], by=base.get("by"))
            summary = dataclasses.replace(summary, attribution=found)
        led.set_campaign_summary(campaign.name, summary.to_dict())
    return CampaignProbes(done, summary)
