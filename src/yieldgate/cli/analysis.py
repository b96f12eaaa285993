"""The commands that read runs: yields, comparisons, forecasts, diagnoses, the HTML report and the
live dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import JsonOption, _float_option, _ledger, _print_json, _where, app, console
from yieldgate.report.console import (
    render_comparison,
    render_diagnosis,
    render_forecast,
    render_report,
    render_waste,
    render_yields,
)

MetricOption = Annotated[
    str,
    typer.Option(
        "--metric",
        help="Eval key <task>/<metric> the yields follow, or loss "
        "(the training loss, not held out). Default val/loss; "
        "a run without it uses its first held-out loss, else its "
        "first eval, else its training loss, and says so.",
    ),
]
PerOption = Annotated[str, typer.Option("--per", help="token, or byte (bits per byte; needs bytes_per_token).")]


@app.command("yield")
def yield_(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run name.")],
    tranche_tokens: Annotated[
        float | None, _float_option("--tranche-tokens", help="Merge evaluations into tranches of at least N tokens.")
    ] = None,
    metric: MetricOption = "val/loss",
    per: PerOption = "token",
    expected_from: Annotated[
        str | None,
        typer.Option(
            "--expected-from",
            help="Set each tranche against the law fitted to this run (a baseline) instead of the "
            "run's own: the 'vs law' column.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Data yield per tranche: validation-loss improvement per billion tokens, device-hour, dollar and kWh,
    with per-source and capability yields over the same spans, and each tranche's improvement against the one a
    fitted loss law expects over the same tokens (vs law: 1 is on the law).

    Example: yieldgate yield bs64-fp16 --tranche-tokens 50000000 --json

    Example: yieldgate yield new-mixture --expected-from baseline
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        report = api.yields(
            run, ledger=ledger, tranche_tokens=tranche_tokens, metric=metric, per=per, expected_from=expected_from
        )

    if as_json:
        _print_json(report.to_dict()["tranches"])
    else:
        render_yields(report, console, run)


@app.command()
def waste(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Argument(help="A run, or a glob of runs: a seed group, a campaign's probes (camp/*).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Wasted compute: what each run spent after it stopped learning on its own law, on restarts' redone work and
    on diverged steps, in device-hours, dollars and kWh where recorded, beside goodput; the sum over a glob.

    Example: yieldgate waste bs64-fp16

    Example: yieldgate waste 'mix/*' --json
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        result = api.waste(target, ledger=ledger)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_waste(result, console)


@app.command()
def compare(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="Run name or glob (a seed group), side A (the reference).")],
    b: Annotated[str, typer.Argument(help="Run name or glob, side B.")],
    at: Annotated[str, typer.Option("--at", help="Align on tokens, time, compute or cost.")] = "tokens",
    target_loss: Annotated[float | None, _float_option("--target-loss", help="Loss for time-to-target.")] = None,
    primary: Annotated[str, typer.Option("--primary", help="learning or throughput.")] = "learning",
    metric: MetricOption = "val/loss",
    per: Annotated[
        str | None,
        typer.Option(
            "--per",
            help="token, or byte (bits per byte; needs bytes_per_token). "
            "Default: byte when the runs' tokenizers differ.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Compare two runs or seed groups at equal tokens/time/compute/cost, with the speedup split into
    throughput x sample efficiency and the manifest diff as confounders.

    Example: yieldgate compare 'baseline-seed*' 'bs256-seed*' --at tokens --json
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        result = api.compare(a, b, ledger=ledger, at=at, target=target_loss, metric=metric, primary=primary, per=per)
    if as_json:
        _print_json(result.to_dict())
        return
    check = result.batch_check  # the library's arguments, spelled as batch-check's flags
    flags = None if check is None else {f"--{k.replace('_', '-')}": str(v) for k, v in check.items()}
    render_comparison(result, console, check_flags=flags)


@app.command()
def forecast(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run name.")],
    next_tokens: Annotated[
        float | None, _float_option("--next-tokens", help="Size of the next tranche in tokens.")
    ] = None,
    next_steps: Annotated[
        float | None,
        _float_option("--next-steps", help="Size of the next tranche in steps, for a run without token counts."),
    ] = None,
    threshold: Annotated[
        float | None,
        _float_option("--threshold", help="Marginal yield (loss per billion tokens) to find the tokens for."),
    ] = None,
    level: Annotated[float, _float_option("--level", help="Coverage of the bootstrap interval.")] = 0.8,
    metric: MetricOption = "val/loss",
    as_json: JsonOption = False,
) -> None:
    """Fit loss = E + B * tokens^-beta on the run's stable-LR evaluations and forecast what the next tranche
    buys, with a bootstrap interval.

    Example: yieldgate forecast bs64-fp16 --next-tokens 1e9 --threshold 0.01

    Example: yieldgate forecast whisper-ft --next-steps 1000   (a run without token counts)
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        result = api.forecast(
            run,
            ledger=ledger,
            next_tokens=next_tokens,
            next_steps=next_steps,
            threshold_per_btok=threshold,
            metric=metric,
            level=level,
        )
    if as_json:
        _print_json(result.to_dict())
    else:
        render_forecast(result, console, threshold)


