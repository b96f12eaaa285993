"""The gate's policy: stages of compute, and the evidence each must show to earn the next.

A policy is a YAML (or JSON) file validated here with the manifest's one-line errors (`stages[1].tokens:
must be > 0, got -5`), unknown fields refused, and content-hashed so that every decision names the exact
policy it was made under. `examples/policy.yaml` is a commented example; docs/gate.md ("Policies and the gate")
explains each field.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from yieldgate.analysis.detectors import CAUSES, LOW_CONFIDENCE
from yieldgate.config_files import read_structured_file, validate
from yieldgate.errors import InputError
from yieldgate.util.hashing import content_hash

__all__ = [
    "BUDGET_UNITS",
    "Stage",
    "Requirements",
    "NewHardwareException",
    "Prices",
    "Policy",
    "load_policy",
    "parse_policy",
    "NON_DATA_CAUSES",
]

NON_DATA_CAUSES = ("schedule", "damaged_update", "infrastructure_stall")
"""Diagnosed causes that are not the data's fault: while one is open, a poor yield must not be blamed on the data."""


class _Model(BaseModel):
    # Unknown fields are errors: a typo (`min_seed`) must not silently fall back to a default.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


BUDGET_UNITS = ("tokens", "device_hours", "usd")
"""What a stage's budget may be given in: tokens trained, device-hours spent, dollars spent (all cumulative)."""


