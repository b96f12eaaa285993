"""`compare` without token counts keeps the wall clock (issue #35, item 12): runs that log wall time but no tokens,
aligned at equal time or steps, get their time to target, the time speedup and its split into steps/s x steps to
target (where a step is the same amount of data on both sides), and no warning that contradicts the notes."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest


def _table(path, rate: float, scale: float = 1.0):
    """A run as a table (step, wall_s, loss, val_loss), no token column: `rate` steps per second, the loss
    1.5 + 3·exp(-step / (300·scale)), a held-out loss 0.1 above it every 100 steps."""
    rows = ["step,wall_s,loss,val_loss"]
    for s in range(0, 1001, 10):
        loss = 1.5 + 3.0 * math.exp(-s / (300 * scale))
        rows.append(f"{s},{s / rate!r},{loss!r},{loss + 0.1!r}" if s % 100 == 0 else f"{s},{s / rate!r},{loss!r},")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("at", ["time", "steps"])
def test_runs_without_tokens_get_time_to_target_and_its_split_on_steps(cli, tmp_path, at):
    """B runs 3 steps/s against A's 2 and learns the same per step: both reach the target (the worst best, A's and
    B's last value) at step 1000, A after 500 s, B after 333.3 s: a time speedup of 1.5, all of it steps/s."""
    cli("import", "table", str(_table(tmp_path / "a.csv", 2.0)), "--run", "a")
    cli("import", "table", str(_table(tmp_path / "b.csv", 3.0)), "--run", "b")
    c = cli.json("compare", "a", "b", "--at", at)
    assert c["aligned_on"] == at and c["tokens_to_target"] == {"a": None, "b": None}
    assert c["time_to_target_s"] == {"a": pytest.approx(500.0), "b": pytest.approx(1000 / 3)}
    assert c["steps_to_target"] == {"a": pytest.approx(1000.0), "b": pytest.approx(1000.0)}
    s = c["speedup"]
    assert s["time"] == pytest.approx(1.5) and s["throughput"] is None and s["sample_efficiency"] is None
    assert s["steps_per_s"] == pytest.approx(1.5) and s["step_efficiency"] == pytest.approx(1.0)
    assert s["time"] == pytest.approx(s["steps_per_s"] * s["step_efficiency"])
    # The target is the worst best across runs, which the notes say every run reaches: no warning says otherwise.
    assert any("every run reaches it" in n for n in c["notes"])
    assert not [w for w in c["warnings"] if "does not reach the target" in w or "lacks wall-clock time" in w]
    assert any("steps/s x steps to target" in n for n in c["notes"])
    assert "b moves steps faster (1.5x steps/s)" in c["verdict"] and "no wall-clock time" not in c["verdict"]
    assert not c["verdict"].startswith("no difference")
    if at == "time":  # the console says the same
        text = cli("compare", "a", "b", "--at", at).stdout
        assert "time 500 s vs 333.3 s" in text and "steps/s 1.5 x step efficiency 1" in text


def test_no_split_on_steps_where_a_step_is_not_the_same_data(cli, tmp_path):
    """The boundary: sides whose manifests give different batch sizes keep the time to target and the time speedup,
    but a step of one is not a step of the other: no split, and a note that says why."""
    for name, rate, batch in (("a", 2.0, 16), ("b", 3.0, 32)):
        manifest = tmp_path / f"{name}.yaml"
        manifest.write_text(f"optimisation:\n  batch_size: {batch}\n")
        cli("import", "table", str(_table(tmp_path / f"{name}.csv", rate)), "--run", name, "--manifest", str(manifest))
    c = cli.json("compare", "a", "b", "--at", "time")
    assert c["speedup"]["time"] == pytest.approx(1.5) and "steps_per_s" not in c["speedup"]
    assert any("no split" in n and "optimisation.batch_size" in n for n in c["notes"])
    assert "b reaches the target sooner (1.5x less wall-clock time)" in c["verdict"]


def test_a_real_vision_log_against_itself_on_a_slower_clock(cli, tmp_path):
    """On a real log (Ultralytics YOLO11 results.csv: epochs and a cumulative `time` column, no token count): the
    same run with every clock reading 1.5x later, as on a slower machine, is 1.5x slower to the target, all of it
    steps/s. The time to target is read off the raw file with the csv module: the target is the best val/box_loss
    (the worst best of two equal curves), reached at the `time` of its epoch."""
    real = Path(__file__).parent / "data" / "real" / "yolo11-seg-gallstone-results.csv"
    with real.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    best = min(rows, key=lambda r: float(r["val/box_loss"]))
    slower = tmp_path / "slower.csv"
    with slower.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "time": repr(float(r["time"]) * 1.5)} for r in rows)
    cli("import", "table", str(real), "--run", "a")
    cli("import", "table", str(slower), "--run", "b")
    c = cli.json("compare", "a", "b", "--at", "time", "--metric", "val/box_loss")
    assert c["tokens_to_target"] == {"a": None, "b": None}
    assert c["time_to_target_s"] == {
        "a": pytest.approx(float(best["time"])),
        "b": pytest.approx(1.5 * float(best["time"])),
    }
    assert c["steps_to_target"] == {"a": float(best["epoch"]), "b": float(best["epoch"])}
    s = c["speedup"]
    assert s["time"] == pytest.approx(1 / 1.5) and s["steps_per_s"] == pytest.approx(1 / 1.5)
    assert s["step_efficiency"] == pytest.approx(1.0)
    assert not [w for w in c["warnings"] if "does not reach the target" in w or "lacks wall-clock time" in w]
    assert "a moves steps faster (1.5x steps/s)" in c["verdict"], c["verdict"]
