"""The whole-ledger commands: check it, merge another ledger's runs into it, copy it between SQLite
and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import JsonOption, _print_json, _where, app, console, ledger_app
from yieldgate.report.console import render_check, render_copy, render_merge


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
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Where the other ledger holds a stored step or evaluation differently, take its values (this "
            "ledger's are kept apart as superseded). Without it such a merge is refused.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Merge runs of another ledger file into this one (steps, extras, evals; one transaction per run), adding what
    this ledger lacks and overwriting nothing.

    A Tracker that could not write its ledger (locked, read-only, disk full) keeps the rows in a spill file
    and names it; this brings them in. Merging twice changes nothing. A run a live Tracker writes is refused.

    Example: yieldgate --ledger yieldgate.db merge /tmp/yieldgate-spill-bs64-node07-1234.db
    """
    from yieldgate import api

    result = api.merge(source, runs=run or (), ledger=_where(ctx), replace=replace)
    if as_json:
        _print_json({**result.to_dict(), "source": str(source)})
    else:
        render_merge(result, console, source)


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
    from yieldgate import api

    result = api.copy_ledger(source, destination, replace=replace)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_copy(result, console)
