"""The Python API: one function per `yieldgate` command, each returning a typed result with `to_dict()`.

Each takes the ledger as a `Ledger`, a path or URL, or nothing (`$YIELDGATE_LEDGER`, else `./yieldgate.db`), opens
it for the call (read-only where the command only reads) and calls the library function the CLI calls, so
Python and the command line give the same numbers:

    from yieldgate import yields, compare, diagnose
    report = yields("bs64-fp16", ledger="runs.db")
    print(compare("bs64-seed*", "bs256-seed*", at="time").verdict)

Errors are `YieldgateError`s that speak of the arguments (`metric must be ...`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yieldgate.errors import InputError, RunNotFound, YieldgateError
from yieldgate.ledger import Ledger, default_location, must_exist

if TYPE_CHECKING:
    import pandas as pd

    from yieldgate.analysis.compare import Comparison, RunData
    from yieldgate.analysis.diagnose import Diagnosis
    from yieldgate.analysis.fit import Forecast
    from yieldgate.analysis.yields import YieldReport
    from yieldgate.data.dedup import DedupResult
    from yieldgate.data.pipeline import Audit
    from yieldgate.data.pipeline_compare import PipelineComparison
    from yieldgate.gate.draft import RecordedDecision
    from yieldgate.gate.plan import SupplyPlan
    from yieldgate.ingest.core import ImportResult
    from yieldgate.ingest.results import ResultsImport
    from yieldgate.ledger.check import CheckResult
    from yieldgate.ledger.copy import CopyResult
    from yieldgate.ledger.spills import WaitingSpill
    from yieldgate.manifest import Manifest, ManifestCheck, ManifestDiff
    from yieldgate.probe.batch import BatchCheckReport
    from yieldgate.probe.campaign.executors import CampaignProbes
    from yieldgate.probe.trainer import ProbeTraining
    from yieldgate.report.export import ExportResult
    from yieldgate.report.html import ReportResult

__all__ = [
    "runs",
    "list_runs",
    "RunListing",
    "matching_runs",
    "remove_runs",
    "rename_run",
    "tag_runs",
    "untag_runs",
    "note_run",
    "RemovedRun",
    "show",
    "yields",
    "waste",
    "compare",
    "forecast",
    "diagnose",
    "gate",
    "plan",
    "import_run",
    "import_results",
    "campaign_proposals",
    "campaign_progress",
    "campaign_attribution",
    "export_run",
    "report",
    "decisions",
    "campaigns",
    "campaign",
    "check",
    "merge",
    "copy_ledger",
    "validate_manifest",
    "manifest_diff",
    "train",
    "batch_check",
    "probe",
    "dedup",
    "audit",
    "audit_pair",
]

LedgerArg = Ledger | str | os.PathLike[str] | None
LocationArg = str | os.PathLike[str] | None
"""Where a ledger is, for a command that hands it to other threads or processes (a training, a campaign's workers):
a path or URL, or None for the default (`$YIELDGATE_LEDGER`, else `./yieldgate.db`)."""


@contextmanager
def _open(ledger: LedgerArg, *, readonly: bool, existing: bool = False) -> Iterator[Ledger]:
    """The ledger given, or one opened (and closed) for the call; with `existing`, a location with no ledger is an
    error rather than a new file."""
    if isinstance(ledger, Ledger):
        yield ledger
        return
    location = ledger if ledger is not None else default_location()
    with Ledger(must_exist(location) if existing else location, readonly=readonly) as opened:
        yield opened


def runs(
    patterns: str | Sequence[str] = (),
    *,
    ledger: LedgerArg = None,
    tags: Sequence[str] = (),
    status: str | Sequence[str] = (),
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
) -> pd.DataFrame:
    """The ledger's runs, one row each (`yieldgate runs`): those matching any of `patterns` (names or globs; none:
    all), carrying every one of `tags`, with any `status`; ordered by `sort` (name, created, updated, status, steps,
    tokens, duration; default oldest first), `reverse`d if asked; the first `limit` (see
    `analysis.listing.select_runs`)."""
    import pandas as pd

    from yieldgate.ledger.runs import RUN_COLUMNS

    listed = list_runs(patterns, ledger=ledger, tags=tags, status=status, sort=sort, reverse=reverse, limit=limit)
    return pd.DataFrame(listed.rows, columns=list(RUN_COLUMNS))


@dataclass(frozen=True)
class RunListing:
    """The runs `list_runs` selected, and how many matched before its `limit`."""

    rows: list[dict[str, Any]]
    """One record per run (`Ledger.run_records`), in the order asked."""
    matched: int
    spills: list[WaitingSpill] = field(default_factory=list)
    """Spill files a killed Tracker left with step records the ledger lacks, of the runs listed."""


def list_runs(
    patterns: str | Sequence[str] = (),
    *,
    ledger: LedgerArg = None,
    tags: Sequence[str] = (),
    status: str | Sequence[str] = (),
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
) -> RunListing:
    """`runs` as plain records, without pandas (what `yieldgate runs` prints), with the count before `limit`."""
    from yieldgate.analysis.listing import list_runs as listed
    from yieldgate.ledger.spills import waiting_spills

    with _open(ledger, readonly=True) as led:
        rows, matched = listed(
            led,
            patterns=_many(patterns),
            tags=list(tags),
            statuses=_many(status),
            sort=sort,
            reverse=reverse,
            limit=limit,
        )
        spills = waiting_spills(led, [r["name"] for r in rows])
    return RunListing(rows, matched, spills)


def _many(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@dataclass(frozen=True)
class RemovedRun:
    """A run `remove_runs` deleted, with what went with it."""

    name: str
    steps: int
    """Core step records."""
    extra_values: int
    """Namespaced extra values (signals, per-source tokens, ...)."""
    evals: int
    events: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _matching(led: Ledger, patterns: str | Sequence[str]) -> list[str]:
    from yieldgate.analysis.listing import match_patterns

    # The names alone (`Ledger.run_names`): `tag`, `untag` and `rm` match inside their write transaction, where the
    # runs list (every run's totals, every record's checksum, a DataFrame) held the write lock for seconds.
    return match_patterns(led.run_names(), _many(patterns), led.location)


def matching_runs(patterns: str | Sequence[str], *, ledger: LedgerArg = None) -> list[str]:
    """The runs the patterns (names or globs) match, in ledger order: what `remove_runs`, `tag_runs` and
    `untag_runs` change. A pattern that matches no run is RunNotFound."""
    with _open(ledger, readonly=True, existing=True) as led:
        return _matching(led, patterns)


def remove_runs(patterns: str | Sequence[str], *, ledger: LedgerArg = None) -> list[RemovedRun]:
    """Delete the runs the patterns (names or globs) match, with their steps, extras, evals and events
    (`yieldgate rm`). All or nothing: a pattern matching no run (RunNotFound), a run a live Tracker writes
    (RunInUse) or one a gate decision cites (RunReferenced) leaves every run in place."""
    with _open(ledger, readonly=False, existing=True) as led, led.transaction():
        return [RemovedRun(**r) for r in led.remove_runs(_matching(led, patterns))]


def rename_run(run: str, new: str, *, ledger: LedgerArg = None) -> str:
    """Rename a run (`yieldgate rename`); returns the new name. A name already taken, a run a live Tracker writes
    and one a gate decision cites are refused."""
    with _open(ledger, readonly=False, existing=True) as led:
        led.rename_run(run, new)
    return new


def tag_runs(
    patterns: str | Sequence[str], tags: str | Sequence[str], *, ledger: LedgerArg = None
) -> dict[str, list[str]]:
    """Add tags to the runs the patterns match (`yieldgate tag`); returns each run's tags after."""
    with _open(ledger, readonly=False, existing=True) as led, led.transaction():
        return {run: led.tag_run(run, _many(tags)) for run in _matching(led, patterns)}


