"""tqdm's progress bars with values, as a log file keeps them (PyTorch Lightning's and many hand-written loops'):
the step is the batches counted across epochs.

A loop shows its values after the bar (tqdm's postfix, `set_postfix`: `[00:03<00:04, 55.1it/s, loss=0.412]`) or
before it (its description, `set_description`: `Epoch 3 loss: 0.412, acc: 0.91:  42%|████ | 197/469 [...]`); both are
read. A bar that evaluates is told apart from a training bar by its description (`Validation`, `Eval`, `test`), or,
unlabelled, by coming after a training bar that reached its end with a count of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from yieldgate.ingest.stepback import printed_alike
from yieldgate.ingest.stepcount import counter_name, total_name
from yieldgate.ingest.textlog.base import NUM, TIMED, Record, clock_seconds, number
from yieldgate.ingest.textlog.kv import read_pairs

__all__ = ["scan"]

# tqdm's progress bars as a log file keeps them, each refresh after a carriage return: `Epoch 3:  42%|████ | 197/469
# [00:03<00:04, 55.1it/s, loss=0.412, v_num=0]` (PyTorch Lightning), `epoch 1/10: 100%|███| 153/153 [00:03<00:00,
# 44.5it/s, loss=0.783]` (many hand-written loops). The count is the batches of the bar's epoch, the elapsed time
# the bar's own, and the values after the rate its postfix.
_TQDM = re.compile(
    r"^(?P<desc>.*?):?\s*\d{1,3}%\|[^|]*\|\s*(?P<n>\d{1,15})/(?P<total>\d{1,15})\s*"
    r"\[(?P<elapsed>\d+(?::\d+){1,2})<[^,\]]*,[^,\]]*(?:,\s*(?P<post>[^\]]*))?\]"
)
_TQDM_EPOCH = re.compile(r"(?i)\bepoch\s*(?P<epoch>\d+)")
# Counters at the head of a description, joined by `|` (torchtune's `1|512|Loss: 1.0188`: the epoch, then the step),
# or by `/` where three or more (a pair `3/10` is a count and its total): the first is the epoch, the last the step.
_DESC_COUNTERS = re.compile(r"^\s*(?P<chain>\d{1,12}(?:\|\d{1,12})+|\d{1,12}(?:/\d{1,12}){2,})(?:[|/:]\s*|\s+|$)")
_TQDM_EVAL = re.compile(r"(?i)^\s*(?:valid|validation|val|eval|evaluating|evaluation|test|testing)\b")
_LAG = 4  # training refreshes: a second writer's copy of an evaluation bar comes within this many after it
_TQDM_PAIR = re.compile(rf"(?<!\w)(\w+)=((?:{NUM}))(?=,|\s|$)")  # tried once per word


def _alike(a: dict[str, float], b: dict[str, float]) -> bool:
    """The same values, each to the digits of the one printed with fewer (a second writer prints its own)."""
    return a.keys() == b.keys() and all(printed_alike(a[k], b[k]) for k in a)


def _chain(desc: str) -> list[int]:
    """The counters at the head of a description (`_DESC_COUNTERS`), or none."""
    found = _DESC_COUNTERS.match(desc)
    return [int(n) for n in re.split(r"[|/]", found["chain"])] if found is not None else []


def _epoch_of(desc: str) -> int | None:
    """The epoch a description names: `Epoch 3`, or the first of its head's counters (`1|512|`)."""
    found = _TQDM_EPOCH.search(desc)
    if found is not None:
        return int(found["epoch"])
    chain = _chain(desc)
    return chain[0] if chain else None


def _values(m: re.Match[str]) -> dict[str, float]:
    """The bar's values: its description's `name: value` pairs (its epoch and head counters aside) and its postfix's
    `name=value`."""
    desc = _TQDM_EPOCH.sub(" ", _TQDM_EVAL.sub(" ", _DESC_COUNTERS.sub(" ", m["desc"], count=1)))
    pairs = read_pairs(desc, step=False) if ":" in desc or "=" in desc else None
    values = {k: v for k, v in (pairs or {}).items() if not k.startswith("#")}
    if m["post"]:
        values.update((k, number(v)) for k, v in _TQDM_PAIR.findall(m["post"]) if k != "v_num")
    return values


@dataclass
class _Bars:
    """What the scan knows of the bars read so far."""

    epoch: int | None = None
    offset: int = 0  # the batches of the epochs before this bar
    total: int = 0
    before_s: float = 0.0  # the seconds of the epochs before this bar
    elapsed: float = 0.0
    step: int = -1  # the last step read
    ended: bool = False  # the last training bar reached its end
    labelled: bool = False  # the last training bar names its epoch
    last: tuple[int, str] | None = None  # the last (epoch, count) read
    bases: dict[int, float] = field(default_factory=dict)  # a named epoch's seconds before its bar began
    ends: dict[int, float] = field(default_factory=dict)  # the most seconds its bar showed
    shown: dict[str, float] = field(default_factory=dict)  # the values last read of those a bar keeps showing
    validated: dict[str, float] = field(default_factory=dict)  # the values of the last evaluation bar read
    trained: dict[str, float] = field(default_factory=dict)  # the training values of the last training bar read
    recent: dict[tuple[int, str], dict[str, float]] = field(default_factory=dict)  # the last few counts' values
    copies: int = 0  # counts drawn again with their values to other digits: a second writer's bars
    trained_since: int = 0  # training refreshes read since the last evaluation bar's values
    head: tuple[list[int], dict[str, float]] = field(default_factory=lambda: ([], {}))  # the last description's
    # head counters and values

    def evaluates(self, m: re.Match[str]) -> bool:
        """A bar that evaluates: so described, or unlabelled after a training bar's end with a count of its own."""
        if _TQDM_EVAL.match(m["desc"]):
            return True
        labelled = _epoch_of(m["desc"]) is not None
        return self.ended and not labelled and int(m["total"]) != self.total and self.epoch is not None


