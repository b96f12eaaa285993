"""Loss spikes: an outlier batch the run recovers from, a damaged update, or an unstable schedule; and the data
as the cause when runs that read the same data in the same order spike at the same steps.

A spike is a value above mean + k·σ of a trailing window (OLMo-core: 128 steps, k = 6). What follows it decides
what it was:
- it recovers (back within 2σ of the level before it within RECOVER_STEPS), the level does not ratchet up
  after it, and the held-out loss around it is unchanged: a `transient_spike`, low severity (an outlier batch,
  not "lower the peak LR");
- it does not recover, or the level ratchets up, or the held-out loss got worse: a `damaged_update`, and
  RECURRING_SPIKES or more of those an unstable `schedule` (when the learning rate is recorded);
- runs that read the same data order (`RunSignals.peers`) spike at the same steps: the data is the cause, and
  the finding names the steps.
Pure and cheap: the Tracker runs `loss_spikes` online on a trailing window (`diagnose.online_findings`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.detectors import (
    GRAD_SPIKE_SIGMA,
    LOW_CONFIDENCE,
    RATCHET_SIGMA,
    RECOVER_STEPS,
    RECURRING_SPIKES,
    SPIKE_LEVEL,
    SPIKE_MIN_HISTORY,
    SPIKE_SIGMA,
    SPIKE_WINDOW,
    Finding,
    NotRun,
    RunSignals,
    _clip,
    _runs,
)
from yieldgate.analysis.fit import learning_noise

__all__ = ["spike_steps", "loss_spikes", "recovery", "eval_spikes"]


def spike_steps(values: np.ndarray, window: int = SPIKE_WINDOW, k: float = SPIKE_SIGMA) -> list[tuple[int, float]]:
    """Indices (and z-scores) of finite values above mean + k·σ of the trailing window.

    The mean is that of the last SPIKE_LEVEL values (the local level) and σ the step-to-step noise of the
    trailing `window` values, std(diff)/√2: a short run's loss falls fast, and a plain σ over 128 steps would
    be mostly trend. A spike does not enter the baseline of the steps after it. Pure and cheap: online use is
    the same call on the trailing window."""
    out: list[tuple[int, float]] = []
    history: list[float] = []
    for i, v in enumerate(values):
        if not math.isfinite(v):
            continue
        if len(history) >= SPIKE_MIN_HISTORY:
            base = np.asarray(history[-window:])
            mu = float(base[-SPIKE_LEVEL:].mean())
            sd = float(np.diff(base).std() / math.sqrt(2.0))
            z = (v - mu) / sd if sd > 0 else math.inf if v > mu else 0.0
            if z > k:
                out.append((i, z))
                continue
        history.append(float(v))
    return out


def recovery(steps: np.ndarray, values: np.ndarray, start: int, end: int) -> dict[str, Any]:
    """What the loss did after a spike over steps `start`-`end`: the level and step noise before it (the last
    SPIKE_LEVEL values; σ = std(diff)/√2 of the trailing window), the step it came back within 2σ of that level
    (None: not within RECOVER_STEPS of its end, or the spike itself lasted longer), and the level of the SPIKE_LEVEL
    values after the recovery window against the level before, in standard errors (a ratchet when above
    RATCHET_SIGMA)."""
    ok = np.isfinite(values)
    before = values[ok & (steps < start)][-SPIKE_WINDOW:]
    after = values[ok & (steps > end)]
    after_steps = steps[ok & (steps > end)]
    if len(before) < SPIKE_MIN_HISTORY:
        return {"recovered_at": None, "ratchet_z": None, "level_before": None}
    level = float(before[-SPIKE_LEVEL:].mean())
    sd = float(np.diff(before).std() / math.sqrt(2.0)) or 1e-12
    window = after[:RECOVER_STEPS]
    back = np.flatnonzero(window <= level + 2 * sd)
    # A spike that lasts longer than RECOVER_STEPS has not recovered "within a few steps", whatever follows.
    recovered_at = int(after_steps[back[0]]) if len(back) and end - start <= RECOVER_STEPS else None
    later = after[RECOVER_STEPS : RECOVER_STEPS + SPIKE_LEVEL]
    ratchet_z = round(float((later.mean() - level) / (sd / math.sqrt(len(later)))), 2) if len(later) >= 4 else None
    return {
        "level_before": round(level, 4),
        "step_noise": round(sd, 5),
        "recovered_at": recovered_at,
        "ratchet_z": ratchet_z,
    }


def _heldout_change(sig: RunSignals, start: int, end: int) -> dict[str, Any]:
    """The held-out loss at the last evaluation before the spike and the first after its recovery window, in units
    of the evaluations' noise (`fit.learning_noise`); None where no evaluation brackets the spike. A damaged update
    harms the model on its training data too: a held-out loss that rose while the training loss fell between the
    same two evaluations (its level over the SPIKE_LEVEL steps up to each) is the run overfitting, read by its own
    detector, not the spike's damage (a one-batch blip that recovered five steps later was blamed for a fine-tune's
    held-out rise between two evaluations an epoch apart)."""
    val = sig.val_loss()
    if len(val) < 2:
        return {"val_change": None}
    steps, values = val.index.to_numpy(dtype=float), val.to_numpy(dtype=float)
    before, after = values[steps < start], values[steps > end + RECOVER_STEPS]
    if not len(before) or not len(after):
        return {"val_change": None}
    noise = learning_noise(steps, values, steps, sig.steps)[0] if len(val) >= 3 else math.nan
    change = float(after[0] - before[-1])
    out = {"val_change": round(change, 4), "val_noise": round(noise, 5)}
    if not noise > 0:
        return out | {"val_worse": False, "val_note": "too few evaluations to measure their noise"}
    train = _train_change(sig, float(steps[steps < start][-1]), float(steps[steps > end + RECOVER_STEPS][0]))
    if change > 3 * noise and train is not None and train < 0:
        return out | {
            "val_worse": False,
            "train_change": round(train, 4),
            "val_note": "training loss fell: overfitting",
        }
    return out | {"val_worse": bool(change > 3 * noise)}


def _train_change(sig: RunSignals, at: float, later: float) -> float | None:
    """The training loss's level (mean of the SPIKE_LEVEL finite values up to a step) at `later` less at `at`."""
    loss = sig.steps.set_index("step")["loss"].dropna() if "loss" in sig.steps else None
    if loss is None:
        return None
    x, y = loss.index.to_numpy(dtype=float), loss.to_numpy(dtype=float)
    ok = np.isfinite(y)
    first, second = y[ok & (x <= at)][-SPIKE_LEVEL:], y[ok & (x <= later)][-SPIKE_LEVEL:]
    if not len(first) or not len(second):
        return None
    return float(second.mean() - first.mean())


