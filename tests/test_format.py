"""report/format.py: the one number formatter, as the console, the HTML report and the notebook show numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from yieldgate.report.format import fmt
from yieldgate.report.jinja import Cell, table


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        (math.nan, "-"),
        (-math.inf, "-"),
        (np.float64("nan"), "-"),
        (True, "true"),
        (1234567, "1,234,567"),
        (np.int64(-4096), "-4,096"),
        (2.0, "2"),
        (12345.678, "12,346"),
        (1e20, "100,000,000,000,000,000,000"),
        (0.000123456, "0.0001235"),
        (np.float32(0.25), "0.25"),
        (3.14159, "3.142"),
        ("bpb", "bpb"),
    ],
)
def test_fmt(value, shown):
    assert fmt(value) == shown


def test_fmt_digits_and_the_report_tables_use_it():
    assert fmt(3.14159, digits=2) == "3.1"
    (row,) = table(["a", "b", "c"], [[1234567, 0.000123456, math.nan]]).rows
    assert row == [Cell("1,234,567", cls="num"), Cell("0.0001235", cls="num"), Cell("-", cls="num")]
