"""Published results in: a long-form table of small and large runs, imported as a campaign (`yieldgate import
results TABLE`, a campaign named).

**The format** (CSV or Parquet; docs/importing.md), one row per measured point: `recipe`, `params` (model
parameters, N), `tokens` (trained so far, D), optional `seed` (0 when absent), `metric` (`<task>/<metric>`, e.g.
`val/pile_cc/loss`, or a bare metric name, read as task `results`), `value`, optional `stderr`, optional
`w:<source>` columns holding the recipe's mixture weights (summing to 1 within 1e-6; one mixture per recipe), and,
where one size and seed has runs of different lengths (a 5x longer run beside the compute-optimal one), optional
`run` (a name for each run: one name is one recipe, seed and size) and/or `tokens_multiplier` (the run's length in
compute-optimal multiples, `CHINCHILLA` = 20 tokens a parameter: a 5x run is 100 tokens a parameter; no point of it
may lie past that length, by more than `LENGTH_SLACK`). Without them, every row of one recipe, size and seed is one
run, and a longer run's points would be read as later evaluations of the shorter one.

**Noise** for deciding only beyond it (`analysis.results`): seeds, reported `stderr`, or `noise` supplied per metric
(the standard error of one run's value, for a single-seed table; a finite number >= 0), and `exponents` per metric
(a declared exponent b of value ~ N^b: a law across sizes from fewer than three sizes), both kept in the spec.

**What it makes.** One run per recipe x params x seed (x run), named `<campaign>/<recipe>/s<seed>/n<params>` (and
`/<run>`, or `/x<multiplier>`, where the table names runs): its
evaluations at their tokens (steps 1, 2, ... in token order, with a step record of the tokens at each), the
mixture in its manifest's data sources and N in `model.params`, and the run meta `results` (campaign, recipe,
seed, params, tokens). The campaign is registered in the ledger with spec `kind: results` (the metrics and their
directions, the recipes' mixtures) and its summary (`analysis.results.summarise_results`), so `yieldgate
campaign`, `compare`, `yield` and the gate read the runs as they read probes (the summary is written in the same
transaction by `api.import_results`: an importer only translates).

**All or nothing.** Every row is checked before anything is written (a missing column, a weight row that does
not sum to 1, a metric with no known direction, a value or standard error that is not finite or is negative, a run
that changes size or a point past its run's length: one line naming the row and column; a supplied noise or
exponent that is not a finite number, or names no metric of the table: one line naming it),
and the runs, the campaign and its summary are written in one transaction. A run that exists is refused unless
`replace` (`ingest.guard`), so one table imported twice into one campaign is refused the second time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.core import write_import
from yieldgate.ingest.types import Mapped, Warnings
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.names import metric_direction, unsafe_character
from yieldgate.util.hashing import content_hash

__all__ = ["REQUIRED", "ResultsImport", "read_results", "import_results", "run_name"]

REQUIRED = ("recipe", "params", "tokens", "metric", "value")
WEIGHT_PREFIX = "w:"
WEIGHT_TOLERANCE = 1e-6
KIND = "results"
CHINCHILLA = 20
"""Tokens a parameter of a compute-optimal run (Hoffmann et al. 2022): a `tokens_multiplier` counts these."""
LENGTH_SLACK = 0.05
"""A point may lie this share past its run's stated length (published token counts are rounded)."""


@dataclass
class ResultsImport:
    """What one results import did."""

    campaign: str
    source: str
    runs: int
    evals: int
    recipes: int
    metrics: dict[str, bool]
    """Metric -> higher is better."""
    sizes: list[int]
    replaced: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_name(campaign: str, recipe: str, seed: int, params: int, label: str = "") -> str:
    return f"{campaign}/{recipe}/s{seed}/n{params}" + (f"/{label}" if label else "")


