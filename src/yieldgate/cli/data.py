"""The data commands: find duplicates among files, audit a pipeline stage by stage (or two, lined up)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from yieldgate.cli.common import JsonOption, _float_option, _print_json, _where, app, console
from yieldgate.errors import InputError
from yieldgate.report.console import WorkProgress, render_audit, render_audit_pair, render_dedup


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
    from yieldgate import api

    result = api.dedup(paths, near=near, shingle=shingle, chunk_chars=chunk_chars)
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
    from yieldgate import api

    result = api.audit(pipelines[0], run=run, ledger=_where(ctx)).to_dict()
    if as_json:
        _print_json(result)
    else:
        render_audit(result, console)


def _audit_pair(a: Path, b: Path, as_json: bool) -> None:
    """`yieldgate audit A B`: both pipelines stage by stage, row by row, the hybrid's choice and the three end to
    end (`api.audit_pair`)."""
    from yieldgate import api

    err = Console(stderr=True, emoji=False)
    with WorkProgress(err, quiet=as_json, transient=True, lines=False) as bar:  # seconds: no lines off a terminal
        bar.update("reading the input", completed=0, total=3)
        steps = iter(range(4))
        result = api.audit_pair(a, b, progress=lambda what: bar.update(what, completed=next(steps)))
        bar.update(completed=3)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_audit_pair(result, console)
