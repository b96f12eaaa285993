"""Where a tracked run's counters start: the checkpoint's point given to the Tracker, checked (`resume_point`), and
the run claimed in the ledger (`claim`): made, continued from its last record, or resumed from a checkpoint with
the records after it set apart (`Ledger.supersede`).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.ledger.owners import Owner
from yieldgate.manifest import Manifest
from yieldgate.track.derive import Start

__all__ = ["claim", "resume_point", "start_at"]

log = logging.getLogger("yieldgate.track")


def resume_point(step: Any, tokens: Any, samples: Any) -> dict[str, float]:
    """The checkpoint's point given to the constructor, checked: {} when none, else step and the counters given."""
    if step is None:
        if tokens is not None or samples is not None:
            raise InputError(
                "Tracker(tokens=..., samples=...) are the checkpoint's counters at its step: pass step= too"
            )
        return {}
    point: dict[str, float] = {}
    for name, value in (("step", step), ("tokens", tokens), ("samples", samples)):
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not (math.isfinite(value) and value >= 0)
        ):
            raise InputError(f"Tracker({name}=...) must be a number >= 0, got {value!r}")
        point[name] = float(value)
    if point["step"] != int(point["step"]):
        raise InputError(f"Tracker(step=...) must be a whole number, got {step!r}")
    point["step"] = int(point["step"])
    return point


def start_at(point: dict[str, float]) -> Start:
    """The start a `resume_point` gives by itself (a new run, or a ledger that could not be read)."""
    return Start(step=int(point.get("step", 0)), tokens=point.get("tokens", 0.0), samples=point.get("samples", 0.0))


def claim(
    ledger: Ledger,
    run: str,
    *,
    owner: Owner,
    manifest: Manifest | None,
    resume: bool,
    takeover: bool,
    point: dict[str, float],
) -> tuple[Start, bool]:
    """Claim `run` in `ledger`'s open write transaction (creating it, or continuing it) and set apart what a resume
    supersedes; return where its counters start and whether the first explicit step may still move that start (a
    resumed run given no `step=`)."""
    start = start_at(point)
    if not ledger.claim_run(run, owner=owner, manifest=manifest, resume=resume, takeover=takeover):
        return start, False
    last = ledger.step_at(run, 1 << 62)
    if last is None:
        return start, "step" not in point
    # Wall time and cost keep counting from the last record: the superseded work was paid for.
    wall = last["wall_s"] or 0.0
    if "step" not in point:
        return Start(step=last["step"], tokens=last["tokens"] or 0.0, samples=last["samples"] or 0.0, wall_s=wall), True
    at = ledger.step_at(run, int(point["step"])) or {"step": 0, "tokens": 0.0, "samples": 0.0}
    start = Start(
        step=int(point["step"]),
        tokens=point.get("tokens", at["tokens"] or 0.0),
        samples=point.get("samples", at["samples"] or 0.0),
        wall_s=wall,
    )
    if at["step"] != point["step"] and "tokens" not in point:
        log.warning(
            "yieldgate: run %r resumes at step %d, but the ledger's last record before it is step %d: tokens "
            "continue from that record's %g; pass tokens= from the checkpoint to be exact",
            run,
            point["step"],
            at["step"],
            start.tokens,
        )
    ledger.supersede(run, start.step, resume={"step": start.step, "tokens": start.tokens, "samples": start.samples})
    return start, False
