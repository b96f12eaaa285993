"""Importers: runs already logged by TensorBoard, MLflow, W&B, lm-evaluation-harness, the Hugging Face
Trainer, tables and plain-text logs, translated onto yieldgate's canonical names and written into the ledger.

They translate, they do not analyse. `import_run` is the one entry point (the CLI's `yieldgate import`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.errors import InputError, check_choice
from yieldgate.ingest.core import map_rows, settle_evals, write_import
from yieldgate.ingest.mapping import LogMapping, load_mapping
from yieldgate.ingest.plausible import check_plausible
from yieldgate.ingest.types import ImportResult, Mapped, Rows, Warnings
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.names import TEXTLOG_FORMATS

__all__ = ["ImportOptions", "KINDS", "Plan", "Read", "import_run", "plan_import"]


@dataclass(kw_only=True)
class ImportOptions:
    """How to read a source; each option is ignored by the kinds it does not concern."""

    run: str
    """Run name; for several runs from one source (an MLflow experiment, a TensorBoard directory of run folders)
    the prefix of `PREFIX/<name>`."""
    map: Sequence[str] = ()
    """`KEY=SOURCE_NAME` overrides of the guessed mapping (`val/loss=eval/ce`, `step=iteration`), a mapping file
    (YAML: the step and how it is computed, the loss, the evaluations and their directions, what the time fields
    mean, and for text logs the lines; `ingest.mapping.mapping_from_doc`), and the step rule's `epoch=F`, `iter=F`,
    `iters_per_epoch=N`."""
    manifest: Path | None = None
    """Manifest file (YAML or JSON) to attach to the run."""
    tokens_per_step: float | None = None
    """Tokens per optimizer step, for logs that record only steps: tokens = step x N where none is logged."""
    tokens_per_sample: float | None = None
    """Tokens per sample (the sequence length), for logs that count samples: tokens = samples x N."""
    patterns: Sequence[str] = ()
    """textlog: regular expressions with named groups, tried in order on each line."""
    log_format: str = "auto"
    """textlog without patterns: a known trainer's format (`textlog.FORMATS`), or `auto` to detect it."""
    step_pattern: str | None = None
    """lm-eval: regex with one group that takes the step from a results file's name."""
    step: int | None = None
    """lm-eval: the step of results files that name none (a released model's final checkpoint)."""
    experiment: bool = False
    """mlflow: SOURCE names an experiment (name or id), not a run id: import each of its runs."""
    tracking_uri: str | None = None
    """mlflow: tracking URI (`file:...`, `sqlite:///...`, `http://...`); default: the SOURCE itself."""
    devices: int | None = None
    """Devices the run trained on (per-device-hour yields need it), where the source does not say or says
    wrong; else read from the log (`world size: 8`) when it prints it."""
    join_on: str = "step"
    """table: `step` (rows carry the run's step), or `time`: telemetry joined onto an existing run by wall clock."""
    replace: bool = False
    """Into a run that exists: set its records apart as superseded (kept, never deleted) and put these in their
    place. Without it (or `append`) an import into an existing run is refused."""
    append: bool = False
    """Into a run that exists: add these records after its last stored step (refused when a step is not after it)."""
    accept_implausible: bool = False
    """Import a reading the plausibility check refuses (`ingest.plausible`) as read, saying so among the warnings."""

    def __post_init__(self) -> None:
        check_choice("log_format", self.log_format, ("auto", *TEXTLOG_FORMATS))
        check_choice("join_on", self.join_on, ("step", "time"))
        if self.replace and self.append:
            raise InputError("replace and append exclude each other: pick one", parameter=("replace", "append"))
        if self.join_on == "time" and (self.replace or self.append):
            raise InputError(
                "replace and append do not apply to join_on time: telemetry adds columns to the run and keeps "
                "every value it holds",
                parameter=("replace", "append", "join_on"),
            )
        if self.devices is not None and self.devices < 1:
            raise InputError(f"devices must be >= 1, got {self.devices}", parameter="devices")


