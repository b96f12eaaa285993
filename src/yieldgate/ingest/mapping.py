"""The importers' mapping of a source's metric names: `--map KEY=SOURCE_NAME` overrides first, then the guess of
`yieldgate.aliases`, resolved to one target per name so that no two names write one key.

A declared mapping (`LogMapping`, from a YAML file given to `--map` or the built-in formats' own) says more: which
field or regex group is the step and how it is computed (`epoch`, `iter`, iterations per epoch), which field is the
training loss, which are evaluations and their direction, and what the time fields mean (a cumulative clock,
seconds per step, data wait per step). The readers of tables and text logs apply it; OpenMMLab's and YOLO's
formats are written as such mappings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from yieldgate.aliases import EXTRA_NAMESPACES, IMPORTED, Target, guess, imported, split_unit
from yieldgate.errors import InputError
from yieldgate.names import CORE_STEP_COLUMNS, SPLIT_PREFIXES, VAL_TASK, is_extra_key, metric_direction

if TYPE_CHECKING:
    from yieldgate.ingest.types import Warnings

__all__ = [
    "LogMapping",
    "StepRule",
    "computed_step",
    "load_mapping",
    "mapping_from_doc",
    "none_known",
    "parse_map_options",
    "resolve_mapping",
]


def _target_of(key: str) -> Target:
    """The target named by the KEY of `--map KEY=SOURCE`."""
    base, scale = split_unit(key)
    if key in CORE_STEP_COLUMNS:
        return Target("step" if key == "step" else "core", key)
    if base + "_s" in ("wall_s", "step_s") and scale != 1.0:
        return Target("core", base + "_s", scale)
    if is_extra_key(key):
        if key.split("/")[0] in EXTRA_NAMESPACES | {IMPORTED}:
            return Target("extra", key)
        return Target("eval", key)
    raise InputError(
        f"map {key}=...: {key!r} is neither a core column ({', '.join(CORE_STEP_COLUMNS)}), an "
        "eval key such as val/loss, nor a namespaced extra such as signals/gns",
        parameter="map",
    )


def parse_map_options(options: Iterable[str]) -> dict[str, str]:
    """`["val/loss=eval_ce", ...]` -> {source name: canonical key}. A key given two sources (`step=a step=b`), or a
    source given two keys, is refused: the one that wins would be a guess."""
    out: dict[str, str] = {}
    keys: dict[str, str] = {}
    for opt in options:
        key, sep, source = opt.partition("=")
        if not sep or not key or not source:
            raise InputError(f"map {opt!r}: expected KEY=SOURCE_NAME, e.g. val/loss=eval/ce_loss", parameter="map")
        _target_of(key)
        if keys.get(key, source) != source or out.get(source, key) != key:
            before = f"{key}={keys[key]}" if key in keys else f"{out[source]}={source}"
            raise InputError(f"map {before} and {opt} contradict each other; give each key once", parameter="map")
        out[source], keys[key] = key, source
    if len(out) > MAX_NAMES:
        raise InputError(
            f"map: {len(out):,} names, more than the {MAX_NAMES:,} an import takes; map the metrics you keep",
            parameter="map",
        )
    return out


def resolve_mapping(
    names: Iterable[str], overrides: Mapping[str, str] | None = None, step_name: str | None = None
) -> dict[str, Target]:
    """The target of every source name: `overrides` ({source: key}) first, then the guess.

    `step_name` is the source column holding the step (None when the format has its own step counter).
    Two source names guessed onto one core column or eval key: the first keeps it, the others become
    `imported/<name>` extras, so no value is silently overwritten.
    """
    overrides = dict(overrides or {})
    out: dict[str, Target] = {}
    taken: set[str] = set()
    names = list(names)
    missing = [s for s in overrides if s not in names]
    if missing:
        raise InputError(
            f"map ...={missing[0]}: no metric {missing[0]!r} in the source; it has {', '.join(sorted(names)[:20])}",
            parameter="map",
        )
    known = set(names)
    for name in names:
        if name in overrides:
            out[name] = _target_of(overrides[name])
            taken.add(out[name].key)
    for name in names:
        if name in out:
            continue
        if name == step_name:
            out[name] = Target("step", "step")
            continue
        target = guess(name) if not _training_twin(name, known) else _training_target(name)
        if target.kind == "extra" and _validation_score(name, known):
            target = guess(f"valid_{name}")
        if target.kind != "extra" and (target.key in taken or target.key == "step"):
            target = imported(name)
        out[name] = target
        taken.add(target.key)
    return out


# The splits a held-out metric is named under, before the name of what it evaluates (`validation/main/loss`).
_EVAL_SPLITS = tuple(split for split, prefix in SPLIT_PREFIXES.items() if prefix)


def _training_twin(name: str, names: set[str]) -> bool:
    """True for `main/loss` beside `validation/main/loss`: a namespaced metric that the source also has under an
    evaluation split is the training side of that metric (Chainer's LogReport names its reporter's values so), not
    an evaluation of a task named `main`."""
    return (
        "/" in name
        and name.split("/")[0].lower() not in _EVAL_SPLITS
        and any(f"{split}/{name}" in names for split in _EVAL_SPLITS)
    )


def _training_target(name: str) -> Target:
    """A training twin's target (`_training_twin`): its metric as the training's (`main/loss` is the loss), else an
    extra under its own name."""
    target = guess("train/" + name.rsplit("/", 1)[1])
    return target if target.kind == "core" else imported(name)


_TRAIN_NAMED = re.compile(r"^(?:train|training)[_/]", re.IGNORECASE)
_HELD_OUT_NAMED = re.compile(rf"^(?:{'|'.join(_EVAL_SPLITS)})[_/]", re.IGNORECASE)


def _validation_score(name: str, names: set[str]) -> bool:
    """True for fastai's `accuracy` beside `train_loss` and `valid_loss`: where a table names its training values by
    their split and has a validation split, a score named by no split (and with no twin under one) is computed on the
    validation set, as fastai's Recorder computes its metrics; where the training's values go unnamed (Keras' `loss`,
    `accuracy` beside `val_accuracy`), it is the training's."""
    if "/" in name or metric_direction(name) is None or "loss" in name.lower():
        return False
    if not any(_TRAIN_NAMED.match(n) for n in names) or not any(_HELD_OUT_NAMED.match(n) for n in names):
        return False
    return not any(n.lower().endswith(name.lower()) and n != name for n in names)


