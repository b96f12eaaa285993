"""The `yieldgate` command: parses, calls the library, renders.

Every command that prints a table takes `--json` and then prints JSON only. Our errors are one line on
stderr with exit status 2.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from yieldgate.cli.common import (
    FLAGS,
    JsonOption,
    _float_option,
    _ledger,
    _print_json,
    _where,
    app,
    console,
    ledger_app,
)
from yieldgate.errors import InputError
from yieldgate.names import TEXTLOG_FORMATS
from yieldgate.report.console import (
    CampaignProgress,
    decision_record,
    render_audit,
    render_audit_pair,
    render_batch_check,
    render_campaign,
    render_campaign_run,
    render_campaigns,
    render_check,
    render_copy,
    render_decision,
    render_decisions,
    render_dedup,
    render_export,
    render_imports,
    render_merge,
    render_plan,
    render_training,
)

# The command families moved out so far, in the order `yieldgate --help` lists their commands.
# isort: off
import yieldgate.cli.runs  # noqa: F401
import yieldgate.cli.analysis  # noqa: F401
# isort: on


__all__ = ["FLAGS", "app", "console", "main"]


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
    from rich.progress import Progress

    from yieldgate.data.recipe import resolve
    from yieldgate.manifest import load_recipe
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.cooldown import cooldown_probe
    from yieldgate.probe.trainer import train_probe

    if (resume_from is None) != (cooldown_tokens is None):
        raise InputError("--resume-from and --cooldown-tokens go together")
    if resume_from is None and tokens is None:
        raise InputError("give --tokens (the probe's budget), or --resume-from with --cooldown-tokens")
    parsed = load_recipe(recipe)
    name = run or (f"{resume_from}/cooldown{cooldown_tokens}" if resume_from else f"{recipe.stem}/s{seed}/t{tokens}")
    location = ctx.find_root().obj["ledger"]
    with Progress(console=Console(stderr=True), disable=as_json) as bar:
        task = bar.add_task(f"{name}: preparing data", total=None)
        data = resolve(parsed, seed=seed)
        bar.update(task, description=f"{name}: training")
        on_step = lambda step, steps: bar.update(task, completed=step, total=steps)  # noqa: E731
        if resume_from is not None and cooldown_tokens is not None:  # given together (checked above)
            final = cooldown_probe(
                data,
                source_run=resume_from,
                cooldown_tokens=cooldown_tokens,
                run=name,
                ledger=location,
                progress=on_step,
            )
        else:
            assert tokens is not None  # checked above
            final = train_probe(
                data, ProbeConfig(tokens=tokens, seed=seed), run=name, ledger=location, progress=on_step
            )
    if as_json:
        _print_json({"run": name, "final": final})
    else:
        render_training(final, console, name)


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
    from rich.progress import Progress

    from yieldgate.probe.batch import BatchCheckSetup, run_batch_check

    setup = BatchCheckSetup(
        baseline_batch=baseline_batch,
        candidate_batch=candidate_batch,
        accumulation=accumulation,
        precision=precision,  # type: ignore[arg-type]  # checked by BatchCheckSetup
        lr=lr,
        candidate_lr=candidate_lr,
        seeds=seeds,
        tokens=tokens,
        source=source,
    )
    err = Console(stderr=True)
    with Progress(console=err, disable=as_json or not err.is_terminal, transient=True) as bar:
        task = bar.add_task("training baseline and candidate", total=2 * seeds)
        result = run_batch_check(
            setup,
            ledger=ctx.find_root().obj["ledger"],
            run=run,
            progress=lambda done, total: bar.update(task, completed=done),
        )
    if as_json:
        _print_json({"setup": dataclasses.asdict(setup), "run": run, **dataclasses.asdict(result)})
    else:
        render_batch_check(result, console, setup, run)


@app.command()
def probe(
    ctx: typer.Context,
    campaign_file: Annotated[Path, typer.Argument(help="Campaign file (YAML or JSON): recipes, seeds, budgets.")],
    executor: Annotated[str, typer.Option("--executor", help="local (worker processes) or ray (Ray tasks).")] = "local",
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Probes at once (default: one per core).")
    ] = None,
    address: Annotated[
        str | None,
        typer.Option("--address", help="Ray cluster address (default: a local Ray instance started for the campaign)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a probe campaign: every recipe x seed x budget the ledger does not already hold, then rank the
    recipes per budget with intervals over seeds, mark ties, and measure decision accuracy.

    Re-running a campaign skips finished probes; a probe that fails is recorded with its error.

    Example: yieldgate probe campaign.yaml --workers 2
    """
    from yieldgate.analysis.campaign import summarise
    from yieldgate.probe.campaign import load_campaign, plan, run_campaign

    campaign = load_campaign(campaign_file)
    location = ctx.find_root().obj["ledger"]
    total = len(plan(campaign))
    try:
        with CampaignProgress(Console(stderr=True), total, quiet=as_json) as (on_step, on_result):
            done = run_campaign(
                campaign,
                location,
                executor=executor,  # type: ignore[arg-type]
                workers=workers,
                address=address,
                progress=on_step,
                on_result=on_result,
            )
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: the probes finished so far are in {location}; run the same command again to train the rest",
            err=True,
        )
        raise typer.Exit(130) from None
    with _ledger(ctx, readonly=False) as ledger:
        summary = summarise(ledger, campaign.name)
        ledger.set_campaign_summary(campaign.name, summary.to_dict())
    if as_json:
        _print_json({"run": done.to_dict(), "summary": summary.to_dict()})
        return
    render_campaign_run(done, Console(stderr=True))
    render_campaign(summary.to_dict(), console)