@dataclass
class Read:
    """One run as read from a source, before mapping."""

    source: str
    """What was read (paths, or `mlflow:<uri>#<run id>`), as stored in the run's meta."""
    rows: Rows | None = None
    """Step-indexed metrics under the source's names (None for eval-only sources)."""
    evals: list[EvalRecord] = field(default_factory=list)
    """Eval records read as such (lm-eval)."""
    suffix: str | None = None
    """For several runs from one source: the part after `PREFIX/` of the run's name."""
    start_unix: float | None = None
    """Unix time the run started, when the source has absolute times (kept for `join_on="time"`)."""
    devices: tuple[int, str] | None = None
    """(device count, where the source says it), when it does."""
    summary: dict[str, float] = field(default_factory=dict)
    """Numbers that belong to no step (a Trainer's final `test_*` results): the run's meta `summary`."""
    tokens_per_step: tuple[float, str] | None = None
    """(tokens per optimizer step, where the source says it), when it does; `tokens_per_step` overrides it."""
    mapping: LogMapping | None = None
    """What the source's format declares (`textlog.mapped`): names and evaluations' directions; the user's
    mapping wins over it."""


def _table(sources: Sequence[str], opts: ImportOptions, warnings: Warnings) -> list[Read]:
    from yieldgate.ingest.tables import read_table

    paths = [Path(s) for s in sources]
    warnings.reading.setdefault("format", "table")
    return tables_to_reads(", ".join(sources), read_table(paths, warnings, load_mapping(opts.map)))


def tables_to_reads(source: str, runs: dict[str | None, Rows]) -> list[Read]:
    """One Read per run of `read_table`: a W&B chart export of several runs gives runs PREFIX/<its run>."""
    if list(runs) == [None]:
        return [Read(source, runs[None])]
    if len(runs) == 1:
        ((run, rows),) = runs.items()
        return [Read(f"{source} ({run})", rows)]
    return [Read(f"{source} ({run})", rows, suffix=run) for run, rows in runs.items()]


def _textlog(sources: Sequence[str], opts: ImportOptions, warnings: Warnings) -> list[Read]:
    from yieldgate.ingest.sniff import table_format
    from yieldgate.ingest.textlog import per_device_throughput, read_textlog

    paths = [Path(s) for s in sources]
    if not opts.patterns and all(p.is_file() and table_format(p) == "jsonl" for p in paths):
        warnings.add("format", f"{', '.join(sources)}: JSON lines, one record per line: read as a table")
        return _table(sources, opts, warnings)
    log = read_textlog(paths, opts.patterns, warnings, load_mapping(opts.map), opts.log_format)
    per_device_throughput(log.rows, (opts.devices, "given") if opts.devices else log.devices, warnings)
    read_as = sorted(set(log.formats))
    warnings.reading.setdefault("format", ", ".join(read_as))
    return [
        Read(
            ", ".join(sources) + ("" if read_as == ["pattern"] else f" (read as {', '.join(read_as)})"),
            log.rows,
            start_unix=log.start_unix,
            devices=log.devices,
            tokens_per_step=log.tokens_per_step,
            mapping=log.mapping,
        )
    ]


def _auto(sources: Sequence[str], opts: ImportOptions, warnings: Warnings) -> list[Read]:
    """`yieldgate import auto`: the kind each source's content shows (`sniff.kind_of`), one kind for all."""
    from yieldgate.ingest.sniff import kind_of

    kinds = {s: kind_of(Path(s)) for s in sources}
    found = sorted(set(kinds.values()))
    if len(found) > 1:
        raise InputError(
            f"import auto: the sources hold different kinds ({', '.join(f'{s}: {k}' for s, k in kinds.items())}); "
            "import them one kind at a time"
        )
    warnings.add("kind", f"{', '.join(sources)}: read as {found[0]} (by its content)")
    warnings.reading["kind"] = found[0]
    return KINDS[found[0]](sources, opts, warnings)


