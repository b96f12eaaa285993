"""A generator of training logs (issue 45): one synthetic run rendered in many shapes, and what a right reading of
it holds.

The run: epochs of `iters` iterations, a training line every `interval` iterations and at each epoch's last one,
an evaluation after each complete epoch (a validation loss that falls, an accuracy that rises), and, where the shape
says, a restart (from the checkpoint at an epoch's end, or a fresh launch from step 0 after a few steps) after which
the loader may have shrunk by one batch (the crash comes after two logged lines at least: after one, the
relaunch's first line repeats its step, a step logged again that no reader can tell from a restart), and a second
writer appending the same records to the same file a little
later, printed with one digit fewer and its own timing, so that the file order steps back by a logging interval now
and then. The global step of iteration `i` of epoch `e` is `start(e) + i`: `start` of the first epoch is 0 and each
epoch adds its own number of iterations.

A shape renders the run as JSON lines, CSV, `key: value` or `key=value` text, bracketed or plain progress pairs
`E/total` and `I/per-epoch` in either order, tqdm bars with the values after the bar or before it, or multi-line
blocks (`| > name: value` under a step header, Coqui TTS's trainer), with timestamps on every line, a per-iteration
time or no clock, and a global step, an epoch with an in-epoch counter, or both.

`expected(shape)` is what any right reading stores; `compare` says how a stored run differs from it.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["AXES", "Expected", "Shape", "compare", "expected", "render", "shape_from"]

# The named axes of variation and their values.
AXES: dict[str, tuple[Any, ...]] = {
    "layout": (
        "jsonl",
        "csv",
        "kv",
        "kv-eq",
        "pairs-bracket",
        "pairs-plain",
        "tqdm-postfix",
        "tqdm-desc",
        "blocks",
    ),
    "counter": ("global", "nested", "both"),
    "order": ("epoch-first", "iter-first"),
    "clock": ("stamps", "step-time", "none"),
    "restart": ("none", "checkpoint", "fresh"),
    "writers": (1, 2),
    "evals": ("none", "loss", "loss+acc"),
    "epoch_base": (0, 1),
    "iter_base": (0, 1),
    "interval": (1, 2, 5),
    "shrink": (False, True),
    "digits": (3, 4, 6),
    "totals": (True, False),
    "labels": (True, False),
}

_T0 = datetime(2024, 3, 1, 9, 30, 0)
_GAP_S = 60.0  # the job is down this long between a crash and its relaunch
_EVAL_S = 3.0  # an evaluation takes this long
_LAG_S = 0.05  # the second writer's least lag behind the first


@dataclass(frozen=True, kw_only=True)
class Shape:
    """One way of writing the run: a value of each axis, the run's size and the seed of its values."""

    layout: str = "kv"
    counter: str = "global"
    order: str = "epoch-first"
    clock: str = "none"
    restart: str = "none"
    writers: int = 1
    evals: str = "loss"
    epoch_base: int = 1
    iter_base: int = 1
    interval: int = 1
    shrink: bool = False
    digits: int = 4
    totals: bool = True
    labels: bool = True
    iters: int = 12
    epochs: int = 4
    seed: int = 0

    def normalized(self) -> Shape:
        """The shape with the axes its layout fixes set as the layout has them (a tqdm bar counts from 1 within its
        epoch and prints its total; a progress pair prints its total; a table has no totals)."""
        s = self
        if s.layout.startswith("tqdm"):
            s = dataclasses.replace(s, iter_base=1, totals=True, counter="nested")
            if s.clock == "stamps":
                s = dataclasses.replace(s, clock="none")
        if s.layout.startswith("pairs"):
            s = dataclasses.replace(s, totals=True)
        if s.layout in ("jsonl", "csv"):
            s = dataclasses.replace(s, totals=False, labels=True)
        if s.layout == "blocks":
            s = dataclasses.replace(s, totals=True, labels=True)
        if s.counter == "global":
            s = dataclasses.replace(s, order="epoch-first")
        if s.restart == "none":
            s = dataclasses.replace(s, shrink=False)
        return dataclasses.replace(s, interval=min(s.interval, s.iters - 1))

    def name(self) -> str:
        return " ".join(f"{a}={getattr(self, a)}" for a in (*AXES, "iters", "epochs", "seed"))