def _peer_spikes(sig: RunSignals) -> dict[str, set[int]]:
    """Steps at which each peer run (same data order) has a loss spike."""
    out = {}
    for name, loss in sig.peers.items():
        loss = loss.dropna()
        steps = loss.index.to_numpy()
        out[name] = {int(steps[i]) for i, _ in spike_steps(loss.to_numpy(dtype=float))}
    return out


@dataclass(frozen=True, order=True)
class _Hit:
    """One spike of one signal (`loss` or `grad_norm`) at one step, with its z-score."""

    step: int
    signal: str
    value: float
    z: float

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "signal": self.signal, "value": self.value, "z": self.z}


@dataclass(frozen=True)
class _Group:
    """Spikes within two steps of each other, from `start` to `end`, with what followed them (`evidence`)."""

    start: int
    end: int
    evidence: dict[str, Any]


@dataclass
class _Groups:
    """The spike groups by what followed them."""

    transient: list[_Group] = field(default_factory=list)
    damaged: list[_Group] = field(default_factory=list)
    shared: list[_Group] = field(default_factory=list)
    """Groups a peer run that reads the same data order spikes at too."""
    grad_only: list[tuple[int, int, list[_Hit]]] = field(default_factory=list)
    """Groups without a loss spike, with their hits."""


_COMMON = {"window": SPIKE_WINDOW, "k": SPIKE_SIGMA, "k_grad_norm": GRAD_SPIKE_SIGMA}
"""The thresholds, in every spike finding's evidence."""


def loss_spikes(sig: RunSignals) -> list[Finding]:
    """Loss spikes above the trailing window's level + 6σ, with any gradient-norm spike at the same step as
    evidence, each read by what followed it (see the module docstring). A gradient-norm spike without a loss
    spike is only a note: at probe scale the norm is heavy-tailed (clean calibration runs reached z = 72 early
    on) and clipping bounds the update it makes."""
    loss = sig.column("loss", "a log without training loss")
    hits = _hits(sig, loss)
    if not hits:
        return []
    groups = _groups(sig, loss, hits)
    found = [_shared_finding(groups.shared)] if groups.shared else []
    found += [_transient_finding(g) for g in groups.transient]
    if len(groups.damaged) >= RECURRING_SPIKES:
        found.append(_recurring_finding(sig, groups.damaged))
    else:
        found += [_damaged_finding(g) for g in groups.damaged]
    found += [_grad_only_finding(start, end, grad_hits) for start, end, grad_hits in groups.grad_only]
    return found


