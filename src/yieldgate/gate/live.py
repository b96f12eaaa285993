"""The gate inside the run: a governor that lets a training run go on only while its marginal learning earns the next
stage of its policy (issue #48).

A Tracker given a policy (`Tracker(..., policy=...)`, the callbacks' `policy=`, or `YIELDGATE_POLICY` in the
environment) makes a `Governor` as it starts (`Governor.start`): a policy that cannot govern the run is refused there,
in one line, before the run is made. The Tracker's writer calls `Governor.evaluate` on its own thread each time an
evaluation has been written (nothing is added to the training step), and the governor decides with the offline
gate's own code: it reads the run as it stood at the evaluation's step (`TargetEvidence.read(..., at_step=)`, one run
read live: `TargetEvidence.live`) and calls `gate.decide`. What it does with the decision:

- at the first evaluation past a stage boundary (the run's tokens reached a stage's), the decision on the next stage
  is stored as `yieldgate gate` stores one (`gate.record`: the evidence, the policy, its hash, the rationale) and
  acted on: approve, the run goes on (under the new-hardware exception too); hold or reject, the run is held;
- between boundaries, a hold for an open fault that is not the data's (a damaged update, a schedule fault, an
  infrastructure stall: the policy's `blocking_causes`) is stored and acted on at once, once a stage: more tokens of
  a damaged run buy nothing. The yield is decided at the boundary only: the stage's tokens were granted when it
  began, and they narrow the interval. So that an evaluation between boundaries costs little (the gate's whole
  reading, its detectors and the forecast's bootstrap, takes a few hundred ms on a small run), each is screened by
  the cheap online detectors (`analysis.diagnose.online_findings`: non-finite values, spikes, stalls, on the last
  256 steps, read incrementally) and by its own value; only a screen that finds a blocking cause, or a non-finite
  evaluation, calls the gate.

A held run is asked to stop (`Verdict.stop`: `Tracker.should_stop`, the callbacks' own stop flags) unless the policy
says `on_hold: warn`; its meta (`governor`) records the decisions and, once held, the compute left unspent: the tokens
from where it stood to the policy's last stage, in device-hours, dollars and kWh at its measured throughput and the
prices (`gate._unspent`). Its status then reads `held` (`Ledger.run_records`). `yieldgate gate RUN --policy P` run
afterwards reads the governed run the same way (its meta says it was governed) and reaches the same decision at the
same boundary; read at the decision's step (`at_step`) it gives the same evidence.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.analysis.compare import RunData
from yieldgate.analysis.diagnose import online_findings
from yieldgate.errors import InputError
from yieldgate.gate.draft import Decision, RecordedDecision
from yieldgate.gate.evidence import in_tokens
from yieldgate.gate.gate import decide, record
from yieldgate.gate.policy import Policy, load_policy, parse_policy
from yieldgate.gate.target import TargetEvidence
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest

__all__ = ["Governor", "Verdict", "governable"]

log = logging.getLogger("yieldgate.track")

ONLINE_WINDOW = 256
"""Trailing steps the cheap detectors screen between boundaries (as the Tracker's online diagnosis does)."""
FAULT_CHECK = "no open non-data fault"
"""The gate's check that holds on an open fault that is not the data's (`gate._faults`): acted on between
boundaries."""


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A decision the governor stored and acted on, as the Tracker reads it."""

    decision: RecordedDecision
    stop: bool
    """The run is asked to stop: the decision does not approve and the policy's `on_hold` is `stop`."""
    boundary: bool
    """Decided at a stage boundary (False: a fault, between boundaries)."""


def governable(policy: Policy, manifest: Manifest | None) -> None:
    """Refuse, in one line, a policy this run cannot be governed by: a bar or a stage budget the run cannot measure
    (dollars without a price). (A stage bar that is not a finite number above 0, stages out of order, in two units or
    with shares past 1 are refused as the policy is read.)"""
    req = policy.requirements
    hw = manifest.hardware if manifest is not None else None
    priced = (policy.prices is not None and policy.prices.per_device_hour) or (
        hw is not None and hw.price_per_device_hour is not None
    )
    if policy.unit == "usd" and not priced:
        raise InputError(
            f"policy {policy.name!r} gives its stages in dollars, but this run records no price: give the policy "
            "prices.per_device_hour or the manifest hardware.price_per_device_hour, or give the stages in tokens or "
            "device_hours; the run was not started"
        )
    if req.min_yield_per_usd is not None and (hw is None or hw.price_per_device_hour is None):
        raise InputError(
            f"policy {policy.name!r} asks for requirements.min_yield_per_usd ({req.min_yield_per_usd:g} per dollar), "
            "but this run records no price: give the manifest hardware.price_per_device_hour, or remove the bar; "
            "the run was not started"
        )


def load(policy: Policy | str | Path | Mapping[str, Any]) -> tuple[Policy, str]:
    """The policy and where it came from (a path, or `Tracker(policy=...)`), validated with one-line errors."""
    if isinstance(policy, Policy):
        return policy, "Tracker(policy=...)"
    if isinstance(policy, Mapping):
        return parse_policy(dict(policy), origin="Tracker(policy=...)"), "Tracker(policy=...)"
    return load_policy(Path(policy)), str(policy)


@dataclass(kw_only=True)
class Governor:
    """The gate inside one run (module docstring). `evaluate` runs on the Tracker's writer thread only."""

    policy: Policy
    source: str
    """Where the policy came from: its path, or `Tracker(policy=...)`."""
    stage: int = -1
    """The largest stage (index into the policy's stages) whose boundary was decided: -1, none."""
    done: bool = False
    """Held and stopping, or past the last stage: nothing more to decide."""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """The decisions stored, oldest first: id, step, tokens, stage decided on, decision."""
    held: dict[str, Any] | None = None
    first: int = 0
    """The step the run starts after (a resumed run's)."""
    _held_stages: set[str] = field(default_factory=set)
    """The stages decided on by a hold or reject: a fault between boundaries is not stored again for them."""
    _seen: int = -1
    """The last step screened."""
    _window: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The trailing steps the cheap detectors screen (`_screen`)."""
    _law: tuple[float, float, float, float] | None = None
    """(E, B, beta, rmse) of the law the last approving decision's forecast was fitted on (`_remember`)."""

    @classmethod
    def start(cls, policy: Policy | str | Path | Mapping[str, Any], *, manifest: Manifest | None) -> Governor:
        """The governor of a run about to start; a policy that cannot govern it is refused (InputError, one line)."""
        parsed, source = load(policy)
        governable(parsed, manifest)
        return cls(policy=parsed, source=source)

    def begin_at(self, step: int, tokens: float) -> None:
        """The run starts after `step`, at `tokens` (a resumed run): the stage boundaries it had reached were decided
        before."""
        self.first, self._seen, self.stage = step, step, _stage_of(self.policy, tokens)

    @property
    def on_hold(self) -> str:
        return self.policy.on_hold or "stop"

    def note(self) -> dict[str, Any]:
        """What the run's meta keeps (`governor`): the policy, how a hold is acted on, the decisions, the hold."""
        return {
            "policy": f"{self.policy.name}@{self.policy.version}",
            "policy_hash": self.policy.content_hash(),
            "source": self.source,
            "on_hold": self.on_hold,
            "decisions": self.decisions,
            "held": self.held,
        }

    def evaluate(self, ledger: Ledger, run: str, step: int) -> Verdict | None:
        """Decide at the evaluation of `step` (written to `ledger`); return the verdict acted on, None when there is
        none to act on."""
        if self.done or step <= self.first:
            return None  # an evaluation before the run's first step (or a resumed run's) has nothing to decide on
        tokens, fault = self._screen(ledger, run, step)
        reached = _stage_of(self._in_tokens(ledger, run), tokens)
        if reached >= len(self.policy.stages) - 1:
            self.done = True  # the last stage is reached: the plan is done, nothing left to earn
            return None
        boundary = reached > self.stage
        drifted = not boundary and self._drifted(ledger, run, step, tokens)
        if not boundary and not fault and not drifted:
            return None
        evidence = TargetEvidence.read(ledger, run, self.policy, at_step=step)
        decision = decide(evidence, self.policy)
        self.stage = max(self.stage, reached)
        self._remember(decision)
        if not boundary and not self._fault(decision) and not (drifted and self._unearned(decision)):
            return None
        return self._act(ledger, decision, run, step, evidence.reached, boundary)

    def _remember(self, decision: Decision) -> None:
        """The law the decision's forecast was fitted on (one run: its own fit), which `_drifted` holds the next
        evaluations to; kept from each decision that approves."""
        fits = (decision.evidence.get("forecast") or {}).get("per_seed") or []
        if decision.decision == "approve" and len(fits) == 1 and fits[0].get("fit"):
            fit = fits[0]["fit"]
            self._law = (float(fit["E"]), float(fit["B"]), float(fit["beta"]), float(fit["rmse"]))

    def _drifted(self, ledger: Ledger, run: str, step: int, tokens: float) -> bool:
        """With `between_boundaries: forecast`: the held-out loss at `step` is worse than the last approved
        forecast's law foresaw at these tokens by more than 3 times the law's scatter (its rmse): the forecast is made
        again (`evaluate`). A check of one evaluation against a formula: no fit, no bootstrap."""
        if self.policy.between_boundaries != "forecast" or self._law is None or not tokens > 0:
            return False
        evals = ledger.evals(run)
        at = evals[(evals["step"] == step) & (evals["task"] == "val") & (evals["metric"] == "loss")]
        if at.empty:
            return False
        e, b, beta, rmse = self._law
        foreseen = e + b * tokens ** (-beta)
        return bool(math.isfinite(rmse) and float(at["value"].iloc[-1]) > foreseen + 3 * rmse)

    def _unearned(self, decision: Decision) -> bool:
        """A decision made again within a stage (`_drifted`) that no longer approves the next stage, not held before."""
        return decision.decision != "approve" and decision.next_stage not in self._held_stages

    def _in_tokens(self, ledger: Ledger, run: str) -> Policy:
        """The policy with its stages in tokens (`evidence.in_tokens`), a budget in device-hours or dollars read at
        the run's throughput as it stands (its tokens over its wall-clock time at the last step screened): the
        reading the offline gate makes of the run at that step."""
        if self.policy.unit == "tokens":
            return self.policy
        steps = self._window.dropna(subset=["tokens", "wall_s"]) if "wall_s" in self._window else self._window[:0]
        data = RunData(run, steps.tail(1), pd.DataFrame(), ledger.manifest(run))
        return in_tokens(self.policy, [data], {run: ledger.meta(run)})

    def _screen(self, ledger: Ledger, run: str, step: int) -> tuple[float, bool]:
        """The run's tokens at `step`, and whether the cheap detectors (`ONLINE_DETECTORS`, on the trailing window of
        steps) find a fault the policy blocks on, or the evaluation at `step` is not finite: only then is a decision
        made between boundaries, by the gate's whole reading. Reads only the steps written since the last call."""
        new = ledger.steps(run, after=self._seen)
        new = new[(new["step"] > self._seen) & (new["step"] <= step)]
        if len(new):
            self._window = pd.concat([self._window, new], ignore_index=True).tail(ONLINE_WINDOW)
            self._seen = int(new["step"].iloc[-1])
        tokens = self._window["tokens"].dropna() if "tokens" in self._window else pd.Series(dtype=float)
        if len(self._window) and not (len(tokens) and tokens.iloc[-1] > 0):
            raise InputError(
                f"run {run!r} has recorded no tokens by step {step:,}: its policy's stages are budgets of tokens, so "
                "it cannot be governed; give tr.step(tokens=...) the tokens each step trained on"
            )
        evals = ledger.evals(run)
        latest = evals.loc[evals["step"] == step, "value"].to_numpy(dtype=float)
        req = self.policy.requirements
        blocking = [
            f
            for f in online_findings(self._window)
            if f.cause in req.blocking_causes and (f.confidence or 1.0) > req.diagnosis_confidence
        ]
        return (float(tokens.iloc[-1]) if len(tokens) else 0.0), bool(blocking) or not np.isfinite(latest).all()

    def _fault(self, decision: Decision) -> bool:
        """A hold between boundaries on an open fault that is not the data's, where the stage it decides on was not
        held already (once a stage: the fault's span grows at every evaluation, the hold it makes does not)."""
        failed = any(c.name == FAULT_CHECK and c.passed is False for c in decision.checks)
        return decision.decision != "approve" and failed and decision.next_stage not in self._held_stages

    def _act(self, ledger: Ledger, decision: Decision, run: str, step: int, tokens: float, boundary: bool) -> Verdict:
        """Store the decision (as `yieldgate gate` does) with the run's meta, and say it."""
        kept = record(ledger, decision, self.policy)
        self.decisions.append(
            {"id": kept, "step": step, "tokens": tokens, "stage": decision.next_stage, "decision": decision.decision}
        )
        stop = decision.decision != "approve" and self.on_hold == "stop"
        if decision.decision != "approve":
            self._held_stages.add(decision.next_stage)
            unspent = decision.evidence.get("unspent") or {}
            log.warning(
                "yieldgate: run %r %s at step %d (%s tokens): %s; stopping here leaves %s; %s",
                run,
                "held" if decision.decision == "hold" else "rejected",
                step,
                f"{tokens:,.0f}",
                decision.rationale,
                _unspent_line(unspent),
                "the run is asked to stop (on_hold: stop)" if stop else "the run goes on (on_hold: warn)",
            )
        if stop:
            self.done = True
            self.held = {"decision": kept, "step": step, "tokens": tokens, "unspent": decision.evidence.get("unspent")}
        ledger.set_meta(run, "governor", self.note())
        return Verdict(decision=RecordedDecision.of(decision, kept), stop=stop, boundary=boundary)


def _stage_of(policy: Policy, tokens: float) -> int:
    """The index of the largest stage `tokens` reached (-1: none)."""
    if not tokens > 0 or math.isnan(tokens):
        return -1
    return sum(1 for s in policy.stages if s.token_budget <= tokens) - 1


def _unspent_line(unspent: dict[str, Any]) -> str:
    if not unspent:
        return "nothing priced"
    figures = [
        f"{unspent['tokens']:,.0f} tokens",
        *(
            f"{unspent[key]:.3g} {unit}"
            for key, unit in (("device_hours", "device-hours"), ("usd", "USD"), ("kwh", "kWh"))
            if unspent.get(key) is not None
        ),
    ]
    return ", ".join(figures) + " unspent"
