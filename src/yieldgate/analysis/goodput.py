"""Goodput: the share of a run's wall-clock time that went into training that counts.

Two losses are counted, each where the run recorded it:

- **checkpoint saves**: `time/checkpoint_s`, the seconds of each save (`with tr.checkpoint(): ...` in a Tracker
  loop, or the column of an imported log);
- **restarts**: each `resume` event throws away the work done after the checkpoint it restarts from: the steps done
  again (`old.step - resume.step`, or up to `redone.step` where a relaunch got less far) and their time. A Tracker
  resumed from a checkpoint sets those records apart (`Ledger.supersede`), and their time is the last set-apart
  `wall_s` less the wall clock at the checkpoint's step; an import whose steps go back in file order records the same
  event with the time read off the log (`lost_s`) and, where the log's clock runs on through the outage, the time the
  job was down (`down_s`).

goodput = (wall - checkpoint_s - lost_s - down_s) / wall, where wall is the run's last `wall_s`: a resumed Tracker
keeps counting wall time from its last record, so the lost work is inside it, and the time the job was down
between the crash and the restart is in no record and not counted. Lost work whose time no record holds (an
imported log without a clock) is priced at the run's median seconds per step, and the result says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from yieldgate.names import CHECKPOINT_KEY

if TYPE_CHECKING:
    from yieldgate.ledger import Ledger

__all__ = ["Goodput", "goodput", "goodput_of", "CHECKPOINT_KEY"]


@dataclass
class Goodput:
    """A run's goodput and what it lost, in seconds of its wall clock."""

    share: float
    """Productive seconds over wall seconds."""
    wall_s: float
    checkpoint_s: float
    checkpoints: int
    """Checkpoint saves timed."""
    restarts: int
    steps_lost: int
    lost_s: float
    """Seconds of the work the restarts threw away."""
    down_s: float
    """Seconds the job was down between a crash and its restart, where a log's clock ran on through it."""
    estimated: list[str] = field(default_factory=list)
    """What was priced at the median step time instead of read off a record."""
    unmeasured: list[str] = field(default_factory=list)
    """Losses the run recorded nothing of (no checkpoint save timed): `share` does not count them, so it is an
    upper bound."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        """One line for the console: the share and each loss."""
        parts = [
            f"checkpoints {self.checkpoint_s / self.wall_s:.1%} ({self.checkpoints} saves)"
            if self.checkpoints
            else "checkpoint saves not timed"
        ]
        if self.restarts:
            lost = (self.lost_s + self.down_s) / self.wall_s
            parts.append(f"{self.restarts} restart(s): {self.steps_lost:,} steps, {lost:.1%} lost")
        note = f"; estimated: {', '.join(self.estimated)}" if self.estimated else ""
        return f"goodput {self.share:.1%} of {self.wall_s / 3600:.3g} h ({', '.join(parts)}){note}"


def _seconds_per_step(steps: pd.DataFrame) -> float | None:
    """Median wall seconds per step between consecutive records (None without a clock)."""
    known = steps[["step", "wall_s"]].dropna() if "wall_s" in steps.columns else pd.DataFrame()
    if len(known) < 2:
        return None
    rate = np.diff(known["wall_s"].to_numpy(float)) / np.diff(known["step"].to_numpy(float))
    rate = rate[np.isfinite(rate) & (rate > 0)]
    return float(np.median(rate)) if len(rate) else None


def goodput(
    steps: pd.DataFrame,
    checkpoint_s: Sequence[float],
    resumes: Sequence[Mapping[str, Any]],
    lost_wall: Mapping[int, float] | None = None,
) -> Goodput | None:
    """The goodput of a run from its core step records, its checkpoint save times, the bodies of its `resume`
    events (with `id`) and, per event id, the seconds of set-apart work found in its records (`lost_wall`).
    None where the run has no wall clock."""
    wall = steps["wall_s"].dropna() if "wall_s" in steps.columns else pd.Series(dtype=float)
    if wall.empty or not float(wall.max()) > 0:
        return None
    total = float(wall.max())
    saves = [float(s) for s in checkpoint_s if np.isfinite(s) and s >= 0]
    per_step = _seconds_per_step(steps)
    lost_s = down_s = 0.0
    steps_lost = 0
    estimated = []
    for body in resumes:
        # the steps done again: up to the last step before the crash, or where a relaunch got to if less (`redone`)
        redone = min(int(body["old"]["step"]), int(body.get("redone", body["old"])["step"]))
        n = max(0, redone - int(body["resume"]["step"]))
        steps_lost += n
        seconds = body.get("lost_s")
        if seconds is None and lost_wall is not None:
            seconds = lost_wall.get(int(body.get("id", -1)))
        if seconds is None and per_step is not None:
            seconds = n * per_step
            estimated.append(f"the time of {n:,} lost steps (median {per_step:.3g} s/step)")
        lost_s += float(seconds or 0.0)
        down_s += float(body.get("down_s") or 0.0)
    good = max(0.0, total - sum(saves) - lost_s - down_s)
    return Goodput(
        share=good / total,
        wall_s=total,
        checkpoint_s=sum(saves),
        checkpoints=len(saves),
        restarts=len(resumes),
        steps_lost=steps_lost,
        lost_s=lost_s,
        down_s=down_s,
        estimated=estimated,
        unmeasured=[] if saves else ["checkpoint saves: none timed (Tracker.checkpoint, time/checkpoint_s)"],
    )


def goodput_of(ledger: Ledger, run: str) -> Goodput | None:
    """`goodput` of a run in the ledger (its clock alone is read: a million steps' every column was 100 MB more)."""
    steps = ledger.steps(run, ["wall_s"])
    saves = ledger.extras(run, [CHECKPOINT_KEY])["value"].tolist()
    events = ledger.events(run, kind="resume")
    resumes = [{"id": int(i), **body} for i, body in zip(events["id"], events["body"], strict=True)]
    lost_wall = {}
    superseded = ledger.superseded(run)
    if len(superseded) and "wall_s" in superseded.columns:
        extras = ledger.extras(run, [CHECKPOINT_KEY])
        for body in resumes:
            gone = superseded.loc[superseded["event_id"] == body["id"], "wall_s"].dropna()
            step = int(body["resume"]["step"])
            at = ledger.step_at(run, step)
            if len(gone) and at is not None and at["wall_s"] is not None:
                # The save that wrote the checkpoint resumed from, when its seconds are on the kept record of that
                # step (they are on the next, set-apart record when the step's record had left before the save
                # ended), is counted as a save: the lost work starts after it, not once more in the lost time.
                kept = float(extras.loc[extras["step"] == step, "value"].sum())
                lost_wall[body["id"]] = max(0.0, float(gone.max()) - at["wall_s"] - kept)
    return goodput(steps, saves, resumes, lost_wall)
