"""A logged `samples` column is stored as the run's count of samples only where it is a running count (issue #45,
class 10, as for tokens): PaddleOCR prints `samples: 176` for the samples of its last print window, which stored as
the count made a run of 2,100 steps read 160 samples in all. One that falls or stays the same is kept aside as
`imported/samples_as_logged`, said once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.ingested import column, write
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger


def _import(path):
    with Ledger(":memory:") as led:
        (res,) = import_run(led, "auto", [str(path)], ImportOptions(run="r"))
        return led.steps("r"), led.extras("r"), res.warnings


def _csv(samples: list[int]) -> str:
    return "step,loss,samples\n" + "".join(f"{10 * (i + 1)},{5.0 - i / 100},{s}\n" for i, s in enumerate(samples))


def test_the_samples_of_a_print_window_are_kept_aside_not_stored_as_the_count(tmp_path):
    text = "".join(
        f"[2022/12/09 17:{i:02d}:13] root INFO: epoch: [1/1200], iter: {10 * (i + 1)}, loss: {7.0 - i / 10:.6f}, "
        f"samples: {176 if i == 0 else 160}, ips: 0.26\n"
        for i in range(8)
    )
    steps, extras, warnings = _import(write(tmp_path, "train.log", text))
    assert steps["samples"].isna().all() and len(column(steps, "loss")) == 8
    aside = extras[extras["key"] == "imported/samples_as_logged"]
    assert aside["value"].tolist() == [176.0] + [160.0] * 7
    assert any("samples falls at 1 step(s)" in w and "not a running count" in w for w in warnings)
    with pytest.raises(InputError, match=r"its samples are no running count \(kept as imported/samples_as_logged\)"):
        with Ledger(":memory:") as led:
            import_run(led, "auto", [str(tmp_path / "train.log")], ImportOptions(run="r", tokens_per_sample=512))


def test_a_running_count_of_samples_is_stored(tmp_path):
    steps, _, warnings = _import(write(tmp_path, "m.csv", _csv([32, 64, 96, 128])))
    assert column(steps, "samples") == {10: 32.0, 20: 64.0, 30: 96.0, 40: 128.0}
    assert not any("samples_as_logged" in w for w in warnings)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(samples=st.lists(st.integers(0, 500), min_size=2, max_size=12))
def test_samples_are_stored_only_where_they_are_a_running_count(tmp_path, samples):
    if not any(samples):
        samples = [*samples[:-1], 1]  # a column of zeros is a counter never counted: another rule
    steps, extras, _ = _import(write(tmp_path, f"m{len(samples)}-{hash(tuple(samples))}.csv", _csv(samples)))
    change = np.diff(samples)
    running = bool((change >= 0).all() and (change > 0).any())
    stored = column(steps, "samples")
    if running:
        assert list(stored.values()) == [float(s) for s in samples]
    else:
        assert not stored
        aside = extras[extras["key"] == "imported/samples_as_logged"]
        assert aside["value"].tolist() == [float(s) for s in samples]