def _lazy(module: str, name: str) -> Callable[[Sequence[str], ImportOptions, Warnings], list[Read]]:
    def read(sources: Sequence[str], opts: ImportOptions, warnings: Warnings) -> list[Read]:
        import importlib

        return getattr(importlib.import_module(f"yieldgate.ingest.{module}"), name)(sources, opts, warnings)

    return read


# Kind -> reader. Readers of ecosystems import their library only when used.
KINDS: dict[str, Callable[[Sequence[str], ImportOptions, Warnings], list[Read]]] = {
    "tensorboard": _lazy("tensorboard", "read"),
    "mlflow": _lazy("mlflow", "read"),
    "wandb": _lazy("wandb", "read"),
    "lm-eval": _lazy("lmeval", "read"),
    "hf-trainer": _lazy("hf", "read"),
    "table": _table,
    "textlog": _textlog,
    "auto": _auto,
}


@dataclass
class Plan:
    """What an import would write, read and mapped, before the ledger is touched."""

    runs: list[tuple[str, Read, Mapped]]
    """(run name, what was read, its records on canonical names) per run."""
    warnings: Warnings


def plan_import(kind: str, sources: Sequence[str], opts: ImportOptions) -> Plan:
    """Read and map `sources` of `kind` as `import_run` would, storing nothing: every run's records, the reading
    checked for plausibility (`ingest.plausible`)."""
    check_choice("kind", kind, KINDS)
    if not sources:
        raise InputError(f"yieldgate import {kind} needs at least one SOURCE")
    user = load_mapping(opts.map)
    warnings = Warnings()
    planned: list[tuple[str, Read, Mapped]] = []
    for read in KINDS[kind](sources, opts, warnings):
        if read.rows is not None:
            mapped = _mapped(read, opts, user, warnings)
        else:
            mapped = Mapped(pd.DataFrame({"step": np.empty(0, dtype=np.int64)}), [])
        mapped.evals = settle_evals(mapped.evals + read.evals, read.source, warnings)
        if mapped.steps.empty and not mapped.evals:
            raise InputError(_nothing_read(kind, read, mapped), parameter="map")
        run = opts.run if read.suffix is None else f"{opts.run}/{read.suffix}"
        planned.append((run, read, mapped))
    return Plan(planned, warnings)


def _mapped(read: Read, opts: ImportOptions, user: LogMapping, warnings: Warnings) -> Mapped:
    """One read's rows mapped, cleaned and checked for plausibility."""
    assert read.rows is not None
    per_step = opts.tokens_per_step
    if per_step is None and opts.tokens_per_sample is None and read.tokens_per_step is not None:
        per_step = read.tokens_per_step[0]
        warnings.add(
            "tokens", f"{read.source}: tokens = step x {per_step:,.0f} where none is logged ({read.tokens_per_step[1]})"
        )
    falls = warnings.count("clock")
    mapped = map_rows(
        read.rows,
        warnings,
        overrides=_overrides(read, user),
        tokens_per_step=per_step,
        tokens_per_sample=opts.tokens_per_sample,
    )
    _directions(mapped, {**(read.mapping.directions if read.mapping else {}), **user.directions})
    check_plausible(
        read.rows,
        mapped,
        warnings,
        clock_falls=warnings.count("clock") - falls,
        accept=opts.accept_implausible,
        reading=warnings.reading,
    )
    return mapped


