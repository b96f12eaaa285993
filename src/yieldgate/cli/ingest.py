"""Runs in and out of other tools: `yieldgate import` and `yieldgate export`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import JsonOption, _float_option, _print_json, _where, app, console, in_flags
from yieldgate.errors import InputError
from yieldgate.names import TEXTLOG_FORMATS
from yieldgate.report.console import render_explanations, render_export, render_imports, say

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
KindArgument = Annotated[
    str,
    typer.Argument(
        help="tensorboard, mlflow, wandb, lm-eval, hf-trainer, table, textlog, results, or auto (by content)."
    ),
]
RunOption = Annotated[
    str | None, typer.Option("--run", help="Run name (with --experiment: the prefix of PREFIX/<name>).")
]
CampaignOption = Annotated[str | None, typer.Option("--campaign", help="results: the campaign the table's runs make.")]
HigherOption = Annotated[
    list[str] | None,
    typer.Option("--higher-is-better", help="results: a metric whose higher value is better (repeatable)."),
]
LowerOption = Annotated[
    list[str] | None,
    typer.Option("--lower-is-better", help="results: a metric whose lower value is better (repeatable)."),
]
NoiseOption = Annotated[
    list[str] | None,
    typer.Option(
        "--noise",
        help="results: METRIC=SE, the standard error of one run's value, to decide only beyond it where the table "
        "has one seed and no stderr (repeatable).",
    ),
]
ExponentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exponent",
        help="results: METRIC=B, a declared exponent of value ~ N^B, so that a law across sizes needs fewer than "
        "three sizes (repeatable).",
    ),
]
DevicesOption = Annotated[
    int | None,
    typer.Option(
        "--devices",
        help="Devices the run trained on, for per-device-hour yields (default: what the log prints, e.g. "
        "'world size: 8').",
    ),
]


ExplainOption = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Store nothing: say how the source would be read (format, step and the counters it combines, clock, "
        "loss, evaluations and their directions, extras, restarts, writers). KIND may be left out: --explain PATH.",
    ),
]
AcceptOption = Annotated[
    bool,
    typer.Option(
        "--accept-implausible",
        help="Import a reading the plausibility check refuses (restarts every few rows, a clock that runs "
        "backwards, ...) as read; the warning stays with the import.",
    ),
]


MapOption = Annotated[
    list[str] | None,
    typer.Option(
        "--map",
        help="KEY=SOURCE_NAME: map a source metric onto a canonical key (repeatable); or a mapping file (YAML: "
        "step, loss, evals, times, lines); or epoch=, iter=, iters_per_epoch= for a computed step.",
    ),
]


@app.command("import")
def import_(
    ctx: typer.Context,
    kind: KindArgument,
    sources: Annotated[
        list[str] | None, typer.Argument(help="Files, directories, or an MLflow run id / experiment.")
    ] = None,
    run: RunOption = None,
    map_: MapOption = None,
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
    replace: Annotated[
        bool, typer.Option("--replace", help="Into a run that exists: set its records apart (kept) and put these in.")
    ] = False,
    append: Annotated[
        bool, typer.Option("--append", help="Into a run that exists: add steps after its last stored step.")
    ] = False,
    campaign: CampaignOption = None,
    higher: HigherOption = None,
    lower: LowerOption = None,
    noise: NoiseOption = None,
    exponent: ExponentOption = None,
    explain: ExplainOption = False,
    accept_implausible: AcceptOption = False,
    as_json: JsonOption = False,
) -> None:
    """Import a run logged by another tool, mapped onto yieldgate's canonical names.

    Example: yieldgate import tensorboard runs/exp1 --run exp1 --tokens-per-step 524288

    Example: yieldgate import textlog train.log --run gpt2 --tokens-per-step 524288   (nanoGPT, Megatron, ...: detected)

    Example: yieldgate import --explain train.log   (how it is read: step, clock, loss, evaluations; nothing stored)

    Example: yieldgate import results regmix.csv --campaign regmix   (published small and large runs: a campaign)
    """
    from yieldgate import api
    from yieldgate.ingest import KINDS

    sources = list(sources or [])
    if explain and kind not in KINDS and Path(kind).exists():
        kind, sources = "auto", [kind, *sources]  # `yieldgate import --explain PATH`
    if kind == "results":
        per_metric = {"noise": _pairs("--noise", noise), "exponents": _pairs("--exponent", exponent)}
        _import_results(ctx, sources, campaign, higher or [], lower or [], per_metric, replace=replace, as_json=as_json)
        return
    options = {
        option: empty if ctx.params[name] is None else ctx.params[name]
        for name, (option, empty) in _IMPORT_OPTIONS.items()
    }
    if explain:
        _explain(kind, sources, run, options, as_json=as_json)
        return
    if run is None:
        raise InputError(f"yieldgate import {kind} needs --run NAME")
    results = api.import_run(kind, sources, run=run, ledger=_where(ctx), replace=replace, append=append, **options)
    for r in results:  # the library's warnings name its parameters, the command's flags are --map, ...
        r.warnings = [in_flags(line, _PARAMETERS) for line in r.warnings]
    if as_json:
        _print_json([r.to_dict() for r in results])
    else:
        render_imports(results, console)
        _say_how_to_count_tokens(results, _where(ctx))


# The command's parameters that are `ImportOptions`' (by its names), each with its value when not given.
_IMPORT_OPTIONS = {
    "map_": ("map", ()),
    "manifest": ("manifest", None),
    "tokens_per_step": ("tokens_per_step", None),
    "tokens_per_sample": ("tokens_per_sample", None),
    "pattern": ("patterns", ()),
    "log_format": ("log_format", "auto"),
    "step_pattern": ("step_pattern", None),
    "step": ("step", None),
    "experiment": ("experiment", False),
    "tracking_uri": ("tracking_uri", None),
    "join_on": ("join_on", "step"),
    "devices": ("devices", None),
    "accept_implausible": ("accept_implausible", False),
}


def _explain(kind: str, sources: list[str], run: str | None, options: dict, *, as_json: bool) -> None:
    """`yieldgate import --explain`: how the sources would be read, nothing stored."""
    from yieldgate import api

    name = run or (Path(sources[0]).stem if sources else "run")
    explained = api.explain_import(kind, sources, run=name, **options)
    for e in explained:  # the library's warnings name its parameters, the command's flags are --map, ...
        e.warnings = [in_flags(line, _PARAMETERS) for line in e.warnings]
    if as_json:
        _print_json([e.to_dict() for e in explained])
    else:
        render_explanations(explained, console)


# The parameters an import's warnings may name (`map`, `tokens_per_step`): the command spells its flags.
_PARAMETERS = ("map", "tokens_per_step", "tokens_per_sample", "accept_implausible")


def _say_how_to_count_tokens(results: list, ledger: str) -> None:
    """A note for each run imported without token counts, saying how to give them: yields per token, comparisons at
    equal tokens and the frontier need them, and a log that counts none was imported with nothing said (`--json`
    has `tokens: null` in `runs --json`)."""
    from yieldgate import api

    counted = {row["name"]: row["tokens"] for row in api.list_runs([r.run for r in results], ledger=ledger).rows}
    for r in results:
        if counted.get(r.run) is None and not r.unchanged:
            say(
                console,
                f"note: {r.run}: no token counts in {r.source}: yields per token, comparisons at equal tokens and the "
                "frontier need them; import it again with --replace --tokens-per-step N (the tokens of one optimizer "
                "step: batch x sequence length x accumulation x data-parallel ranks), or --tokens-per-sample N where "
                "samples are logged",
            )


def _pairs(flag: str, items: list[str] | None) -> dict[str, float]:
    """`METRIC=VALUE` items as metric -> number; InputError naming the flag on one that is not."""
    out = {}
    for item in items or []:
        metric, sep, value = item.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not metric or number is None:
            raise InputError(f"{flag} {item!r}: give METRIC=NUMBER, e.g. {flag} val/loss=0.01")
        out[metric] = number
    return out


def _import_results(
    ctx: typer.Context,
    sources: list[str],
    campaign: str | None,
    higher: list[str],
    lower: list[str],
    per_metric: dict[str, dict[str, float]],
    *,
    replace: bool,
    as_json: bool,
) -> None:
    from yieldgate import api

    if campaign is None:
        raise InputError("yieldgate import results needs --campaign NAME: the campaign its runs make")
    if len(sources) != 1:
        raise InputError(f"yieldgate import results reads one table, got {len(sources)}: import each as its campaign")
    result = api.import_results(
        sources[0],
        campaign=campaign,
        ledger=_where(ctx),
        higher_is_better=higher,
        lower_is_better=lower,
        replace=replace,
        **per_metric,
    )
    if as_json:
        _print_json(result.to_dict())
        return
    console.print(
        f"imported {result.runs:,} runs ({result.recipes:,} recipes, {result.evals:,} evaluations, sizes "
        f"{', '.join(f'{n:,}' for n in result.sizes)}) from {result.source} as campaign {result.campaign!r}"
        + (f"; {result.replaced:,} run(s) replaced" if result.replaced else "")
        + f": yieldgate campaign {result.campaign}",
        markup=False,
        highlight=False,
    )


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