def untag_runs(
    patterns: str | Sequence[str], tags: str | Sequence[str], *, ledger: LedgerArg = None
) -> dict[str, list[str]]:
    """Take tags off the runs the patterns match (`yieldgate untag`); each run must carry them. Returns each run's
    tags after."""
    with _open(ledger, readonly=False, existing=True) as led, led.transaction():
        return {run: led.untag_run(run, _many(tags)) for run in _matching(led, patterns)}


def note_run(run: str, text: str, *, ledger: LedgerArg = None) -> str | None:
    """Keep a note with a run, replacing the one before; empty text removes it (`yieldgate note`). Returns the note
    as kept (None: removed)."""
    with _open(ledger, readonly=False, existing=True) as led:
        led.set_note(run, text)
        return led.note(run)


def show(run: str, *, ledger: LedgerArg = None) -> dict[str, Any]:
    """One run whole (`yieldgate show`): its record (as `runs` gives it), each step column recorded with its count
    and its first, last, smallest and largest value (`(step, value)`; NaN and inf skipped for the extremes), the
    devices, summary, extras and unmeasured signals, goodput, each eval's last value, the events and the manifest."""
    import numpy as np

    from yieldgate.analysis.goodput import goodput_of
    from yieldgate.analysis.load import column_stats
    from yieldgate.ledger.spills import waiting_spills
    from yieldgate.report.console import run_record

    with _open(ledger, readonly=True) as led:
        info, steps, evals = run_record(led.run_info(run)), led.steps(run), led.evals(run)
        events, manifest, extras, meta = led.events(run), led.manifest(run), led.extra_keys(run), led.meta(run)
        good = goodput_of(led, run)
        spills = waiting_spills(led, [run])
    columns = {c: int(steps[c].notna().sum()) for c in steps.columns if c != "step" and steps[c].notna().any()}
    return {
        "run": info,
        "step_columns": columns,
        "column_stats": {c: column_stats(steps, c) for c in columns},
        "devices": meta.get("devices"),
        "summary": meta.get("summary"),
        "extras": extras,
        "unmeasured": meta.get("unmeasured", {}),
        "goodput": good.to_dict() if good is not None else None,
        "waiting_spills": [w.to_dict() | {"hint": w.hint} for w in spills],
        "evals": [
            {
                "task": task,
                "metric": metric,
                "count": len(g),
                "last_step": int(g["step"].iloc[-1]),
                "last_value": g["value"].iloc[-1],
                "last_stderr": None if np.isnan(g["stderr"].iloc[-1]) else float(g["stderr"].iloc[-1]),
                "higher_is_better": bool(g["higher_is_better"].iloc[-1]),
            }
            for (task, metric), g in evals.groupby(["task", "metric"], sort=True)
        ],
        "events": {state: int((events["state"] == state).sum()) for state in ("open", "resolved")},
        "manifest": manifest.model_dump(mode="json", exclude_none=True) if manifest else None,
    }