@app.command()
def campaign(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Campaign name (omit to list the campaigns).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a campaign's rankings, ties, decision accuracy and forecasts, as last stored by `yieldgate probe`.

    Example: yieldgate campaign mixtures --json
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        if name is None:
            names = api.campaigns(ledger=ledger)
            _print_json(names) if as_json else render_campaigns(names, console)
            return
        record = api.campaign(name, ledger=ledger)
    if record["summary"] is None:
        raise InputError(f"campaign {name!r} has no stored results yet; run `yieldgate probe` on its file")
    if as_json:
        _print_json(record)
        return
    render_campaign(record["summary"], console)


@app.command("dedup")
def dedup_(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked); each file is one document.")],
    near: Annotated[
        float | None,
        _float_option(
            "--near", help="Near dedup at estimated Jaccard >= THRESHOLD (MinHash + LSH); exact dedup without it."
        ),
    ] = None,
    shingle: Annotated[str, typer.Option("--shingle", help="Shingles for --near: word:N or char:N.")] = "word:3",
    chunk_chars: Annotated[
        int | None,
        typer.Option("--chunk-chars", help="Cut each file into chunks of about N characters (at line breaks)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Find exact or near-duplicate documents among files: clusters, similarity, and the share of tokens
    that dedup would remove.

    Example: yieldgate dedup corpus/ --near 0.15 --shingle word:3 --chunk-chars 2000 --json
    """
    from yieldgate.data.pipeline import dedup_paths

    result = dedup_paths(paths, near=near, shingle=shingle, chunk_chars=chunk_chars)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_dedup(result.to_dict(), console)


@app.command()
def audit(
    ctx: typer.Context,
    pipelines: Annotated[
        list[Path],
        typer.Argument(
            help="Pipeline file (YAML or JSON): input, tag rule, stages; a second one lines the two up (A, B)."
        ),
    ],
    run: Annotated[
        str | None, typer.Option("--run", help="Record the audit into this run (created if absent); one pipeline only.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a data pipeline stage by stage and account for each: documents, bytes and tokens in and out,
    drop reasons, throughput, and the retention of the tagged slice beside the retention of everything.

    With two pipelines (A, B): both run, their stages are lined up (same name, else same role: filter, dedup,
    sample, in order), and a hybrid is built and run that takes at each row the stage keeping more of the
    tagged slice, or the faster at equal tagged retention, both tried on the same documents.

    Example: yieldgate audit pipeline.yaml --run audit-1 --json

    Example: yieldgate audit a.yaml b.yaml   (A vs B, and the hybrid)
    """
    if len(pipelines) > 2:
        raise InputError(f"give one pipeline file, or two to compare (A B), not {len(pipelines)}")
    if len(pipelines) == 2:
        if run is not None:
            raise InputError("--run records one pipeline's audit: run `yieldgate audit FILE --run NAME` for each")
        _audit_pair(pipelines[0], pipelines[1], as_json)
        return
    from yieldgate.data.pipeline import audit_file

    result = audit_file(pipelines[0], ledger=ctx.find_root().obj["ledger"], run=run).to_dict()
    if as_json:
        _print_json(result)
    else:
        render_audit(result, console)


def _audit_pair(a: Path, b: Path, as_json: bool) -> None:
    """`yieldgate audit A B`: both pipelines stage by stage, row by row, the hybrid's choice and the three end to
    end (`data.pipeline_compare`)."""
    from rich.progress import Progress

    from yieldgate.data.pipeline_compare import compare_files

    err = Console(stderr=True)
    with Progress(console=err, disable=as_json or not err.is_terminal, transient=True) as bar:
        task = bar.add_task("reading the input", total=3)
        steps = iter(range(4))

        def on_run(what: str) -> None:
            bar.update(task, description=what, completed=next(steps))

        result = compare_files(a, b, progress=on_run)
        bar.update(task, completed=3)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_audit_pair(result, console)


@app.command("check")
def check(
    ctx: typer.Context,
    run: Annotated[
        str | None, typer.Argument(help="Check only this run's records (SQLite's check covers the whole file).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check the ledger file: SQLite's integrity check and every stored block's checksum, damage reported by run
    and step range. Exits 0 when the ledger is whole, 2 when it is damaged.

    Example: yieldgate --ledger yieldgate.db check bs64-fp16 --json
    """
    from yieldgate import api

    result = api.check(run, ledger=_where(ctx))
    if as_json:
        _print_json(result.to_dict())
    else:
        render_check(result, console)
    if not result.clean:
        raise typer.Exit(2)


@app.command()
def merge(
    ctx: typer.Context,
    source: Annotated[Path, typer.Argument(help="Another ledger file: a Tracker's spill file, another node's ledger.")],
    run: Annotated[list[str] | None, typer.Option("--run", help="Merge only this run (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Merge runs of another ledger file into this one (steps, extras, evals; one transaction per run).

    A Tracker that could not write its ledger (locked, read-only, disk full) keeps the rows in a spill file
    and names it; this brings them in. Merging twice changes nothing.

    Example: yieldgate --ledger yieldgate.db merge /tmp/yieldgate-spill-bs64-node07-1234.db
    """
    from yieldgate import api

    copied = api.merge(source, runs=run or (), ledger=_where(ctx))
    if as_json:
        _print_json({"source": str(source), "runs": copied})
    else:
        render_merge(copied, console, source)


@ledger_app.command("copy")
def ledger_copy(
    source: Annotated[str, typer.Argument(help="The ledger to copy: a SQLite file or a postgresql:// URL.")],
    destination: Annotated[
        str,
        typer.Argument(help="Where to: a new or empty SQLite file, or a postgresql:// URL of an existing database."),
    ],
    replace: Annotated[
        bool, typer.Option("--replace", help="Delete what the destination holds first (refused otherwise).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Copy a whole ledger into another, either direction between SQLite and PostgreSQL: every run, step, eval,
    event, decision and campaign, with their ids. One transaction on the destination, committed only once its row
    counts and digest equal the source's.

    Example: yieldgate ledger copy yieldgate.db postgresql://yg@db.internal:5432/yieldgate
    """
    from yieldgate.ledger.copy import copy_ledger

    result = copy_ledger(source, destination, replace=replace)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_copy(result, console)


# The options of `yieldgate import` that one kind of source reads (textlog, lm-eval, mlflow, table), and its devices.
PatternOption = Annotated[
    list[str] | None, typer.Option("--pattern", help="textlog: regex with named groups (repeatable).")
]
FormatOption = Annotated[
    str,
    typer.Option("--format", help=f"textlog without --pattern: auto (detect) or one of {', '.join(TEXTLOG_FORMATS)}."),
]
StepPatternOption = Annotated[
    str | None, typer.Option("--step-pattern", help="lm-eval: regex whose group takes the step from the file name.")
]
StepOption = Annotated[
    int | None,
    typer.Option(
        "--step", help="lm-eval: the step of results files that name none (a released model's final checkpoint)."
    ),
]
ExperimentOption = Annotated[
    bool, typer.Option("--experiment", help="mlflow: SOURCE is an experiment; import each of its runs.")
]
TrackingUriOption = Annotated[str | None, typer.Option("--tracking-uri", help="mlflow: tracking URI of the store.")]
JoinOnOption = Annotated[
    str, typer.Option("--join-on", help="table: step, or time (telemetry joined onto an existing run by wall clock).")
]
DevicesOption = Annotated[
    int | None,
    typer.Option(
        "--devices",
        help="Devices the run trained on, for per-device-hour yields (default: what the log prints, e.g. "
        "'world size: 8').",
    ),
]


@app.command("import")
def import_(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="tensorboard, mlflow, wandb, lm-eval, hf-trainer, table or textlog.")],
    sources: Annotated[list[str], typer.Argument(help="Files, directories, or an MLflow run id / experiment.")],
    run: Annotated[str, typer.Option("--run", help="Run name (with --experiment: the prefix of PREFIX/<name>).")],
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", help="KEY=SOURCE_NAME: map a source metric onto a canonical key (repeatable)."),
    ] = None,
    manifest: Annotated[Path | None, typer.Option("--manifest", help="Manifest file to attach.")] = None,
    tokens_per_step: Annotated[
        float | None, _float_option("--tokens-per-step", help="Derive tokens = step x N where none are logged.")
    ] = None,
    tokens_per_sample: Annotated[
        float | None,
        _float_option(
            "--tokens-per-sample", help="Derive tokens = samples x N (N: the sequence length) where samples are logged."
        ),
    ] = None,
    pattern: PatternOption = None,
    log_format: FormatOption = "auto",
    step_pattern: StepPatternOption = None,
    step: StepOption = None,
    experiment: ExperimentOption = False,
    tracking_uri: TrackingUriOption = None,
    join_on: JoinOnOption = "step",
    devices: DevicesOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import a run logged by another tool, mapped onto yieldgate's canonical names.

    Example: yieldgate import tensorboard runs/exp1 --run exp1 --tokens-per-step 524288

    Example: yieldgate import textlog train.log --run gpt2 --tokens-per-step 524288   (nanoGPT, Megatron, ...: detected)
    """
    from yieldgate import api

    results = api.import_run(
        kind,
        sources,
        run=run,
        ledger=_where(ctx),
        map=map_ or (),
        manifest=manifest,
        tokens_per_step=tokens_per_step,
        tokens_per_sample=tokens_per_sample,
        patterns=pattern or (),
        log_format=log_format,
        step_pattern=step_pattern,
        step=step,
        experiment=experiment,
        tracking_uri=tracking_uri,
        join_on=join_on,
        devices=devices,
    )
    if as_json:
        _print_json([r.to_dict() for r in results])
    else:
        render_imports(results, console)


@app.command()
def export(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run name.")],
    dest: Annotated[
        str,
        typer.Argument(
            help="table: a .csv or .parquet file; tensorboard, wandb: a folder; "
            "mlflow: a store folder, .db file or tracking URI."
        ),
    ],
    to: Annotated[str, typer.Option("--to", help="tensorboard, mlflow, wandb or table.")],
    as_json: JsonOption = False,
) -> None:
    """Write a run's records, yields and diagnoses to TensorBoard, MLflow, W&B (offline) or a CSV/Parquet table,
    with tokens as the x-axis where the tool has one.

    Example: yieldgate export bs64-fp16 runs/tb --to tensorboard
    """
    from yieldgate import api

    result = api.export_run(run, to, dest, ledger=_where(ctx))
    if as_json:
        _print_json(result.to_dict())
    else:
        render_export(result, console, run)


@app.command("gate")
def gate_(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="Run, seed group (glob) or campaign recipe ({campaign}/{recipe}/*).")],
    policy: Annotated[Path, typer.Option("--policy", help="Policy file (YAML or JSON): stages and requirements.")],
    strict: Annotated[bool, typer.Option("--strict", help="Exit 3 on hold and 4 on reject (for CI).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Decide whether TARGET has earned its next stage of compute under a policy: approve, hold (with what to
    run next) or reject. The decision is stored with the policy, its hash and the evidence; a hold or a reject
    still exits 0 unless --strict.

    Example: yieldgate gate 'milton/s*/t150000' --policy examples/policy.yaml --strict
    """
    from yieldgate.gate.gate import gate, record
    from yieldgate.gate.policy import load_policy

    parsed = load_policy(policy)
    with _ledger(ctx) as ledger:
        decision = gate(ledger, target, parsed)
    with _ledger(ctx, readonly=False) as ledger:
        decision_id = record(ledger, decision, parsed)
    if as_json:
        _print_json({"id": decision_id, **decision.to_dict()})
    else:
        render_decision(decision, console, decision_id)
    if strict and decision.decision != "approve":
        raise typer.Exit(3 if decision.decision == "hold" else 4)


@app.command()
def plan(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            help="Run, seed group (glob) or campaign recipe; or a recipe or manifest file (YAML/JSON) not trained yet."
        ),
    ],
    policy: Annotated[Path, typer.Option("--policy", help="Policy file (YAML or JSON): its stages, and max_epochs.")],
    flops: Annotated[
        float | None,
        _float_option("--flops", help="FLOP budget C: the compute-optimal N and D (C = 6ND) from the L(N, D) law."),
    ] = None,
    scaling: Annotated[
        str | None,
        typer.Option(
            "--scaling",
            help="Campaign recipe (CAMPAIGN/RECIPE) of 3 or more model sizes to fit L(N, D) from (default: the "
            "target's own campaign, when it has 3 or more sizes).",
        ),
    ] = None,
    params: Annotated[
        int | None,
        typer.Option(
            "--params", min=1, help="Planned model's non-embedding parameters N (default: the target's manifest's)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The data supply of every stage of a policy: for each source, the tokens the stage draws from it, how many
    times that passes its unique tokens (epochs), what the repetition is worth as new tokens (Muennighoff et al.
    2023), and which sources to grow before a stage passes the policy's max_epochs. With an L(N, D) law (Hoffmann
    et al. 2022, fitted over a campaign's probes of 3 or more sizes): each stage's predicted loss for the planned
    model, whether the stage leaves it undertrained, and for --flops the compute-optimal N and D. Nothing is stored.

    Example: yieldgate plan 'camp/two' --policy examples/policy.yaml

    Example: yieldgate plan recipe.yaml --policy examples/policy.yaml --json

    Example: yieldgate plan 'sizes/clean/*/*/m3x64' --policy policy.yaml --flops 1e13 --params 2000000
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        result = api.plan(target, policy, ledger=ledger, flops=flops, scaling=scaling, params=params)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_plan(result.to_dict(), console)


@app.command()
def decisions(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Argument(help="Only the decisions on this target (as it was gated).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The audit trail of gate decisions, oldest first: when, target, stage, decision, policy and rationale;
    --json adds the policy and the evidence of each.

    Example: yieldgate decisions 'milton/s*/t150000' --json
    """
    from yieldgate import api

    rows = [decision_record(r) for r in api.decisions(target, ledger=_where(ctx))]
    if as_json:
        _print_json(rows)
    else:
        render_decisions(rows, console, target)


@app.command()
def demo(
    ctx: typer.Context,
    quick: Annotated[bool, typer.Option("--quick", help="A smaller, faster version (about a minute).")] = False,
    out: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="HTML report to write (default: beside the ledger, LEDGER.html)."),
    ] = None,
) -> None:
    """The main job on the built-in corpus, with real trainings: pipeline A (dedup + filters) against pipeline B
    (everything, a bigger batch) at equal tokens and time, a mixture campaign with its ranking and decision
    accuracy, a gate decision on the best recipe's next stage, and the HTML report.

    Example: yieldgate --ledger demo.db demo --quick
    """
    from yieldgate.demo import run_demo

    run_demo(ctx.find_root().obj["ledger"], quick=quick, console=console, report=None if out is None else str(out))


def main() -> None:
    """Entry point of the `yieldgate` console script."""
    app()
