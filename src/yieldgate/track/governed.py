"""A Tracker's side of the gate inside the run (`gate/live.py`): what the training thread reads, `should_stop` and
`decision`, set on the writer's thread where the governor decides, and the governor's errors contained.

The training thread only reads two attributes: no work, no lock, no host sync is added to its step. The writer calls
`evaluate` after it has written evaluations; the governor reads the run back from the ledger and decides. An error
there (a ledger that cannot be read, a run without tokens) is reported once, kept in the run's meta, and the run goes
on ungoverned: the Tracker never stops a run because its governor failed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yieldgate.gate.draft import RecordedDecision
    from yieldgate.gate.live import Governor, Verdict
    from yieldgate.ledger import Ledger
    from yieldgate.manifest import Manifest

__all__ = ["Governed", "governed", "ENV"]

log = logging.getLogger("yieldgate.track")

ENV = "YIELDGATE_POLICY"
"""The environment variable a Tracker given no policy reads one from (a probe launched by a campaign, a script run
under a scheduler): a policy file's path."""


class Governed:
    """The governor of one run and what it decided, as the Tracker reads it."""

    def __init__(self, governor: Governor, on_fault: Callable[[str, BaseException], None]) -> None:
        self.governor: Governor | None = governor
        self.on_fault = on_fault
        self.should_stop = False
        """The governor held the run and its policy says `on_hold: stop`: the loop should stop (set at the
        evaluation that decided, on the writer's thread)."""
        self.decision: RecordedDecision | None = None
        """The last decision the governor stored (approve at a boundary, or the hold), None before the first."""
        self.failed: str | None = None
        """Why the run goes on ungoverned, once its governor failed."""

    def evaluate(self, ledger: Ledger, run: str, steps: list[int]) -> None:
        """Writer thread: decide at each evaluated step just written, in order."""
        for step in steps:
            if self.governor is None:
                return
            try:
                verdict = self.governor.evaluate(ledger, run, step)
            except Exception as exc:  # noqa: BLE001 - contained: a governor that fails leaves the run ungoverned
                self._fail(ledger, run, step, exc)
                return
            if verdict is not None:
                self._take(verdict)

    def _take(self, verdict: Verdict) -> None:
        self.decision = verdict.decision
        if verdict.stop:
            self.should_stop = True

    def _fail(self, ledger: Ledger, run: str, step: int, exc: BaseException) -> None:
        """Said once, loudly, kept in the run's meta; the run goes on ungoverned."""
        assert self.governor is not None
        self.failed = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        note = {**self.governor.note(), "failed": {"step": step, "error": self.failed}}
        self.governor = None
        self.on_fault("governing the run (it goes on ungoverned)", exc)
        log.error(
            "yieldgate: the gate inside run %r failed at step %d (%s): the run goes on UNGOVERNED, nothing more is "
            "decided or stopped; `yieldgate gate %s --policy POLICY` decides on it offline",
            run,
            step,
            self.failed,
            run,
        )
        try:
            ledger.set_meta(run, "governor", note)
        except Exception as err:  # noqa: BLE001 - contained: the note is lost, the run goes on
            self.on_fault("recording that the governor failed", err)


def governed(policy: Any, manifest: Manifest | None, on_fault: Callable[[str, BaseException], None]) -> Governed | None:
    """The Tracker's governor for `policy` (a policy file's path, its content as a mapping, or a `Policy`; None:
    `$YIELDGATE_POLICY`, where set, else the run is ungoverned). A policy that cannot govern this run raises
    InputError (one line): the run does not start half-governed. The gate is imported only for a governed run."""
    if policy is None:
        policy = os.environ.get(ENV) or None
    if policy is None:
        return None
    from yieldgate.gate.live import Governor

    return Governed(Governor.start(policy, manifest=manifest), on_fault)