def _hits(sig: RunSignals, loss: pd.Series) -> list[_Hit]:
    """The spikes of the loss and of the gradient norm (where recorded), in step order."""
    series = {"loss": loss}
    if "grad_norm" in sig.steps and sig.steps["grad_norm"].notna().any():
        series["grad_norm"] = sig.steps.set_index("step")["grad_norm"].dropna()
    hits: list[_Hit] = []
    for name, values in series.items():
        steps, v = values.index.to_numpy(), values.to_numpy(dtype=float)
        k = SPIKE_SIGMA if name == "loss" else GRAD_SPIKE_SIGMA
        hits += [_Hit(int(steps[i]), name, float(v[i]), round(float(z), 2)) for i, z in spike_steps(v, k=k)]
    return sorted(hits)


def _groups(sig: RunSignals, loss: pd.Series, hits: list[_Hit]) -> _Groups:
    """The hits grouped by step (within two steps), each group with a loss spike read by what followed it."""
    loss_steps, loss_values = loss.index.to_numpy(), loss.to_numpy(dtype=float)
    peers = _peer_spikes(sig)
    groups = _Groups()
    for start, end in _runs(np.array([h.step for h in hits]), gap=2):
        here = [h for h in hits if start <= h.step <= end]
        if not any(h.signal == "loss" for h in here):
            groups.grad_only.append((start, end, here))
            continue
        ev = {
            "spikes": [h.to_dict() for h in here],
            **recovery(loss_steps, loss_values, start, end),
            **_heldout_change(sig, start, end),
        }
        ratchet = ev["ratchet_z"] is not None and ev["ratchet_z"] > RATCHET_SIGMA
        ev["recovered"] = ev["recovered_at"] is not None and not ratchet and not ev.get("val_worse", False)
        ev["shared_with"] = sorted(
            p for p, at in peers.items() if any(abs(a - st) <= 1 for a in at for st in range(start, end + 1))
        )
        kind = groups.shared if ev["shared_with"] else groups.transient if ev["recovered"] else groups.damaged
        kind.append(_Group(start, end, ev))
    return groups


def _shared_finding(shared: list[_Group]) -> Finding:
    """Spikes that peer runs reading the same data in the same order share: the data is the cause."""
    runs = sorted({p for g in shared for p in g.evidence["shared_with"]})
    steps = [g.start for g in shared]
    recovered = all(g.evidence["recovered"] for g in shared)
    return Finding(
        cause="transient_spike" if recovered else "damaged_update",
        start_step=steps[0],
        end_step=shared[-1].end,
        confidence=0.8,
        detector="shared_data_spike",
        evidence={"steps": steps, "shared_with": runs, "events": [g.evidence for g in shared], **_COMMON},
        advice=f"{', '.join(runs)} read the same data in the same order and spike at the same steps "
        f"({', '.join(map(str, steps[:10]))}): the data is the cause; inspect and filter the batches at "
        "those steps",
    )


def _transient_finding(g: _Group) -> Finding:
    return Finding(
        cause="transient_spike",
        start_step=g.start,
        end_step=g.end,
        confidence=0.6,
        detector="transient_spike",
        evidence={**g.evidence, **_COMMON},
        advice=f"a loss spike at step {g.start} recovered by step {g.evidence['recovered_at']}"
        + (" and left the held-out loss unchanged" if g.evidence["val_change"] is not None else "")
        + ": an outlier batch, not a schedule fault; nothing to change unless it recurs (inspect that "
        "batch)",
    )


def _recurring_finding(sig: RunSignals, damaged: list[_Group]) -> Finding:
    """RECURRING_SPIKES or more spikes the run did not recover from: the schedule, when the LR is recorded."""
    has_lr = "lr" in sig.steps and sig.steps["lr"].notna().any()
    return Finding(
        cause="schedule" if has_lr else "damaged_update",
        start_step=damaged[0].start,
        end_step=damaged[-1].end,
        confidence=0.8,
        detector="recurring_spikes",
        evidence={"spikes": [g.evidence["spikes"] for g in damaged][:20], "count": len(damaged), **_COMMON},
        advice="recurring loss spikes that do not recover: the update is unstable at this LR; lower the peak "
        "LR, lengthen warm-up or tighten clipping",
    )