def yields(
    run: str,
    *,
    ledger: LedgerArg = None,
    tranche_tokens: float | None = None,
    metric: str = "val/loss",
    per: str = "token",
    expected_from: str | None = None,
) -> YieldReport:
    """Tranche yields of a run (`yieldgate yield`), each also against a fitted law: the run's own, or that of the
    reference run `expected_from` (`Tranche.vs_expected`)."""
    from yieldgate.analysis.runs import yield_report

    with _open(ledger, readonly=True) as led:
        return yield_report(
            led, run, tranche_tokens=tranche_tokens, metric=metric, per=per, expected_from=expected_from
        )


def waste(target: str, *, ledger: LedgerArg = None) -> dict[str, Any]:
    """The compute a run, a seed group or a campaign's probes (a glob: `camp/*`) spent on work that bought no
    learning (`analysis.waste`): tranches within noise of zero, restarts' redone work, diverged steps, each in
    device-hours, dollars and kWh where recorded, beside goodput. Returns {"runs": [per run], "total": summed}."""
    from yieldgate.analysis.listing import match_runs
    from yieldgate.analysis.waste import total, waste

    with _open(ledger, readonly=True) as led:
        each = [waste(led, run) for run in match_runs(led, target)]
    return {"runs": [w.to_dict() for w in each], "total": total(each, target).to_dict()}


def compare(
    a: str,
    b: str,
    *,
    ledger: LedgerArg = None,
    at: str = "tokens",
    target: float | None = None,
    metric: str = "val/loss",
    primary: str = "learning",
    per: str | None = None,
) -> Comparison:
    """Two runs or seed groups (globs) aligned at equal tokens, time, compute or cost (`yieldgate compare`); `per`
    None: bits per byte when their tokenizers differ, per token otherwise (said in the notes)."""
    from yieldgate.analysis.compare import compare as aligned
    from yieldgate.analysis.listing import match_runs
    from yieldgate.analysis.load import comparison_unit, default_metric, load_run, metric_key, objective_note

    with _open(ledger, readonly=True) as led:
        per, unit_note = comparison_unit(led, a, b, per)
        groups = [[load_run(led, n, per=per) for n in match_runs(led, p)] for p in (a, b)]
    metric, note = default_metric(groups[0][0], metric, per)
    task, name = metric_key(metric, per)
    result = aligned(
        groups[0],
        groups[1],
        names=(a, b),
        at=at,  # type: ignore[arg-type]  # checked there
        target_loss=target,
        task=task,
        metric=name,
        primary=primary,  # type: ignore[arg-type]  # checked there
    )
    if note:
        result.notes.insert(0, note)
    if unit_note:
        result.notes.insert(0, unit_note)
    if not task:
        result.notes.insert(0, "compared on the training loss, which is not held out")
    for data in groups[0] + groups[1]:
        objective = objective_note(data, name)
        if objective is not None:
            result.notes.insert(0, objective)
    return result


