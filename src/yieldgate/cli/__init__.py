"""The `yieldgate` command: parses, calls the library, renders.

Every command that prints a table takes `--json` and then prints JSON only. Our errors are one line on
stderr with exit status 2.

The commands live in one module per family (`runs`, `analysis`, `probe`, `data`, `ledger`, `ingest`, `gate`,
`demo`), each registering on the `app` of `common`: importing them here, in this order, lists them in
`yieldgate --help` in that order.
"""

from __future__ import annotations

from yieldgate.cli.common import FLAGS, app, console

# The command families, in the order `yieldgate --help` lists their commands.
# isort: off
import yieldgate.cli.runs  # noqa: F401
import yieldgate.cli.analysis  # noqa: F401
import yieldgate.cli.probe  # noqa: F401
import yieldgate.cli.data  # noqa: F401
import yieldgate.cli.ledger  # noqa: F401
import yieldgate.cli.ingest  # noqa: F401
import yieldgate.cli.gate  # noqa: F401
import yieldgate.cli.demo  # noqa: F401
# isort: on

__all__ = ["FLAGS", "app", "console", "main"]


def main() -> None:
    """Entry point of the `yieldgate` console script."""
    app()
