"""What every text-log format is made of: a `Line` (a regex whose named groups are values), a `LogFormat` (a
trainer's kinds of line, or a reader of its whole log) and the records it reads from a log's lines; and the pieces
the formats share: how loggers print a number, terminal colour codes and launcher ranks stripped from a line.

A value that says it is not yet measured (nanoGPT prints an MFU of -100% until it has five steps) is absent, not a
number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from yieldgate.ingest.mapping import LogMapping

__all__ = [
    "NUM",
    "PER_DEVICE_TOKENS_PER_S",
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

    def records(self, lines: Sequence[str]) -> Iterator[Record]:
        """(index of the record's first line, lines it took, values) of each record in `lines`.

        A reader's values without a step (Megatron's evaluation "at the end of training") belong to the step
        of the record before them; with none before, the line is not read."""
        if self.scan is not None:
            yield from self.scan([strip_ansi(line) for line in lines])
            return
        i, last = 0, None
        pending: list[tuple[int, dict[str, float]]] = []  # stepless values waiting for the next step (`ahead`)
        while i < len(lines):
            line = strip_ansi(lines[i])
            block = self.blocks(line, lines, i) if self.blocks is not None else None
            if block is not None:
                n, values = block
                if n > 1:
                    last = values["step"]
                    yield i, n, values
                i += n
                continue
            read = self.read(line, None if self.ahead else last)
            if read is not None:
                last = read["step"]
                for j, waiting in pending:
                    yield j, 1, {**waiting, "step": last}
                pending = []
                yield i, 1, read
            elif self.ahead and (stepless := self._stepless(line)):
                pending.append((i, stepless))
            i += 1

    def _stepless(self, line: str) -> dict[str, float] | None:
        """The values of a line of this format that carries no step."""
        return next((values for kind in self.lines if (values := kind.read(line)) and "step" not in values), None)

    def read(self, line: str, last_step: float | None = None) -> dict[str, float] | None:
        """The line's values with a whole `step`, or None when the line is not one of this format's.
        `last_step` is the step of values that a reader returns without one."""
        readers = [kind.read for kind in self.lines] + ([self.reader] if self.reader is not None else [])
        for read in readers:
            values = read(line)
            if values is not None and "step" not in values and last_step is not None:
                values["step"] = last_step
            step = values.get("step", -1.0) if values is not None else -1.0
            if values is not None and step >= 0 and step.is_integer():
                if values.get("mfu", 0.0) < 0:  # nanoGPT's placeholder before it has measured anything
                    del values["mfu"]
                return values
        return None
