"""What every text-log format is made of: a `Line` (a regex whose named groups are values), a `LogFormat` (a
trainer's kinds of line, or a reader of its whole log) and the records it reads from a log's lines; and the pieces
the formats share: how loggers print a number, terminal colour codes and launcher ranks stripped from a line.

A value that says it is not yet measured (nanoGPT prints an MFU of -100% until it has five steps) is absent, not a
number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from yieldgate.ingest.mapping import LogMapping

__all__ = [
    "NUM",
    "PER_DEVICE_TOKENS_PER_S",
    "TIMED",
    "BlockReader",
    "Line",
    "LogFormat",
    "Record",
    "clock_seconds",
    "number",
    "strip_ansi",
]

PER_DEVICE_TOKENS_PER_S = "tokens_per_s_per_device"
"""A log's name for one device's tokens/s; the import multiplies it by the device count into `tokens_per_s`."""

# A number as loggers print it: 12, -3.5, .5, 1.5E-04, 1,234,567 (thousands separators), nan, NaN, -inf.
# `\d+(?:\.\d*)?`, not `\d+\.?\d*`: that splits a run of n digits n ways, n^2 steps before a mismatch.
NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf)\b"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RANK = re.compile(r"^(?:\[(?:default|rank)\d+\]:|\d{1,5}: )")

Record: TypeAlias = tuple[int, int, dict[str, float]]
"""(index of the record's first line, lines it took, its values)."""
BlockReader: TypeAlias = Callable[[str, Sequence[str], int], tuple[int, dict[str, float]] | None]
"""(line, lines, its index) -> (lines the block that the line heads took, their values), or None when the line
(`strip_ansi`'d) heads no block."""


def strip_ansi(line: str) -> str:
    """The line without terminal colour codes (TorchTitan, rich and tqdm colour what they print) and without
    the rank a launcher puts before each line (torchrun's `[default0]:`, `[rank0]:`; srun --label's `0: `)."""
    line = _ANSI.sub("", line) if "\x1b" in line else line
    return _RANK.sub("", line, count=1) if line[:1] in "[0123456789" and line else line


def number(text: str) -> float:
    """A number as `NUM` matched it (`1,234.5` is 1234.5)."""
    return float(text.replace(",", ""))


def clock_seconds(clock: str) -> float:
    """`01:02:03` or `02:03` (a progress bar's elapsed time) in seconds."""
    seconds = 0.0
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


@dataclass(frozen=True)
class Line:
    """One kind of line: a regex whose named groups are values. `names` renames a group (a regex group
    cannot hold `/`), `scale` converts its unit; a group left out of the match is absent."""

    regex: str
    names: Mapping[str, str] = field(default_factory=dict)
    scale: Mapping[str, float] = field(default_factory=dict)

    def read(self, line: str) -> dict[str, float] | None:
        """The line's values, or None when the regex does not match it."""
        m = re.search(self.regex, line)
        if m is None:
            return None
        out = {}
        for group, text in m.groupdict().items():
            if text is not None:
                out[self.names.get(group, group)] = number(text) * self.scale.get(group, 1.0)
        return out


def _printed_alike(
    a: Mapping[str, float], b: Mapping[str, float], skip: Collection[str] = (), places: Mapping[str, int] | None = None
) -> bool:
    """Whether two records hold the same values (those in `skip` aside), each to the digits of the one printed with
    fewer, and at least to its name's `places` (`stepback.printed_places`)."""
    from yieldgate.ingest.stepback import printed_alike

    keys = a.keys() - set(skip)
    return keys == b.keys() - set(skip) and all(printed_alike(a[k], b[k], (places or {}).get(k, 0)) for k in keys)


_LAG = 8  # records: a second writer's copy of a record comes within this many after it


@dataclass
class _Seen:
    """What the reading of a log's records remembers: the epoch a line said begins (`carried`), the furthest step
    reached since the steps last went back to a record that is no copy of a recent one (a restart; a stepless record,
    an evaluation, is at it: a second writer's copies of the steps before may come between), and the last few
    records, whose copies a second writer prints a little later."""

    carried: dict[str, float] = field(default_factory=dict)
    reach: float | None = None  # the furthest step of this attempt: a stepless record is at it
    count: int = 0
    copies: int = 0  # records seen to be copies of a recent one: a second writer's
    stepless: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    recent: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    printed: dict[str, list[float]] = field(default_factory=dict)  # the stepless records' values, by name

    def copied(self, values: dict[str, float]) -> bool:
        """Whether a stepless record repeats one of the last few (a second writer's copy); else remember it."""
        from yieldgate.ingest.stepback import printed_places

        for k, v in values.items():
            self.printed.setdefault(k, []).append(v)
        # the places each name is printed to, once a few show it (the first copies are told by their digits alone)
        places = {k: printed_places(np.array(v)) if len(v) >= 4 else 0 for k, v in self.printed.items()}
        if self.copies and any(
            self.count - n <= _LAG and _printed_alike(values, b, (), places) for n, b in self.stepless
        ):
            return True  # (only where a second writer showed itself: a copy of a record with a step)
        self.stepless = [(self.count, dict(values)), *self.stepless[:3]]
        return False

    def record(self, values: dict[str, float]) -> dict[str, float]:
        """`values` as the record read, with the carried epoch where they print none: a second writer's copy of a
        record of the epoch before, printed after the line that began the next, keeps its epoch."""
        self.count += 1
        copy = next((b for n, b in self.recent if self.count - n <= _LAG and _printed_alike(values, b, TIMED)), None)
        step = values["step"]
        self.copies += copy is not None
        if self.reach is None or (step < self.reach and copy is None):
            self.reach = step  # the steps go back, not to a copy of a step before: a restart
        self.reach = max(self.reach, step)
        out = values
        if self.carried and "#epoch" not in values:
            out = {**values, **self.carried}
            if copy is not None and "#epoch" in copy:
                out["#epoch"] = copy["#epoch"]
        self.recent = [(self.count, out), *self.recent[: _LAG - 1]]
        return out


_STEPLESS = "_stepless"  # set by `LogFormat.read` on values it gave the step of the record before

# What a writer times for itself, by the names the readers give it: a copy of a record differs in these.
TIMED = ("step_s", "step_time", "time", "data_time", "wall_s", "timestamp", "#epoch", "#epoch/total")


@dataclass(frozen=True)
class LogFormat:
    """One trainer's log: its kinds of line, tried in order, and `reader` last."""

    name: str
    """Its `--format` name."""
    about: str
    """Who prints it, and a line of it."""
    lines: Sequence[Line] = ()
    """Its kinds of line, each read by a regex."""
    reader: Callable[[str], dict[str, float] | None] | None = None
    """A reader for formats a regex per line cannot express (pairs in any order)."""
    blocks: BlockReader | None = None
    """Also read blocks: a head line with the step, then lines of values (OLMo's `[step=N/M]`, `kv.read_block`)."""
    scan: Callable[[Sequence[str]], Iterator[Record]] | None = None
    """A reader of the whole log instead of `lines` and `reader`, for a format whose lines take their step from
    lines before them (Keras' `Epoch 3/10` headers)."""
    note: str = ""
    """What an import of this format says about its steps (`steps count epochs`), when that needs saying."""
    ahead: bool = False
    """Lines without a step belong to the step printed next (build-nanogpt evaluates before it prints the step's
    line), not to the one before."""
    epochs: bool = False
    """Its steps count epochs (one line per epoch), not optimizer steps."""
    mapping: LogMapping | None = None
    """The declared mapping the format is written as (`textlog.mapped`): its names, directions and step rule."""
    context: Callable[[str], dict[str, float] | None] | None = None
    """A reader of lines that only say which epoch begins (`Epoch 3/10`): the counters they give the records after
    them that print none (`kv.context`)."""

    def records(self, lines: Sequence[str]) -> Iterator[Record]:
        """(index of the record's first line, lines it took, values) of each record in `lines`.

        A reader's values without a step (Megatron's evaluation "at the end of training") belong to the step
        of the record before them; with none before, the line is not read."""
        if self.scan is not None:
            yield from self.scan([strip_ansi(line) for line in lines])
            return
        i, last = 0, None
        counters: dict[str, float] = {}  # the counters of the record before (`read`)
        pending: list[tuple[int, dict[str, float]]] = []  # stepless values waiting for the next step (`ahead`)
        seen = _Seen()
        begun = False  # a line began an epoch after the last record: a stepless block after it is of that epoch
        while i < len(lines):
            line = strip_ansi(lines[i])
            if self.context is not None and (found := self.context(line)) is not None:
                seen.carried, begun = found, True
                i += 1
                continue
            block = self.blocks(line, lines, i) if self.blocks is not None else None
            if block is not None:
                n, values = block
                if "step" not in values and values and begun and "#epoch" in seen.carried:
                    values["step"] = seen.carried["#epoch"]  # a block of an epoch's values after the line began it
                if "step" not in values and values and seen.reach is not None:
                    if seen.copied(values):
                        i += n
                        continue  # the same stepless record again: a second writer's
                    values["step"] = seen.reach  # an evaluation's block after the step it evaluates
                if n > 1 and "step" in values:
                    begun = False
                    yield i, n, seen.record(values)
                i += n
                continue
            read = self.read(line, None if self.ahead else last, counters)
            if (
                read is not None
                and read.pop(_STEPLESS, 0.0)
                and seen.copied({k: v for k, v in read.items() if k != "step" and not k.startswith("#")})
            ):
                i += 1
                continue  # the same stepless record again: a second writer's
            if read is not None:
                begun = False
                last, counters = read["step"], {k: v for k, v in read.items() if k.startswith("#")}
                for j, held in pending:
                    yield j, 1, {**held, "step": last}
                pending = []
                yield i, 1, seen.record(read)
            elif self.ahead and (stepless := self._stepless(line)):
                pending.append((i, stepless))
            i += 1

    def _stepless(self, line: str) -> dict[str, float] | None:
        """The values of a line of this format that carries no step."""
        return next((values for kind in self.lines if (values := kind.read(line)) and "step" not in values), None)

    def read(
        self, line: str, last_step: float | None = None, counters: Mapping[str, float] | None = None
    ) -> dict[str, float] | None:
        """The line's values with a whole `step`, or None when the line is not one of this format's.
        `last_step` is the step of values that a reader returns without one, `counters` (the `#` counters of the
        record before, `stepcount`) what places them as it was placed."""
        readers = [kind.read for kind in self.lines] + ([self.reader] if self.reader is not None else [])
        for read in readers:
            values = read(line)
            if values is not None and "step" not in values and last_step is not None:
                values = {**(counters or {}), **values, "step": last_step, _STEPLESS: 1.0}
            step = values.get("step", -1.0) if values is not None else -1.0
            if values is not None and step >= 0 and step.is_integer():
                if values.get("mfu", 0.0) < 0:  # nanoGPT's placeholder before it has measured anything
                    del values["mfu"]
                return values
        return None