@app.command()
def report(
    ctx: typer.Context,
    patterns: Annotated[
        list[str], typer.Argument(help="Run names or globs; each is a group, later ones are compared with the first.")
    ],
    out: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write.")] = Path("report.html"),
    png: Annotated[Path | None, typer.Option("--png", help="Also write the main plots as PNG files here.")] = None,
    metric: MetricOption = "val/loss",
    per: Annotated[
        str | None,
        typer.Option(
            "--per",
            help="token, or byte (bits per byte; needs bytes_per_token). "
            "Default: byte when the runs' tokenizers differ, as "
            "compare asks.",
        ),
    ] = None,
    smooth: Annotated[
        float,
        _float_option("--smooth", help="Weight of the moving average drawn for tokens/s, in [0, 1) (0: as logged)."),
    ] = 0.0,
    target_loss: Annotated[
        float | None,
        _float_option(
            "--target-loss",
            help="The metric's value the frontier counts tokens to (default: the worst best of the runs).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Write one self-contained HTML report (opens with no network): loss against tokens, time and cost,
    throughput beside learning, yields, the comparison, learning signals, diagnoses, decisions, manifest diff.

    Example: yieldgate report baseline 'bs256-seed*' -o report.html --png figures/

    Example: yieldgate report 'bpe4k-*' 'bpe32k-*' --smooth 0.9   (bits per byte: the tokenizers differ)

    Example: yieldgate report 'sweep-*' --target-loss 3.2   (the frontier: tokens/s against tokens to 3.2)
    """
    from yieldgate import api

    result = api.report(
        patterns, out, ledger=_where(ctx), metric=metric, png_dir=png, per=per, smooth=smooth, target=target_loss
    )
    if as_json:
        _print_json(
            {
                "path": result.path,
                "runs": result.runs,
                "figures": result.figures,
                "pngs": result.pngs,
                "per": result.per,
                "frontier": result.frontier,
            }
        )
    else:
        render_report(result, console, png)


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on. Loopback (the default) needs no token; any other address requires one.",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: any free port).")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="YIELDGATE_TOKEN",
            help="Token every request must carry (at least 16 characters). Beyond "
            "loopback one is generated and printed once when not "
            "given.",
        ),
    ] = None,
) -> None:
    """Serve a live, read-only dashboard of the ledger: the runs, each run's plots (updated while it trains),
    and comparisons with the numbers of `yieldgate compare`. Works offline; stop it with Ctrl-C.

    Example: yieldgate --ledger runs.db serve   (then open http://127.0.0.1:8765/)

    Example: yieldgate --ledger runs.db serve --host 0.0.0.0 --port 8080   (prints a token to open it with)
    """
    from yieldgate.serve import open_server

    server = open_server(ctx.find_root().obj["ledger"], host=host, port=port, token=token)
    typer.echo(f"yieldgate serve: {server.shown_url}  (read-only; Ctrl-C stops it)")
    if server.generated:
        typer.echo("the token is in the address above and is printed only this once; give --token to choose it")
    server.run()


@app.command()
def diagnose(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run name.")],
    against: Annotated[
        list[str] | None,
        typer.Option(
            "--against",
            help="Another run that reads the same data in the same order (repeatable); runs with the same "
            "data recipe and seed are found without it.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Diagnose a run: data exhaustion, overfitting, a duplicated or non-i.i.d. stream, mixture drift, the schedule,
    a damaged update or a transient spike, an infrastructure stall, undertraining, with the evidence of each;
    findings are kept as open events.

    Example: yieldgate diagnose bs64-fp16 --against bs64-fp16-lr2 --json
    """
    from yieldgate import api

    result = api.diagnose(run, ledger=_where(ctx), against=against or ())
    if as_json:
        _print_json(result.to_dict())
    else:
        render_diagnosis(result, console, run)