def forecast(
    run: str,
    *,
    ledger: LedgerArg = None,
    next_tokens: float | None = None,
    next_steps: float | None = None,
    threshold_per_btok: float | None = None,
    metric: str = "val/loss",
    level: float = 0.8,
) -> Forecast:
    """The next tranche's gain from the run's stable-LR evaluations (`yieldgate forecast`; `fit.stable_phase`):
    `next_tokens` on its token counts, or `next_steps` on its steps (a run without token counts). Refused past a
    divergence."""
    from yieldgate.analysis import stats
    from yieldgate.analysis.fit import forecast as fitted
    from yieldgate.analysis.load import default_metric, load_run, metric_key, objective_note
    from yieldgate.analysis.points import eval_points

    stats.check_level(level)
    with _open(ledger, readonly=True) as led:
        data = load_run(led, run)
        metric, default_note = default_metric(data, metric)
        task, name = metric_key(metric, "token")
        if not task:
            raise InputError(
                f"run {run!r}: a forecast needs held-out evaluations; the training loss (metric 'loss') "
                "falls on memorised data too"
            )
        points = eval_points(data.evals, data.steps, task, name)
        if points.empty:
            known = sorted({f"{t}/{m}" for t, m in zip(data.evals["task"], data.evals["metric"], strict=True)})
            raise InputError(f"run {run!r} has no evaluations of {metric}; it has: {', '.join(known) or 'none'}")
        diverged = _divergence(led, run, points)
    if diverged:
        raise InputError(f"run {run!r} diverged ({diverged}): a curve fitted across a divergence forecasts nothing")
    used, size, by_steps, note = _tranche_points(data, points, metric, next_tokens, next_steps)
    result = fitted(
        used["tokens"].to_numpy(),
        used["value"].to_numpy(),
        next_tokens=size,
        at_tokens=float(used["tokens"].iloc[-1]),
        level=level,
        threshold_per_btok=None if by_steps else threshold_per_btok,
    )
    result.axis = ("epochs" if data.epochs else "steps") if by_steps else "tokens"
    at = ", ".join(map(str, used["step"].astype(int)))
    result.notes.insert(
        0,
        f"fitted on evaluations at {'epochs' if data.epochs else 'steps'} {at}"
        + (f" against {result.axis} (no token counts)" if by_steps else ""),
    )
    if note:
        result.notes.insert(1, note)
    if default_note:
        result.notes.insert(0, default_note)
    objective = objective_note(data, name)
    if objective is not None:
        result.notes.insert(0, objective)
    return result


def _tranche_points(
    data: RunData, points: pd.DataFrame, metric: str, next_tokens: float | None, next_steps: float | None
) -> tuple[pd.DataFrame, float, bool, str | None]:
    """What `forecast` fits and forecasts: the evaluations of the run's stable-LR phase (all, when fewer than 3
    are), the next tranche's size, whether on steps (no token counts), and `fit.stable_phase`'s note."""
    import math

    from yieldgate.analysis.fit import stable_phase

    by_steps = bool(points["tokens"].isna().all())
    if by_steps:
        if next_steps is None:
            raise InputError(
                f"run {data.name!r} has no token counts: forecast on its steps with next_steps=N, "
                "or import it with tokens_per_step"
            )
        if not (math.isfinite(next_steps) and next_steps > 0):
            raise InputError(f"next_steps must be a number > 0, got {next_steps}")
        points = points.assign(tokens=points["step"].astype(float))
        size = next_steps
    else:
        if next_tokens is None:
            given = " (next_steps is for a run without token counts)" if next_steps is not None else ""
            raise InputError(f"next_tokens is needed: the size of the next tranche in tokens{given}")
        size = next_tokens
    points = points.dropna(subset=["tokens"])
    points = points[points["tokens"] > 0]
    mask, note = stable_phase(data.steps, points["step"].to_numpy())
    used = points[mask] if mask.sum() >= 3 else points
    if len(used) < 3:
        raise InputError(
            f"run {data.name!r} has {len(used)} evaluations of {metric} to fit; a forecast needs 3 or more"
        )
    if bool(used["higher_is_better"].iloc[0]):
        raise InputError(
            f"{metric} rises as the model learns; the power-law forecast fits losses (lower is better): "
            "forecast a loss, e.g. metric val/loss"
        )
    return used, size, by_steps, note


