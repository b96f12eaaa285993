"""What keeps a training run safe from its Tracker, and the Tracker's records safe from the run's end.

An error inside a Tracker call is contained (`contained`): reported once by the Tracker, counted, never raised
into training. Trackers not yet closed (`live`) are flushed at interpreter exit and on SIGTERM, after which the
process does what it would have done; a SIGTERM that arrives while a packet is half handed to the writer, or a
close is flushing, is held until that call returns (`whole`).
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["contained", "install_sigterm", "live", "whole"]


live: weakref.WeakSet[Any] = weakref.WeakSet()
"""Trackers not yet closed: flushed at interpreter exit and on SIGTERM."""
_sigterm_installed = False
_holding = 0
"""Tracker calls under way that a SIGTERM must not cut (a packet being shipped, a close flushing)."""
_held: int | None = None
"""A SIGTERM that arrived during one: delivered again when the last of them returns."""
_holding_lock = threading.RLock()  # re-entrant: the handler may run (and close) inside a held block


def _close_live(status: str) -> None:
    for tracker in list(live):
        tracker.close(status)


@atexit.register
def _at_exit() -> None:
    # The writer is a daemon thread: without this, rows still buffered at exit would be lost. No clean close
    # was recorded, so the run is `killed` (the data contract's name for it).
    _close_live("killed")


def _on_sigterm(previous: Any) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        global _held
        if _holding:
            # The signal interrupted a packet half handed to the writer (its rows out of the Tracker, not yet
            # in the inbox) or a close flushing: flushing now would lose that packet, and ending the process
            # now would cut the flush. Held: `whole` sends it again once the call is done.
            _held = signum
            return
        _close_live("killed")
        if callable(previous):
            previous(signum, frame)
        else:  # the default action: restore it and let the signal end the process as it would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handler


def whole(method: Any) -> Any:
    """Run a Tracker method to its end even when SIGTERM arrives inside it: the handler holds the signal
    and it is sent again when the method returns (its rows are then in the writer's hands, or flushed)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _holding, _held
        with _holding_lock:  # Trackers on several threads: a lost count would hold every later SIGTERM
            _holding += 1
        try:
            return method(*args, **kwargs)
        finally:
            with _holding_lock:
                _holding -= 1
                signum = _held if not _holding else None
                if signum is not None:
                    _held = None
            if signum is not None:
                os.kill(os.getpid(), signum)  # the handler runs on the main thread at its next bytecode

    return wrapper


def install_sigterm() -> None:
    """Flush every live Tracker on SIGTERM (schedulers send it before killing a job), then do what the
    process would have done: the previous Python handler, or the default action. Main thread only; a
    process that ignores SIGTERM keeps ignoring it."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN or previous is None:
        return
    signal.signal(signal.SIGTERM, _on_sigterm(previous))
    _sigterm_installed = True


def contained(method: Any) -> Any:
    """Run a Tracker method so that an error inside the tracker never reaches the training loop, and count
    the time it takes as the Tracker's own cost."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - contained by design: reported once and counted
            self._fault(method.__name__, exc)
            return None
        finally:
            self.busy.seconds += time.perf_counter() - start

    return wrapper
