"""`yieldgate serve`: where the dashboard listens, who may read it, and uvicorn running it.

Loopback by default, answering only its own host names. Any other address needs a token: the one given, or
one generated here (`secrets.token_urlsafe`) that the caller prints once; a request without it gets 401.
The socket is bound here, before uvicorn starts, so a port in use is one clear error rather than a log line.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any

from yieldgate.errors import InputError, YieldgateError
from yieldgate.ledger import Ledger

__all__ = ["Server", "open_server", "is_loopback", "LOOPBACK_NAMES"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """True for `localhost` and any loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Server:
    """A bound, not yet running dashboard: its address, token (None on loopback without one) and socket."""

    url: str = field(repr=False)  # holds the token
    host: str
    port: int
    token: str | None = field(repr=False)  # a secret: kept out of a repr in a log or a traceback
    generated: bool
    """The token was made here: the caller prints it once (it is stored nowhere)."""
    sock: socket.socket = field(repr=False)
    app: Any = field(repr=False)

    @property
    def shown_url(self) -> str:
        """The address to print: with a token made here (printed this once, or nobody could open the page), else
        with the given token masked: it came from the caller (an option, an environment variable), who has it, and a
        terminal's output ends up in logs and scrollback."""
        if self.token is None or self.generated:
            return self.url
        return self.url.replace(f"?token={self.token}", "?token=<the token given>")

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C), then close the socket."""
        import uvicorn

        from yieldgate.analysis import stats
        from yieldgate.report.figures.base import warm_up

        # The analysis imports scipy.stats when it first needs a quantile (~1 s) and plotly builds its validators
        # at the first figure (~0.3 s): now, while the socket holds any early request in its queue, rather than
        # inside the first run page.
        stats.t_quantile(0.9, 2)
        warm_up()

        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on")
        try:
            uvicorn.Server(config).run(sockets=[self.sock])
        finally:
            self.sock.close()


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(
            f"host {host!r}: not an address this machine can listen on ({exc.strerror}); "
            "e.g. 127.0.0.1, or 0.0.0.0 for every interface"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InputError(f"port {port} on {host}: cannot listen ({exc.strerror}); choose another port") from None
    sock.setblocking(False)
    return sock


def open_server(location: str, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> Server:
    """Check the ledger opens, decide the token, bind `host:port` (port 0: any free port) and build the app."""
    try:
        import uvicorn  # noqa: F401  (the `serve` extra)

        from yieldgate.serve.app import create_app
    except ImportError as exc:
        raise YieldgateError(
            f"serving needs starlette and uvicorn ({exc.name} is missing): pip install 'yieldgate[serve]'"
        ) from None

    if not 0 <= port <= 65535:
        raise InputError(f"port must be within 0-65535, got {port}")
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InputError(
            f"token must have at least {MIN_TOKEN_CHARS} characters, got {len(token)}; "
            "leave it out to have one generated"
        )
    Ledger(location, readonly=True).close()  # a missing folder or a damaged file: said now, not at the first page
    loopback = is_loopback(host)
    generated = token is None and not loopback
    if generated:
        token = secrets.token_urlsafe(24)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    names = [*LOOPBACK_NAMES, host] if loopback else None
    app = create_app(location, token=token, allowed_hosts=names)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
    return Server(url=url, host=host, port=bound, token=token, generated=generated, sock=sock, app=app)
