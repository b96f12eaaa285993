"""The run commands: list, show, rename, tag, note and remove runs; validate and diff manifests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import JsonOption, _print_json, _runs_ledger, _where, app, console, manifest_app
from yieldgate.errors import InputError
from yieldgate.report.console import (
    render_manifest_check,
    render_manifest_diff,
    render_no_runs,
    render_removed,
    render_runs,
    render_show,
    render_tags,
    run_record,
    say,
    write_table,
)

Patterns = Annotated[list[str], typer.Argument(help="Run names or globs (quote them: 'bs64-seed*').")]


@app.command()
def runs(
    ctx: typer.Context,
    patterns: Annotated[
        list[str] | None, typer.Argument(help="Only runs matching a name or glob (quote globs).", show_default=False)
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="Only runs carrying this tag (repeat: all of them).", show_default=False),
    ] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            help="Only runs with this status (repeat: any of "
            "them): running, finished, failed, killed, imported, stale, "
            "crashed, held.",
            show_default=False,
        ),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            help="Order by name, created, updated, status, steps, tokens or duration (default: oldest first).",
            show_default=False,
        ),
    ] = None,
    reverse: Annotated[
        bool, typer.Option("--reverse", help="Reverse the order (runs without a value stay last).")
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            help="Show N runs: the first N of --sort's order, else the "
            "N most recently updated (table default 100; 0: all; "
            "--json, --csv and --tsv list all unless "
            "given).",
        ),
    ] = None,
    as_json: JsonOption = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV only (one row per run, times in UTC).")] = False,
    as_tsv: Annotated[bool, typer.Option("--tsv", help="Print tab-separated values only.")] = False,
) -> None:
    """List the runs in the ledger: status, tokens, steps, created, duration, last eval, tags, manifest hash.

    Example: yieldgate --ledger runs.db runs 'bs64-*' --tag baseline --status finished --sort tokens --reverse

    Example: yieldgate --ledger runs.db runs --csv > runs.csv
    """
    from yieldgate import api

    if as_json + as_csv + as_tsv > 1:
        raise InputError("--json, --csv and --tsv each choose the output: give one")
    machine = as_json or as_csv or as_tsv
    shown = limit if limit is not None else (0 if machine else 100)
    listing = api.list_runs(
        patterns or [], ledger=_where(ctx), tags=tag or [], status=status or [], sort=sort, reverse=reverse, limit=shown
    )
    if as_csv or as_tsv:
        write_table(listing.rows, sys.stdout, "," if as_csv else "\t")
        return
    records = [run_record(r) for r in listing.rows]
    if as_json:
        _print_json(records)
    elif not records:
        render_no_runs(ctx.find_root().obj["ledger"], console, filtered=bool(patterns or tag or status))
    else:
        render_runs(records, console, matched=listing.matched, sort=sort, spills=listing.spills)


@app.command("rm")
def rm(
    ctx: typer.Context,
    patterns: Patterns,
    yes: Annotated[bool, typer.Option("--yes", help="Remove without asking.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove runs with their steps, extras, evals and events (asks first unless --yes).

    All or nothing: a pattern matching no run, a run a live Tracker writes or one a gate decision cites stops it.

    Example: yieldgate rm 'scratch-*' --yes
    """
    from yieldgate import api

    with _runs_ledger(ctx) as ledger:
        names = api.matching_runs(patterns, ledger=ledger)
        if not yes:
            listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            typer.echo(f"{len(names)} run{'s' * (len(names) != 1)}: {listed}", err=True)
            if not typer.confirm("Remove them with their steps, evals and events?", default=False, err=True):
                typer.echo("Nothing removed.", err=True)
                raise typer.Exit(1)
        removed = api.remove_runs(names, ledger=ledger)  # the names as confirmed: each matches only itself
    if as_json:
        _print_json([r.to_dict() for r in removed])
    else:
        render_removed(removed, console)