def _divergence(ledger: Ledger, run: str, points: pd.DataFrame) -> str | None:
    """Where the run diverged (a logged training loss or evaluation that is NaN or infinite), with the count
    and the span: "non-finite training loss at 6 logged steps, 1,200-1,250"."""
    import numpy as np

    steps = ledger.steps(run, nullable=True)
    logged = steps.dropna(subset=["loss"]) if "loss" in steps else steps.iloc[:0]
    for what, step, values in (
        ("training loss", logged["step"], logged.get("loss")),
        ("evaluation", points["step"], points["value"]),
    ):
        if values is None:
            continue
        bad = step.to_numpy()[~np.isfinite(values.to_numpy(dtype=float, na_value=np.nan))]
        if len(bad):
            span = f"step {bad[0]:,}" if len(bad) == 1 else f"{len(bad):,} logged steps, {bad[0]:,}-{bad[-1]:,}"
            return f"non-finite {what} at {span}"
    return None


def diagnose(run: str, *, ledger: LedgerArg = None, against: Sequence[str] = (), store: bool = True) -> Diagnosis:
    """Causes with evidence (`yieldgate diagnose`); the findings are kept as open events unless `store` is off."""
    from yieldgate.analysis.diagnose import diagnose as run_diagnosis

    with _open(ledger, readonly=True) as led:
        for name in (run, *against):
            led.run_id(name)  # a missing run fails here, before a ledger file is made for the write
    with _open(ledger, readonly=not store) as led:
        return run_diagnosis(led, run, against=against, store=store)


def gate(
    target: str, policy: str | os.PathLike[str], *, ledger: LedgerArg = None, record: bool = True
) -> RecordedDecision:
    """Approve, hold or reject TARGET's next stage under a policy file (`yieldgate gate`); the decision is kept with
    its evidence unless `record` is off, and carries the id it is kept under (`id`; None: not kept)."""
    from yieldgate.gate import gate as gates
    from yieldgate.gate.draft import RecordedDecision
    from yieldgate.gate.policy import load_policy

    parsed = load_policy(Path(policy))
    with _open(ledger, readonly=True) as led:  # decided on a read-only ledger: a missing run makes no new file
        decision = gates.gate(led, target, parsed)
    kept = None
    if record:
        with _open(ledger, readonly=False) as led:
            kept = gates.record(led, decision, parsed)
    return RecordedDecision.of(decision, kept)


def plan(
    target: str,
    policy: str | os.PathLike[str],
    *,
    ledger: LedgerArg = None,
    flops: float | None = None,
    scaling: str | None = None,
    params: int | None = None,
) -> SupplyPlan:
    """Each stage's data supply under a policy file (`yieldgate plan`): per source its epochs, effective tokens
    and the worth of the stage's new tokens, and the sources to grow; TARGET is a run, seed group or campaign
    recipe, or a recipe or manifest file. With an L(N, D) law (the campaign recipe `scaling`, else the target's
    own campaign of 3 or more sizes): each stage's predicted loss at `params` and the compute-optimal N and D for
    `flops`. Nothing is stored."""
    from yieldgate.gate.plan import plan_target
    from yieldgate.gate.policy import load_policy

    parsed = load_policy(Path(policy))
    with _open(ledger, readonly=True) as led:
        return plan_target(led, target, parsed, flops=flops, scaling=scaling, params=params)


def import_run(
    kind: str, sources: str | Sequence[str], *, run: str, ledger: LedgerArg = None, **options: Any
) -> list[ImportResult]:
    """Import a run another tool logged (`yieldgate import`); `options` are `ImportOptions`' fields
    (`tokens_per_step=`, `devices=`, `map=[...]`, ...)."""
    from yieldgate.ingest import ImportOptions
    from yieldgate.ingest import import_run as run_import

    paths = [sources] if isinstance(sources, str) else list(sources)
    opts = ImportOptions(run=run, **options)  # checked before a ledger file is made
    with _open(ledger, readonly=False) as led:
        return run_import(led, kind, paths, opts)


def campaign_proposals(name: str, *, ledger: LedgerArg = None, level: float | None = None) -> dict[str, Any]:
    """The mixture regression of a results campaign and the mixture it proposes, per metric (`yieldgate campaign
    NAME --propose`; `analysis.results.mixture_regressions`)."""
    from yieldgate.analysis.results import mixture_regressions

    with _open(ledger, readonly=True) as led:
        return mixture_regressions(led, name, level=level)


def import_results(
    table: str | os.PathLike[str], *, campaign: str, ledger: LedgerArg = None, **options: Any
) -> ResultsImport:
    """Import a long-form results table as a campaign (`yieldgate import results`); `options`: `higher_is_better=`,
    `lower_is_better=` (metric names), `replace=` (`ingest.results.import_results`)."""
    from yieldgate.analysis.results import summarise_results
    from yieldgate.ingest.results import import_results as run_import

    with _open(ledger, readonly=False) as led, led.transaction():  # the runs and their summary, or nothing
        result = run_import(led, Path(table), campaign=campaign, **options)
        led.set_campaign_summary(campaign, summarise_results(led, campaign))
        return result


