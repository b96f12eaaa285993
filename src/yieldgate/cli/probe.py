"""The commands that train: one probe, the small-batch check, a probe campaign, and a campaign's
stored results."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from yieldgate.cli.common import JsonOption, _float_option, _ledger, _print_json, _where, app, console
from yieldgate.errors import InputError
from yieldgate.report.console import (
    CampaignProgress,
    WorkProgress,
    render_batch_check,
    render_campaign,
    render_campaign_probes,
    render_campaign_status,
    render_campaigns,
    render_training,
)

if TYPE_CHECKING:
    from yieldgate.probe.campaign.executors import CampaignRun


@app.command()
def train(
    ctx: typer.Context,
    recipe: Annotated[Path, typer.Argument(help="Recipe file (YAML or JSON): sources, filters, dedup, tokenizer.")],
    tokens: Annotated[int | None, typer.Option("--tokens", help="Token budget of the probe.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of model, sampler and eval draw.")] = 0,
    run: Annotated[
        str | None,
        typer.Option(
            "--run", help="Run name (default: RECIPE/s<seed>/t<tokens>, or RUN/cooldown<N> with --resume-from)."
        ),
    ] = None,
    resume_from: Annotated[
        str | None,
        typer.Option(
            "--resume-from", help="Continue this probe run from its checkpoint (with --cooldown-tokens), as a new run."
        ),
    ] = None,
    cooldown_tokens: Annotated[
        int | None,
        typer.Option(
            "--cooldown-tokens",
            min=1,
            help="Tokens over which the LR cools down linearly to 0 from the resumed run's last LR.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Train one probe of the reference GPT on a recipe, with the Tracker, into the ledger; or, with --resume-from
    and --cooldown-tokens, continue a probe with its LR cooled down to 0 (the experiment that tells a plateau's
    cause: a drop means the schedule was the limit, none the data; `diagnose` on the original reads it).

    Example: yieldgate train recipes/shakespeare.yaml --tokens 1000000 --seed 1
    Example: yieldgate train recipes/shakespeare.yaml --resume-from shakespeare/s1/t1000000 --cooldown-tokens 100000
    """
    from yieldgate import api

    with WorkProgress(Console(stderr=True, emoji=False), quiet=as_json, ledger=_where(ctx)) as bar:
        result = api.train(
            recipe,
            tokens=tokens,
            seed=seed,
            run=run,
            resume_from=resume_from,
            cooldown_tokens=cooldown_tokens,
            ledger=_where(ctx),
            on_stage=lambda name, stage: bar.update(f"{name}: {stage}"),
            progress=lambda step, steps: bar.update(completed=step, total=steps),
        )
    if as_json:
        _print_json(result.to_dict())
    else:
        render_training(result.final, console, result.run)