@app.command()
def rename(
    ctx: typer.Context,
    old: Annotated[str, typer.Argument(help="The run's name.")],
    new: Annotated[str, typer.Argument(help="Its new name (not taken by another run).")],
    as_json: JsonOption = False,
) -> None:
    """Rename a run; its records, tags and note stay with it.

    Example: yieldgate rename brisk-otter-7 bs64-lr3e-4
    """
    from yieldgate import api

    with _runs_ledger(ctx) as ledger:
        api.rename_run(old, new, ledger=ledger)
    if as_json:
        _print_json({"old": old, "new": new})
    else:
        say(console, f"renamed {old} to {new}")


def _tags_command(ctx: typer.Context, patterns: str, tags: list[str], as_json: bool, add: bool) -> None:
    from yieldgate import api

    with _runs_ledger(ctx) as ledger:
        after = (api.tag_runs if add else api.untag_runs)(patterns, tags, ledger=ledger)
    if as_json:
        _print_json([{"name": n, "tags": t} for n, t in after.items()])
    else:
        render_tags(after, console)


Tags = Annotated[list[str], typer.Argument(help="Tags: letters, digits and _ . : / = + @ - (e.g. baseline, lr=3e-4).")]
RunPattern = Annotated[str, typer.Argument(help="Run name or glob (quote it: 'bs64-seed*').")]


@app.command()
def tag(ctx: typer.Context, run: RunPattern, tags: Tags, as_json: JsonOption = False) -> None:
    """Add tags to a run (or to every run a glob matches); prints each run's tags.

    Example: yieldgate tag 'bs64-seed*' baseline team/data
    """
    _tags_command(ctx, run, tags, as_json, add=True)


@app.command()
def untag(ctx: typer.Context, run: RunPattern, tags: Tags, as_json: JsonOption = False) -> None:
    """Take tags off a run (or every run a glob matches); each must carry them. Prints each run's tags.

    Example: yieldgate untag 'bs64-seed*' baseline
    """
    _tags_command(ctx, run, tags, as_json, add=False)


@app.command()
def note(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run name.")],
    text: Annotated[str, typer.Argument(help="The note (replaces the one before; '' removes it).")],
    as_json: JsonOption = False,
) -> None:
    """Keep a note with a run: why it was run, what it showed. `yieldgate show` and `runs --json` print it.

    Example: yieldgate note bs64-lr3e-4 "baseline for the dedup study; loader fixed at step 1200"
    """
    from yieldgate import api

    with _runs_ledger(ctx) as ledger:
        saved = api.note_run(run, text, ledger=ledger)
    if as_json:
        _print_json({"name": run, "note": saved})
    else:
        say(console, f"{run}: {'note kept' if saved else 'note removed'}")


@app.command()
def show(
    ctx: typer.Context, run: Annotated[str, typer.Argument(help="Run name.")], as_json: JsonOption = False
) -> None:
    """Show one run: summary, goodput, step columns recorded, extras, evals, events and manifest.

    Example: yieldgate show bs64-fp16 --json
    """
    from yieldgate import api

    result = api.show(run, ledger=_where(ctx))
    if as_json:
        _print_json(result)
    else:
        render_show(result, console)


@manifest_app.command("validate")
def manifest_validate(
    path: Annotated[Path, typer.Argument(help="Manifest file (YAML or JSON).")], as_json: JsonOption = False
) -> None:
    """Validate a manifest file and print its content hash.

    Example: yieldgate manifest validate manifest.yaml
    """
    from yieldgate import api

    result = api.validate_manifest(path)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_manifest_check(result, console)


@manifest_app.command("diff")
def manifest_diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="Manifest file or run name.")],
    b: Annotated[str, typer.Argument(help="Manifest file or run name.")],
    as_json: JsonOption = False,
) -> None:
    """Print the fields in which two manifests differ: the confounders of a comparison.

    Example: yieldgate manifest diff baseline.yaml bs64-fp16
    """
    from yieldgate import api

    result = api.manifest_diff(a, b, ledger=_where(ctx)).to_dict()
    if as_json:
        _print_json(result)
    else:
        render_manifest_diff(result, console)
