"""How a source would be read, said without storing anything (`yieldgate import --explain`): the format, the field
that is the step (and the counters it combined), the clock and its kind, the training loss, each evaluation with its
direction, what is kept as extras, and the restarts and writers found. A user checks the reading before trusting it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from yieldgate.ledger.records import higher_is_better
from yieldgate.names import metric_direction

if TYPE_CHECKING:
    from yieldgate.ingest import ImportOptions, Read
    from yieldgate.ingest.types import Mapped, Warnings

__all__ = ["Evaluation", "Explanation", "explain_import"]


@dataclass(frozen=True)
class Evaluation:
    """One evaluation the source holds: its key, the field it is read from, and which way is better."""

    key: str
    source: str
    direction: str
    """`rises` (higher is better) or `falls`."""
    direction_from: str = "its name"
    """Where the direction comes from: `its name` (`names.metric_direction`: `loss` falls, `score` rises), `the
    source or mapping` (a format's or the user's declared direction), or `no rule: taken as rising` (a name that does
    not say)."""


@dataclass(kw_only=True)
class Explanation:
    """How one run of a source would be read."""

    run: str
    source: str
    format: str
    """What the source was read as: a text log's format (`kv`, `tqdm`, ...), `table`, `tensorboard`, ..."""
    step: str
    """Which field is the step, and how counters were combined into it."""
    clock: str
    """The clock and its kind: timestamps, the log's own, summed from per-iteration times, or none."""
    loss: str | None
    """The field read as the training loss."""
    evaluations: list[Evaluation] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    """The fields kept as extras, each with where it goes (`epoch -> imported/epoch`)."""
    restarts: list[dict[str, Any]] = field(default_factory=list)
    """Each restart: where, the step before and after, the steps done again."""
    writers: str = "one"
    implausible: str | None = None
    """What the plausibility check finds implausible in this reading (an import refuses it unless told to accept it)."""
    steps: int = 0
    evals: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clock(mapping: dict[str, str], reading: dict[str, str], form: str, mapped: Mapped) -> str:
    if "clock" in reading:
        return reading["clock"]
    own = [name for name, key in mapping.items() if key.split(" ")[0] == "wall_s"]
    if own == ["timestamp"]:
        return "the timestamp the records start with (seconds since the first)"
    if own:
        kind = "the progress bars' elapsed time" if form == "tqdm" else "the log's own clock"
        return f"{kind} ({own[0]})"
    per_step = [name for name, key in mapping.items() if key.split(" ")[0] == "step_s"]
    if per_step and "wall_s" in mapped.steps.columns:
        return f"none logged: summed from the per-iteration times ({per_step[0]}), an estimate"
    return "none"


def _explained(run: str, kind: str, read: Read, mapped: Mapped, warnings: Warnings) -> Explanation:
    reading = warnings.reading
    step_field = reading.get("step_field")
    form = reading.get("format", reading.get("kind", kind))
    source_of = {key.split(" ")[0]: name for name, key in mapped.mapping.items()}
    seen: dict[str, Evaluation] = {}
    for rec in mapped.evals:
        key = f"{rec.task}/{rec.metric}"
        rising = higher_is_better(rec.metric) if rec.higher_is_better is None else rec.higher_is_better
        if rec.higher_is_better is not None:
            whence = "the source or mapping"
        else:
            whence = "its name" if metric_direction(rec.metric) is not None else "no rule: taken as rising"
        seen.setdefault(key, Evaluation(key, source_of.get(key, key), "rises" if rising else "falls", whence))
    extras = [f"{name} -> {key}" for name, key in mapped.mapping.items() if "/" in key and "(eval)" not in key]
    restarts = [
        {
            "where": body["where"],
            "from_step": body["old"]["step"],
            "to_step": body["resume"]["step"] + 1,
            "redone_steps": max(
                0, min(body["old"]["step"], body.get("redone", body["old"])["step"]) - body["resume"]["step"]
            ),
        }
        for body in mapped.restarts
    ]
    return Explanation(
        run=run,
        source=read.source,
        format=form,
        step=reading.get("step") or (f"the field {step_field!r}" if step_field else "the source's own step"),
        clock=_clock(mapped.mapping, reading, form, mapped),
        loss=source_of.get("loss"),
        evaluations=sorted(seen.values(), key=lambda e: e.key),
        extras=extras,
        restarts=restarts,
        writers=reading.get("writers", "one"),
        implausible=reading.get("implausible"),
        steps=int(mapped.steps["step"].nunique()),
        evals=len(mapped.evals),
        warnings=warnings.summary(),
    )


def explain_import(kind: str, sources: Sequence[str], opts: ImportOptions) -> list[Explanation]:
    """How `import_run` would read `sources` of `kind` (`plan_import`), one explanation per run; nothing is stored.
    A reading the plausibility check would refuse is explained as read, with what is implausible in it."""
    import dataclasses

    from yieldgate.ingest import plan_import

    plan = plan_import(kind, sources, dataclasses.replace(opts, accept_implausible=True))
    return [_explained(run, kind, read, mapped, plan.warnings) for run, read, mapped in plan.runs]