def export_run(run: str, to: str, dest: str | os.PathLike[str], *, ledger: LedgerArg = None) -> ExportResult:
    """Send a run to TensorBoard, MLflow, W&B or a table (`yieldgate export`)."""
    from yieldgate.report.export import export_run as run_export

    with _open(ledger, readonly=True) as led:
        return run_export(led, run, to, str(dest))


def report(
    patterns: str | Sequence[str],
    output: str | os.PathLike[str],
    *,
    ledger: LedgerArg = None,
    metric: str = "val/loss",
    per: str | None = None,
    png_dir: str | os.PathLike[str] | None = None,
    smooth: float = 0.0,
    target: float | None = None,
) -> ReportResult:
    """The self-contained HTML report of runs or seed groups (`yieldgate report`), and its main plots as PNG files
    in `png_dir`; `per` None: bits per byte when their tokenizers differ, per token otherwise; `smooth`: the weight
    of the moving average drawn for tokens/s; `target`: the metric's value the frontier counts tokens to."""
    from yieldgate.report.html import write_report

    groups = [patterns] if isinstance(patterns, str) else list(patterns)
    with _open(ledger, readonly=True) as led:
        return write_report(led, groups, output, metric=metric, png_dir=png_dir, per=per, smooth=smooth, target=target)


def decisions(target: str | None = None, *, ledger: LedgerArg = None) -> list[dict[str, Any]]:
    """The gate decisions, oldest first, each with its policy and evidence (`yieldgate decisions`): those on
    `target` (as it was gated) when given (`Ledger.decisions`)."""
    with _open(ledger, readonly=True) as led:
        return led.decisions(target).to_dict("records")


def campaigns(*, ledger: LedgerArg = None) -> list[str]:
    """The names of the ledger's campaigns (`yieldgate campaign`)."""
    with _open(ledger, readonly=True) as led:
        return led.campaigns()


def campaign(name: str, *, ledger: LedgerArg = None) -> dict[str, Any]:
    """A campaign's stored record: its spec, and the summary `yieldgate probe` last stored (None before one)."""
    with _open(ledger, readonly=True) as led:
        return led.campaign(name)


