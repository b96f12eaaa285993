"""`yieldgate serve`: a live, read-only dashboard over the ledger (Starlette app, uvicorn server).

The pages draw with the static report's figure code (`yieldgate.report.figures`) and show the numbers of the CLI
from the same library calls; plotly.js and every asset come from the installed packages (no network needed).
Needs the `serve` extra: `pip install 'yieldgate[serve]'`.
"""

from __future__ import annotations

from yieldgate.serve.server import Server, is_loopback, open_server

__all__ = ["Server", "open_server", "is_loopback"]
