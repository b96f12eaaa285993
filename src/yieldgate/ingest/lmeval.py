"""lm-evaluation-harness results files (`results_<date>.json`), one per checkpoint, as eval records.

Each task of `results` becomes eval records of that task, one per metric. lm-eval writes a metric as
`<metric>,<filter>`: the default filter `none` is dropped (`acc,none` -> `acc`); any other filter stays in
the name (`exact_match,strict-match`), since two filters of one metric are two different scores. Standard
errors (`acc_stderr,none`) are kept as their own metric (`acc_stderr`, lower is better). The direction of
each metric comes from the file's own `higher_is_better` table when it has one.

The step of a file: `--step-pattern REGEX` searched in the file's path (its first group, or the group named
`step`); else a top-level `step` field; else `step<digits>` in `config.model_args` (Pythia-style
`revision=step143000`). The portfolio is `lm-eval`, its version the harness version that wrote the file
(`lm_eval_version`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yieldgate.errors import InputError
from yieldgate.ingest.clean import Warnings, read_json
from yieldgate.ledger import EvalRecord

__all__ = ["read", "read_results", "metric_name"]

PORTFOLIO = "lm-eval"
_MODEL_ARGS_STEP = re.compile(r"step[-_=]?(\d+)")


def metric_name(key: str) -> str | None:
    """`acc,none` -> `acc`; `exact_match,strict-match` kept; `alias` and other non-metrics -> None."""
    metric, _, filt = key.partition(",")
    if not filt:
        return None  # `alias`, `name`, ...: lm-eval writes every metric with its filter
    return metric if filt == "none" else key


def _step(path: Path, results: dict[str, Any], pattern: re.Pattern[str] | None) -> int:
    if pattern is not None:
        m = pattern.search(path.as_posix())
        if not m:
            raise InputError(f"{path}: --step-pattern {pattern.pattern!r} does not match the file's path")
        text = m.groupdict().get("step") or (m.group(1) if m.groups() else m.group(0))
        try:
            return int(text)
        except ValueError:
            raise InputError(f"{path}: --step-pattern matched {text!r}, not a whole number") from None
    if isinstance(results.get("step"), int):
        return results["step"]
    args = str((results.get("config") or {}).get("model_args") or "")
    m = _MODEL_ARGS_STEP.search(args)
    if m:
        return int(m.group(1))
    raise InputError(f"{path}: no step: the file has no 'step' field and no step<N> in config.model_args; "
                     r"give --step-pattern, e.g. 'step(\d+)' for results of checkpoint folders named step1000")


def read_results(path: Path, pattern: re.Pattern[str] | None, tokens_per_step: float | None,
                 warnings: Warnings) -> list[EvalRecord]:
    """The eval records of one results file."""
    doc = read_json(path, "an lm-evaluation-harness results file")
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise InputError(f"{path}: no 'results' object; expected an lm-evaluation-harness results file")
    step = _step(path, doc, pattern)
    tokens = None if tokens_per_step is None else step * float(tokens_per_step)
    directions = doc.get("higher_is_better") or {}
    version = str(doc.get("lm_eval_version") or (doc.get("config") or {}).get("lm_eval_version") or "")
    records = []
    for task, metrics in doc["results"].items():
        if not isinstance(metrics, dict):
            raise InputError(f"{path}: results.{task}: expected an object of metrics, got {str(metrics)[:60]}")
        for key, value in metrics.items():
            name = metric_name(key)
            if name is None or value in ("N/A", None):
                continue  # lm-eval writes "N/A" for a stderr it could not compute
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{path}: results.{task}.{key}: expected a number, got {value!r}")
            base = name.split(",")[0]
            hib = (directions.get(task) or {}).get(base.removesuffix("_stderr"))
            if base.endswith("_stderr"):
                hib = False
            if not math.isfinite(value):
                warnings.add("nan", f"{path}: results.{task}.{key} is {value}; kept as recorded")
            records.append(EvalRecord(step=step, tokens=tokens, task=task, metric=name, value=float(value),
                                      higher_is_better=hib if isinstance(hib, bool) else None,
                                      portfolio=PORTFOLIO, portfolio_version=version))
    return records


def _files(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    if source.is_dir():
        files = sorted(source.rglob("results*.json"))
        if files:
            return files
        raise InputError(f"{source}: no results*.json files in this directory")
    raise InputError(f"{source}: no such file or directory; expected lm-evaluation-harness results JSON")


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: eval records of one run from results files (one per checkpoint)."""
    from yieldgate.ingest import Read

    try:
        pattern = re.compile(opts.step_pattern) if opts.step_pattern else None
    except re.error as exc:
        raise InputError(f"--step-pattern {opts.step_pattern!r}: not a regular expression ({exc})") from None
    files = [f for s in sources for f in _files(Path(s))]
    records = [r for f in files for r in read_results(f, pattern, opts.tokens_per_step, warnings)]
    return [Read(", ".join(sources), None, records)]
