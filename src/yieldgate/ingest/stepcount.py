"""The step of a log that counts in two places: an epoch counter and, beside it, a counter within the epoch (and
perhaps a printed global step).

Trainers print progress as pairs (`Epoch [3/300] Iter [50/390]`, `[3/300][50/390]`, `Step: 50/390, Epoch: 3/300`,
`STEP: 24/406 -- GLOBAL_STEP: 25`) or as columns (`epoch`, `iter`). Taken alone, the counter within the epoch
starts again at every epoch: read as the step it makes every epoch boundary a restart and every epoch's records
overwrite the one before. The structure tells the counters apart, not their names: **a counter that resets while a
companion rises is the inner one**. The step is then the printed global step where there is one (a counter that
runs on through the epochs), else `start(E) + I`, where `start` of the first epoch is `(E - E0) x N` and each epoch
adds its own number of iterations `N` (its counter's printed total, or its largest count): `N` may change after a
resume (the loader shrank by one). A record with an epoch and no count (an evaluation after the epoch) is at the
epoch's last step.

A reader marks a counter it found in a progress pair or a block's head as `#<label>` (and its total as
`#<label>/total`); plain `epoch`, `step`, `iter` columns take part too. `#` columns are never metrics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.stepback import TIMING, printed_places, same_as_printed

__all__ = [
    "COUNTER",
    "StepReading",
    "counter_name",
    "counts_only",
    "cumulative_beside",
    "infer_step",
    "is_counter",
    "total_name",
]

COUNTER = "#"
"""The first character of a column a reader found as a counter (`#epoch`, `#iter/total`, `#1`): not a metric."""
_TOTAL = "/total"
_EPOCHS = {"epoch", "ep", "epochs"}
_GLOBALS = {"global_step", "globalstep", "global", "gstep", "total_step", "global_iter", "global_iteration"}
# Plain columns that may be a counter beside an epoch (a table's `epoch`, `iter`; a text line's `step: 50`).
_PLAIN = ("epoch", "step", "iter", "iteration", "it", "batch", "global_step")
_MAX_EPOCHS = 10**6  # a span of epoch numbers past this is no epoch counter

Column = tuple[np.ndarray, np.ndarray]


def counter_name(label: str) -> str:
    """The column of a counter labelled `label` (`Global step` -> `#global_step`; a position `1` -> `#1`)."""
    return COUNTER + re.sub(r"[\s-]+", "_", label.strip().lower())


def total_name(label: str) -> str:
    """The column of that counter's printed total."""
    return counter_name(label) + _TOTAL


def is_counter(name: str) -> bool:
    return name.startswith(COUNTER)


def counts_only(names: Iterable[str]) -> list[str] | None:
    """The names, when every one is a counter (a step, an epoch, a batch, a count a reader marked) and none a value
    of training; else None."""
    names = list(names)
    counted = [n for n in names if is_counter(n) or n.lower() in (*_PLAIN, "steps", "epochs", "global_iter", "total")]
    return counted if len(counted) == len(names) else None


@dataclass
class StepReading:
    """The step of each row as the counters give it, and how it was read (for the import's notes)."""

    step: np.ndarray
    present: np.ndarray
    how: str
    """`the printed global step (#global_step)`, `step = (epoch - 1) x 390 + iter ...`."""
    used: list[str] = field(default_factory=list)
    """The counter columns combined."""


@dataclass
class _Counter:
    name: str
    label: str
    values: np.ndarray
    present: np.ndarray
    total: np.ndarray | None  # the printed total where printed (NaN elsewhere)


def _shown(c: _Counter) -> str:
    """A counter as the log names it: `epoch`, `iter`, or a position (`the 2nd bracketed count`)."""
    if not is_counter(c.name):
        return c.name
    label = c.name[len(COUNTER) :]
    return f"the bracketed count #{label}" if label.isdigit() else label


def _whole(values: np.ndarray, present: np.ndarray) -> bool:
    v = values[present]
    return len(v) > 0 and bool(np.isfinite(v).all()) and bool((v == np.round(v)).all()) and bool((v >= 0).all())


