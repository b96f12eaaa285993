"""What every importer shares: mapping a source's rows onto canonical names, cleaning them, and writing
them into the ledger in one transaction, idempotently.

An importer only reads its format into `Rows` (source metric names, file order) or eval records; this
module does the rest, so every format treats messy logs the same way (`yieldgate.ingest.clean`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from yieldgate.aliases import STEP_NAMES, Target
from yieldgate.errors import InputError
from yieldgate.ingest.clean import clean, clip
from yieldgate.ingest.evalsteps import epoch_evals, not_computed
from yieldgate.ingest.guard import keep_stored, make_room, refuse_live
from yieldgate.ingest.mapping import none_known, resolve_mapping
from yieldgate.ingest.timing import energy, per_step_times, wall_from_step_times
from yieldgate.ingest.tokencount import SAMPLES_ASIDE, read_samples, read_tokens
from yieldgate.ingest.types import ImportResult, Mapped, Rows, Warnings
from yieldgate.ledger import EvalRecord, Ledger, fold_stderr
from yieldgate.names import MAX_NAME_CHARS, STEP_UNIT, split_eval_key, unsafe_character

if TYPE_CHECKING:
    from yieldgate.manifest import Manifest

__all__ = ["ImportResult", "Mapped", "map_rows", "write_import", "pick_step", "data_digest", "settle_evals"]


_SEPARATORS = re.compile(r"[\s.\-]+")


def step_key(name: str, *, whole: bool = True) -> str:
    """A column's name as step names are compared (`aliases.STEP_NAMES`): lower case, each run of spaces, dots and
    dashes one underscore (`total timesteps` -> `total_timesteps`); with `whole=False`, the part after its last `/`
    (`time/total_timesteps`)."""
    key = _SEPARATORS.sub("_", name.strip().lower())
    return key if whole else key.rsplit("/", 1)[-1]


def pick_step(names: Iterable[str], overrides: Mapping[str, str], source: str, prefer: Sequence[str] = ()) -> str:
    """The source column that holds the step: `--map step=NAME`, else the first of `prefer` then of
    STEP_NAMES present, names compared by `step_key` (a namespaced name by its last part only where no name is
    one as a whole: `eval/step` may be on the evaluation rows alone)."""
    names = list(names)
    for src, key in overrides.items():
        if key == "step":
            if src not in names:  # a mapping's `step:` naming a field the source lacks read as a KeyError
                raise InputError(
                    f"{source}: the step is mapped to {src!r}, which the source does not have; it has "
                    f"{', '.join(names[:20]) or 'no columns'}",
                    parameter="map",
                )
            return src
    for whole in (True, False):  # names as a whole; only where none is a step name, namespaced names' last parts
        keyed: dict[str, str] = {}
        for n in names:
            keyed.setdefault(step_key(n, whole=whole), n)
        for candidate in (*prefer, *STEP_NAMES):
            if candidate.lower() in keyed:
                return keyed[candidate.lower()]
    raise InputError(
        f"{source}: no step column among {', '.join(names[:20]) or 'no columns'}; name it with map step=COLUMN",
        parameter="map",
    )


def _nullable(values: np.ndarray, present: np.ndarray) -> pd.arrays.FloatingArray:
    return pd.arrays.FloatingArray(np.where(present, values, 0.0), ~present)


def _tokens_from_samples(canon: Rows, per_sample: float) -> None:
    """tokens = samples x N where a row logs samples and no tokens (a batch-size ramp keeps them right)."""
    if per_sample <= 0:
        raise InputError(f"tokens_per_sample must be > 0, got {per_sample:g}", parameter="tokens_per_sample")
    if "samples" not in canon.values or not canon.present["samples"].any():
        has = (
            "its samples are no running count (kept as imported/samples_as_logged)"
            if SAMPLES_ASIDE in canon.values
            else "this source has none"
        )
        raise InputError(
            f"{canon.source}: tokens_per_sample needs logged samples (e.g. Megatron's consumed "
            f"samples) and {has}; use tokens_per_step N",
            parameter=("tokens_per_sample", "tokens_per_step"),
        )
    logged = canon.present["samples"]
    # A row without samples (a validation line) takes those of its step's other row.
    at_step = dict(zip(canon.step[logged].tolist(), canon.values["samples"][logged].tolist(), strict=True))
    samples = np.array([at_step.get(s, np.nan) for s in canon.step.tolist()], dtype=float)
    samples[logged] = canon.values["samples"][logged]
    have = canon.present.get("tokens", np.zeros(len(canon), dtype=bool))
    tokens = canon.values.get("tokens", np.full(len(canon), np.nan)).copy()
    fill = ~have & ~np.isnan(samples)
    tokens[fill] = samples[fill] * float(per_sample)
    canon.values["tokens"], canon.present["tokens"] = tokens, have | fill


def _impossible_mfu(canon: Rows, warnings: Warnings) -> None:
    """An MFU above 100% of peak is impossible (a peak FLOP/s table that does not know the device, a per-device
    rate divided by one device's peak): the whole series is moved to `imported/mfu_as_logged`, with a warning,
    instead of standing as a fraction of peak."""
    if "mfu" not in canon.values:
        return
    values, present = canon.values["mfu"], canon.present["mfu"]
    over = present & np.isfinite(values) & (values > 1.0)
    if not over.any():
        return
    canon.values["imported/mfu_as_logged"] = canon.values.pop("mfu")
    canon.present["imported/mfu_as_logged"] = canon.present.pop("mfu")
    first = canon.where[int(np.argmax(over))]
    warnings.add(
        "mfu",
        f"{first}: MFU above 100% of peak on {int(over.sum())} row(s) (up to "
        f"{float(values[over].max()):.0%}), which no device reaches: kept as imported/mfu_as_logged, "
        "not as mfu (the trainer's peak FLOP/s does not fit the device?)",
    )


# A training loss logged only as its terms: Ultralytics YOLO's `train/box_loss`, `train/seg_loss`, `train/cls_loss`,
# `train/dfl_loss` (each already weighted by its gain; their sum is what the optimizer minimises).
_LOSS_PART = re.compile(r"^train/\w+_loss$")


def _loss_from_parts(canon: Rows, rows: Rows, targets: Mapping[str, Target], warnings: Warnings) -> None:
    """`loss` as the sum of its parts where no total is logged (the parts stay extras under their names)."""
    parts = [name for name, t in targets.items() if t.kind == "extra" and _LOSS_PART.match(name)]
    if "loss" in canon.values or len(parts) < 2:
        return
    present = np.logical_and.reduce([rows.present[name] for name in parts])
    if not present.any():
        return
    canon.values["loss"] = np.sum([rows.values[name] for name in parts], axis=0)
    canon.present["loss"] = present
    warnings.add("loss", f"{canon.source}: no total training loss logged: loss = {' + '.join(parts)}")


# Names of a loss's terms without the word (Gluon's SSD prints `CrossEntropy=..., SmoothL1=...` and no total)
_TERM_NAMES = frozenset({"crossentropy", "smoothl1", "l1", "l2", "mse", "nll", "bce", "focal", "kl", "kld", "ctc"})


def _no_loss_said(canon: Rows, targets: Mapping[str, Target], warnings: Warnings) -> None:
    """Say where a source has no training loss but values that look like its terms: which are kept as extras, and
    how to read one as the loss. Their sum is not taken: how the trainer weighs them is not in the log."""
    if "loss" in canon.values:
        return
    terms = [
        name
        for name, t in targets.items()
        if t.kind == "extra" and ("loss" in name.lower() or re.sub(r"[\W_]", "", name.lower()) in _TERM_NAMES)
    ]
    if terms:
        warnings.add(
            "loss",
            f"{canon.source}: no training loss: {', '.join(terms[:6])} look like terms of one and are kept as extras "
            f"(how they are weighed is not logged); where one is the loss, import again with map loss={terms[0]}",
        )


# A count of the tokens one step trained on, logged where no cumulative count is: MaxText's `total_weights` (the
# step's non-padding target tokens, its metric_logger's line; `learning/total_weights` in its TensorBoard files).
_STEP_TOKENS = re.compile(r"^(?:learning/)?total_weights$")


def _tokens_from_step_counts(canon: Rows, rows: Rows, targets: Mapping[str, Target], warnings: Warnings) -> str | None:
    """`tokens` as the running sum of a per-step token count where no cumulative count is logged; returns the name
    summed. Only over a log of every step: the tokens of a step the log skips were counted by nobody, so a log
    with gaps gets no tokens (and a warning), not a sum that falls short."""
    names = [name for name, t in targets.items() if t.kind == "extra" and _STEP_TOKENS.match(name)]
    if "tokens" in canon.values or not names:
        return None
    name = names[0]
    counted = rows.present[name] & np.isfinite(rows.values[name])
    if not counted.any():
        return None
    # one count per step, the last logged (a step logged again after a resume is its later values)
    steps, last = np.unique(rows.step[counted][::-1], return_index=True)
    per_step = rows.values[name][counted][::-1][last]
    span = int(steps[-1] - steps[0]) + 1
    if len(steps) < span:
        warnings.add(
            "tokens",
            f"{canon.source}: {name} (the tokens of one step) is logged on {len(steps)} of the {span} steps "
            f"{steps[0]}-{steps[-1]}: not summed into tokens, since the steps it skips are not counted (give "
            "tokens_per_step to count them)",
        )
        return None
    at = np.minimum(np.searchsorted(steps, canon.step), len(steps) - 1)
    known = steps[at] == canon.step
    canon.values["tokens"] = np.where(known, np.cumsum(per_step)[at], np.nan)
    canon.present["tokens"] = known
    warnings.add(
        "tokens",
        f"{canon.source}: tokens = running sum of {name} (the tokens each step trained on), from step {steps[0]}"
        + (" (a resumed run?): the tokens of the steps before it are not counted" if steps[0] > 1 else ""),
    )
    return name


def _step_keeps_its_clock(canon: Rows, eval_keys: Sequence[str]) -> dict[int, float]:
    """An evaluation logged on its own line after its step's training line (TorchTitan's `validate step: 1`,
    Megatron's `validation loss at iteration N`) is timestamped when the evaluation ended: that clock goes with
    its eval records, while the step keeps its training line's (the ledger would merge the later one over it).
    Returns {row: wall_s} of the evaluation rows whose clock was taken off their step."""
    wall_ok = canon.present.get("wall_s")
    if wall_ok is None or not eval_keys:
        return {}
    evaluated = np.zeros(len(canon), dtype=bool)
    for key in eval_keys:
        evaluated |= canon.present[key]
    trained = np.isin(canon.step, canon.step[wall_ok & ~evaluated])
    later = evaluated & wall_ok & trained
    canon.present["wall_s"] = wall_ok & ~later
    return {int(i): float(canon.values["wall_s"][i]) for i in np.nonzero(later)[0]}


def map_rows(
    rows: Rows,
    warnings: Warnings,
    *,
    overrides: Mapping[str, str] | None = None,
    tokens_per_step: float | None = None,
    tokens_per_sample: float | None = None,
) -> Mapped:
    """Rename `rows`' metrics to canonical names, clean them (`clean.clean`), and split steps from evals.

    `rows.step` is already the step (readers take it from the source's step column or counter).
    """
    overrides = {src: key for src, key in (overrides or {}).items() if key != "step"}
    targets: dict[str, Target] = resolve_mapping(rows.values, overrides, None)
    none_known(rows.source, targets, warnings)
    canon = _renamed(rows, targets)
    per_step_times(canon, targets, overrides, warnings)
    eval_keys = list(dict.fromkeys(t.key for t in targets.values() if t.kind == "eval"))
    not_computed(canon, eval_keys, warnings)
    epoch_evals(canon, eval_keys, warnings)
    _loss_from_parts(canon, rows, targets, warnings)
    _no_loss_said(canon, targets, warnings)
    _impossible_mfu(canon, warnings)
    summed = _count_tokens(canon, rows, targets, warnings, tokens_per_step, tokens_per_sample)
    before = len(warnings.restarts)
    canon = clean(canon, warnings)
    wall_from_step_times(canon, warnings)
    energy(canon, warnings)
    kinds = {t.key: t.kind for t in targets.values()}
    evals = _eval_records(canon, [key for key, kind in kinds.items() if kind == "eval"])
    mapping = {name: t.describe() for name, t in targets.items()}
    if summed is not None:
        mapping[summed] += "; tokens (running sum)"
    return Mapped(_step_frame(canon), evals, mapping, warnings.restarts[before:])


def _renamed(rows: Rows, targets: Mapping[str, Target]) -> Rows:
    """`rows` under their targets' keys, in their targets' units (the step column left out)."""
    canon = Rows(rows.source, rows.step, rows.where, launch=rows.launch)
    for name, target in targets.items():
        if target.kind == "step":
            continue  # the caller already took the step from it
        if target.key in canon.values:
            # Two names onto one key (an override and a guess): merge, the override's values first.
            p = rows.present[name] & ~canon.present[target.key]
            canon.values[target.key][p] = rows.values[name][p] * target.scale
            canon.present[target.key] |= p
            continue
        canon.values[target.key] = rows.values[name] * target.scale
        canon.present[target.key] = rows.present[name].copy()
    return canon


def _count_tokens(
    canon: Rows,
    rows: Rows,
    targets: Mapping[str, Target],
    warnings: Warnings,
    tokens_per_step: float | None,
    tokens_per_sample: float | None,
) -> str | None:
    """The tokens column: counters that never moved from 0 dropped, then the tokens given per step or per sample,
    or else summed from per-step counts; returns the source name summed into tokens, if one was."""
    for counter in ("tokens", "samples"):
        present = canon.present.get(counter)
        if present is not None and present.any() and not canon.values[counter][present].any():
            # LLaMA-Factory writes total_tokens 0 on every line unless told to count them: a counter that never
            # moves from 0 was not counted
            del canon.values[counter], canon.present[counter]
            warnings.add(
                "zero",
                f"{canon.source}: {counter} is 0 on every row: not counted by the trainer, so not "
                f"imported (give tokens_per_step or tokens_per_sample to count them)",
            )
    given = tokens_per_step is not None or tokens_per_sample is not None
    read_tokens(canon, warnings, given=given)  # a tokens column that is not a running count: read, set aside or refused
    read_samples(canon, warnings)  # a samples column that is not one: set aside
    summed = None if given else _tokens_from_step_counts(canon, rows, targets, warnings)
    if tokens_per_sample is not None:
        _tokens_from_samples(canon, tokens_per_sample)
    if tokens_per_step is not None:
        if tokens_per_step <= 0:
            raise InputError(f"tokens_per_step must be > 0, got {tokens_per_step:g}", parameter="tokens_per_step")
        have = canon.present.get("tokens", np.zeros(len(canon), dtype=bool))
        tokens = canon.values.get("tokens", np.full(len(canon), np.nan)).copy()
        tokens[~have] = canon.step[~have] * float(tokens_per_step)
        canon.values["tokens"], canon.present["tokens"] = tokens, np.ones(len(canon), dtype=bool)
    return summed


def _eval_records(canon: Rows, keys: Sequence[str]) -> list[EvalRecord]:
    """The eval records of the eval `keys`, taken out of `canon`: each at its row's step, with the row's tokens and
    wall clock."""
    eval_wall = _step_keeps_its_clock(canon, keys)
    evals: list[EvalRecord] = []
    for key in keys:
        task, metric = split_eval_key(key)
        present = canon.present.pop(key)
        values = canon.values.pop(key)
        none = np.zeros(len(canon.step), dtype=bool)
        wall, wall_ok = canon.values.get("wall_s", none), canon.present.get("wall_s", none)
        tokens, tokens_ok = canon.values.get("tokens", none), canon.present.get("tokens", none)
        at = np.nonzero(present)[0]  # as Python numbers in one go: an import may hold a million evaluations
        for i, step, value, token, token_ok, clock, clock_ok in zip(
            at.tolist(),
            canon.step[at].tolist(),
            values[at].astype(float).tolist(),
            tokens[at].astype(float).tolist(),
            tokens_ok[at].tolist(),
            wall[at].astype(float).tolist(),
            wall_ok[at].tolist(),
            strict=True,
        ):
            evals.append(
                EvalRecord(
                    step=int(step),
                    task=task,
                    metric=metric,
                    value=value,
                    tokens=token if token_ok else None,
                    wall_s=eval_wall.get(i, clock if clock_ok else None),
                )
            )
    return evals


def _step_frame(canon: Rows) -> pd.DataFrame:
    """The step records: one row per step with a value (rows that only carried eval values are not step records)."""
    any_step = np.zeros(len(canon), dtype=bool)
    for p in canon.present.values():
        any_step |= p
    frame = pd.DataFrame({"step": canon.step[any_step]})
    for key in sorted(canon.values):
        frame[key] = _nullable(canon.values[key][any_step], canon.present[key][any_step])
    return frame


def _same_value(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def settle_evals(evals: list[EvalRecord], source: str, warnings: Warnings) -> list[EvalRecord]:
    """One record per (step, portfolio, task, metric), the later kept, as the ledger keeps it; a second value
    of one task's metric at one step is named in a warning (another evaluation set is another task, so it
    never lands here: `val` and `test` at one step are two records). A standard error read as a metric of its
    own (lm-eval's `acc_stderr`, a table's `hellaswag/acc_stderr` column) is set as its metric's `stderr`
    (`ledger.fold_stderr`)."""
    kept: dict[tuple[int, str, str, str], EvalRecord] = {}
    for rec in evals:
        key = (rec.step, rec.portfolio, rec.task, rec.metric)
        before = kept.get(key)
        if before is not None and not _same_value(before.value, rec.value):
            warnings.add(
                "eval-conflict",
                f"{source}: task {rec.task!r} metric {rec.metric!r} has two values at step "
                f"{rec.step} ({before.value:g}, then {rec.value:g}); the later is kept",
            )
        kept.pop(key, None)
        kept[key] = rec
    folded, alone = fold_stderr(kept.values())
    return folded + alone


def write_import(
    ledger: Ledger,
    run: str,
    mapped: Mapped,
    *,
    kind: str,
    source: str,
    warnings: Warnings,
    manifest: Manifest | None = None,
    start_unix: float | None = None,
    attach: bool = False,
    replace: bool = False,
    append: bool = False,
    summary: Mapping[str, float] | None = None,
    devices: tuple[int, str] | None = None,
    epochs: bool = False,
) -> ImportResult:
    """Write one imported run in one transaction; the same records from the same source again write nothing.

    The run is created if needed (status `imported`). Nothing stored is overwritten: a run that exists is
    refused (InputError) unless `replace` (its records set apart as superseded, `Ledger.supersede`, and the
    import stands in their place) or `append` (every imported step after the run's last stored one; the run's
    status and source left alone); a run a live Tracker writes is refused whatever is asked (RunInUse). Each
    import is listed in the run's meta under `imports` with its source, content hash, mapping and warnings.
    `attach`: add columns to an existing run (telemetry), leaving its status and source, and every value it
    already holds, alone (`ImportResult.kept`). `epochs`: the source's steps count epochs, recorded as the run's
    meta `step_unit` (`epoch`), which the analyses label their step axis by.
    """
    _refuse_unsafe_names(mapped, source)
    lines = warnings.summary()
    digest = data_digest(mapped)
    result = ImportResult(
        kind=kind,
        source=source,
        run=run,
        steps=int(mapped.steps["step"].nunique()),
        evals=len(mapped.evals),
        mapping=mapped.mapping,
        warnings=lines,
    )
    with ledger.transaction():
        exists = run in set(ledger.runs()["name"])
        if exists:
            done = ledger.meta(run).get("imports", [])
            if any(d.get("source") == source and d.get("sha256") == digest for d in done):
                result.unchanged = True
                return result
            refuse_live(ledger, run)
            if attach:
                mapped = keep_stored(ledger, run, mapped, result)
            else:
                moved = make_room(ledger, run, mapped, kind=kind, source=source, replace=replace, append=append)
                if moved is not None:
                    result.set_apart = moved
                    result.warnings.append(_replaced(run, moved))
        if not attach and not (exists and append):
            ledger.create_run(run, manifest=manifest, status="imported", source=f"import:{kind}", if_exists="reuse")
        if manifest is not None and exists:
            ledger.set_manifest(run, manifest)
        if len(mapped.steps):
            ledger.append_steps(run, mapped.steps)
        if mapped.evals:
            ledger.append_evals(run, mapped.evals)
        for body in mapped.restarts:
            start, end = body["resume"]["step"], body["old"]["step"]
            ledger.add_event(run, "resume", body, start_step=start, end_step=end, state="resolved")
        entry = {
            "kind": kind,
            "source": source,
            "sha256": digest,
            "steps": result.steps,
            "evals": result.evals,
            "mapping": mapped.mapping,
            "warnings": lines,
        }
        _note_import(ledger, run, entry, start_unix=start_unix, devices=devices, epochs=epochs, summary=summary)
        if not attach and not (exists and append):
            ledger.set_status(run, "imported")
    return result


def _replaced(run: str, moved: Mapping[str, int]) -> str:
    """What a replacing import set apart, said with its warnings."""
    return (
        f"run {run!r} replaced: its {moved['steps']:,} step rows, {moved['extra_values']:,} extra values and "
        f"{moved['evals']:,} evals are set apart as superseded (kept, not deleted: Ledger.superseded and the "
        "run's `warning` event hold them)"
    )


def _refuse_unsafe_names(mapped: Mapped, source: str) -> None:
    """A metric name holding a control character is refused naming the file (the ledger refuses such a name too,
    but without saying which file held it), and so is one longer than MAX_NAME_CHARS (a damaged header)."""
    names = [str(key) for key in mapped.steps.columns] + [f"{e.task}/{e.metric}" for e in mapped.evals]
    for key in dict.fromkeys(names):
        unsafe = unsafe_character(key)
        if unsafe is not None:
            raise InputError(
                f"{source}: the metric name {clip(key)} holds {unsafe}; fix the name in the file (a damaged log?)"
            )
        if len(key) > MAX_NAME_CHARS:
            raise InputError(
                f"{source}: the metric name {clip(key)} is longer than the {MAX_NAME_CHARS} characters a name may "
                "have (a damaged file?); shorten it in the file, or give it a short name with map KEY=NAME",
                parameter="map",
            )


def _note_import(
    ledger: Ledger,
    run: str,
    entry: dict[str, Any],
    *,
    start_unix: float | None,
    devices: tuple[int, str] | None,
    epochs: bool,
    summary: Mapping[str, float] | None,
) -> None:
    """The run's meta after an import: the import listed under `imports`, and what the source told of the run (its
    start, device count, step unit, summary)."""
    done = ledger.meta(run).get("imports", [])
    done.append(entry)
    ledger.set_meta(run, "imports", done)
    if start_unix is not None and "start_unix" not in ledger.meta(run):
        ledger.set_meta(run, "start_unix", start_unix)
    if devices is not None:
        ledger.set_meta(run, "devices", {"count": devices[0], "from": devices[1]})
    if epochs:
        ledger.set_meta(run, STEP_UNIT, "epoch")
    if summary:
        ledger.set_meta(run, "summary", {**ledger.meta(run).get("summary", {}), **summary})


def data_digest(mapped: Mapped) -> str:
    """sha256 of the mapped records: what makes an import the same import (same source, same options)."""
    h = hashlib.sha256()
    h.update(pd.util.hash_pandas_object(mapped.steps.fillna(-1.2345e300), index=False).to_numpy().tobytes())
    # Every field of each evaluation: a corrected file that changes only a standard error or a direction is a new
    # import, not one skipped as already done.
    fields = [f.name for f in dataclasses.fields(EvalRecord)]
    evals = pd.DataFrame([dataclasses.astuple(e) for e in mapped.evals], columns=fields).astype(str)
    h.update(pd.util.hash_pandas_object(evals, index=False).to_numpy().tobytes())
    return h.hexdigest()
