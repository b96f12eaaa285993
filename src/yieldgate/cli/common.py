"""What every `yieldgate` command shares: the typer app and its groups, the error handling (one line on stderr,
exit status 2; an argument the library names spelled as its flag), the `--ledger` option and the helpers that open
it, the number options and JSON output."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from yieldgate._version import __version__
from yieldgate.errors import InputError, YieldgateError
from yieldgate.ledger import DEFAULT_LEDGER, Ledger, must_exist
from yieldgate.report.console import clean as _clean

# Markup off: a run name, task or metric key is printed as written (`[/]` in a name neither styles nor breaks a
# table). The few lines that style words ask for markup and escape what they show. Emoji codes off: a name or an
# advice holding `:v:` is printed as written, not as a picture.
console = Console(markup=False, emoji=False)


# How the command line spells each library argument an `InputError` names (`InputError.parameters`): the library
# speaks of its arguments (`at must be one of ...`), a command of its flags (`--at must be one of ...`). One
# spelling per argument: an argument two commands spelled differently would need a second name in the library.
FLAGS = {
    "ablate_by": "--ablate-by",
    "ablate_recipe": "--recipe",
    "ablate_sources": "--ablate-sources",
    "accept_implausible": "--accept-implausible",
    "append": "--append",
    "at": "--at",
    "chunk_chars": "--chunk-chars",
    "cooldown_tokens": "--cooldown-tokens",
    "devices": "--devices",
    "executor": "--executor",
    "experiment": "--experiment",
    "exponents": "--exponent",
    "higher_is_better": "--higher-is-better",
    "join_on": "--join-on",
    "kind": "KIND",
    "log_format": "--format",
    "lower_is_better": "--lower-is-better",
    "map": "--map",
    "noise": "--noise",
    "out": "-o",
    "patterns": "--pattern",
    "per": "--per",
    "primary": "--primary",
    "replace": "--replace",
    "resume_from": "--resume-from",
    "run": "--run",
    "sort": "--sort",
    "status": "--status",
    "step": "--step",
    "step_pattern": "--step-pattern",
    "to": "--to",
    "tokens": "--tokens",
    "tokens_per_sample": "--tokens-per-sample",
    "tokens_per_step": "--tokens-per-step",
}


def _in_flags(exc: InputError) -> str:
    """The message of `exc` with each argument it names (the first time it stands as a word) spelled as its flag."""
    return in_flags(str(exc), exc.parameters)


def in_flags(message: str, parameters: Iterable[str]) -> str:
    """`message` with each of `parameters` (the first time it stands as a word, and every time it gives a value,
    `map iter=batch map iters_per_epoch=N`, so advice of several values runs as written) spelled as its flag."""
    for parameter in parameters:
        flag = FLAGS.get(parameter, parameter)
        valued = re.compile(rf"(?<![\w./'\"-]){re.escape(parameter)}(?= [\w/.-]+=)")
        message, given = valued.subn(flag, message)
        if not given:
            word = re.compile(rf"(?<![\w./'\"-]){re.escape(parameter)}(?![\w/'\"-])")
            message = word.sub(flag, message, count=1)
    return message


class _Group(TyperGroup):
    """Maps yieldgate's errors to one line on stderr and exit status 2, for every (sub)command."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except YieldgateError as exc:
            typer.echo(f"error: {_in_flags(exc) if isinstance(exc, InputError) else exc}", err=True)
            raise typer.Exit(2) from None
        except ModuleNotFoundError as exc:  # an optional dependency of ours: the extra that installs it
            from yieldgate.util.extras import missing_extra

            named = missing_extra(exc, f"`yieldgate {ctx.invoked_subcommand or ctx.info_name}`")
            if named is None:
                raise
            typer.echo(f"error: {named}", err=True)
            raise typer.Exit(2) from None

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        return super().parse_args(ctx, _ledger_first(args))


def _ledger_first(args: list[str]) -> list[str]:
    """`--ledger PATH` belongs to the group, before the command; accept it after the command too (`yieldgate runs
    --ledger team.db`, as sqlite-utils takes its database anywhere) by moving it to the front."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        if args[i] == "--":
            rest += args[i:]
            break
        if args[i] == "--ledger" and i + 1 < len(args):
            front += args[i : i + 2]
            i += 2
            continue
        (front if args[i].startswith("--ledger=") else rest).append(args[i])
        i += 1
    return front + rest


app = typer.Typer(
    cls=_Group,
    help="Measure how much training runs learn for what they spend, and gate the next stage of compute.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
manifest_app = typer.Typer(cls=_Group, help="Validate and diff manifests.", no_args_is_help=True)
app.add_typer(manifest_app, name="manifest")
ledger_app = typer.Typer(
    cls=_Group, help="Whole ledgers: copy one between SQLite and PostgreSQL.", no_args_is_help=True
)
app.add_typer(ledger_app, name="ledger")

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON only.")]


def _number(flag: str) -> Callable[[str], float]:
    """The parser of a float option: a finite number, or one line naming the option (nan and inf mean nothing in
    any of them; each command checks its own range)."""

    def parse(text: str | float) -> float:
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{flag} takes a number, got {text!r}") from None
        if not math.isfinite(value):
            raise InputError(f"{flag} must be a finite number, got {text}")
        return value

    return parse


def _float_option(flag: str, **kwargs: Any) -> Any:
    """`typer.Option(flag, ...)` for a float: parsed by `_number`, shown as FLOAT."""
    return typer.Option(flag, parser=_number(flag), metavar="FLOAT", **kwargs)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"yieldgate {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    ledger: Annotated[
        str, typer.Option("--ledger", envvar="YIELDGATE_LEDGER", help="Ledger file (SQLite) or URL.", show_default=True)
    ] = DEFAULT_LEDGER,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    ctx.obj = {"ledger": ledger}
    # The width is the terminal's (or $COLUMNS) now, at each command: not one read when this module was imported (a
    # program that runs several commands in one process, with the terminal resized or COLUMNS set between them).
    console.width = None  # type: ignore[assignment]


def _where(ctx: typer.Context) -> str:
    """The ledger's location as `--ledger` (or $YIELDGATE_LEDGER) gives it: an api function opens it for the call."""
    return str(ctx.find_root().obj["ledger"])


def _ledger(ctx: typer.Context, *, readonly: bool = True) -> Ledger:
    return Ledger(ctx.find_root().obj["ledger"], readonly=readonly)


def _runs_ledger(ctx: typer.Context) -> Ledger:
    """The ledger, writable, for a command that changes runs already in it: one that does not exist is an error,
    not a new empty file."""
    return Ledger(must_exist(ctx.find_root().obj["ledger"]))


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(_clean(value), indent=2) + "\n")
