"""`Ledger.steps` reads a run's blocks one at a time into columns sized beforehand (a run page of a million steps
peaked 100 MB lower for it): the frame is the one the blocks read all at once give, on any history of appends,
re-logged steps and `after` bounds, and a writer that adds rows between the count and the read costs a second read,
never a row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yieldgate.ledger import Ledger
from yieldgate.ledger.steps import STEP_VALUE_COLUMNS

appends = st.lists(
    st.tuples(st.integers(1, 600), st.integers(1, 300), st.booleans()),  # first step, rows, loss recorded
    min_size=1,
    max_size=12,
)


def _write(led: Ledger, run: str, history: list[tuple[int, int, bool]]) -> None:
    led.create_run(run)
    for k, (first, rows, with_loss) in enumerate(history):
        step = np.arange(first, first + rows)
        columns = {"step": step, "tokens": step * 64.0, "wall_s": step * 0.1 + k}
        if with_loss:
            columns["loss"] = np.where(step % 7 == 0, np.nan, 5.0 / step)  # a recorded NaN now and then
        led.append_steps(run, columns)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=appends, after=st.one_of(st.none(), st.integers(0, 900)), nullable=st.booleans())
def test_a_run_read_block_by_block_is_the_run_read_at_once(tmp_path_factory, history, after, nullable):
    path = tmp_path_factory.mktemp("blocks") / "l.db"
    with Ledger(path) as led:
        _write(led, "r", history)
        read = led.steps("r", nullable=nullable, after=after)
        run_id = led.run_id("r")
        steps, values = led._blocks_at_once("r", run_id, list(STEP_VALUE_COLUMNS), -(2**63))
    whole = {"step": steps}
    for name, (vals, miss) in values.items():
        whole[name] = (
            pd.arrays.FloatingArray(np.where(miss, 0.0, vals), miss) if nullable else np.where(miss, np.nan, vals)
        )
    expected = pd.DataFrame(whole)
    if after is not None:
        expected = expected[expected["step"] > after].reset_index(drop=True)
    pd.testing.assert_frame_equal(read, expected)
    assert read["step"].is_monotonic_increasing and read["step"].is_unique


def test_rows_written_between_the_count_and_the_read_are_read_again_not_lost(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as writer, Ledger(path, readonly=True) as reader:
        _write(writer, "r", [(1, 500, True), (501, 500, True)])
        counted = reader._query
        raced: list[int] = []

        def count_then_write(sql, params=()):
            out = counted(sql, params)
            if "SUM(n)" in sql and not raced:  # the count is taken; a writer appends before the blocks are read
                raced.append(len(writer.steps("r")))
                step = np.arange(1001, 1101)
                writer.append_steps("r", {"step": step, "tokens": step * 64.0, "loss": 5.0 / step})
            return out

        reader._query = count_then_write
        read = reader.steps("r", ["loss"])
    assert raced == [1000] and read["step"].tolist() == list(range(1, 1101))
    assert np.allclose(read["loss"].dropna(), [5.0 / s for s in range(1, 1101) if s % 7 or s > 1000])