def _damaged_finding(g: _Group) -> Finding:
    loss_z = max(h["z"] for h in g.evidence["spikes"] if h["signal"] == "loss")
    return Finding(
        cause="damaged_update",
        start_step=g.start,
        end_step=g.end,
        confidence=_clip(0.6 + (loss_z - SPIKE_SIGMA) / 20),
        detector="spike",
        evidence={**g.evidence, **_COMMON},
        advice=f"a spike at step {g.start} that the run did not recover from (or that raised the loss level "
        "after it): inspect that step's batch and skip it; if it recurs, lower the LR or tighten "
        "clipping",
    )


def _grad_only_finding(start: int, end: int, hits: list[_Hit]) -> Finding:
    return Finding(
        cause="damaged_update",
        start_step=start,
        end_step=end,
        confidence=LOW_CONFIDENCE,
        detector="grad_norm_spike",
        evidence={"spikes": [h.to_dict() for h in hits], **_COMMON},
        advice=f"a gradient-norm spike at step {start} without a loss spike: clipping bounds its "
        "update; watch for a recurrence",
    )


EVAL_SPIKE_SIGMA = 6.0
"""An evaluation is a spike when it lies this many robust standard deviations above its neighbours' line ..."""
EVAL_SPIKE_SHARE = 0.1
"""... and at least this share of their line's value above them (a curve smooth to the last digit has σ ~ 0)."""
EVAL_SPIKE_MIN = 5
"""Evaluations of one task needed before a spike among them can be told from the curve."""


def eval_spikes(sig: RunSignals) -> list[Finding]:
    """A single held-out evaluation far above both its neighbours, the next one back on the curve:
    a transient of the evaluation (a different or broken eval batch, an eval-time precision fault) or of the model
    that the run recovered from. The training-loss detector cannot see it (it reads the training loss), and the two
    tranche yields around it are distorted by it: one a large loss, the next a large gain. Per task, on `loss` and
    `bpb` evaluations; σ is 1.4826 x the median absolute deviation of every interior evaluation's distance to its
    neighbours' line."""
    e = sig.evals
    if e.empty or not e["metric"].isin(("loss", "bpb")).any():
        raise NotRun("no held-out loss or bits-per-byte evaluations")
    found, read = [], 0
    # One series per portfolio (and version) too: two portfolios' val/loss at the same steps are two curves.
    series = [c for c in ("portfolio", "portfolio_version") if c in e]
    for keys, rows in e[e["metric"].isin(("loss", "bpb"))].groupby([*series, "task", "metric"], sort=True):
        task, metric = keys[-2:]
        rows = rows[np.isfinite(rows["value"].to_numpy(dtype=float))].sort_values("step")
        steps, values = rows["step"].to_numpy(dtype=float), rows["value"].to_numpy(dtype=float)
        if len(values) < EVAL_SPIKE_MIN or len(np.unique(steps)) < len(steps):
            continue
        read += 1
        # The line through each interior evaluation's neighbours, at its step.
        w = (steps[1:-1] - steps[:-2]) / (steps[2:] - steps[:-2])
        line = values[:-2] + w * (values[2:] - values[:-2])
        above = values[1:-1] - line
        sigma = 1.4826 * float(np.median(np.abs(above - np.median(above))))
        # Above both neighbours by the margin, not only above their line: the first evaluation after the loss steps
        # up to a new level lies above the line too, but not above the next one.
        over = values[1:-1] - np.maximum(values[:-2], values[2:])
        for i in np.nonzero((over > EVAL_SPIKE_SIGMA * sigma) & (over > EVAL_SPIKE_SHARE * np.abs(line)))[0]:
            step, key = int(steps[i + 1]), f"{task}/{metric}"
            found.append(
                Finding(
                    cause="transient_spike",
                    start_step=step,
                    end_step=step,
                    confidence=0.6,
                    detector="eval_spike",
                    evidence={
                        "eval": key,
                        "value": float(values[i + 1]),
                        "neighbours": [float(values[i]), float(values[i + 2])],
                        "neighbour_steps": [int(steps[i]), int(steps[i + 2])],
                        "above_line": round(float(above[i]), 6),
                        "sigma": round(sigma, 6),
                        "k": EVAL_SPIKE_SIGMA,
                    },
                    advice=f"{key} at step {step} is {values[i + 1]:.4g} against {values[i]:.4g} and "
                    f"{values[i + 2]:.4g} at the evaluations around it, and the next is back on the curve: one "
                    "evaluation off (a broken eval batch, or a transient the run recovered from); the two tranche "
                    "yields around it are distorted by it, so read yields over wider tranches",
                )
            )
    if not read:
        raise NotRun(f"fewer than {EVAL_SPIKE_MIN} held-out loss evaluations of any one task")
    return found
