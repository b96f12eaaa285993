"""A pytest-xdist worker collects its garbage before it reports its session finished.

Once every worker has reported, the controller asks them to stop, and execnet sends SIGINT to a worker still busy
5 s later. What a worker still runs by then is pytest's own closing garbage collection (its unraisable-exception
cleanup), and with it every finalizer of an object left in a reference cycle: one slower than 5 s printed a
`KeyboardInterrupt` traceback under a green `make test` (issue #36). One such object was a DataLoader iterator
held in a cycle by the exception its workers raised: its finalizer, run by whichever collection came next, took
10.1 s (its two workers' 5 s join timeouts; stopped at once after the refusal, 0.07 s). Collected here, before the
report, the finalizers run while the controller still waits for this worker, and nothing interrupts them.
"""

from __future__ import annotations

import gc

import pytest


def collect_before_reporting(session: pytest.Session) -> None:
    """Collect now when this is an xdist worker (the hook's last implementation: after the session's fixtures are
    torn down, before xdist reports); a run without workers has no report to precede."""
    if hasattr(session.config, "workerinput"):
        gc.collect()