def import_run(ledger: Ledger, kind: str, sources: Sequence[str], opts: ImportOptions) -> list[ImportResult]:
    """Import `sources` of `kind` into the ledger as run `opts.run` (or runs `opts.run/<name>`).

    Everything is read and mapped before the ledger is touched (`plan_import`), then written in one transaction: a
    source that does not parse, or reads implausibly, leaves the ledger as it was. Importing the same source into the
    same run again writes nothing (`ImportResult.unchanged`); another into a run that exists needs `opts.replace` or
    `opts.append` (`ingest.guard`).
    """
    check_choice("kind", kind, KINDS)
    from yieldgate.manifest import load_manifest  # pydantic, on the imports that attach a manifest only

    manifest = load_manifest(opts.manifest) if opts.manifest is not None else None
    if opts.join_on == "time":
        if not sources:
            raise InputError(f"yieldgate import {kind} needs at least one SOURCE")
        return [_join_telemetry(ledger, kind, sources, opts, Warnings(), manifest)]
    plan = plan_import(kind, sources, opts)
    with ledger.transaction():
        return [
            write_import(
                ledger,
                run,
                mapped,
                kind=kind,
                source=read.source,
                warnings=plan.warnings,
                manifest=manifest,
                start_unix=read.start_unix,
                summary=read.summary,
                devices=(opts.devices, "given") if opts.devices else read.devices,
                epochs=read.rows is not None and read.rows.epochs,
                replace=opts.replace,
                append=opts.append,
            )
            for run, read, mapped in plan.runs
        ]


def _overrides(read: Read, user: LogMapping) -> dict[str, str]:
    """{source name: key} of the format's mapping (for the names the source has) and the user's, the user's
    winning; the step field is the reader's."""
    assert read.rows is not None
    own = {s: k for s, k in (read.mapping.names if read.mapping else {}).items() if s in read.rows.values}
    taken = set(user.names.values())
    own = {s: k for s, k in own.items() if k not in taken and s not in user.names}
    return {**own, **user.names}


def _directions(mapped: Mapped, directions: dict[str, bool]) -> None:
    """The evaluations' directions that a mapping declares, set on their records."""
    if directions:
        mapped.evals = [
            dataclasses.replace(rec, higher_is_better=directions[f"{rec.task}/{rec.metric}"])
            if f"{rec.task}/{rec.metric}" in directions
            else rec
            for rec in mapped.evals
        ]


def _nothing_read(kind: str, read: Read, mapped: Mapped) -> str:
    """Why an import that read no row is refused: what was looked for, and what the source held."""
    looked_for = {
        "lm-eval": "numeric metrics under 'results'",
        "hf-trainer": "log_history entries with numbers",
        "tensorboard": "scalar summaries",
        "textlog": "log lines with a step and a metric",
    }.get(kind, "rows with a step and at least one metric")
    found = f"only {', '.join(sorted(mapped.mapping)[:8])}" if mapped.mapping else "no metric at all"
    return (
        f"{read.source}: nothing to import: looked for {looked_for} and found {found}; check that this is "
        f"{kind} output, or name the columns with map KEY=NAME"
    )


def _join_telemetry(
    ledger: Ledger, kind: str, sources: Sequence[str], opts: ImportOptions, warnings: Warnings, manifest
) -> ImportResult:
    """`join_on="time"`: telemetry tables onto the existing run `opts.run`, by wall clock."""
    from yieldgate.ingest.telemetry import join_on_time

    if kind != "table":
        raise InputError(f"join_on time joins telemetry tables (kind table), not {kind}", parameter="join_on")
    paths = [Path(s) for s in sources]
    for p in paths:
        if not p.is_file():
            raise InputError(f"{p}: no such file; expected a telemetry CSV (nvidia-smi, dmon or timestamped)")
    frame = join_on_time(ledger, opts.run, paths, warnings)
    steps = pd.DataFrame({"step": frame["step"].to_numpy(dtype=np.int64)})
    for col in frame.columns.drop("step"):
        values = frame[col].to_numpy(dtype=float)
        steps[col] = pd.arrays.FloatingArray(np.nan_to_num(values), np.isnan(values))
    mapped = Mapped(steps, [], {c: c for c in frame.columns if c != "step"})
    with ledger.transaction():
        return write_import(
            ledger,
            opts.run,
            mapped,
            kind="telemetry",
            source=", ".join(sources),
            warnings=warnings,
            manifest=manifest,
            attach=True,
        )