def none_known(source: str, targets: Mapping[str, Target], warnings: Warnings) -> None:
    """Say, in one line, when no metric of the source has a name yieldgate knows (its clock aside): which it kept
    as extras, and how to name them."""
    extras = [t.key for t in targets.values() if t.key.startswith(f"{IMPORTED}/")]
    if not extras or any(t.kind in ("core", "eval") and t.key != "wall_s" for t in targets.values()):
        return
    listed = ", ".join(extras[:6]) + (f" and {len(extras) - 6} more" if len(extras) > 6 else "")
    warnings.add(
        "unknown-names",
        f"{source}: none of its {len(extras)} metric name(s) is one yieldgate knows: kept as extras {listed}; "
        "to read them as yieldgate's own, name them with map KEY=SOURCE_NAME (loss=..., val/loss=..., tokens=...)",
    )


# --- a declared mapping: a YAML file, or --map options beyond KEY=SOURCE_NAME ----------------------------------

MAX_NAMES = 2000
"""Names a mapping may map: the columns one import takes (`clean.MAX_COLUMNS`); a million took two minutes."""
MAX_LINES = 100
"""Regexes a mapping's `lines` may hold."""

_TIME_KEYS = {"clock": "wall_s", "per_step": "step_s", "data_wait": "data_wait_s"}
_STEP_KEYS = ("field", "epoch", "iter", "iters_per_epoch", "first_epoch")
_DOC_KEYS = ("step", "loss", "evals", "times", "names", "lines", "epochs", "carry")


@dataclass
class StepRule:
    """How a row's step is computed: from one field, or step = (epoch - first_epoch) x N + iter with N the
    iterations per epoch (a number or a field; a row without N takes the last N seen), a row with an epoch and no
    iteration at the end of its epoch (an evaluation after it)."""

    field: str | None = None
    epoch: str | None = None
    iter: str | None = None
    iters_per_epoch: str | int | None = None
    first_epoch: int = 1

    def describe(self) -> str:
        """`the field 'iteration'`, `step = (epoch - 1) x iters + iter`."""
        if self.field is not None:
            return f"the field {self.field!r}"
        first = f"({self.epoch} - {self.first_epoch})" if self.first_epoch else str(self.epoch)
        per = self.iters_per_epoch if self.iters_per_epoch is not None else 1
        return f"step = {first} x {per}" + (f" + {self.iter}" if self.iter else " (an epoch a step)")