def shape_from(rng: random.Random) -> Shape:
    """A shape with every axis drawn from `rng`."""
    drawn = {axis: rng.choice(values) for axis, values in AXES.items()}
    return Shape(**drawn, iters=rng.randint(6, 20), epochs=rng.randint(3, 6), seed=rng.randrange(10**6)).normalized()


@dataclass
class _Rec:
    """One record of the run as its trainer had it: a training line or an evaluation."""

    kind: str  # "train" | "eval"
    epoch: int
    it: int  # the iteration within the epoch (the last one for an evaluation)
    per: int  # iterations in this epoch
    step: int  # the global step
    t: float  # seconds since the job's first line
    values: dict[str, float]
    dt: float = 0.0  # seconds of one iteration, as the trainer measured it
    attempt: int = 1


@dataclass
class Expected:
    """What a right reading of the shape stores."""

    loss: dict[int, float]
    evals: dict[tuple[str, int], float]
    higher: dict[str, bool]
    restarts: int
    steps_lost: int
    interval: int
    wall_last: float | None = None
    step_s: dict[int, float] = field(default_factory=dict)
    goodput: float | None = None
    goodput_tol: float = 0.0
    """How far a reading's goodput may be from the run's: a reader sees the restart only at logged lines, so it may
    charge up to a logging interval's time more on either side, and an evaluation's."""


def _loss(step: int, attempt: int, seed: int) -> float:
    """The loss at `step`; a relaunch draws other batches, so its losses differ from the crashed attempt's by more
    than the printed rounding (equal values one interval back are a second writer's, whatever made them)."""
    noise = random.Random(seed * 7919 + attempt * 104729 + step).uniform(-0.05, 0.05)
    return 2.0 + 3.0 / (1.0 + step / 15.0) + noise + 0.15 * (attempt == 2)


def _timeline(shape: Shape) -> tuple[list[_Rec], dict[str, float]]:
    """The run's records in the order its trainer made them, and its times (`crash`, `checkpoint`, `relaunch`)."""
    rng = random.Random(shape.seed)
    b, k = shape.iter_base, shape.interval
    dt = 2.0 + 2.0 * rng.random()
    recs: list[_Rec] = []
    times: dict[str, float] = {}
    clock = {"t": 0.0}

    def epoch(e: int, start: int, per: int, attempt: int, stop: int | None = None) -> bool:
        """Run epoch `e` (steps start + b ... start + per - 1 + b); stop after `stop` training lines (a crash)."""
        lines = 0
        before = b - 1
        for i in range(b, per + b):
            if i % k and i != per - 1 + b:
                continue
            clock["t"] += dt * (i - before)
            before = i
            step = start + i
            lr = 1e-3 * (1.0 - step / (shape.iters * shape.epochs + 10))
            took = dt * (1.0 + 0.1 * random.Random(step * 31 + attempt).random())
            values = {"loss": _loss(step, attempt, shape.seed), "lr": lr}
            recs.append(_Rec("train", e, i, per, step, clock["t"], values, took, attempt))
            lines += 1
            if stop is not None and lines >= stop:
                return False
        if shape.evals != "none":
            clock["t"] += _EVAL_S
            step = start + per - 1 + b
            values = {"val_loss": _loss(step, 0, shape.seed) + 0.15}
            if shape.evals == "loss+acc":
                values["val_acc"] = 0.3 + 0.6 * step / (step + 30.0)
            recs.append(_Rec("eval", e, per - 1 + b, per, step, clock["t"], values, 0.0, attempt))
        return True

    e0, per = shape.epoch_base, shape.iters
    lines_per_epoch = len([i for i in range(b, per + b) if not i % k or i == per - 1 + b])
    if shape.restart == "none":
        for n in range(shape.epochs):
            epoch(e0 + n, n * per, per, 1)
        return recs, times
    if shape.restart == "checkpoint":
        done = rng.randint(1, shape.epochs - 2)  # epochs done before the crash
        for n in range(done):
            epoch(e0 + n, n * per, per, 1)
        times["checkpoint"] = clock["t"]
        epoch(e0 + done, done * per, per, 1, stop=rng.randint(2, max(2, lines_per_epoch - 1)))
        resume_epoch, start = done, done * per
    else:  # a fresh launch after a few steps of a first one
        epoch(e0, 0, per, 1, stop=rng.randint(2, max(2, min(3, lines_per_epoch - 1))))
        times["checkpoint"] = recs[0].t - dt * (recs[0].it - b + 1)
        resume_epoch, start = 0, 0
    times["crash"] = clock["t"]
    clock["t"] += _GAP_S
    times["relaunch"] = clock["t"]
    per2 = per - 1 if shape.shrink else per
    for n in range(resume_epoch, shape.epochs):
        epoch(e0 + n, start, per2, 2)
        start += per2
    return recs, times


