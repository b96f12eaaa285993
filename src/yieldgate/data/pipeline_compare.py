"""`yieldgate audit A.yaml B.yaml`: two data pipelines lined up stage by stage, and the hybrid that takes, at each
aligned stage, the variant that serves the tagged slice better.

**Alignment.** Each stage has a role: `filter` (a recipe filter), `dedup` or `sample`. The stages are aligned in
order, as a diff aligns lines: a pair must have the same role, both orders are kept, and of all such alignments
the one with the highest score is taken, a pair scoring 2 when the two stages have the same table name (by
default their kind: `dedup` with `dedup`, `min_chars` with `min_chars`; name a stage to pair it on purpose) and
1 when only the role matches. A stage left without a partner stands alone in its row.

**The hybrid is built and run, one aligned row at a time.** A stage's figures in its own pipeline describe the
documents that pipeline's earlier stages let through: a dedup after a filter that already dropped the tagged
slice keeps "all" of the slice it sees. So the two candidates of a row are tried on the same documents, the
hybrid's stream so far (A's input after the stages already chosen), and the choice is made from those trials:

1. If one keeps a larger share of the tagged documents, by more than `tolerance` (default 2 percentage
   points), it is taken, whatever its speed: the tagged slice is what the audit guards, and a stage's own speed
   does not say what it costs end to end (the hybrid's end-to-end throughput, beside A's and B's, does).
2. Otherwise (tagged retention equal within the tolerance, or no tagged document in the stream), the faster
   in MB/s on those same documents is taken. An exact tie goes to A.

Overall retention is not judged: dropping more can be the point of a filter or a dedup. A stage that only one
pipeline has is kept (there is nothing to weigh it against). The chosen trial's output is the next row's
input, so the hybrid's figures are measured by running it, not estimated from A's and B's stages: its stages
are named `A/<stage>` or `B/<stage>`, and it reads A's input with A's tag rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from yieldgate.data.audit import Audit, StageStats
from yieldgate.data.pipeline import (
    Pipeline,
    StageSpec,
    apply_stage,
    documents_of,
    load_pipeline,
    new_audit,
    run_pipeline,
    stage_names,
)
from yieldgate.errors import InputError

__all__ = ["PipelineComparison", "StagePair", "align_stages", "choose", "compare_pipelines", "compare_files", "role"]

TOLERANCE = 0.02
"""Tagged retentions closer than this (absolute share) are equal for the hybrid's rule."""

Side = Literal["a", "b"]


def role(spec: StageSpec) -> str:
    """What a stage is for: `dedup`, `sample`, or `filter` (every recipe filter kind)."""
    return spec.kind if spec.kind in ("dedup", "sample") else "filter"


def align_stages(a: Pipeline, b: Pipeline) -> list[tuple[int | None, int | None]]:
    """Rows of (A's stage index, B's stage index), None where a stage has no partner; see the module docstring.

    A longest-common-subsequence table over the stages, where a pair of the same role scores 1, plus 1 when the
    names match too. Ties prefer a pair, then leaving A's stage alone (so A's unpaired stage comes first)."""
    names_a, names_b = stage_names(a), stage_names(b)
    roles_a, roles_b = [role(s) for s in a.stages], [role(s) for s in b.stages]
    n, m = len(a.stages), len(b.stages)

    def score(i: int, j: int) -> int | None:
        if roles_a[i] != roles_b[j]:
            return None
        return 2 if names_a[i] == names_b[j] else 1

    # best[i][j]: the highest score aligning A's stages i.. with B's stages j..
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            pair = score(i, j)
            best[i][j] = max(best[i + 1][j], best[i][j + 1], -1 if pair is None else pair + best[i + 1][j + 1])
    rows: list[tuple[int | None, int | None]] = []
    i = j = 0
    while i < n or j < m:
        pair = score(i, j) if i < n and j < m else None
        if pair is not None and best[i][j] == pair + best[i + 1][j + 1]:
            rows.append((i, j))
            i, j = i + 1, j + 1
        elif i < n and (j == m or best[i][j] == best[i + 1][j]):
            rows.append((i, None))
            i += 1
        else:
            rows.append((None, j))
            j += 1
    return rows


def choose(a: StageStats, b: StageStats, tolerance: float = TOLERANCE) -> tuple[Side, str]:
    """Which of two aligned stages the hybrid keeps, and why in words (the module docstring's rule)."""
    ta, tb = a.tagged_retention, b.tagged_retention
    if ta is not None and tb is not None and abs(ta - tb) > tolerance:
        side: Side = "a" if ta > tb else "b"
        return side, f"keeps more of the tagged slice ({max(ta, tb):.1%} vs {min(ta, tb):.1%})"
    ra, rb = a.to_dict()["mb_per_s"], b.to_dict()["mb_per_s"]
    equal = "at equal tagged retention" if ta is not None and tb is not None else "(no tagged slice reached both)"
    if ra is None or rb is None:
        side = "b" if ra is None and rb is not None else "a"
        return side, f"the other stage received no documents to time {equal}"
    side = "b" if rb > ra else "a"
    return side, f"faster {equal} ({max(ra, rb):.3g} vs {min(ra, rb):.3g} MB/s)"


