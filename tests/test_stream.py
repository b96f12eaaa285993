from __future__ import annotations

import pytest

from yieldgate.data.stream import RepeatCounter


def test_fresh_stream_has_no_repeats_and_a_loop_is_all_repeats():
    counter = RepeatCounter(window=1000)
    assert [counter.update(range(i * 10, i * 10 + 10)) for i in range(5)] == [0.0] * 5
    looping = RepeatCounter(window=1000)
    rates = [looping.update(range((i % 20) * 10, (i % 20) * 10 + 10)) for i in range(60)]  # 200 examples, looped
    assert rates[:20] == [0.0] * 20 and rates[20:] == [1.0] * 40


def test_window_forgets_and_in_batch_repeats_count():
    counter = RepeatCounter(window=4)
    assert counter.update([1, 2, 3, 4]) == 0.0
    assert counter.update([5, 6, 7, 8]) == 0.0
    assert counter.update([1, 2]) == 0.0  # fell out of the 4-sample window
    assert counter.update([9, 9]) == 0.5
    assert counter.update([]) == 0.0
    with pytest.raises(ValueError):
        RepeatCounter(window=0)