def scan(lines: Sequence[str]) -> Iterator[Record]:
    """Each refresh of a training bar with values, at step = the batches of the epochs before (each bar's total) plus
    its count, and wall_s = the epochs before's time plus its elapsed time; with the bar's epoch and count as counters
    (`stepcount`: a restart of the epochs is seen there). A value the bar keeps showing (Lightning's `val_loss` until
    the next validation) is read when it changes; an evaluation bar's values at its end are evaluations of the step
    before it."""
    bars = _Bars()
    for i, line in enumerate(lines):
        m = _TQDM.search(line) if "%|" in line else None
        if m is None:
            continue
        pairs = _values(m)
        if not pairs:
            continue
        if bars.evaluates(m):
            # the same validation drawn again with no training between (Lightning), or a second writer's copy
            seen = (pairs == bars.validated and bars.trained_since == 0) or (
                bars.copies > 0 and bars.trained_since <= _LAG and _alike(pairs, bars.validated)
            )
            if bars.step >= 0 and m["n"] == m["total"] and not seen:
                bars.validated, bars.trained_since = pairs, 0
                values = {k if k.startswith("val") else f"val_{k}": v for k, v in pairs.items()}
                if bars.epoch is not None and bars.labelled:
                    values[counter_name("epoch")] = float(bars.epoch)
                yield i, 1, {"step": float(bars.step), **values}
            continue
        yield from _training(i, m, pairs, bars)


def _training(i: int, m: re.Match[str], pairs: dict[str, float], bars: _Bars) -> Iterator[Record]:
    chain = _chain(m["desc"])
    if chain and (chain, pairs) == bars.head:
        return  # the bar moved on before its description did (torchtune's): the same record drawn again
    bars.head = (chain, pairs)
    found = _epoch_of(m["desc"])
    bars.labelled = found is not None
    this = found if found is not None else 0
    lower = bars.last is not None and int(m["n"]) < int(bars.last[1])
    if bars.epoch is not None and (this != bars.epoch or (lower and found is None)):
        # The next epoch's bar, a new fit's, or a bar without an epoch counting from 0 again: counted on. A bar of
        # the same epoch at a lower count is another writer's refresh, or a relaunch's (`stepcount` sees it).
        bars.offset, bars.before_s, bars.last = bars.offset + bars.total, bars.before_s + bars.elapsed, None
    bars.epoch, bars.total, bars.elapsed = this, int(m["total"]), clock_seconds(m["elapsed"])
    bars.ended = m["n"] == m["total"]
    # the bar drawn again at its count (after a validation, at its end): the same values (a second writer's, printed
    # to its own digits, are its own rows: `stepback.second_writer` keeps them once)
    again = (bars.epoch, m["n"]) == bars.last and {k: v for k, v in pairs.items() if not k.startswith("val")} == (
        bars.trained
    )
    bars.last, bars.step = (bars.epoch, m["n"]), bars.offset + int(m["n"])
    bars.trained = {k: v for k, v in pairs.items() if not k.startswith("val")}
    untimed = {k: v for k, v in bars.trained.items() if k not in TIMED}
    before = bars.recent.get(bars.last)
    bars.copies += before is not None and before != untimed and _alike(before, untimed)
    bars.recent = {**dict(list(bars.recent.items())[-7:]), bars.last: untimed}
    wall = bars.before_s + bars.elapsed
    if found is not None:  # a named epoch keeps its own start: a late writer's bar of the epoch before keeps its clock
        if this not in bars.bases:
            bars.bases[this] = max((b + bars.ends[e] for e, b in bars.bases.items()), default=0.0)
        bars.ends[this] = max(bars.ends.get(this, 0.0), bars.elapsed)
        wall = bars.bases[this] + bars.elapsed
    values = {"step": float(bars.step), "wall_s": wall}
    for k, v in pairs.items():
        if (k.startswith("val") and bars.shown.get(k) == v) or (again and not k.startswith("val")):
            continue  # a validation's value still shown since, or the count's training values read already
        bars.shown[k] = v
        values[k] = v
    bars.trained_since += 1
    if len(values) > 2:
        if found is not None:
            values[counter_name("epoch")] = float(this)
        if len(chain) > 1:
            values[counter_name("step")] = float(chain[-1])
        values[counter_name("iter")], values[total_name("iter")] = float(m["n"]), float(m["total"])
        yield i, 1, values