@dataclass
class StagePair:
    """One row of the alignment: each side's stage figures in its own pipeline (`StageStats.to_dict`, None where
    the side has no stage there), the trials on the hybrid's stream, the side the hybrid takes and why."""

    a: dict[str, Any] | None
    b: dict[str, Any] | None
    trials: dict[str, dict[str, Any]]
    """`a`, `b`: each candidate tried on the hybrid's stream at this row (the figures the choice is made from)."""
    pick: Side
    reason: str


@dataclass
class PipelineComparison:
    """Two pipelines side by side and the hybrid, measured."""

    a: str
    """Where pipeline A came from (a file)."""
    b: str
    pairs: list[StagePair]
    hybrid: list[str]
    """The hybrid's stages in order, each `A/<stage>` or `B/<stage>`."""
    summaries: dict[str, dict[str, Any]]
    """`a`, `b`, `hybrid`: each pipeline end to end (`Audit.summary`), the hybrid's from its chosen trials."""
    hybrid_audit: dict[str, Any]
    """The hybrid's own audit, stage by stage (`Audit.to_dict`)."""
    tolerance: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["pairs"] = [p.__dict__ for p in self.pairs]
        return out


def compare_pipelines(
    a: Pipeline,
    b: Pipeline,
    *,
    labels: tuple[str, str] = ("A", "B"),
    tolerance: float = TOLERANCE,
    progress: Callable[[str], None] | None = None,
) -> PipelineComparison:
    """Run A and B over their inputs, align their stages, and build and run the hybrid over A's input, trying
    each row's two stages on the same documents (see the module docstring). `progress(what)` is called before
    each of the three runs."""
    if not 0 <= tolerance < 1:
        raise InputError(f"tolerance must be in [0, 1), got {tolerance}")
    step = progress or (lambda what: None)
    notes = []
    docs_a = documents_of(a.input)
    docs_b = docs_a if b.input == a.input else documents_of(b.input)
    if b.input != a.input:
        notes.append("the pipelines read different inputs: a stage's figures describe different documents on each side")
    if b.tag != a.tag:
        notes.append("the pipelines tag the slice differently: tagged retentions are of different slices")
    if b.input != a.input or b.tag != a.tag:
        notes.append("the hybrid runs on A's input with A's tag rule")
    if a.tag is None:
        notes.append("no tag rule: the hybrid takes the faster stage of each pair")
    step("running A")
    audit_a = run_pipeline(a, documents=docs_a)
    step("running B")
    audit_b = run_pipeline(b, documents=docs_b)
    step("building and running the hybrid")
    pairs, hybrid = _hybrid(a, b, audit_a, audit_b, docs_a, tolerance)
    return PipelineComparison(
        a=labels[0],
        b=labels[1],
        pairs=pairs,
        hybrid=[s.name for s in hybrid.stages],
        summaries={"a": audit_a.summary(), "b": audit_b.summary(), "hybrid": hybrid.summary()},
        hybrid_audit=hybrid.to_dict(),
        tolerance=tolerance,
        notes=notes,
    )


def _hybrid(
    a: Pipeline, b: Pipeline, audit_a: Audit, audit_b: Audit, docs: list[dict[str, Any]], tolerance: float
) -> tuple[list[StagePair], Audit]:
    """The aligned rows with each row's trials and choice, and the hybrid's audit: the chosen trials in order."""
    specs = {"a": a.stages, "b": b.stages}
    names = {"a": stage_names(a), "b": stage_names(b)}
    hybrid = new_audit(a.tag)
    pairs = []
    stream = docs
    for i, j in align_stages(a, b):
        rows: tuple[tuple[Side, int | None], ...] = (("a", i), ("b", j))
        at = {side: k for side, k in rows if k is not None}
        trials: dict[Side, tuple[Audit, list[dict[str, Any]]]] = {}
        for side, k in at.items():
            label = f"{side.upper()}/{names[side][k]}"
            trial = new_audit(a.tag)
            out = list(apply_stage(trial, specs[side][k], label, stream))
            trials[side] = (trial, out)
        pick: Side
        if len(trials) == 2:
            pick, reason = choose(trials["a"][0].stages[0], trials["b"][0].stages[0], tolerance)
        else:
            (pick,) = trials
            reason = f"only {pick.upper()} has this stage: kept"
        chosen, stream = trials[pick]
        hybrid.stages.append(chosen.stages[0])
        hybrid.notes.update(chosen.notes)
        pairs.append(
            StagePair(
                a=None if i is None else audit_a.stages[i].to_dict(),
                b=None if j is None else audit_b.stages[j].to_dict(),
                trials={side: t.stages[0].to_dict() for side, (t, _) in trials.items()},
                pick=pick,
                reason=reason,
            )
        )
    return pairs, hybrid


def compare_files(
    a: str | Path,
    b: str | Path,
    *,
    tolerance: float = TOLERANCE,
    progress: Callable[[str], None] | None = None,
) -> PipelineComparison:
    """`yieldgate audit A.yaml B.yaml`: load both pipeline files and `compare_pipelines` them."""
    return compare_pipelines(
        load_pipeline(a), load_pipeline(b), labels=(str(a), str(b)), tolerance=tolerance, progress=progress
    )