@dataclass
class LogMapping:
    """What a log's fields mean, as a user (or a built-in format) declares them: `names` ({source: canonical key},
    what `--map KEY=SOURCE` gives), the step rule, the evaluations' directions, and for text logs the `lines`
    (regexes with named groups) that read them. `names` already holds the loss, the evaluations and the time
    fields under their canonical keys (`loss`, `val/...`, `wall_s` / `step_s` / `data_wait_s`)."""

    names: dict[str, str] = field(default_factory=dict)
    step: StepRule | None = None
    directions: dict[str, bool] = field(default_factory=dict)
    """{canonical eval key: higher is better} where the mapping says."""
    lines: list[str] = field(default_factory=list)
    epochs: bool = False
    """The steps count epochs (the import says so)."""
    carry: bool = False
    """Text logs: a line that holds only the step's fields (`Epoch 3`) gives them to the lines after it that hold
    none (a metric printed alone: `Validation accuracy: 0.91`), until the next such line."""

    def step_columns(self) -> tuple[str, ...]:
        """The source fields the step rule reads (not metrics)."""
        rule = self.step
        if rule is None:
            return ()
        per = rule.iters_per_epoch if isinstance(rule.iters_per_epoch, str) else None
        return tuple(n for n in (rule.field, rule.epoch, rule.iter, per) if n)


def _eval_key(source: str) -> str:
    """The eval key of a field the mapping names an evaluation: itself when it has a task (`coco/bbox_mAP`), else
    `val/<field>`."""
    return source if "/" in source else f"{VAL_TASK}/{source}"


def _direction(where: str, value: Any) -> bool | None:
    if value in (None, "auto"):
        return None
    if value in ("higher", "max", True):
        return True
    if value in ("lower", "min", False):
        return False
    raise InputError(f"{where}: expected higher, lower or auto, got {value!r}", parameter="map")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _step_rule(where: str, spec: Any) -> StepRule:
    if isinstance(spec, str):
        return StepRule(field=spec)
    if not isinstance(spec, dict) or not spec or any(k not in _STEP_KEYS for k in spec):
        raise InputError(
            f"{where}: step is a field name, or {{epoch: F, iter: F, iters_per_epoch: N or F, first_epoch: 0 or 1}}",
            parameter="map",
        )
    per = spec.get("iters_per_epoch")
    if isinstance(per, bool) or (isinstance(per, int | float) and not (per >= 1 and float(per).is_integer())):
        raise InputError(
            f"{where}: iters_per_epoch must be a whole number >= 1 or a field name, got {per!r}", parameter="map"
        )
    if spec.get("first_epoch", 1) not in (0, 1):
        raise InputError(f"{where}: first_epoch must be 0 or 1, got {spec['first_epoch']!r}", parameter="map")
    rule = StepRule(
        field=_text(spec.get("field")),
        epoch=_text(spec.get("epoch")),
        iter=_text(spec.get("iter")),
        iters_per_epoch=int(per) if isinstance(per, float) else per if isinstance(per, int | str) else None,
        first_epoch=int(spec.get("first_epoch", 1)),
    )
    if rule.field is None and rule.epoch is None:
        raise InputError(
            f"{where}: step needs a field, or an epoch field (with iter and iters_per_epoch)", parameter="map"
        )
    if rule.epoch is not None and rule.iter is not None and rule.iters_per_epoch is None:
        raise InputError(
            f"{where}: step from epoch and iter needs iters_per_epoch (a number or a field)", parameter="map"
        )
    return rule