def _align_positions(columns: MutableMapping[str, Column]) -> None:
    """Unlabelled pairs by their totals, not their places: a line with fewer pairs than the others (an evaluation's
    `[3/300]` beside training's `[50/390][3/300]`) has its pair in the place whose total it shows."""
    places = sorted(int(n[1:]) for n in columns if is_counter(n) and n[1:].isdigit())
    if len(places) < 2:
        return
    totals = {p: columns[total_name(str(p))] for p in places}
    full = np.logical_and.reduce([totals[p][1] for p in places])
    if not full.any():
        return
    usual = {p: float(pd.Series(totals[p][0][full]).mode().iloc[0]) for p in places}
    for p in places:
        for q in places:
            if q == p or usual[q] == usual[p]:
                continue
            values, present = columns[counter_name(str(p))]
            of, _ = totals[p]
            moved = present & ~full & (of == usual[q]) & ~columns[counter_name(str(q))][1]
            if moved.any():
                for name in (counter_name, total_name):
                    src, dst = columns[name(str(p))], columns[name(str(q))]
                    columns[name(str(q))] = (np.where(moved, src[0], dst[0]), dst[1] | moved)
                    columns[name(str(p))] = (src[0], src[1] & ~moved)


def _gather(columns: MutableMapping[str, Column]) -> list[_Counter]:
    """The counters among `columns`: those a reader marked (`#...`) where there are any, else the plain columns that
    may be counters (a table's `epoch`, `iter`)."""
    _align_positions(columns)
    out = []
    marked = any(is_counter(name) for name in columns)
    for name, (values, present) in columns.items():
        if name.endswith(_TOTAL) and is_counter(name):
            continue
        if is_counter(name):
            label = name[len(COUNTER) :]
        elif name.lower() in _PLAIN and not marked:
            label = name.lower()
        else:
            continue
        if not _whole(values, present):
            continue
        total = columns.get(name + _TOTAL) if is_counter(name) else None
        totals = np.where(total[1], total[0], np.nan) if total is not None else None
        out.append(_Counter(name, label, values, present, totals))
    return out


def _changes(c: _Counter) -> float:
    """The share of consecutive rows (where it is printed) at which the counter changes."""
    v = c.values[c.present]
    return float(np.mean(np.diff(v) != 0)) if len(v) > 1 else 0.0


def _outer(counters: Sequence[_Counter]) -> _Counter | None:
    """The epoch counter: one labelled so (a pair's before a plain column's); else, of counters printed as unlabelled
    pairs, the one that changes least often."""
    epochs = [c for c in counters if c.label in _EPOCHS]
    if epochs:
        return min(epochs, key=lambda c: not is_counter(c.name))
    positional = [c for c in counters if c.label.isdigit()]
    if len(positional) >= 2:
        return min(positional, key=_changes)
    return None


def _resets_with(c: _Counter, outer: _Counter) -> bool | None:
    """Whether `c` starts again when the epoch rises (True: an inner counter, which does not rise there), runs on
    through it (False: a global step), or neither can be told (None: no epoch rises between rows that print both)."""
    both = np.nonzero(c.present & outer.present)[0]
    if len(both) < 2:
        return None
    inner, epoch = c.values[both], outer.values[both]
    rises = np.diff(epoch) > 0
    if not rises.any():
        return None
    stays = np.diff(inner) <= 0  # back to the start, or at its count again (one line an epoch)
    return bool(stays[rises].sum() * 2 >= rises.sum())


