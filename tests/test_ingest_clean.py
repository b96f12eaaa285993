"""The one place messy rows are cleaned: exact rows kept and warnings given, case by case."""

from __future__ import annotations

import math

import numpy as np

from yieldgate.ingest.clean import clean, pivot, read_lines
from yieldgate.ingest.types import Rows, Warnings


def _rows(steps, **columns):
    rows = Rows("log", np.array(steps, dtype=np.int64), [f"log:{i + 1}" for i in range(len(steps))])
    for name, values in columns.items():
        rows.present[name] = np.array([v is not None for v in values])
        rows.values[name] = np.array([math.nan if v is None else v for v in values], dtype=float)
    return rows


def test_backwards_clock_is_offset_and_reported_each_time():
    w = Warnings()
    out = clean(_rows([1, 2, 3, 4, 5], wall_s=[10.0, 20.0, 5.0, 15.0, 2.0]), w)
    assert out.values["wall_s"].tolist() == [10.0, 20.0, 20.0, 30.0, 30.0]
    assert w.summary() == [
        "log:3: wall_s went back from 20 to 5 (timer reset or resumed run); later values offset by 15",
        "log:5: wall_s went back from 15 to 2 (timer reset or resumed run); later values offset by 13",
    ]


def test_repeats_dropped_relogs_reported_kinds_merged():
    w = Warnings()
    rows = _rows([1, 2, 2, 2, 3, 3], loss=[3.0, 2.5, 2.5, None, 2.0, 1.9], val=[None, None, None, 2.7, None, None])
    out = clean(rows, w)
    assert out.step.tolist() == [1, 2, 2, 3, 3]  # one exact repeat dropped; train and val rows of step 2 kept
    assert out.where == ["log:1", "log:2", "log:4", "log:5", "log:6"]
    assert w.summary() == [
        "log:3: 1 repeated row(s) (same step, same values) dropped",
        "log:6: step 3 logged again with loss 1.9 (was 2); the later values are kept",
    ]


def test_nan_is_kept_and_counted_and_absent_stays_absent():
    w = Warnings()
    out = clean(_rows([1, 2, 3], loss=[math.nan, None, math.inf]), w)
    assert out.present["loss"].tolist() == [True, False, True]
    assert math.isnan(out.values["loss"][0]) and out.values["loss"][2] == math.inf
    assert w.summary() == ["log:1: loss is nan/inf on 2 row(s); kept as recorded"]


def test_warnings_of_one_kind_are_capped_then_counted():
    w = Warnings()
    clean(_rows(list(range(14)), wall_s=[10.0, 0.0] * 7), w)
    lines = w.summary()
    assert len(lines) == 6 and lines[-1] == "... and 2 more of the same kind (clock)"


def test_truncated_last_line_is_skipped(tmp_path):
    path = tmp_path / "x.log"
    path.write_text("a\nb\nc")
    w = Warnings()
    assert read_lines(path, w) == ["a", "b"]
    assert w.summary() == [f"{path}:3: last line has no line end (truncated write?); skipped: 'c'"]
    path.write_text("a\r\nb\r\n")
    assert read_lines(path, Warnings()) == ["a", "b"]


def test_pivot_makes_one_row_per_group_and_step():
    w = Warnings()
    rows = pivot(
        "s",
        np.array([0, 0, 0, 1, 1]),
        np.array([1, 1, 2, 2, 2]),
        ["a", "b", "a", "a", "a"],
        np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
        np.array([100.0, 101.0, 102.0, 200.0, 201.0]),
        lambda i: f"v{i}",
        w,
    )
    assert rows.step.tolist() == [1, 2, 2] and rows.where == ["v0", "v2", "v3"]
    assert rows.values["a"].tolist() == [1.0, 3.0, 5.0] and rows.present["b"].tolist() == [True, False, False]
    assert rows.values["wall_time"].tolist() == [1.0, 2.0, 101.0]  # each row's latest time, from the earliest
    assert w.summary() == ["v4: 1 value(s) logged more than once at one step; the last kept"]