def mapping_from_doc(where: str, doc: Any) -> LogMapping:
    """A `LogMapping` from a mapping document (the YAML a user writes; the built-in formats are written so too):

    step: {epoch: epoch, iter: iter, iters_per_epoch: iters}   # or step: iteration
    loss: total_loss
    evals: {coco/bbox_mAP: higher, val_loss: lower}            # key: its direction (higher, lower, auto)
    times: {time: per_step, data_time: data_wait}              # clock, per_step or data_wait
    names: {grad_norm: gnorm}                                  # KEY: SOURCE_NAME, as --map KEY=SOURCE_NAME
    lines: ['^Epoch (?P<epoch>\\d+) .* loss (?P<total_loss>\\S+)']   # text logs: regexes with named groups
    epochs: true                                               # the steps count epochs
    carry: true                                                # a line of the step's fields alone gives them on
    """
    if not isinstance(doc, dict):
        raise InputError(f"{where}: a mapping is an object with {', '.join(_DOC_KEYS)}", parameter="map")
    unknown = [k for k in doc if k not in _DOC_KEYS]
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; a mapping has {', '.join(_DOC_KEYS)}", parameter="map")
    out = LogMapping(epochs=bool(doc.get("epochs", False)), carry=bool(doc.get("carry", False)))
    if doc.get("step") is not None:
        out.step = _step_rule(f"{where}: step", doc["step"])
    names = doc.get("names") or {}
    if not isinstance(names, dict) or len(names) > MAX_NAMES:
        count = f"{len(names):,} names" if isinstance(names, dict) else f"a {type(names).__name__}"
        raise InputError(
            f"{where}: names: {count}; names is a mapping of at most {MAX_NAMES:,} KEY: SOURCE_NAME pairs (the "
            "columns one import takes)",
            parameter="map",
        )
    for key, source in names.items():
        _target_of(str(key))
        out.names[str(source)] = str(key)
    if doc.get("loss") is not None:
        out.names[str(doc["loss"])] = "loss"
    for source, meaning in (doc.get("times") or {}).items():
        if meaning not in _TIME_KEYS:
            raise InputError(
                f"{where}: times.{source}: {meaning!r} is none of {', '.join(_TIME_KEYS)}", parameter="map"
            )
        out.names[str(source)] = _TIME_KEYS[meaning]
    evals = doc.get("evals") or {}
    for source, spec in evals.items() if isinstance(evals, dict) else ((e, None) for e in evals):
        key = _eval_key(str(source))
        if isinstance(spec, dict):
            key, spec = str(spec.get("key", key)), spec.get("direction")
        out.names[str(source)] = key
        direction = _direction(f"{where}: evals.{source}", spec)
        if direction is not None:
            out.directions[key] = direction
    lines = doc.get("lines") or []
    if not isinstance(lines, list) or len(lines) > MAX_LINES:
        raise InputError(f"{where}: lines is a list of at most {MAX_LINES} regexes", parameter="map")
    out.lines = [_bounded_regex(f"{where}: lines[{i}]", str(line)) for i, line in enumerate(lines)]
    if out.step is not None and out.step.field is not None:
        out.names[out.step.field] = "step"
    return out


MAX_NESTED_COUNT = 3
"""The most times a part that repeats without bound may itself be repeated (`(\\d+\\.){3}`): each is one more scan of
the line nested in the others."""


def _bounded_regex(where: str, pattern: str) -> str:
    """`pattern` once it is a regex whose matching time grows at most polynomially with a line's length: a repeat of
    something that can itself repeat (`(a+)+`, `(\\w*\\s?)*`) backtracks exponentially on a line it almost matches (60 s
    on a 41-character line). InputError otherwise. (A bound on the regexes, not an engine without backtracking: the
    text-log reader compiles them with `re`.)"""
    import re
    from re import _parser  # type: ignore[attr-defined]  # the stdlib's own parse: what `re` will run

    try:
        tree = _parser.parse(pattern)
    except re.error as exc:
        raise InputError(f"{where}: {pattern!r} is not a regular expression ({exc})", parameter="map") from None

    def unbounded(items: Any) -> bool:
        """A repeat without bound somewhere in `items` (possessive ones and atomic groups aside)."""
        for op, arg in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT") and (arg[1] == _parser.MAXREPEAT or unbounded(arg[2])):
                return True
            if (name == "SUBPATTERN" and unbounded(arg[-1])) or (
                name == "BRANCH" and any(unbounded(b) for b in arg[1])
            ):
                return True
        return False

    def repeats(items: Any, inside: bool) -> bool:
        """Within `items`: a repeat of variable length, or an alternation, inside a repeat without bound (`inside`),
        or a part that repeats without bound repeated more than `MAX_NESTED_COUNT` times."""
        for op, arg in items:
            name = str(op)
            if name in ("MAX_REPEAT", "MIN_REPEAT"):
                low, high, body = arg
                if inside and low != high:
                    return True
                if high != _parser.MAXREPEAT and high > MAX_NESTED_COUNT and unbounded(body):
                    return True  # (.*a){12}: as many nested scans as the count, n^12 on a line it almost matches
                if repeats(body, inside or high == _parser.MAXREPEAT):
                    return True
            elif name == "SUBPATTERN" and repeats(arg[-1], inside):
                return True
            elif name == "BRANCH" and (inside or any(repeats(branch, inside) for branch in arg[1])):
                return True  # (a|aa)+: the ways to split a line among the branches grow exponentially
        return False  # possessive repeats and atomic groups never backtrack into themselves

    if repeats(tree, False):
        raise InputError(
            f"{where}: {pattern!r} repeats a part that itself repeats or chooses ((a+)+, (\\w*\\s?)*, (a|aa)+, "
            "(.*a){12}), which can take minutes on one line it almost matches; repeat a single part (a+), or make "
            "the repeat possessive ((a+)++) or the group atomic ((?>a|aa)+)",
            parameter="map",
        )
    return pattern


