"""Telemetry joined onto a run by wall clock. There is no GPU here, so the files are written in nvidia-smi's
documented output formats (`--query-gpu ... --format=csv` and `dmon -o DT`), with its units and `[N/A]`."""

from __future__ import annotations

from datetime import datetime

import pytest

from yieldgate.errors import InputError, RunNotFound
from yieldgate.ingest import ImportOptions, import_run


def _local(t: float, fmt: str) -> str:
    return datetime.fromtimestamp(t).strftime(fmt)


@pytest.fixture
def live(ledger):
    ledger.create_run("live")
    ledger.append_steps("live", {"step": [1, 2, 3, 4], "wall_s": [10.0, 20.0, 30.0, 40.0], "loss": [4, 3, 2, 1]})
    return ledger.run_info("live")["created_at"]


def test_nvidia_smi_query_csv_joins_per_step(ledger, live, tmp_path):
    path = tmp_path / "gpu.csv"
    lines = ["timestamp, index, name, utilization.gpu [%], power.draw [W], memory.used [MiB], clocks.sm [MHz]"]
    for offset, util, power in ((5, 40, 200.0), (15, 80, 300.0), (17, 60, 250.0), (45, 10, 90.0), (-3, 0, 60.0)):
        stamp = _local(live + offset, "%Y/%m/%d %H:%M:%S.%f")[:-3]
        lines.append(f"{stamp}, 0, NVIDIA H100, {util} %, {power:.2f} W, 2048 MiB, 1980 MHz")
        lines.append(f"{stamp}, 1, NVIDIA H100, {util / 2:.0f} %, {power:.2f} W, 1024 MiB, [N/A]")
    path.write_text("\n".join(lines) + "\n")
    (res,) = import_run(ledger, "table", [str(path)], ImportOptions(run="live", join_on="time"))
    extras = ledger.extras("live").pivot(index="step", columns="key", values="value")
    assert extras.index.tolist() == [1, 2]
    assert extras["device/gpu_util"].tolist() == [30.0, (60.0 + 45.0) / 2]  # mean over GPUs, then over samples
    assert extras["device/power_w"].tolist() == [400.0, 550.0]  # summed over GPUs
    assert extras["device/mem_used_gib"].tolist() == [3.0, 3.0]
    assert extras["device/sm_clock_mhz"].tolist() == [1980.0, 1980.0]
    assert res.warnings == [f"{path}: 2 of 5 samples fall outside the run's time span; dropped"]
    assert ledger.run_info("live")["status"] == "running"  # joined onto, not re-labelled
    assert ledger.steps("live")["loss"].tolist() == [4, 3, 2, 1]


def test_dmon_output_and_errors(ledger, live, tmp_path):
    path = tmp_path / "dmon.txt"
    rows = [
        f" {_local(live + t, '%Y%m%d')}   {_local(live + t, '%H:%M:%S')}    0    {p}    50     -     {u}"
        for t, p, u in ((25, 100, 70), (35, 120, 90))
    ]
    path.write_text(
        "#Date       Time        gpu    pwr  gtemp  mtemp     sm\n"
        "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %\n" + "\n".join(rows) + "\n"
    )
    import_run(ledger, "table", [str(path)], ImportOptions(run="live", join_on="time"))
    extras = ledger.extras("live").pivot(index="step", columns="key", values="value")
    assert extras.index.tolist() == [3, 4]
    assert extras["device/power_w"].tolist() == [100.0, 120.0] and extras["device/temp_c"].tolist() == [50.0, 50.0]
    assert "imported/mtemp" not in extras  # `-` everywhere: not a metric
    with pytest.raises(InputError, match="no time column"):
        (tmp_path / "x.csv").write_text("a,b\n1,2\n")
        import_run(ledger, "table", [str(tmp_path / "x.csv")], ImportOptions(run="live", join_on="time"))
    with pytest.raises(InputError, match="no sample falls within run 'live'"):
        (tmp_path / "y.csv").write_text(f"timestamp,power\n{live - 100},5\n")
        import_run(ledger, "table", [str(tmp_path / "y.csv")], ImportOptions(run="live", join_on="time"))
    with pytest.raises(RunNotFound, match="no run named 'other'"):
        import_run(ledger, "table", [str(path)], ImportOptions(run="other", join_on="time"))
