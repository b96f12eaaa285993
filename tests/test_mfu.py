"""How a run's MFU is planned (`track.mfu.plan_mfu`): the peak's dtype, where it was read, and the warning when it is
only a guess."""

from __future__ import annotations

import logging

import pytest
import torch

from tests.support.helpers import CFG
from yieldgate.manifest import Hardware, Manifest, Optimisation
from yieldgate.probe.model import GPT
from yieldgate.track.mfu import MFU_LOGGER, plan_mfu

H100 = "NVIDIA H100 80GB HBM3"


def _plan(caplog, *, precision: str | None = None, peak: float | None = None, device_kind: str = H100):
    manifest = Manifest(
        hardware=Hardware(device_kind=device_kind, peak_flops=peak),
        optimisation=Optimisation(precision=precision) if precision else None,
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=MFU_LOGGER):
        plan = plan_mfu(GPT(CFG), manifest, torch.device("cpu"), world=1, run="r")
    return plan, [r.getMessage() for r in caplog.records if r.name == MFU_LOGGER]


def test_a_peak_read_off_fp32_parameters_is_said_to_be_a_guess(caplog):
    """Under torch.autocast the parameters stay fp32 while the matmuls run in bf16: the fp32 (or tf32) row of the
    peak table makes MFU 2 to 15 times too high, or above 100% and left out. The Tracker cannot see autocast (it is
    on only inside the loop's forward), so it says which row it used and how to give the precision."""
    plan, said = _plan(caplog)
    assert (plan.meta["dtype"], plan.meta["dtype_from"], plan.peak_flops) == ("fp32", "parameters", 6.69e13)
    assert len(said) == 1 and "autocast" in said[0] and "optimisation.precision" in said[0]
    plan, said = _plan(caplog, precision="bf16")
    assert (plan.meta["dtype"], plan.meta["dtype_from"], plan.peak_flops) == ("bf16", "manifest", 9.894e14)
    assert said == []


@pytest.mark.parametrize(
    ("what", "kwargs"),
    [("an override is the user's own peak", {"peak": 1e15}), ("no peak, no MFU", {"device_kind": "cpu"})],
)
def test_no_guess_is_said_where_no_row_of_the_table_is_used(caplog, what, kwargs):
    plan, said = _plan(caplog, **kwargs)
    assert plan.meta["dtype_from"] == "parameters" and said == [], what