def load_mapping(options: Iterable[str]) -> LogMapping:
    """The mapping of `--map` options: `KEY=SOURCE_NAME` pairs, a mapping file (YAML or JSON, `mapping_from_doc`),
    and the step rule's own keys (`epoch=F`, `iter=F`, `iters_per_epoch=N or F`, `first_epoch=0`); the pairs
    given on the command line win over the file's."""
    from yieldgate.config_files import read_structured_file

    out = LogMapping()
    step: dict[str, Any] = {}
    pairs = []
    for opt in options:
        key, sep, source = opt.partition("=")
        if not sep:
            if not Path(opt).is_file():
                raise InputError(
                    f"map {opt!r}: expected KEY=SOURCE_NAME or a mapping file (YAML); no such file", parameter="map"
                )
            loaded = mapping_from_doc(opt, read_structured_file(opt))
            out.names.update(loaded.names)
            out.directions.update(loaded.directions)
            out.lines += loaded.lines
            out.step, out.epochs = loaded.step or out.step, loaded.epochs or out.epochs
            out.carry = loaded.carry or out.carry
        elif key in _STEP_KEYS[1:]:
            if key in step:
                raise InputError(f"map {key}= is given twice; give it once", parameter="map")
            step[key] = int(source) if source.lstrip("-").isdigit() else source
        else:
            pairs.append(opt)
    if step:
        if "epoch" not in step:
            raise InputError("map iter=/iters_per_epoch=: give epoch=FIELD too", parameter="map")
        out.step = _step_rule("map", step)
    out.names.update(parse_map_options(pairs))
    return out


def computed_step(
    columns: Mapping[str, tuple[np.ndarray, np.ndarray]], rule: StepRule, source: str
) -> tuple[np.ndarray, np.ndarray]:
    """(step, present) of each row by `rule` from its epoch / iteration columns (`StepRule`)."""
    missing = [n for n in (rule.epoch, rule.iter, rule.iters_per_epoch) if isinstance(n, str) and n not in columns]
    if missing:
        raise InputError(
            f"{source}: the mapping's step reads {missing[0]!r}, which the source does not have; it has "
            f"{', '.join(sorted(columns)[:20])}",
            parameter="map",
        )
    assert rule.epoch is not None
    epoch, has_epoch = columns[rule.epoch]
    n = len(epoch)
    if isinstance(rule.iters_per_epoch, str):
        per, has_per = columns[rule.iters_per_epoch]
        per = pd.Series(np.where(has_per, per, np.nan)).ffill().bfill().to_numpy()
    else:
        per = np.full(n, float(rule.iters_per_epoch or 1))
    it, has_it = columns[rule.iter] if rule.iter else (np.zeros(n), np.zeros(n, dtype=bool))
    # no iteration: the end of its epoch, its last iteration (N - 1 where they count from 0)
    it = np.where(has_it, it, per - (1 if has_it.any() and it[has_it].min() == 0 else 0))
    step = (epoch - rule.first_epoch) * per + it
    return step, has_epoch & np.isfinite(step)