class Stage(_Model):
    """One stage of compute: the budget it trains to (tokens, device-hours or dollars: one of them) and its share of
    the programme's total compute."""

    name: str = Field(min_length=1)
    """Stage name, e.g. `probe`, `pilot`, `full`."""
    tokens: int | None = Field(default=None, gt=0)
    """Token budget the stage trains to (cumulative accepted tokens)."""
    device_hours: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Or: the device-hours the stage spends by its end (cumulative; wall-clock time x the run's devices)."""
    usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Or: the dollars the stage spends by its end (cumulative device-hours x the price per device-hour)."""
    compute_share: float = Field(gt=0, le=1)
    """Share of the total compute of all stages that this stage spends (0-1]."""

    @model_validator(mode="after")
    def _one_budget(self) -> Stage:
        given = [unit for unit in BUDGET_UNITS if getattr(self, unit) is not None]
        if len(given) != 1:
            raise ValueError(
                f"stage {self.name!r} needs exactly one budget of {', '.join(BUDGET_UNITS)}, got "
                f"{', '.join(given) or 'none'}"
            )
        return self

    @property
    def unit(self) -> str:
        """The unit the budget is given in: `tokens`, `device_hours` or `usd`."""
        return next(unit for unit in BUDGET_UNITS if getattr(self, unit) is not None)

    @property
    def budget(self) -> float:
        """The budget, in its unit."""
        return float(getattr(self, self.unit))

    @property
    def token_budget(self) -> int:
        """The budget in tokens: a stage given in device-hours or dollars is read in tokens at a run's measured
        throughput first (`Policy.in_tokens`)."""
        if self.tokens is None:
            raise ValueError(f"stage {self.name!r} is a budget of {self.unit}: read it in tokens first")
        return self.tokens


class Requirements(_Model):
    """What the evidence at one stage must show for the next stage to be approved."""

    min_yield_per_btok: float = Field(gt=0, allow_inf_nan=False)
    """Threshold on the forecast marginal yield of the next stage's tokens: validation-loss decrease per
    billion tokens. Approve needs the interval's lower bound above it; reject when even its upper bound is below.
    A finite number above 0: a bar of infinity (or NaN) holds every stage, and one at or below 0 approves a loss
    that does not fall."""
    min_yield_per_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Optional threshold per dollar (loss decrease per USD of the next stage); needs a price in the manifest
    (`hardware.price_per_device_hour`) and recorded wall time."""
    regression_tolerance: float = Field(default=0.05, ge=0)
    """Largest worsening allowed on a hard slice (`hard/*`, bits per byte) or a capability task (any task that is
    not `val`, in its own metric), measured as the final value against the run's best, mean over seeds."""
    min_seeds: int = Field(default=3, ge=1)
    """Seeds (runs per budget) the forecast interval needs."""
    min_tokens_per_param: float = Field(default=0.0, ge=0)
    """The next stage's tokens per model parameter must reach this (Chinchilla: ~20; far below, a model is
    undertrained). 0 turns the check off."""
    max_epochs: float | None = Field(default=None, gt=0)
    """The most times the next stage may pass any source's unique tokens (`data.sources[].unique_tokens` in the
    manifests); a source passed more often holds the gate, naming how many unique tokens it needs. Muennighoff
    et al. (2023): up to ~4 epochs are worth nearly as much as new data. None (the default) turns the check off;
    the forecast yield is discounted for repetition either way (`supply.py`)."""
    blocking_causes: list[str] = Field(default_factory=lambda: list(NON_DATA_CAUSES))
    """Open diagnoses with these causes hold the gate: a learning problem that is not the data's fault."""
    diagnosis_confidence: float = Field(default=LOW_CONFIDENCE, ge=0, le=1)
    """Open diagnoses at or below this confidence are notes and do not block (diagnose's low-confidence line)."""
    level: float = Field(default=0.8, gt=0, lt=1)
    """Coverage of the yield interval."""
    undetermined_stall: Literal["hold", "reject"] | None = None
    """What a stall of undetermined cause does (diagnose's `stalled`: a plateau at constant LR with no cooldown
    after it, which the schedule's noise floor and exhausted data both explain): `hold` (the default, also when
    unset) until the cooldown probe tells them apart; `reject` reads the flat curve as the data's limit."""

    @field_validator("blocking_causes")
    @classmethod
    def _known_causes(cls, causes: list[str]) -> list[str]:
        unknown = [c for c in causes if c not in CAUSES]
        if unknown:
            raise ValueError(f"unknown cause {unknown[0]!r}; causes are {', '.join(CAUSES)}")
        return causes


class NewHardwareException(_Model):
    """Re-running a known recipe on new hardware: throughput decides, while learning is shown unchanged."""

    kind: Literal["new_hardware"] = "new_hardware"
    """The only exception there is: a known recipe re-run on new hardware."""
    reference: str = Field(min_length=1)
    """Run or glob of the reference runs (the recipe on the old hardware)."""
    loss_tolerance: float = Field(default=0.02, ge=0)
    """|Δ validation loss| at equal tokens accepted as the same curve even where the seed interval is narrower."""
    throughput_tolerance: float = Field(default=0.05, ge=0, lt=1)
    """Tokens/s may fall this fraction below the reference's and still count as not worse (host noise)."""


class Prices(_Model):
    """What the next stage's compute costs, for its price in the decision (a manifest's own
    `hardware.price_per_device_hour` is used where the policy gives none)."""

    per_device_hour: float | None = Field(default=None, gt=0)
    """USD per device-hour."""
    per_kwh: float | None = Field(default=None, gt=0)
    """USD per kWh of the energy the runs recorded (`energy_j`), for the energy's share of the price."""


class Policy(_Model):
    """A stage gate: stages with budgets, the exploration share, and the requirements for the next stage."""

    name: str = Field(min_length=1)
    """Policy name, stored with every decision."""
    version: str = Field(min_length=1)
    """Policy version (a number or a string); change it when the policy changes."""
    primary: Literal["learning", "throughput"] = "learning"
    """Axis that decides: `learning` (the forecast yield), or `throughput`, which needs an `exception` and
    decides only while the exception holds (learning decides otherwise)."""
    exploration_share: float = Field(default=0.2, ge=0, le=1)
    """Stages whose cumulative compute share stays within this are exploration; past it the workflow (data,
    mixture, model, optimisation) is locked to the one approved earlier for the target."""
    stages: list[Stage] = Field(min_length=2)
    """Stages in increasing budgets, all in one unit (tokens, device-hours or dollars)."""
    requirements: Requirements
    """What the evidence must show to earn the next stage."""
    exception: NewHardwareException | None = None
    """Optional: the new-hardware exception, where throughput decides."""
    prices: Prices | None = None
    """Optional: the prices the next stage is priced at (device-hours, kWh) in each decision."""
    on_hold: Literal["stop", "warn"] | None = None
    """What a run governed by this policy does when the gate inside it holds (`gate/live.py`): `stop` (the default,
    also when unset) asks the training loop to stop (`Tracker.should_stop`, the callbacks' own stop flags); `warn`
    stores the decision and says so, and the run goes on. The offline gate ignores it."""
    between_boundaries: Literal["faults", "forecast"] | None = None
    """What the gate inside a run decides on between stage boundaries (`gate/live.py`): `faults` (the default, also
    when unset) an open fault that is not the data's only, the yield at the boundaries; `forecast` also the yield,
    as soon as an evaluation falls outside the law the last boundary's forecast was fitted on (worse by more than
    3 times its scatter): the forecast is made again there, and a decision that no longer approves the next stage
    holds the run within its stage. The offline gate ignores it."""

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        # `version: 1` in YAML is an int; a version is a label, so 1 and "1" are the same policy version.
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _check(self) -> Policy:
        units = sorted({s.unit for s in self.stages})
        if len(units) > 1:
            raise ValueError(f"stages must give their budgets in one unit, got {' and '.join(units)}")
        budgets = [s.budget for s in self.stages]
        if any(b <= a for a, b in pairwise(budgets)):
            shown = [int(b) if b.is_integer() else b for b in budgets]
            raise ValueError(f"stages must be in strictly increasing {self.unit}, got {shown}")
        names = [s.name for s in self.stages]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"stage names must be unique, repeated: {', '.join(dupes)}")
        total = sum(s.compute_share for s in self.stages)
        if total > 1 + 1e-9:
            raise ValueError(f"stage compute shares add up to {total:.4g}, more than 1")
        if self.primary == "throughput" and self.exception is None:
            raise ValueError(
                "primary: throughput needs an exception (kind: new_hardware, reference: RUN_OR_GLOB): "
                "throughput decides only against a reference whose learning it is shown to keep"
            )
        return self

    def stored(self) -> dict[str, Any]:
        """The policy as plain data, as decisions store it: a stage's budgets in the units it does not use left out
        (a policy in tokens reads as it did before stages could be given in device-hours or dollars)."""
        data = self.model_dump(mode="json")
        data["stages"] = [{k: v for k, v in stage.items() if v is not None} for stage in data["stages"]]
        if data["between_boundaries"] is None:  # added later: at its default, absent
            del data["between_boundaries"]
        return data

    def content_hash(self) -> str:
        """sha256 of the canonical JSON form: the same for any key order, comments or file format."""
        data = self.stored()
        for key in _ADDED_LATER:  # fields added since policies were first hashed: at their default, absent
            if data["requirements"][key] is None:
                del data["requirements"][key]
        for key in ("prices", "on_hold"):  # added later too: at their default, absent
            if data[key] is None:
                del data[key]
        return content_hash(data)

    @property
    def unit(self) -> str:
        """The unit every stage's budget is given in (`Stage.unit`)."""
        return self.stages[0].unit

    def in_tokens(self, tokens_per_device_hour: float | None, usd_per_device_hour: float | None) -> Policy:
        """The policy with its stages' budgets in tokens: as it is where they are, else read at a run's measured
        throughput (tokens per device-hour) and, for dollars, its price per device-hour. A figure it needs that is
        unknown is refused in one line (InputError)."""
        if self.unit == "tokens":
            return self
        if not (tokens_per_device_hour is not None and tokens_per_device_hour > 0):
            raise InputError(
                f"policy {self.name!r} gives its stages in {self.unit}, and the runs' throughput is unknown (no "
                "tokens or wall-clock time recorded): record them, or give the stages in tokens"
            )
        per_unit = tokens_per_device_hour
        if self.unit == "usd":
            if not (usd_per_device_hour is not None and usd_per_device_hour > 0):
                raise InputError(
                    f"policy {self.name!r} gives its stages in dollars, and no price is known: set prices."
                    "per_device_hour in the policy or hardware.price_per_device_hour in the manifests"
                )
            per_unit = tokens_per_device_hour / usd_per_device_hour
        tokens = [max(1, round(s.budget * per_unit)) for s in self.stages]
        if any(b <= a for a, b in pairwise(tokens)):  # budgets so close that they round to one token count
            raise InputError(f"policy {self.name!r}: its stages read in tokens are not distinct: {tokens}")
        stages = [
            Stage(name=s.name, tokens=n, compute_share=s.compute_share)
            for s, n in zip(self.stages, tokens, strict=True)
        ]
        return self.model_copy(update={"stages": stages})

    def is_exploration(self, stage: Stage) -> bool:
        """Whether the stage lies within the exploration share (cumulative compute share up to and including it)."""
        spent = 0.0
        for s in self.stages:
            spent += s.compute_share
            if s.name == stage.name:
                return spent <= self.exploration_share + 1e-9
        raise ValueError(f"stage {stage.name!r} is not in policy {self.name!r}")


_ADDED_LATER = ("max_epochs", "undetermined_stall")
"""Requirements added after decisions were first stored: left out of the hash while unset, so that a policy
written before them keeps the hash its decisions name."""

_EXAMPLE = "'name: probes, version: 1, stages: [...], requirements: {min_yield_per_btok: 250}'"


def parse_policy(data: Any, origin: str = "policy") -> Policy:
    """Validate plain data as a Policy; errors are one line naming `origin` and the field."""
    return validate(Policy, data, origin, _EXAMPLE)


def load_policy(path: str | Path) -> Policy:
    """Load and validate a policy from a YAML or JSON file."""
    return parse_policy(read_structured_file(path), origin=str(path))