def expected(shape: Shape) -> Expected:
    """What a right reading of `shape`'s log stores: each step's last training loss, each evaluation at the step
    that ended its epoch, one restart if the shape has one (the steps it threw away: from the checkpoint's step to
    the last step before the crash), and with timestamps the clock and the goodput."""
    recs, times = _timeline(shape)
    loss = {r.step: round(r.values["loss"], shape.digits) for r in recs if r.kind == "train"}
    evals = {
        (f"val/{name[4:]}", r.step): round(v, shape.digits)
        for r in recs
        if r.kind == "eval"
        for name, v in r.values.items()
    }
    higher = {"val/loss": False, "val/acc": True}
    out = Expected(loss, evals, higher, 0, 0, shape.interval)
    if shape.clock == "step-time":
        out.step_s = {r.step: round(r.dt, 4) for r in recs if r.kind == "train"}
    if shape.restart != "none":
        crashed = [r for r in recs if r.attempt == 1 and r.kind == "train"][-1]
        again = next(r for r in recs if r.attempt == 2)
        out.restarts = 1
        out.steps_lost = crashed.step - (again.step - again.it + shape.iter_base - 1)
    if shape.clock == "stamps":
        trained = [r for r in recs if r.kind == "train"]
        first = trained[0].t
        out.wall_last = trained[-1].t - first
        out.goodput = 1.0
        if shape.restart != "none":
            ckpt = max((r.t for r in trained if r.attempt == 1 and r.t <= times["checkpoint"]), default=first)
            out.goodput = (out.wall_last - (times["crash"] - ckpt) - _GAP_S) / out.wall_last
            worst = max(r.dt for r in trained)
            out.goodput_tol = (2 * shape.interval * worst + _EVAL_S) / out.wall_last + 0.01
    return out


# --- rendering ---------------------------------------------------------------------------------------------------


@dataclass
class _Line:
    """One record as one writer wrote it."""

    t: float
    writer: int
    rec: _Rec
    text: str = ""


def _num(v: float, digits: int) -> str:
    return f"{round(v, digits):.{digits}f}"


