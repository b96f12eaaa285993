"""Text-log formats written as declared mappings (`ingest.mapping.LogMapping`): regexes with named groups (or a
reader of `key: value` pairs) give each line's fields, and the mapping says which is the step and how it is
computed, which field is the loss, which are evaluations and what the time fields mean. A user's mapping file with
`lines` is read by the same code as the built-in formats written so: OpenMMLab's text log (`openmmlab`) and
YOLOv5's headerless `results.txt` (`yolo-txt`), and nanoGPT's console (`nanogpt`).

An evaluation line (OpenMMLab's `Epoch(val)`) is marked with `EVAL_MARK`: its metrics are the run's evaluations,
named `val/<metric>` unless they name their task (`coco/bbox_mAP`), and it lands where its step rule puts it (an
epoch without an iteration: the end of that epoch), or at the step of the training line before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

from yieldgate.errors import InputError
from yieldgate.ingest.mapping import LogMapping
from yieldgate.ingest.textlog.base import LogFormat, Record, number

__all__ = ["EVAL_MARK", "mapped_format", "step_of"]

EVAL_MARK = "_eval"
"""A field set on the records of evaluation lines; not a metric."""

FieldReader = Callable[[str], "dict[str, float] | None"]


def step_of(mapping: LogMapping, fields: dict[str, float], per: float | None) -> float | None:
    """The step of one line's fields by the mapping's step rule (`StepRule`): its step field, or (epoch -
    first_epoch) x N + iteration, N the line's own iterations per epoch or `per` (the last seen); a line with an
    epoch and no iteration is at the end of its epoch. None when the line has neither."""
    rule = mapping.step
    if rule is None:
        return fields.get("step")
    if rule.field is not None:
        return fields.get(rule.field)
    epoch = fields.get(rule.epoch or "")
    if epoch is None:
        return None
    n = rule.iters_per_epoch
    size = fields.get(n, per) if isinstance(n, str) else float(n or 1)
    if size is None:
        return None
    it = fields.get(rule.iter or "", size)
    return (epoch - rule.first_epoch) * size + it


def _regex_reader(patterns: Sequence[str]) -> FieldReader:
    compiled = []
    for p in patterns:
        try:
            compiled.append(re.compile(p))
        except re.error as exc:
            raise InputError(f"mapping lines {p!r}: not a regular expression ({exc})", parameter="map") from None

    def read(line: str) -> dict[str, float] | None:
        for rx in compiled:
            m = rx.search(line)
            if m is not None:
                out = {}
                for name, text in m.groupdict().items():
                    try:
                        out[name] = number(text) if text is not None else None
                    except ValueError:
                        continue  # a group of words (a name, a date): not a value
                return {k: v for k, v in out.items() if v is not None}
        return None

    return read


def mapped_format(
    name: str, about: str, mapping: LogMapping, reader: FieldReader | None = None, note: str = ""
) -> LogFormat:
    """A `LogFormat` that reads lines with the mapping's `lines` (then `reader`) and steps them by its rule."""
    read = _regex_reader(mapping.lines)

    def fields(line: str) -> dict[str, float] | None:
        found = read(line) if mapping.lines else None
        return found if found is not None or reader is None else reader(line)

    counters = {*mapping.step_columns(), "step"}
    context: dict[str, float] = {}  # with `carry`: the step's fields of the last line that held nothing else

    def scan(lines: Sequence[str]) -> Iterator[Record]:
        per: float | None = None
        last: float | None = None
        context.clear()
        for i, line in enumerate(lines):
            values = fields(line)
            if not values:
                continue
            if mapping.carry and values.keys() <= counters:
                context.clear()
                context.update(values)  # `Epoch 3`: the lines after it are of epoch 3
                continue
            if mapping.carry:
                values = {**context, **values}  # a line without the epoch (a metric printed alone): the last named
            size = mapping.step.iters_per_epoch if mapping.step is not None else None
            if isinstance(size, str) and size in values:
                per = values[size]
            step = step_of(mapping, values, per)
            if step is None and values.get(EVAL_MARK):
                step = last  # an evaluation after the training line before it
            if step is None or step < 0 or not float(step).is_integer():
                continue
            last = step
            yield i, 1, {**values, "step": float(step)}

    return LogFormat(name, about, scan=scan, note=note, epochs=mapping.epochs, mapping=mapping)
