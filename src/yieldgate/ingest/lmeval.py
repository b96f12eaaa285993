"""lm-evaluation-harness results as eval records: per-checkpoint results files of every published generation,
and aggregate files that hold many checkpoints in one JSON.

Per-checkpoint files (any name: `results_<date>.json`, `step143000.json`, `160M_step143000.json`). Each task
of `results` becomes eval records of that task, one per metric:
- v0.4 writes a metric as `<metric>,<filter>`: the default filter `none` is dropped (`acc,none` -> `acc`); any
  other filter stays in the name (`exact_match,strict-match`), since two filters of one metric are two scores;
- v0.3 (`results` beside `versions`) writes plain names (`acc`, `acc_stderr`, `ppl`).
A standard error (`acc_stderr`) is not a metric: it is its metric's record's `stderr`. The direction of each metric
comes from the file's own `higher_is_better` table when it has one, else from its name
(`names.metric_direction`).

The step of a file: `step_pattern` searched in the file's path (its first group, or the group named `step`);
else a top-level `step` field; else `step<digits>` in `config.model_args` (Pythia-style
`revision=step143000`); else the number after `step`, `global_step`, `iter`, `ckpt` or `checkpoint-` in the
path (the last such in it: `checkpoint-2000/results.json`, `160M_step143000.json`).

Aggregate files: one JSON with per-task lists of values across checkpoints and one list of their steps or
tokens (`{"steps": [...], "arc_easy": [...], "piqa": {"acc": [...]}}`), as large open-model projects
publish their evaluation curves, the per-task lists perhaps under `results` beside the axes (BigScience's
`{"tokens": [...], "checkpoints": [...], "results": {"arc_easy": {"acc": [...], "acc_stderr": [...]}}}`); or
checkpoints as keys (`{"step1000": <results file>, ...}`) or a list of
results files each with its `step`.

The portfolio is `lm-eval`, its version the harness version that wrote the file (`lm_eval_version`).
A directory imports every such file it holds; other JSON files in it are skipped with a warning.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeGuard

from yieldgate.errors import InputError
from yieldgate.ingest.clean import clip, read_json
from yieldgate.ingest.types import Warnings
from yieldgate.ledger import EvalRecord
from yieldgate.names import metric_direction
from yieldgate.util.inputs import check_regular

__all__ = ["read", "read_results", "metric_name"]

PORTFOLIO = "lm-eval"
# A step is at most 18 digits (an int64): a longer run of digits is not a step (and Python reads no int of
# 4,300+ digits).
_MODEL_ARGS_STEP = re.compile(r"step[-_=]?(\d{1,18})(?!\d)")
_PATH_STEP = re.compile(r"(?:global_step|step|iteration|iter|ckpt|checkpoint)[-_=]?(\d{1,18})(?!\d)", re.IGNORECASE)
# Names of an aggregate file's checkpoint axis: the step (preferred) or tokens of each column of values.
_STEP_AXES = ("steps", "step", "global_steps", "iterations", "iteration", "checkpoints", "checkpoint")
_TOKEN_AXES = ("tokens", "tokens_seen", "num_tokens", "train_tokens", "tokens_trained")
_NOT_METRICS = {"alias", "name", "samples", "sample_len", "version"}


def metric_name(key: str, plain: bool = False) -> str | None:
    """`acc,none` -> `acc`; `exact_match,strict-match` kept; a plain `acc` only from v0.3 files (`plain`);
    `alias` and other non-metrics -> None."""
    metric, _, filt = key.partition(",")
    if not filt:
        return metric if plain and metric not in _NOT_METRICS else None
    return metric if filt == "none" else key


def _step_in_path(path: Path, pattern: re.Pattern[str] | None) -> int | None:
    if pattern is not None:
        m = pattern.search(path.as_posix())
        if not m:
            raise InputError(
                f"{path}: step_pattern {pattern.pattern!r} does not match the file's path", parameter="step_pattern"
            )
        text = m.groupdict().get("step") or (m.group(1) if m.groups() else m.group(0))
        try:
            return int(text)
        except ValueError:
            raise InputError(
                f"{path}: step_pattern matched {text!r}, not a whole number", parameter="step_pattern"
            ) from None
    return None


def _step(path: Path, results: dict[str, Any], pattern: re.Pattern[str] | None, given: int | None = None) -> int:
    step = _step_in_path(path, pattern)
    if step is not None:
        return step
    if isinstance(results.get("step"), int) and not isinstance(results.get("step"), bool):
        return results["step"]
    args = str((results.get("config") or {}).get("model_args") or "") if isinstance(results.get("config"), dict) else ""
    m = _MODEL_ARGS_STEP.search(args)
    if m:
        return int(m.group(1))
    found = _PATH_STEP.findall(path.as_posix())
    if found:
        return int(found[-1])
    if given is not None:
        return given
    raise InputError(
        rf"{path}: give step N (a released model's checkpoint) or step_pattern, e.g. 'ckpt(\d+)' for results of "
        "folders named ckpt1000: the file has no 'step' field, no step<N> in config.model_args and none in its path",
        parameter=("step", "step_pattern"),
    )


def _record(
    path: Path,
    where: str,
    task: str,
    name: str,
    value: Any,
    step: int,
    tokens: float | None,
    hib: Any,
    version: str,
    warnings: Warnings,
) -> EvalRecord | None:
    if value in ("N/A", None) or isinstance(value, (dict, list)):
        return None  # lm-eval writes "N/A" for a stderr it could not compute
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: {where}: expected a number, got {value!r}")
    base = name.split(",")[0]
    if base.endswith("_stderr"):
        hib = False
    elif not isinstance(hib, bool):
        hib = metric_direction(base)
    if not math.isfinite(value):
        warnings.add("nan", f"{path}: {where} is {value}; kept as recorded")
    return EvalRecord(
        step=step,
        tokens=tokens,
        task=task,
        metric=name,
        value=float(value),
        higher_is_better=hib,
        portfolio=PORTFOLIO,
        portfolio_version=version,
    )


def _results_records(
    path: Path, doc: dict[str, Any], step: int, tokens: float | None, warnings: Warnings
) -> list[EvalRecord]:
    """The records of one checkpoint's results document (v0.3 or v0.4)."""
    raw_directions, raw_config = doc.get("higher_is_better"), doc.get("config")
    directions = raw_directions if isinstance(raw_directions, dict) else {}
    config = raw_config if isinstance(raw_config, dict) else {}
    version = str(doc.get("lm_eval_version") or config.get("lm_eval_version") or "")
    # v0.3 writes plain metric names; v0.4 writes every metric with its filter
    plain = not any("," in str(k) for metrics in doc["results"].values() if isinstance(metrics, dict) for k in metrics)
    records = []
    for task, metrics in doc["results"].items():
        if not isinstance(metrics, dict):
            raise InputError(f"{path}: results.{task}: expected an object of metrics, got {str(metrics)[:60]}")
        for key, value in metrics.items():
            name = metric_name(str(key), plain)
            if name is None:
                continue
            hib = (directions.get(task) or {}).get(name.split(",")[0].removesuffix("_stderr"))
            rec = _record(path, f"results.{task}.{key}", task, name, value, step, tokens, hib, version, warnings)
            if rec is not None:
                records.append(rec)
    return records