def campaign_progress(name: str, *, ledger: LedgerArg = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A campaign's record (`campaign`) and its progress (`probe.campaign.status.campaign_status`: done, running,
    failed, left; None for imported results, which have no probes to run); while probes are left, the record's
    summary is the decision so far, from the probes done."""
    from yieldgate.analysis.campaign import summarise
    from yieldgate.analysis.results import is_results
    from yieldgate.probe.campaign.status import campaign_status

    with _open(ledger, readonly=True) as led:
        record = led.campaign(name)
        if is_results(record):
            return record, None
        try:
            status = campaign_status(led, name)
        except ValueError:  # a stored spec this version cannot plan again (pydantic's errors are ValueErrors)
            return record, None
        if status["done"] and status["done"] < status["planned"]:
            record = {**record, "summary": summarise(led, name).to_dict()}
    return record, status


def campaign_attribution(name: str, *, ledger: LedgerArg = None, level: float | None = None) -> dict[str, Any] | None:
    """A probe campaign's recipe x capability table and its sources' marginal effects: leave-one-out probes and, with
    enough mixtures, the mixture regression's (`analysis.attribution.attribution`), read afresh from the ledger at
    `level` (default: the campaign's); the summary `yieldgate probe` stores holds the same (`attribution`). None for
    imported results, or without two recipes' finished probes at one budget."""
    from yieldgate.analysis.attribution import attribution

    with _open(ledger, readonly=True) as led:
        return attribution(led, name, level=level)


def check(run: str | None = None, *, ledger: LedgerArg = None) -> CheckResult:
    """SQLite's integrity check (of a file) and every stored block's checksum, or only `run`'s blocks
    (`yieldgate check`)."""
    from yieldgate.ledger.check import check_ledger

    with _open(ledger, readonly=True) as led:
        return check_ledger(led, run)


def merge(source: str | os.PathLike[str], *, runs: Sequence[str] = (), ledger: LedgerArg = None) -> dict[str, int]:
    """Merge the runs of another ledger file (a Tracker's spill file, another node's ledger), or only `runs`, into
    this one (`yieldgate merge`), one transaction per run; merging twice changes nothing. Returns the step records
    merged per run."""
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{path}: no such ledger file; give the path the Tracker reported")
    with Ledger(path, readonly=True) as side, _open(ledger, readonly=False) as led:
        return {name: led.copy_run(side, name) for name in list(runs) or side.runs()["name"].tolist()}


def copy_ledger(
    source: str | os.PathLike[str], destination: str | os.PathLike[str], *, replace: bool = False
) -> CopyResult:
    """Copy a whole ledger into another, either way between SQLite and PostgreSQL (`yieldgate ledger copy`),
    verified by row counts and digest before the destination commits; `replace`: empty the destination first
    (`ledger.copy.copy_ledger`)."""
    from yieldgate.ledger.copy import copy_ledger as copied

    return copied(source, destination, replace=replace)


def validate_manifest(path: str | os.PathLike[str]) -> ManifestCheck:
    """Validate a manifest file, with its content hash (`yieldgate manifest validate`); one that does not validate
    is a ManifestError that names the field."""
    from yieldgate.manifest import ManifestCheck, load_manifest

    return ManifestCheck(file=os.fspath(path), hash=load_manifest(Path(path)).content_hash())


def manifest_diff(a: str, b: str, *, ledger: LedgerArg = None) -> ManifestDiff:
    """The fields in which two manifests differ, the confounders of a comparison (`yieldgate manifest diff`); each
    is a manifest file, or else the name of a run whose manifest the ledger holds."""
    from yieldgate.manifest import ManifestDiff, diff

    ma, mb = _manifest_of(a, ledger), _manifest_of(b, ledger)
    return ManifestDiff(a=a, b=b, hash_a=ma.content_hash(), hash_b=mb.content_hash(), differences=diff(ma, mb))


def _manifest_of(ref: str, ledger: LedgerArg) -> Manifest:
    """A manifest file if `ref` is a path that exists, else the manifest of the run named `ref`."""
    from yieldgate.manifest import load_manifest

    if Path(ref).is_file():
        return load_manifest(ref)
    with _open(ledger, readonly=True) as led:
        try:
            manifest = led.manifest(ref)
        except RunNotFound:
            raise RunNotFound(f"{ref}: neither a manifest file nor a run in {led.location}") from None
    if manifest is None:
        raise YieldgateError(f"run {ref!r} has no manifest; attach one when recording or importing it")
    return manifest


def _location(ledger: LocationArg) -> str:
    return os.fspath(ledger) if ledger is not None else default_location()


def train(
    recipe: str | os.PathLike[str],
    *,
    tokens: int | None = None,
    seed: int = 0,
    run: str | None = None,
    resume_from: str | None = None,
    cooldown_tokens: int | None = None,
    ledger: LocationArg = None,
    on_stage: Callable[[str, str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ProbeTraining:
    """Train one probe of the reference GPT on a recipe file, `tokens` long, into the ledger (`yieldgate train`); or
    continue probe `resume_from` from its checkpoint for `cooldown_tokens`, its LR cooled down linearly to 0, as a
    new run. `run` defaults to RECIPE/s<seed>/t<tokens> (RESUME_FROM/cooldown<N>). `on_stage(run, stage)` hears
    "preparing data", then "training"; `progress(step, steps)` as it trains."""
    if (resume_from is None) != (cooldown_tokens is None):
        raise InputError("resume_from and cooldown_tokens go together", parameter=("resume_from", "cooldown_tokens"))
    if resume_from is None and tokens is None:
        raise InputError(
            "give tokens (the probe's budget), or resume_from with cooldown_tokens",
            parameter=("tokens", "resume_from", "cooldown_tokens"),
        )
    # Checked before these imports: a call that cannot train says so without loading torch.
    from yieldgate.data.recipe import resolve
    from yieldgate.manifest import load_recipe
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.cooldown import cooldown_probe
    from yieldgate.probe.trainer import ProbeTraining, train_probe

    parsed = load_recipe(Path(recipe))
    name = run or (
        f"{resume_from}/cooldown{cooldown_tokens}" if resume_from else f"{Path(recipe).stem}/s{seed}/t{tokens}"
    )
    stage = on_stage or (lambda run, what: None)
    stage(name, "preparing data")
    data = resolve(parsed, seed=seed)
    stage(name, "training")
    if resume_from is not None and cooldown_tokens is not None:  # given together (checked above)
        final = cooldown_probe(
            data,
            source_run=resume_from,
            cooldown_tokens=cooldown_tokens,
            run=name,
            ledger=_location(ledger),
            progress=progress,
        )
    else:
        assert tokens is not None  # checked above
        final = train_probe(
            data, ProbeConfig(tokens=tokens, seed=seed), run=name, ledger=_location(ledger), progress=progress
        )
    return ProbeTraining(name, final)


def batch_check(
    *,
    run: str | None = None,
    ledger: LocationArg = None,
    progress: Callable[[int, int], None] | None = None,
    **setup: Any,
) -> BatchCheckReport:
    """The small-batch baseline check (`yieldgate batch-check`): does a bigger batch, accumulation or lower
    precision change what is learned per token? `setup`: `probe.batch.BatchCheckSetup`'s fields
    (`candidate_batch=`, `precision=`, `seeds=`, ...). With `run`, the result is kept with that run (created if
    absent), where `diagnose` reads it. `progress(done, total)` once the setup is checked (done 0), then after
    each training."""
    from yieldgate.probe.batch import BatchCheckReport, BatchCheckSetup, run_batch_check

    checked = BatchCheckSetup(**setup)
    if progress is not None:
        progress(0, 2 * checked.seeds)
    result = run_batch_check(checked, ledger=_location(ledger), run=run, progress=progress)
    return BatchCheckReport(checked, result, run)


CampaignDisplay = Callable[[int], AbstractContextManager[tuple[Any, Any]]]
"""`probe`'s `display`: given the number of probes planned, a context manager held open while they train that gives
`(progress, on_result)` for `run_campaign` (`report.console.CampaignProgress`)."""


def probe(
    campaign_file: str | os.PathLike[str],
    *,
    ledger: LocationArg = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    ablate_sources: bool = False,
    display: CampaignDisplay | None = None,
) -> CampaignProbes:
    """Run a probe campaign (`yieldgate probe`): every recipe x seed x budget the ledger does not already hold, on
    `executor` (local, ray or slurm; `workers` at once; Ray at `address`), then rank the recipes over every finished
    probe and store that summary with the campaign. With `ablate_sources`, also one leave-one-out recipe per source
    of the first recipe at the smallest budget (`probe.campaign.ablation`; a base of one source is refused). The
    file is read and checked before any probe trains, and before `display` is called."""
    from yieldgate.analysis.campaign import summarise
    from yieldgate.probe.campaign import load_campaign, run_campaign
    from yieldgate.probe.campaign import plan as planned
    from yieldgate.probe.campaign.ablation import ablation_plan
    from yieldgate.probe.campaign.executors import CampaignProbes, preflight_campaign

    campaign = preflight_campaign(load_campaign(Path(campaign_file)), executor)
    extra = list(ablation_plan(campaign)) if ablate_sources else []
    location = _location(ledger)
    shown = display(len(planned(campaign)) + len(extra)) if display is not None else nullcontext((None, None))
    with shown as (on_step, on_result):
        done = run_campaign(
            campaign,
            location,
            executor=executor,  # type: ignore[arg-type]  # checked by preflight_campaign
            workers=workers,
            address=address,
            progress=on_step,
            on_result=on_result,
            extra=extra,
        )
    with _open(location, readonly=False) as led:
        summary = summarise(led, campaign.name)
        led.set_campaign_summary(campaign.name, summary.to_dict())
    return CampaignProbes(done, summary)


def dedup(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    near: float | None = None,
    shingle: str = "word:3",
    chunk_chars: int | None = None,
) -> DedupResult:
    """Exact or near-duplicate documents among files (`yieldgate dedup`): each file under `paths` (folders walked)
    one document, or chunks of about `chunk_chars` characters; near dedup at estimated Jaccard >= `near` over
    `shingle`s (word:N or char:N), exact without it."""
    from yieldgate.data.pipeline import dedup_paths

    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    return dedup_paths(given, near=near, shingle=shingle, chunk_chars=chunk_chars)


def audit(pipeline: str | os.PathLike[str], *, run: str | None = None, ledger: LocationArg = None) -> Audit:
    """Run a data pipeline file stage by stage and account for each (`yieldgate audit FILE`); with `run`, the audit
    is recorded into that run (created if absent)."""
    from yieldgate.data.pipeline import audit_file

    return audit_file(Path(pipeline), ledger=_location(ledger), run=run)


def audit_pair(
    a: str | os.PathLike[str], b: str | os.PathLike[str], *, progress: Callable[[str], None] | None = None
) -> PipelineComparison:
    """Two pipeline files run and lined up stage by stage, with the hybrid that takes at each row the stage keeping
    more of the tagged slice (`yieldgate audit A B`; `data.pipeline_compare`); `progress(what)` before each run."""
    from yieldgate.data.pipeline_compare import compare_files

    return compare_files(Path(a), Path(b), progress=progress)
