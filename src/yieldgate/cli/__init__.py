"""The `yieldgate` command: parses, calls the library, renders.

Every command that prints a table takes `--json` and then prints JSON only. Our errors are one line on
stderr with exit status 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import (
    FLAGS,
    app,
    console,
)

# The command families moved out so far, in the order `yieldgate --help` lists their commands.
# isort: off
import yieldgate.cli.runs  # noqa: F401
import yieldgate.cli.analysis  # noqa: F401
import yieldgate.cli.probe  # noqa: F401
import yieldgate.cli.data  # noqa: F401
import yieldgate.cli.ledger  # noqa: F401
import yieldgate.cli.ingest  # noqa: F401
import yieldgate.cli.gate  # noqa: F401
# isort: on


__all__ = ["FLAGS", "app", "console", "main"]


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