@app.command("batch-check")
def batch_check(
    ctx: typer.Context,
    baseline_batch: Annotated[
        int, typer.Option("--baseline-batch", help="Sequences per step of the small-batch baseline (fp32).")
    ] = 8,
    candidate_batch: Annotated[
        int, typer.Option("--candidate-batch", help="Sequences per step of the candidate (all microbatches).")
    ] = 64,
    accumulation: Annotated[int, typer.Option("--accumulation", help="The candidate's microbatches per step.")] = 1,
    precision: Annotated[
        str, typer.Option("--precision", help="The candidate's precision: fp32, bf16 or fp16.")
    ] = "fp32",
    lr: Annotated[
        float, _float_option("--lr", help="Learning rate (AdamW) of the baseline, and of the candidate.")
    ] = 3e-3,
    candidate_lr: Annotated[
        float | None, _float_option("--candidate-lr", help="The candidate's own learning rate (default: --lr).")
    ] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds; each trains both from the same model.")] = 3,
    tokens: Annotated[int, typer.Option("--tokens", help="Tokens (bytes) each training sees.")] = 65_536,
    source: Annotated[str, typer.Option("--source", help="Built-in corpus source of the text.")] = "shakespeare-modern",
    run: Annotated[
        str | None, typer.Option("--run", help="Keep the result with this run (created if absent); diagnose reads it.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The small-batch baseline check: does a bigger batch, accumulation or lower precision change what is learned
    per token? Trains the reference GPT on the built-in corpus with the small-batch baseline and the candidate, the
    same tokens from the same model seed by seed, and compares learning per token against the seed noise; prints
    the verdict with its interval and the gradient norms with their noise correction (defaults: about 30 s on 2
    CPU cores).

    Example: yieldgate batch-check --baseline-batch 8 --candidate-batch 64 --precision bf16 --run bs64-bf16

    Example: yieldgate batch-check --candidate-batch 256 --accumulation 4 --candidate-lr 6e-3 --seeds 5 --json
    """
    from yieldgate import api

    def trained(done: int, total: int) -> None:
        bar.update("training baseline and candidate", completed=done, total=total)
        if done:
            bar.finished(f"{done} of {total} trainings done (the baseline and the candidate, seed by seed)")

    with WorkProgress(Console(stderr=True, emoji=False), quiet=as_json, transient=True, ledger=_where(ctx)) as bar:
        result = api.batch_check(
            baseline_batch=baseline_batch,
            candidate_batch=candidate_batch,
            accumulation=accumulation,
            precision=precision,
            lr=lr,
            candidate_lr=candidate_lr,
            seeds=seeds,
            tokens=tokens,
            source=source,
            run=run,
            ledger=_where(ctx),
            progress=trained,
        )
    if as_json:
        _print_json(result.to_dict())
    else:
        render_batch_check(result.result, console, result.setup, result.run)


@app.command()
def probe(
    ctx: typer.Context,
    campaign_file: Annotated[Path, typer.Argument(help="Campaign file (YAML or JSON): recipes, seeds, budgets.")],
    executor: Annotated[
        str,
        typer.Option(
            "--executor", help="local (worker processes), ray (Ray tasks) or slurm (Slurm jobs, own trainer)."
        ),
    ] = "local",
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Probes at once (default: one per core).")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option("--address", help="Ray cluster address (default: a local Ray instance started for the campaign)."),
    ] = None,
    ablate_sources: Annotated[
        bool,
        typer.Option(
            "--ablate-sources",
            help="Also train one leave-one-out recipe per source of the first recipe (BASE-minus-SOURCE: its weight "
            "0, the rest renormalised), at the smallest budget with its seeds, and show each source's effect with "
            "the weights before and after.",
        ),
    ] = False,
    ablate_recipe: Annotated[
        str | None,
        typer.Option("--recipe", help="With --ablate-sources: the recipe to ablate (default: the first)."),
    ] = None,
    ablate_by: Annotated[
        str | None,
        typer.Option(
            "--ablate-by",
            help="With --ablate-sources: move each left-out source's weight to this baseline source of the recipe, "
            "the others' unchanged (BASE-minus-SOURCE+BASELINE), instead of renormalising the rest.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a probe campaign: every recipe x seed x budget the ledger does not already hold, then rank the
    recipes per budget with intervals over seeds, mark ties, and measure decision accuracy.

    Re-running a campaign skips finished probes; a probe that fails is recorded with its error.

    Example: yieldgate probe campaign.yaml --workers 2

    Example: yieldgate probe examples/campaign.yaml --ablate-sources

    Example: yieldgate probe campaign.yaml --ablate-sources --recipe mix --ablate-by clean
    """
    from yieldgate import api

    location = _where(ctx)
    try:
        result = api.probe(
            campaign_file,
            ledger=location,
            executor=executor,
            workers=workers,
            address=address,
            ablate_sources=ablate_sources,
            ablate_recipe=ablate_recipe,
            ablate_by=ablate_by,
            display=lambda total: CampaignProgress(
                Console(stderr=True, emoji=False), total, quiet=as_json, ledger=location
            ),
        )
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: the probes finished so far are in {location}; run the same command again to train the rest",
            err=True,
        )
        raise typer.Exit(130) from None
    if as_json:
        _print_json(result.to_dict())
    else:
        render_campaign_probes(result, console, Console(stderr=True, emoji=False))
    _exit_if_failed(result.run)


def _exit_if_failed(run: CampaignRun) -> None:
    """Exit status 1 with one line naming the first failure where a probe failed: the others are ranked and stored,
    and the exit status still says the campaign is not whole."""
    if run.failed:
        first, error = next(iter(run.failed.items()))
        typer.echo(
            f"error: campaign {run.campaign!r}: {len(run.failed)} of {run.planned} probe(s) failed; the first, "
            f"{first}: {error} (each with its output: yieldgate campaign {run.campaign})",
            err=True,
        )
        raise typer.Exit(1)


@app.command()
def campaign(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Campaign name (omit to list the campaigns).")] = None,
    propose: Annotated[
        bool,
        typer.Option(
            "--propose",
            help="Imported results with mixture weights: fit the metric over the mixtures, score it on the larger "
            "runs' and propose the best mixture.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a campaign's rankings, ties, decision accuracy and forecasts, as last stored by `yieldgate probe` (or
    by `yieldgate import results`: each smaller scale's decisions against the largest); while probes are running,
    failed or left, what is done, running, failed (with each failure's output) and left, and the decision so far.

    Example: yieldgate campaign mixtures --json

    Example: yieldgate campaign regmix --propose
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        if name is None:
            names = api.campaigns(ledger=ledger)
            _print_json(names) if as_json else render_campaigns(names, console)
            return
        if propose:
            from yieldgate.report.console import render_proposals

            report = api.campaign_proposals(name, ledger=ledger)
            _print_json(report) if as_json else render_proposals(report, console)
            return
        record, status = api.campaign_progress(name, ledger=ledger)
        incomplete = status is not None and status["done"] < status["planned"]
    if record["summary"] is None and (status is None or status["left"] == status["planned"]):
        raise InputError(f"campaign {name!r} has no stored results yet; run `yieldgate probe` on its file")
    if as_json:
        _print_json({**record, "progress": status} if incomplete else record)
        return
    if incomplete and status is not None:
        render_campaign_status(status, console, name)
    if record["summary"] is not None:
        render_campaign(record["summary"], console)