def _copies(columns: Mapping[str, Column], rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Of `rows` (their (epoch, count) `keys`), those that repeat an earlier one's counts with every value that is not
    a writer's own timing equal as printed: a second writer's copies (`stepback`), which say nothing new of an epoch's
    size and whose lag would look like a restart. (`_originals` says which row each copies.)"""
    return _originals(columns, rows, keys) >= 0


def _originals(columns: Mapping[str, Column], rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each of `rows`, the position in `rows` of the earlier row it copies (`_copies`), or -1."""
    from yieldgate.aliases import guess

    values = [
        np.where(p, v, np.nan)[rows]
        for name, (v, p) in columns.items()
        if not is_counter(name) and name.lower() not in _PLAIN and guess(name).key not in TIMING
    ]
    places = [printed_places(v) for v in values]
    seen: dict[tuple[int, int], list[int]] = {}
    out = np.full(len(rows), -1, dtype=np.int64)
    for j, key in enumerate(map(tuple, keys.tolist())):
        for k in seen.get(key, ()):
            if all(same_as_printed(v[j : j + 1], v[k : k + 1], d)[0] for v, d in zip(values, places, strict=True)):
                out[j] = k
                break
        else:
            seen.setdefault(key, []).append(j)
    return out


def _attempts(epoch: np.ndarray, count: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """The attempt (0, 1, ...) each row belongs to: a new one begins where the (epoch, count) goes back (a restart or
    a new launch), a second writer's copies aside (each in the attempt of the row before it)."""
    return np.cumsum(
        np.r_[False, (np.diff(epoch) < 0) | ((np.diff(epoch) == 0) & (np.diff(count) <= 0))]
        if not copies.any()
        else _restarts_past_copies(epoch, count, copies)
    )


def _last_attempt(epoch: np.ndarray, count: np.ndarray, copies: np.ndarray) -> dict[int, np.ndarray]:
    """Per epoch, the indices of its rows in the last attempt that ran it."""
    attempt = _attempts(epoch, count, copies)
    last: dict[int, np.ndarray] = {}
    for e in np.unique(epoch).tolist():
        mine = (epoch == e) & ~copies
        if mine.any():
            last[int(e)] = np.nonzero(mine & (attempt == attempt[mine].max()))[0]
    return last


def _restarts_past_copies(epoch: np.ndarray, count: np.ndarray, copies: np.ndarray) -> np.ndarray:
    """Where a new attempt begins, comparing each row with the last row before it that is not a copy."""
    out = np.zeros(len(epoch), dtype=bool)
    prev: int | None = None
    for j in range(len(epoch)):
        if copies[j]:
            continue
        if prev is not None and (epoch[j], count[j]) <= (epoch[prev], count[prev]):
            out[j] = True
        prev = j
    return out


def _sizes(
    outer: _Counter, inner: _Counter, train: np.ndarray, base: int, copies: np.ndarray, source: str
) -> tuple[np.ndarray, dict[int, dict[int, int]], str]:
    """The attempt of each row with both counters (`_attempts`), the iterations of each epoch each attempt saw (its
    printed total on that attempt's lines: a relaunch may print another, its loader one batch shorter; else, where
    the next epoch's counts shift the logging grid, the size that shift gives (`_shifted_size`); else its largest
    count there), and how they were told (`printed`, `shifted`, `largest`). Without totals, an epoch's largest count
    is its size only where its last iteration is logged: where every epoch ends on the logging interval's grid, that
    cannot be told, and the reading is refused. `copies`: which of the rows with both counters a second writer wrote."""
    rows = np.nonzero(train)[0]
    epoch = outer.values[rows].astype(np.int64)
    count = inner.values[rows].astype(np.int64)
    totals = inner.total[rows] if inner.total is not None else None
    printed = totals is not None and bool(np.isfinite(totals).any())
    attempt = _attempts(epoch, count, copies)
    sizes: dict[int, dict[int, int]] = {}
    for a in np.unique(attempt[~copies]).tolist():
        mine = (attempt == a) & ~copies
        for e in np.unique(epoch[mine]).tolist():
            at = np.nonzero(mine & (epoch == e))[0]
            known = totals[at][np.isfinite(totals[at])] if totals is not None else np.empty(0)
            sizes.setdefault(a, {})[e] = int(known[-1]) if len(known) else int(count[at].max()) + 1 - base
    if not printed:
        runs = [np.unique(count[at]) for at in _last_attempt(epoch, count, copies).values()]
        k, told = _interval(runs, base), "largest"
        for a, mine in sizes.items():
            for e in [e for e in mine if e + 1 in mine]:
                this, after = (count[(attempt == a) & ~copies & (epoch == n)] for n in (e, e + 1))
                if k is not None and (shifted := _shifted_size(this, after, k)) is not None:
                    mine[e], told = shifted, "shifted"
        _refuse_unknown_sizes(outer, inner, runs, base, source, int(outer.values[outer.present].min()))
        return attempt, sizes, told
    return attempt, sizes, "printed"


def _shifted_size(counts: np.ndarray, after: np.ndarray, k: int) -> int | None:
    """The size of an epoch logged on a cadence that runs on through the epochs (every `k` iterations of the run, not
    of the epoch: pytorch-CycleGAN prints where its total count is a multiple of the interval): the next epoch's counts
    sit on another grid, and its first log comes `k` iterations after this epoch's last, so the epoch had `k + last -
    first` (its counts' last, the next's first) iterations. None where the grid does not shift (a cadence within each
    epoch, or an epoch a multiple of `k`: its size stays its largest count)."""
    grids = {int(c) % k for c in counts.tolist()}, {int(c) % k for c in after.tolist()}
    if k < 2 or len(grids[0]) != 1 or len(grids[1]) != 1 or grids[0] == grids[1] or not 0 < after.min() < k:
        return None
    return k + int(counts.max()) - int(after.min())


def _starts(sizes: dict[int, dict[int, int]], e0: int) -> dict[int, dict[int, int]]:
    """Per attempt, the first step of each epoch it ran (and of the two after): it begins where the run it resumed
    had that epoch begin (a new launch at the first epoch: step 0), and each epoch adds its own size in this
    attempt (an epoch it did not log the size of the one before). An abandoned launch's steps are counted with its
    own sizes, not the relaunch's."""
    timeline: dict[int, int] = {}
    out: dict[int, dict[int, int]] = {}
    for a, mine in sorted(sizes.items()):
        epochs = sorted(mine)
        size = mine[epochs[0]]
        at = timeline.get(epochs[0], (epochs[0] - e0) * size)
        starts: dict[int, int] = {}
        for e in range(epochs[0], epochs[-1] + 3):
            size = mine.get(e, size)
            starts[e], at = at, at + size
        out[a] = starts
        timeline = {e: s for e, s in timeline.items() if e < epochs[0]} | starts
    return out


def _interval(runs: list[np.ndarray], base: int) -> int | None:
    """The logging interval of the counts within epochs: the most common gap between an epoch's counts before its
    last (from the epoch's start where it counts from 1), else between all its counts; None with one count an epoch."""
    before_last = [np.diff(np.r_[[0] if base else [], r[:-1]]) for r in runs]
    gaps = np.concatenate(before_last) if before_last else np.empty(0)
    if not len(gaps):
        gaps = np.concatenate([np.diff(r) for r in runs])
    if not len(gaps):
        return None
    values, counts = np.unique(gaps.astype(np.int64), return_counts=True)
    return int(values[np.argmax(counts)])


def _refuse_unknown_sizes(
    outer: _Counter, inner: _Counter, runs: list[np.ndarray], base: int, source: str, first: int
) -> None:
    """Refuse where the logging interval is more than one and every epoch's last count is on its grid: whether the
    epoch's last iteration was logged, and so how many it has, cannot be told (`runs`: each epoch's counts)."""
    k = _interval(runs, base)
    ends = np.array([int(r.max()) for r in runs])
    if k is not None:
        inside = np.concatenate([r[:-1] for r in runs]).astype(np.int64)  # the counts before each epoch's last
        grid = int(np.bincount(inside % k).argmax()) if len(inside) else int(ends[0] % k)
        if k == 1 or not (ends % k == grid).all():
            return
    every = f", logged every {k}," if k is not None else ", logged once an epoch,"
    raise InputError(
        f"{source}: {_shown(inner)} counts the iterations within each epoch ({_shown(outer)}){every} and every epoch's "
        f"last count is on that grid ({', '.join(map(str, sorted(set(ends.tolist()))[:3]))}): whether its last "
        f"iteration was logged, and so how many an epoch has, cannot be told; give it: map epoch={_shown(outer)} "
        f"map iter={_shown(inner)} map iters_per_epoch=N" + (" map first_epoch=0" if first == 0 else ""),
        parameter="map",
    )


def _nested(outer: _Counter, inner: _Counter, columns: Mapping[str, Column], source: str) -> StepReading:
    """step = start(E) + I on rows with both (a second writer's copy at its original's step); an epoch's last step on
    rows with the epoch only."""
    train = outer.present & inner.present
    rows = np.nonzero(train)[0]
    base = 0 if inner.values[train].min() == 0 else 1
    e0 = 0 if int(outer.values[outer.present].min()) == 0 else 1
    original = _originals(columns, rows, np.c_[outer.values[rows], inner.values[rows]].astype(np.int64))
    copies = original >= 0
    attempt, sizes, told = _sizes(outer, inner, train, base, copies, source)
    printed = told == "printed"
    epochs = sorted({e for mine in sizes.values() for e in mine})
    if epochs[-1] - epochs[0] > _MAX_EPOCHS:
        raise InputError(f"{source}: {outer.name} spans {epochs[0]}-{epochs[-1]}: not an epoch counter")
    starts = _starts(sizes, e0)
    step = np.full(len(train), np.nan)
    own = [starts.get(int(a), starts[max(starts)]) for a in attempt.tolist()]
    step[rows] = [s[int(e)] + i for s, e, i in zip(own, outer.values[rows], inner.values[rows], strict=True)]
    step[rows[copies]] = step[rows[original[copies]]]
    alone = np.nonzero(outer.present & ~inner.present)[0]
    if len(alone) and printed:
        before = np.maximum(np.searchsorted(rows, alone) - 1, 0)  # the attempt of the row before each
        for i, k in zip(alone.tolist(), before.tolist(), strict=True):
            of = starts.get(int(attempt[k]), starts[max(starts)])
            e = int(outer.values[i])
            step[i] = of[e + 1] - 1 + base if e + 1 in of else np.nan
    elif len(alone):
        _epoch_ends(step, outer.values, rows[~copies], alone)
    sizes_seen = {size for mine in sizes.values() for size in mine.values()}
    epoch, count = _shown(outer), _shown(inner)
    first = f"({epoch} - {e0})" if e0 else epoch
    sized = f"{next(iter(sizes_seen))}" if len(sizes_seen) == 1 else "each epoch's own count"
    how = (
        f"step = {first} x {sized} + {count}: {count} starts again as {epoch} rises"
        + {
            "printed": " (an epoch's size: its printed total)",
            "shifted": " (an epoch's size: where the next epoch's logs shift the grid, the logging cadence runs on "
            "through the epochs and the shift gives it; else its largest count)",
            "largest": " (an epoch's size: its largest count)",
        }[told]
        + ("; a record with the epoch alone is at its last step" if len(alone) else "")
    )
    return StepReading(step, np.isfinite(step), how, [outer.name, inner.name])


def _epoch_ends(step: np.ndarray, epoch: np.ndarray, trained: np.ndarray, alone: np.ndarray) -> None:
    """Place the rows with an epoch alone (an evaluation after it) at the furthest step of that epoch logged before
    the row since the epoch last began again (a restart; `trained`: the rows with both counters, a second writer's
    copies left out). (With printed sizes, `_nested` places them at their epoch's last step.)"""
    reached: dict[int, float] = {}
    order = np.argsort(np.r_[trained, alone], kind="stable")
    is_trained = np.r_[np.ones(len(trained), bool), np.zeros(len(alone), bool)][order]
    for i, was_trained in zip(np.r_[trained, alone][order].tolist(), is_trained.tolist(), strict=True):
        e = int(epoch[i])
        if not was_trained:
            step[i] = reached.get(e, np.nan)
        elif reached and (e < max(reached) or step[i] <= reached.get(e, -1.0)):
            reached = {e: step[i]}  # the counters go back: a restart, whose epochs are done again
        else:
            reached[e] = step[i]


def _global(glob: _Counter, outer: _Counter | None, columns: Mapping[str, Column]) -> StepReading:
    """The printed global step; a row with the epoch alone is at the furthest step of its epoch logged before it
    (`_epoch_ends`)."""
    step = np.where(glob.present, glob.values, np.nan)
    if outer is not None:
        alone = np.nonzero(outer.present & ~glob.present)[0]
        if len(alone):
            rows = np.nonzero(glob.present & outer.present)[0]
            copies = _copies(columns, rows, np.c_[glob.values[rows]].astype(np.int64))
            _epoch_ends(step, outer.values, rows[~copies], alone)
    used = [glob.name] + ([outer.name] if outer is not None else [])
    return StepReading(step, np.isfinite(step), f"the printed global step ({_shown(glob)})", used)


def _companion(columns: Mapping[str, Column], counters: Sequence[_Counter]) -> _Counter | None:
    """An epoch counter under another name: a column of whole numbers that rises by one exactly where a step counter
    starts again, and stays as it is in between (a relaunch's clock or a cumulative count changes on every row)."""
    for c in counters:
        rows = np.nonzero(c.present)[0]
        resets = np.diff(c.values[rows]) < 0
        if resets.sum() < 2:
            continue
        for name, (values, present) in columns.items():
            if name == c.name or is_counter(name) or not present[rows].all() or not _whole(values, present):
                continue
            moves = np.diff(values[rows])
            if (moves[resets] == 1).mean() >= 0.9 and (moves[~resets] == 0).mean() >= 0.99:
                return _Counter(name, "epoch", values, present, None)
    return None


# The words of a column's name that say it counts steps (`steps_done`, `total_timesteps`, `env_steps`, `num_updates`)
_STEP_WORDS = {
    "step",
    "steps",
    "timestep",
    "timesteps",
    "update",
    "updates",
    "iteration",
    "iterations",
    "iter",
    "iters",
}
_PER_ROW = 0.9  # the share of rows at which a counter rises by one for it to count the rows


def cumulative_beside(columns: Mapping[str, Column], chosen: str) -> str | None:
    """A column named as a count of steps (`steps_done`) that rises beside `chosen`, a counter that rises by one a row
    (an RL trainer's `episode`, a table's `epoch`), by more than one somewhere and never falls: the steps the rows
    stand for, counted on; of several, the one that reaches least far (the finest). None where there is none."""
    values, present = columns[chosen]
    rows = np.nonzero(present)[0]
    if len(rows) < 3 or np.mean(np.diff(values[rows]) == 1) < _PER_ROW:
        return None
    found: tuple[float, str] | None = None
    for name, (other, has) in columns.items():
        if name == chosen or not set(re.split(r"[\W_]+", name.lower())) & _STEP_WORDS:
            continue
        if not has[rows].all() or not _whole(other, has):
            continue
        rise = np.diff(other[rows])
        if (rise < 0).any() or np.mean(rise > 0) < _PER_ROW or not (rise > 1).any():
            continue
        if found is None or other[rows[-1]] < found[0]:
            found = (float(other[rows[-1]]), name)
    return found[1] if found is not None else None


def infer_step(columns: MutableMapping[str, Column], source: str) -> StepReading | None:
    """The step of each row where counters nest (an epoch and a counter within it); None where they do not (one
    step counter, or none: the reader's step stands). The `#` counter columns are taken out of `columns`."""
    counters = _gather(columns)
    for name in [n for n in columns if is_counter(n)]:
        del columns[name]
    outer = _outer(counters) or _companion(columns, counters)
    if outer is None:
        return None
    # a counter never printed on a record with the epoch is not counted within it (WS-DAN's `[0/250]` on its own
    # lines, the epoch on others): no nesting can be read from the two
    others = [c for c in counters if c is not outer and c.label not in _EPOCHS and (c.present & outer.present).any()]
    labelled = [c for c in others if c.label in _GLOBALS]
    if labelled:
        return _global(labelled[0], outer, columns)
    verdicts = [(c, _resets_with(c, outer)) for c in others]
    inner = [c for c, v in verdicts if v or (v is None and c.total is not None)]
    runs_on = [c for c, v in verdicts if v is False or (v is None and c.total is None)]
    if runs_on:
        return _global(max(runs_on, key=lambda c: int(c.present.sum())), outer, columns)
    if inner:
        return _nested(outer, max(inner, key=lambda c: int(c.present.sum())), columns, source)
    return None