def _load(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(f"{path}: no such file; the results table is a CSV or Parquet file")
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    try:
        return pd.read_csv(path, dtype={"recipe": str, "metric": str}, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable CSV table ({str(exc).splitlines()[0]})") from None


def _where(source: str, i: int, column: str) -> str:
    """Rows counted from 1 after the header: row 1 is a CSV's second line."""
    return f"{source}: row {i + 1}, column {column!r}"


def _numbers(frame: pd.DataFrame, column: str, source: str, *, optional: bool = False) -> np.ndarray:
    """The column as floats; InputError naming the first row whose cell is not a finite number (an empty cell is
    NaN where `optional`)."""
    cells = frame[column]
    values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
    empty = cells.isna().to_numpy()
    bad = ~np.isfinite(values) & ~(empty & optional)
    if bad.any():
        i = int(np.argmax(bad))
        got = "nothing" if empty[i] else repr(str(cells.iloc[i]))
        raise InputError(f"{_where(source, i, column)}: expected a finite number, got {got}")
    return values


def _directions(frame: pd.DataFrame, source: str, higher: Sequence[str], lower: Sequence[str]) -> dict[str, bool]:
    """Metric -> higher is better: the override flags first, else the names table; InputError naming the first
    row of a metric that says neither."""
    both = set(higher) & set(lower)
    if both:
        raise InputError(f"metric {sorted(both)[0]!r} is given as both higher and lower is better: pick one")
    out: dict[str, bool] = {}
    for i, metric in enumerate(frame["metric"]):
        if metric in out:
            continue
        if not isinstance(metric, str) or not metric.strip():
            raise InputError(f"{_where(source, i, 'metric')}: expected a metric name, got nothing")
        if metric in higher or metric in lower:
            out[metric] = metric in higher
            continue
        direction = metric_direction(metric.rpartition("/")[2])
        if direction is None:
            raise InputError(
                f"{_where(source, i, 'metric')}: {metric!r} has no known direction; pass "
                f"higher_is_better {metric} or lower_is_better {metric}",
                parameter=("higher_is_better", "lower_is_better"),
            )
        out[metric] = direction
    return out


def _names(frame: pd.DataFrame, source: str) -> None:
    for i, recipe in enumerate(frame["recipe"]):
        if not isinstance(recipe, str) or not recipe.strip():
            raise InputError(f"{_where(source, i, 'recipe')}: expected a recipe name, got nothing")
        bad = unsafe_character(recipe) or ("'/'" if "/" in recipe else None)
        if bad:
            raise InputError(f"{_where(source, i, 'recipe')}: a recipe name may not hold {bad}; rename it")


def _lengths(frame: pd.DataFrame, out: pd.DataFrame, source: str) -> pd.Series:
    """Each row's run label ("" without `run` and `tokens_multiplier`): the `run` cell, else `x<multiplier>`.
    InputError naming the row and column of a run name that changes recipe, seed or size, or a point past its
    run's length (multiplier x 20 tokens a parameter)."""
    label = pd.Series([""] * len(frame))
    if "tokens_multiplier" in frame.columns:
        mult = _numbers(frame, "tokens_multiplier", source)
        bad = mult <= 0
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{_where(source, i, 'tokens_multiplier')}: expected a number > 0, got {mult[i]:g}")
        length = mult * CHINCHILLA * out["params"].to_numpy(dtype=float)
        past = out["tokens"].to_numpy(dtype=float) > length * (1 + LENGTH_SLACK)
        if past.any():
            i = int(np.argmax(past))
            raise InputError(
                f"{_where(source, i, 'tokens_multiplier')}: tokens {out['tokens'][i]:,} lie past the run's length, "
                f"{mult[i]:g} x {CHINCHILLA} tokens a parameter x {out['params'][i]:,} parameters = {length[i]:,.0f}: "
                "the multiplier or the size is wrong"
            )
        label = pd.Series([f"x{m:g}" for m in mult])
    if "run" in frame.columns:
        first: dict[str, int] = {}
        for i, name in enumerate(frame["run"]):
            if not isinstance(name, str) or not name.strip():
                raise InputError(f"{_where(source, i, 'run')}: expected a run name, got nothing")
            held = unsafe_character(name) or ("'/'" if "/" in name else None)
            if held:
                raise InputError(f"{_where(source, i, 'run')}: a run name may not hold {held}; rename it")
            j = first.setdefault(name, i)
            for column in ("params", "recipe", "seed"):
                if out[column][i] != out[column][j]:
                    raise InputError(
                        f"{_where(source, i, 'run')}: run {name!r} has {column} {out[column][j]} at row {j + 1} and "
                        f"{out[column][i]} here: one run is one recipe, seed and model size; name the other run apart"
                    )
        label = frame["run"].astype(str).str.strip()
    return label.reset_index(drop=True)


def _source(column: str) -> str:
    return column[len(WEIGHT_PREFIX) :]


def _weights(frame: pd.DataFrame, source: str) -> dict[str, dict[str, float]]:
    """Recipe -> source -> weight (empty without `w:` columns); InputError naming the first row whose weights are
    not numbers >= 0 summing to 1 within 1e-6, or a recipe given two mixtures."""
    columns = [c for c in frame.columns if str(c).startswith(WEIGHT_PREFIX)]
    if not columns:
        return {}
    values = np.column_stack([_numbers(frame, c, source) for c in columns])
    negative = values < 0
    if negative.any():
        i, j = np.argwhere(negative)[0]
        raise InputError(f"{_where(source, int(i), columns[j])}: a weight must be >= 0, got {values[i, j]:g}")
    sums = values.sum(axis=1)
    off = np.abs(sums - 1) > WEIGHT_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        raise InputError(
            f"{_where(source, i, columns[-1])}: the row's weights ({', '.join(columns)}) sum to {sums[i]:.9g}, not 1 "
            f"(within {WEIGHT_TOLERANCE:g}); normalise them"
        )
    out: dict[str, dict[str, float]] = {}
    first: dict[str, int] = {}
    for i, recipe in enumerate(frame["recipe"]):
        mixture = {_source(c): float(v) for c, v in zip(columns, values[i], strict=True)}
        if recipe not in out:
            out[recipe], first[recipe] = mixture, i
        elif mixture != out[recipe]:
            differs = next(c for c in columns if mixture[_source(c)] != out[recipe][_source(c)])
            raise InputError(
                f"{_where(source, i, differs)}: recipe {recipe!r} has another mixture at row {first[recipe] + 1}; "
                "one recipe is one mixture (name the other mixture as another recipe)"
            )
    return out


def read_results(
    path: str | Path, *, higher_is_better: Sequence[str] = (), lower_is_better: Sequence[str] = ()
) -> tuple[pd.DataFrame, dict[str, bool], dict[str, dict[str, float]]]:
    """The checked table (columns recipe, params, tokens, seed, metric, value, stderr as read), the metrics'
    directions and the recipes' mixtures; InputError (one line naming the row and column) on anything wrong."""
    path = Path(path)
    source = str(path)
    frame = _load(path).reset_index(drop=True)
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(
            f"{source}: no column {missing[0]!r}; a results table has columns {', '.join(REQUIRED)} (optional seed, "
            "stderr and w:<source>): see docs/importing.md"
        )
    if frame.empty:
        raise InputError(f"{source}: the table has no rows")
    _names(frame, source)
    out = pd.DataFrame({"recipe": frame["recipe"].astype(str), "metric": frame["metric"]})
    for column in ("params", "tokens", "value"):
        out[column] = _numbers(frame, column, source)
    for column in ("params", "tokens"):
        bad = (out[column] <= 0) | (out[column] != np.round(out[column]))
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise InputError(f"{_where(source, i, column)}: expected a whole number > 0, got {out[column][i]:g}")
    seeds = _numbers(frame, "seed", source) if "seed" in frame.columns else np.zeros(len(frame))
    if (seeds != np.round(seeds)).any():
        i = int(np.argmax(seeds != np.round(seeds)))
        raise InputError(f"{_where(source, i, 'seed')}: expected a whole seed number, got {seeds[i]:g}")
    out["seed"] = seeds.astype(np.int64)
    out["stderr"] = _numbers(frame, "stderr", source, optional=True) if "stderr" in frame.columns else math.nan
    if (out["stderr"] < 0).any():
        i = int(np.argmax((out["stderr"] < 0).to_numpy()))
        raise InputError(f"{_where(source, i, 'stderr')}: a standard error must be >= 0, got {out['stderr'][i]:g}")
    directions = _directions(frame, source, higher_is_better, lower_is_better)
    out["params"], out["tokens"] = out["params"].astype(np.int64), out["tokens"].astype(np.int64)
    out["length"] = _lengths(frame, out, source)
    twice = out.duplicated(["recipe", "params", "seed", "length", "tokens", "metric"])
    if twice.any():
        i = int(np.argmax(twice.to_numpy()))
        run = f", run {out['length'][i]!r}" if out["length"][i] else ""
        raise InputError(
            f"{_where(source, i, 'value')}: a second value of {out['metric'][i]!r} for recipe {out['recipe'][i]!r}, "
            f"params {out['params'][i]}, seed {out['seed'][i]}{run}, tokens {out['tokens'][i]}; one row per point "
            "(a longer run of the same size and seed is another run: name it in a run or tokens_multiplier column)"
        )
    return out, directions, _weights(frame, source)


def _manifest(run: str, params: int, mixture: dict[str, float]) -> Any:
    from yieldgate.manifest import Manifest, ModelConfig, Recipe, Source

    data = Recipe(sources=[Source(name=s, weight=w) for s, w in mixture.items()]) if mixture else None
    return Manifest(name=run, data=data, model=ModelConfig(params=params))


def _mapped(group: pd.DataFrame, directions: dict[str, bool]) -> Mapped:
    """One run's records: a step per distinct token count (1, 2, ... in order), its evaluations there."""
    tokens = sorted(group["tokens"].unique())
    step_of = {int(t): k + 1 for k, t in enumerate(tokens)}
    steps = pd.DataFrame({"step": list(step_of.values())})
    steps["tokens"] = pd.array([float(t) for t in step_of], dtype="Float64")
    evals = []
    columns = (group[c].tolist() for c in ("metric", "tokens", "value", "stderr"))
    for name, at, value, stderr in zip(*columns, strict=True):
        task, _, metric = str(name).rpartition("/")
        evals.append(
            EvalRecord(
                step=step_of[int(at)],
                task=task or KIND,
                metric=metric,
                value=float(value),
                tokens=float(at),
                higher_is_better=directions[name],
                stderr=None if math.isnan(stderr) else float(stderr),
            )
        )
    return Mapped(steps=steps, evals=evals, mapping={m: m for m in sorted(group["metric"].unique())})


def _per_metric(values: Mapping[str, float], name: str, metrics: dict[str, bool], *, low: float | None) -> dict:
    """A per-metric setting (`noise`, `exponents`) checked: each a metric of the table, each a finite number (and
    >= `low`); InputError naming the setting and the metric otherwise."""
    out = {}
    for metric, value in values.items():
        if metric not in metrics:
            raise InputError(
                f"{name} for {metric!r}: the table has no metric {metric!r} (it has {', '.join(sorted(metrics))})",
                parameter=name,
            )
        number = float(value)
        if not math.isfinite(number) or (low is not None and number < low):
            need = f"a finite number >= {low:g}" if low is not None else "a finite number"
            raise InputError(f"{name} for {metric!r} must be {need}, got {value!r}", parameter=name)
        out[metric] = number
    return out


def import_results(
    ledger: Ledger,
    path: str | Path,
    *,
    campaign: str,
    higher_is_better: Sequence[str] = (),
    lower_is_better: Sequence[str] = (),
    noise: Mapping[str, float] | None = None,
    exponents: Mapping[str, float] | None = None,
    replace: bool = False,
    level: float = 0.9,
) -> ResultsImport:
    """Import a results table as campaign `campaign` (see the module docstring): checked whole first, then
    written in one transaction (call it inside the caller's to write the summary with it: `api.import_results`).
    `noise`: metric -> the standard error of one run's value (a single-seed table's noise); `exponents`: metric ->
    the declared exponent of a law across sizes."""
    if not campaign or "/" in campaign or unsafe_character(campaign):
        raise InputError(f"campaign name {campaign!r}: give a name without '/' or control characters")
    table, directions, mixtures = read_results(path, higher_is_better=higher_is_better, lower_is_better=lower_is_better)
    source = str(path)
    spec: dict[str, Any] = {
        "kind": KIND,
        "source": Path(path).name,
        "level": level,
        "metrics": directions,
        "recipes": {r: {"sources": [{"name": s, "weight": w} for s, w in m.items()]} for r, m in mixtures.items()},
    }
    if noise:
        spec["noise"] = _per_metric(noise, "noise", directions, low=0.0)
    if exponents:
        spec["exponents"] = _per_metric(exponents, "exponents", directions, low=None)
    result = ResultsImport(
        campaign=campaign,
        source=source,
        runs=0,
        evals=len(table),
        recipes=int(table["recipe"].nunique()),
        metrics=directions,
        sizes=sorted(int(n) for n in table["params"].unique()),
    )
    with ledger.transaction():
        existing = set(ledger.runs()["name"])
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        for (recipe, params, seed, length), group in table.groupby(["recipe", "params", "seed", "length"], sort=True):
            run = run_name(campaign, str(recipe), int(seed), int(params), str(length))
            mapped = _mapped(group, directions)
            manifest = _manifest(run, int(params), mixtures.get(str(recipe), {}))
            if run in existing:  # the import guard: refused unless replace, the records set apart then
                warnings = Warnings()
                done = write_import(
                    ledger, run, mapped, kind=KIND, source=source, warnings=warnings, manifest=manifest, replace=replace
                )
                result.replaced += done.set_apart is not None
            else:  # a new run: what write_import writes, without its listing of every run per run
                _write_new(ledger, run, mapped, manifest, source, digest)
            meta = {"campaign": campaign, "recipe": recipe, "seed": int(seed), "params": int(params)}
            if length:
                meta["run"] = str(length)
            ledger.set_meta(run, KIND, {**meta, "tokens": int(group["tokens"].max())})
            result.runs += 1
        ledger.put_campaign(campaign, spec, content_hash(spec))
    return result


def _write_new(ledger: Ledger, run: str, mapped: Mapped, manifest: Any, source: str, digest: str) -> None:
    """A new run's records, manifest and `imports` entry (the table's sha256), status `imported`."""
    ledger.create_run(run, manifest=manifest, status="imported", source=f"import:{KIND}")
    ledger.append_steps(run, mapped.steps)
    ledger.append_evals(run, mapped.evals)
    entry = {"kind": KIND, "source": source, "sha256": digest, "steps": len(mapped.steps), "evals": len(mapped.evals)}
    ledger.set_meta(run, "imports", [{**entry, "mapping": mapped.mapping, "warnings": []}])