def _stamp(t: float) -> str:
    return (_T0 + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _printed(shape: Shape, rec: _Rec, writer: int) -> dict[str, str]:
    """The record's values as the writer prints them: the second with one digit fewer, and its own timing."""
    digits = shape.digits - (writer - 1)
    out = {}
    for name, v in rec.values.items():
        out[name] = f"{v:.4e}" if name == "lr" else _num(v, digits)
    if shape.clock == "step-time" and rec.kind == "train":
        out["time"] = f"{rec.dt + 0.0123 * (writer - 1):.4f}"
    return out


def _counters(shape: Shape, rec: _Rec, sep: str, eq: str, labels: tuple[str, str, str]) -> list[str]:
    """`epoch: E`, `iter: I`, `step: G` as the shape prints them (with their totals where it prints them)."""
    epoch_l, iter_l, step_l = labels
    total_e = shape.epoch_base + shape.epochs - 1 if shape.epoch_base else shape.epochs
    e = f"{epoch_l}{eq}{rec.epoch}" + (f"/{total_e}" if shape.totals else "")
    i = f"{iter_l}{eq}{rec.it}" + (f"/{rec.per}" if shape.totals else "")
    g = f"{step_l}{eq}{rec.step}"
    if rec.kind == "eval":
        return {"global": [g], "nested": [e], "both": [e, g]}[shape.counter]
    parts = {"global": [g], "nested": [e, i], "both": [e, i, g]}[shape.counter]
    if shape.order == "iter-first" and shape.counter != "global":
        parts[0], parts[1] = parts[1], parts[0]
    return parts


def _kv(shape: Shape, line: _Line, eq: str, sep: str) -> str:
    printed = _printed(shape, line.rec, line.writer)
    head = _counters(shape, line.rec, sep, eq, ("epoch", "iter", "step"))
    return sep.join(head + [f"{k}{eq}{v}" for k, v in printed.items()])


def _pairs(shape: Shape, line: _Line, bracket: bool) -> str:
    rec, printed = line.rec, _printed(shape, line.rec, line.writer)
    total_e = shape.epoch_base + shape.epochs - 1 if shape.epoch_base else shape.epochs
    total_steps = shape.iters * shape.epochs + shape.iter_base - 1
    if bracket:
        lab = (lambda word: f"{word} ") if shape.labels else (lambda word: "")
        e, i = f"{lab('Epoch')}[{rec.epoch}/{total_e}]", f"{lab('Iter')}[{rec.it}/{rec.per}]"
        g = f"Step [{rec.step}/{total_steps}]" if shape.counter == "global" else f"global_step: {rec.step}"
    else:
        e, i = f"Epoch: {rec.epoch}/{total_e}", f"Step: {rec.it}/{rec.per}"
        g = f"Step: {rec.step}/{total_steps}" if shape.counter == "global" else f"Global step: {rec.step}"
    if rec.kind == "eval":
        head = {"global": [g], "nested": [e], "both": [e, g]}[shape.counter]
        names = {"val_loss": "Val Loss", "val_acc": "Val Acc"} if not bracket else {}
    else:
        head = {"global": [g], "nested": [e, i], "both": [e, i, g]}[shape.counter]
        if shape.order == "iter-first" and shape.counter != "global":
            head[0], head[1] = head[1], head[0]
        names = {"loss": "Loss", "lr": "LR", "time": "Time"} if not bracket else {}
    metrics = [f"{names.get(k, k)}: {v}" for k, v in printed.items()]
    return (
        (" " if bracket and shape.labels else ("" if bracket else ", ")).join(head)
        + (" " if bracket else ", ")
        + (" " if bracket else ", ").join(metrics)
    )


def _bar(n: int, total: int) -> str:
    filled = 10 * n // total
    return f"{100 * n // total:3d}%|{'█' * filled}{' ' * (10 - filled)}| {n}/{total}"


def _tqdm(shape: Shape, line: _Line, start_t: dict[tuple[int, int, int], float]) -> str:
    rec, printed = line.rec, _printed(shape, line.rec, line.writer)
    elapsed = int(line.t - start_t.get((line.writer, rec.attempt, rec.epoch), line.t))  # each writer's own bar
    clock = f"[{elapsed // 60:02d}:{elapsed % 60:02d}<00:01,  9.50it/s"
    if rec.kind == "eval":
        n = 7  # the evaluation's own bar, at its end
        values = {k[4:]: v for k, v in printed.items()}
        if shape.layout == "tqdm-postfix":
            return f"Validation: {_bar(n, n)} {clock}, " + ", ".join(f"{k}={v}" for k, v in values.items()) + "]"
        return "Eval " + ", ".join(f"{k}: {v}" for k, v in values.items()) + f": {_bar(n, n)} {clock}]"
    if shape.layout == "tqdm-postfix":
        return (
            f"Epoch {rec.epoch}: {_bar(rec.it, rec.per)} {clock}, "
            + ", ".join(f"{k}={v}" for k, v in printed.items())
            + "]"
        )
    return (
        f"Epoch {rec.epoch} "
        + ", ".join(f"{k}: {v}" for k, v in printed.items())
        + f": {_bar(rec.it, rec.per)} {clock}]"
    )


def _block(shape: Shape, line: _Line) -> str:
    rec, printed = line.rec, _printed(shape, line.rec, line.writer)
    if rec.kind == "eval":
        body = [f"     | > avg_{k[4:]}: {v} (+0.0012)" for k, v in printed.items()]
        return "\n".join(["  --> EVAL PERFORMANCE", *body])
    head = {
        "global": f"GLOBAL_STEP: {rec.step}",
        "nested": f"STEP: {rec.it}/{rec.per}",
        "both": f"STEP: {rec.it}/{rec.per} -- GLOBAL_STEP: {rec.step}",
    }[shape.counter]
    if shape.clock == "stamps":
        head = f"TIME: {_stamp(line.t)[:19]} -- {head}"
    names = {"lr": "current_lr", "time": "step_time"}
    body = [f"     | > {names.get(k, k)}: {v}" + ("" if k == "lr" else f"  ({v})") for k, v in printed.items()]
    return "\n".join([f"   --> {head}", *body])


def _row(shape: Shape, line: _Line) -> dict[str, Any]:
    rec, printed = line.rec, _printed(shape, line.rec, line.writer)
    row: dict[str, Any] = {}
    if shape.clock == "stamps":
        row["timestamp"] = (_T0 + timedelta(seconds=line.t)).isoformat(timespec="milliseconds")
    counters = {"epoch": rec.epoch, "iter": rec.it, "step": rec.step}
    wanted = {"global": ["step"], "nested": ["epoch", "iter"], "both": ["epoch", "iter", "step"]}[shape.counter]
    if rec.kind == "eval":
        wanted = {"global": ["step"], "nested": ["epoch"], "both": ["epoch", "step"]}[shape.counter]
    if shape.order == "iter-first":
        wanted = sorted(wanted, key=lambda n: n != "iter")
    row.update({n: counters[n] for n in wanted})
    row.update({k: float(v) for k, v in printed.items()})
    return row


def _lines(shape: Shape) -> list[_Line]:
    """Every record as each writer wrote it, in the order they reached the file."""
    recs, _ = _timeline(shape)
    rng = random.Random(shape.seed + 1)
    lines = [_Line(r.t, 1, r) for r in recs]
    if shape.writers == 2:
        gaps = [b.t - a.t for a, b in zip(recs, recs[1:], strict=False) if b.t > a.t]
        typical = sorted(gaps)[len(gaps) // 2] if gaps else 1.0
        # the second writer lags by a little, now and then by more than a line's interval: it drifts
        lines += [_Line(r.t + _LAG_S + typical * rng.choice((0.2, 0.5, 1.4)), 2, r) for r in recs]
    lines.sort(key=lambda line: (line.t, line.writer))
    return lines


def render(shape: Shape, folder: Path) -> Path:
    """Write the run as `shape` says into `folder`; the file's path."""
    lines = _lines(shape)
    if shape.layout == "jsonl":
        path = folder / "metrics.jsonl"
        path.write_text("".join(json.dumps(_row(shape, line)) + "\n" for line in lines))
        return path
    if shape.layout == "csv":
        rows = [_row(shape, line) for line in lines]
        names = list(dict.fromkeys(n for r in rows for n in r))
        path = folder / "metrics.csv"
        table = [",".join(names)] + [",".join(str(r.get(n, "")) for n in names) for r in rows]
        path.write_text("\n".join(table) + "\n")
        return path
    out = ["Starting training", f"Config: epochs {shape.epochs}, batch size 32"]
    starts: dict[tuple[int, int, int], float] = {}  # (writer, attempt, epoch): when its bar began
    epoch_seen: dict[int, int] = {}
    for line in lines:
        rec = line.rec
        starts.setdefault((line.writer, rec.attempt, rec.epoch), line.t)
        if shape.layout == "blocks" and shape.counter != "global" and line.writer == 1:
            if epoch_seen.get(rec.attempt) != rec.epoch:
                epoch_seen[rec.attempt] = rec.epoch
                total = shape.epoch_base + shape.epochs - 1 if shape.epoch_base else shape.epochs
                out.append(f"\n > EPOCH: {rec.epoch}/{total}")
        if shape.layout in ("kv", "kv-eq"):
            text = _kv(shape, line, ": " if shape.layout == "kv" else "=", ", " if shape.layout == "kv" else " ")
        elif shape.layout.startswith("pairs"):
            text = _pairs(shape, line, shape.layout == "pairs-bracket")
        elif shape.layout.startswith("tqdm"):
            text = _tqdm(shape, line, starts)
        else:
            text = _block(shape, line)
        if shape.clock == "stamps" and shape.layout != "blocks":
            text = f"{_stamp(line.t)} INFO {text}"
        out.append(text)
    path = folder / "train.log"
    path.write_text("\n".join(out) + "\n")
    return path


# --- reading back ------------------------------------------------------------------------------------------------


def compare(ledger: Any, run: str, want: Expected) -> list[str]:
    """How the stored run differs from `want` (empty: the same run)."""
    from yieldgate.analysis.goodput import goodput_of

    diffs: list[str] = []
    steps = ledger.steps(run)
    got = {int(s): float(v) for s, v in zip(steps["step"], steps["loss"], strict=True) if v == v}
    if set(got) != set(want.loss):
        extra, missing = sorted(set(got) - set(want.loss)), sorted(set(want.loss) - set(got))
        diffs.append(
            f"loss steps differ: {len(got)} read, {len(want.loss)} logged; extra {extra[:5]}, missing {missing[:5]}"
        )
    else:
        wrong = [s for s in want.loss if abs(got[s] - want.loss[s]) > 1e-9 * max(1.0, abs(want.loss[s]))]
        if wrong:
            diffs.append(f"loss differs at steps {wrong[:5]} (read {got[wrong[0]]}, logged {want.loss[wrong[0]]})")
    evals = ledger.evals(run)
    read = {
        (f"{t}/{m}", int(s)): float(v)
        for t, m, s, v in zip(evals["task"], evals["metric"], evals["step"], evals["value"], strict=True)
    }
    if read.keys() != want.evals.keys():
        diffs.append(f"evaluations differ: read {sorted(read)[:4]}, logged {sorted(want.evals)[:4]}")
    elif any(abs(read[k] - v) > 1e-9 for k, v in want.evals.items()):
        diffs.append("evaluation values differ")
    for t, m, h in zip(evals["task"], evals["metric"], evals["higher_is_better"], strict=True):
        if bool(h) != want.higher[f"{t}/{m}"]:
            diffs.append(f"{t}/{m} read as {'rising' if h else 'falling'}")
            break
    restarts = len(ledger.events(run, kind="resume"))
    if restarts != want.restarts:
        diffs.append(f"{restarts} restart(s) read, {want.restarts} in the run")
    if want.step_s:
        has = dict(zip(steps["step"].astype(int), steps["step_s"], strict=True))
        if any(abs(has.get(s, float("nan")) - v) > 1e-9 for s, v in want.step_s.items() if s in got):
            diffs.append("step_s is not each line's per-iteration time")
    gp = goodput_of(ledger, run)
    if want.restarts and gp is not None and abs(gp.steps_lost - want.steps_lost) > want.interval:
        diffs.append(f"{gp.steps_lost} steps lost read, {want.steps_lost} redone")
    if want.wall_last is not None:
        last = float(steps["wall_s"].max())
        if abs(last - want.wall_last) > 1.0:
            diffs.append(f"the clock ends at {last:.1f} s, the timestamps at {want.wall_last:.1f} s")
        if want.goodput is not None and (gp is None or abs(gp.share - want.goodput) > want.goodput_tol):
            diffs.append(f"goodput {gp.share if gp else None}, the run's {want.goodput:.3f}")
    return diffs