def _is_results(doc: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(doc, dict) and isinstance(doc.get("results"), dict)


def _curves_under_results(doc: dict[str, Any]) -> bool:
    """Whether `results` holds per-task lists across checkpoints (an aggregate), not one checkpoint's numbers."""
    tasks = [m for m in doc["results"].values() if isinstance(m, dict) and m]
    return bool(tasks) and all(isinstance(v, list) for m in tasks for v in m.values())


def _axes_beside(doc: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint axes (steps, tokens) an aggregate keeps beside its `results`."""
    return {k: v for k, v in doc.items() if str(k).lower() in (*_STEP_AXES, *_TOKEN_AXES)}


def _axis(doc: dict[str, Any], names: Sequence[str]) -> tuple[str, list[float]] | None:
    for key, value in doc.items():
        if (
            str(key).lower() in names
            and isinstance(value, list)
            and value
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        ):
            return key, [float(v) for v in value]
    return None


def _aggregate(path: Path, doc: Any, tokens_per_step: float | None, warnings: Warnings) -> list[EvalRecord] | None:
    """The records of an aggregate file, or None when `doc` is not one."""
    if isinstance(doc, list) and doc and all(_is_results(d) and isinstance(d.get("step"), int) for d in doc):
        return [
            r for d in doc for r in _results_records(path, d, d["step"], _tokens(d["step"], tokens_per_step), warnings)
        ]
    if not isinstance(doc, dict):
        return None
    keyed = {k: v for k, v in doc.items() if _is_results(v)}
    if keyed and len(keyed) == len(doc):
        out = []
        for key, sub in keyed.items():
            found = _PATH_STEP.findall(str(key)) or re.findall(r"^\d{1,18}$", str(key))
            if not found:
                raise InputError(f"{path}: checkpoint {clip(str(key))}: no step in its name (expected e.g. 'step1000')")
            step = int(found[-1])
            out += _results_records(path, sub, step, _tokens(step, tokens_per_step), warnings)
        return out
    # Curves: {"steps" or "tokens": [...], task: [...] or {metric: [...]}} (perhaps under one key)
    if len(doc) == 1 and isinstance(next(iter(doc.values())), dict):
        inner = _aggregate(path, next(iter(doc.values())), tokens_per_step, warnings)
        if inner is not None:
            return inner
    return _curve_records(path, doc, tokens_per_step, warnings)


_Axis = tuple[str, list[float]]
"""A checkpoint axis of a curves file: its key and its values (`_axis`)."""


def _curve_records(
    path: Path, doc: dict[str, Any], tokens_per_step: float | None, warnings: Warnings
) -> list[EvalRecord] | None:
    """The records of a curves file: one value per checkpoint of each task (or task and metric), the checkpoints
    given by steps, tokens or both; None when `doc` has neither axis."""
    steps, tokens = _axis(doc, _STEP_AXES), _axis(doc, _TOKEN_AXES)
    axis = steps or tokens
    if axis is None:
        return None
    n = len(axis[1])
    if steps is not None and tokens is not None and len(tokens[1]) != n:
        raise InputError(f"{path}: {tokens[0]!r} has {len(tokens[1])} values and {steps[0]!r} {n}")
    records: list[EvalRecord] = []
    skip = {steps[0] if steps else None, tokens[0] if tokens else None}
    for task, series in doc.items():
        if task in skip:
            continue
        by_metric = series if isinstance(series, dict) else {"": series}
        for metric, values in by_metric.items():
            if not isinstance(values, list):
                continue
            label = f"{task}{'.' + metric if metric else ''}"
            if len(values) != n:
                raise InputError(f"{path}: {label} has {len(values)} values for {n} checkpoints")
            name = metric_name(str(metric), plain=True) if metric else "score"
            if name is None:
                continue
            for i, value in enumerate(values):
                step, tok = _checkpoint(path, i, steps, tokens, tokens_per_step)
                rec = _record(path, f"{label}[{i}]", str(task), name, value, step, tok, None, "", warnings)
                if rec is not None:
                    records.append(rec)
    return records


def _checkpoint(
    path: Path, i: int, steps: _Axis | None, tokens: _Axis | None, tokens_per_step: float | None
) -> tuple[int, float | None]:
    """The step and tokens of a curves file's checkpoint `i`: its step, else its tokens over `tokens_per_step`."""
    if steps is not None:
        step = int(steps[1][i])
        return step, tokens[1][i] if tokens is not None else _tokens(step, tokens_per_step)
    assert tokens is not None  # a curves file has steps, tokens or both (`_curve_records`)
    if tokens_per_step is None:
        raise InputError(
            f"{path}: checkpoints are given by tokens only ({tokens[0]!r}); give "
            "tokens_per_step N to number their steps",
            parameter="tokens_per_step",
        )
    return int(round(tokens[1][i] / tokens_per_step)), tokens[1][i]


def _tokens(step: int, tokens_per_step: float | None) -> float | None:
    return None if tokens_per_step is None else step * float(tokens_per_step)


def read_results(
    path: Path,
    pattern: re.Pattern[str] | None,
    tokens_per_step: float | None,
    warnings: Warnings,
    step: int | None = None,
) -> list[EvalRecord]:
    """The eval records of one results file (one checkpoint's, or an aggregate of many); `step`: the step of a
    file that names none."""
    doc = read_json(path, "an lm-evaluation-harness results file")
    if _is_results(doc) and _curves_under_results(doc):
        # BigScience's aggregates: {"tokens": [...], "checkpoints": [...], "results": {task: {metric: [...]}}}
        records = _curve_records(path, {**doc["results"], **_axes_beside(doc)}, tokens_per_step, warnings)
        if records is not None:
            return records
    if _is_results(doc):
        step = _step(path, doc, pattern, step)
        return _results_records(path, doc, step, _tokens(step, tokens_per_step), warnings)
    records = _aggregate(path, doc, tokens_per_step, warnings)
    if records is None:
        raise InputError(
            f"{path}: neither an lm-evaluation-harness results file (no 'results' object) nor an "
            "aggregate of checkpoints (no 'steps' or 'tokens' list beside per-task lists)"
        )
    return records


def _files(source: Path, warnings: Warnings) -> list[Path]:
    if source.is_dir():
        files = sorted(source.rglob("*.json"))
        if files:
            return files
        raise InputError(f"{source}: no .json files in this directory; expected lm-evaluation-harness results")
    if not source.exists():
        raise InputError(f"{source}: no such file or directory; expected lm-evaluation-harness results JSON")
    check_regular(source, "lm-evaluation-harness results JSON")  # a FIFO or /dev/zero: refused, not read
    return [source]


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: eval records of one run from results files (per checkpoint, or aggregates).
    A file named on the command line must read; in a directory, JSON files that are not results are skipped
    with a warning."""
    from yieldgate.ingest import Read

    try:
        pattern = re.compile(opts.step_pattern) if opts.step_pattern else None
    except re.error as exc:
        raise InputError(
            f"step_pattern {opts.step_pattern!r}: not a regular expression ({exc})", parameter="step_pattern"
        ) from None
    records = []
    for s in sources:
        source = Path(s)
        for f in _files(source, warnings):
            try:
                records += read_results(f, pattern, opts.tokens_per_step, warnings, opts.step)
            except InputError as exc:
                if source.is_file():
                    raise
                warnings.add("skipped", f"skipped: {exc}")
    return [Read(", ".join(sources), None, records)]
