"""The plausibility check on every import (issue 45): a reading no run could have made is refused in one line that
says what was implausible and which mapping would read the source, or imported as read when asked; and `yieldgate
import --explain`, which says how a source would be read without storing anything. Every refusal's advice is run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _in_epoch_counts(epochs: int = 12, per: int = 10, *, updates: bool = True) -> list[dict]:
    """A count within each epoch as the only `step`, no epoch printed; with `updates`, the optimizer's update count
    beside it."""
    rows = []
    for e in range(epochs):
        for i in range(1, per + 1):
            row = {"step": i, "loss": round(4.0 / (1 + e * per + i), 6)}
            if updates:
                row["num_updates"] = e * per + i
            rows.append(row)
    return rows


def test_a_counter_that_resets_at_regular_intervals_is_refused_with_the_mapping_that_reads_it(cli, tmp_path):
    """The count within each epoch read as the step made 11 restarts in 120 rows and kept 10 steps; refused, and the
    advice (the field that counts on) reads the run."""
    rows = _in_epoch_counts()
    log = _jsonl(tmp_path / "log.jsonl", rows)
    out = cli("import", "auto", str(log), "--run", "r", code=2)
    assert out.stderr.count("\n") == 1 and "error: " in out.stderr
    assert "the steps start again at 1 11 times in 120 rows, at regular intervals" in out.stderr
    assert "read it with --map step=num_updates, or import it as read with --accept-implausible" in out.stderr
    cli("import", "auto", str(log), "--run", "r", "--map", "step=num_updates")
    with Ledger(tmp_path / "yieldgate.db", readonly=True) as led:
        assert led.events("r", kind="resume").empty
        got = led.steps("r")
        assert got["step"].tolist() == [r["num_updates"] for r in rows]
        assert got["loss"].tolist() == [r["loss"] for r in rows]


def test_accept_implausible_imports_the_reading_as_read_and_says_so(cli, tmp_path):
    log = _jsonl(tmp_path / "log.jsonl", _in_epoch_counts(updates=False))
    out = cli("import", "auto", str(log), "--run", "r", code=2)
    assert "import it as read with --accept-implausible" in out.stderr and "--map" not in out.stderr
    res = cli.json("import", "auto", str(log), "--run", "r", "--accept-implausible")
    assert any("read as it is, although implausible: the steps start again" in w for w in res[0]["warnings"])
    with Ledger(tmp_path / "yieldgate.db", readonly=True) as led:
        assert len(led.events("r", kind="resume")) == 11


def test_lost_work_past_half_the_run_without_the_clock_restarting_is_refused(ledger, tmp_path):
    """The same 100 steps logged three times over, no clock to show a relaunch: the restarts would have redone 200
    of the run's 100 steps."""
    rows = [{"step": s, "loss": round(5 - s / 100 - k / 10, 4)} for k in range(3) for s in range(1, 101)]
    with pytest.raises(InputError, match=r"would have redone 200 of its 100 steps, and the clock shows no gap"):
        import_run(ledger, "auto", [str(_jsonl(tmp_path / "log.jsonl", rows))], ImportOptions(run="r"))
    assert "r" not in set(ledger.runs()["name"])
    import_run(ledger, "auto", [str(tmp_path / "log.jsonl")], ImportOptions(run="r", accept_implausible=True))
    assert len(ledger.events("r", kind="resume")) == 2


def test_a_clock_that_runs_backwards_is_refused(ledger, tmp_path):
    """Timestamps as the clock, every other line from a host whose clock is a minute behind: the clock runs backwards
    at every other line though the steps never go back."""
    lines = [
        f"2024-01-01 10:{3 + k // 30 - (k % 2):02d}:{(2 * k) % 60:02d} INFO step {10 * k} loss: {5 - k / 100:.3f}"
        for k in range(1, 41)
    ]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"the clock runs backwards \d+ times where the steps do not go back"):
        import_run(ledger, "textlog", [str(tmp_path / "train.log")], ImportOptions(run="r"))


def test_a_plausible_restart_is_not_refused(ledger, tmp_path):
    rows = [{"step": s, "loss": 5 - s / 100, "elapsed": float(s)} for s in range(1, 101)]
    rows += [{"step": s, "loss": 5.01 - s / 100, "elapsed": 150.0 + s - 51} for s in range(51, 121)]
    import_run(ledger, "auto", [str(_jsonl(tmp_path / "log.jsonl", rows))], ImportOptions(run="r"))
    assert len(ledger.events("r", kind="resume")) == 1


# -- import --explain ------------------------------------------------------------------------------------------------


def _explained_log(path: Path) -> Path:
    """Two epochs of progress pairs with timestamps and a per-iteration time, an evaluation line after each, a
    relaunch from the first epoch's checkpoint a minute later, and a second writer's copy of one line."""
    lines = []
    for k, (e, i, loss, t) in enumerate(
        [(1, 2, 4.1, 0), (1, 4, 3.9, 2), (2, 2, 3.7, 4), (2, 4, 3.5, 6), (2, 2, 3.75, 70), (2, 4, 3.45, 72)]
    ):
        stamp = f"2024-01-01 10:{t // 60:02d}:{t % 60:02d},000"
        lines.append(f"{stamp} INFO Epoch [{e}/2] Iter [{i}/4] loss: {loss:.3f} time: 0.9{k}")
        if i == 4:
            stamp = f"2024-01-01 10:{(t + 1) // 60:02d}:{(t + 1) % 60:02d},000"
            lines.append(f"{stamp} INFO Epoch [{e}/2] val_loss: {loss + 0.2:.3f} val_acc: 0.{e}5")
    copy = lines[1].replace("10:00:02,000", "10:00:03,000").replace("loss: 3.900", "loss: 3.90")
    lines.insert(2, copy.replace("time: 0.91", "time: 0.99"))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_explain_says_how_a_log_would_be_read_and_stores_nothing(cli, tmp_path):
    log = _explained_log(tmp_path / "train.log")
    out = cli("import", "--explain", str(log)).stdout
    said = " ".join(out.split())
    assert "train: " in said and "(nothing stored)" in said
    assert "step step = epoch x 4 + iter: iter starts again as epoch rises" in said.replace("(epoch - 1)", "epoch")
    assert "clock the timestamp each line starts with" in said
    assert "training loss loss" in said
    assert "val/acc (val_acc, rises: its name); val/loss (val_loss, falls: its name)" in said
    assert "restarts" in said and "from step 8 to 6, 3 done again" in said
    assert "writers two: 1 row(s) written again by a second writer" in said
    assert not (tmp_path / "yieldgate.db").exists()
    got = json.loads(cli("import", "--explain", str(log), "--json").stdout)
    (e,) = got
    assert e["format"] == "kv" and e["loss"] == "loss" and e["steps"] == 4 and e["implausible"] is None
    assert e["restarts"] == [{"where": f"{log}:8", "from_step": 8, "to_step": 6, "redone_steps": 3}]
    assert {v["key"]: v["direction"] for v in e["evaluations"]}["val/loss"] == "falls"
    assert not (tmp_path / "yieldgate.db").exists()


def test_explain_shows_an_implausible_reading_as_read_and_says_what_is_implausible(cli, tmp_path):
    log = _jsonl(tmp_path / "log.jsonl", _in_epoch_counts(updates=False))
    (e,) = json.loads(cli("import", "--explain", str(log), "--json").stdout)
    assert e["implausible"].startswith("the steps start again at 1 11 times in 120 rows")
    assert len(e["restarts"]) == 11


def test_a_log_read_as_counters_alone_is_refused_and_its_advice_reads_it(cli, tmp_path):
    """Values printed in a shape no reader knows (`objective 2.50`, no `:` or `=`) beside counters it does: only the
    counters are read; refused with the advice to name the values, and the pattern it asks for reads the run."""
    log = tmp_path / "train.log"
    log.write_text("".join(f"GLOBAL_STEP: {s} -- objective {3 - s / 10:.2f}\n" for s in range(1, 9)))
    out = cli("import", "auto", str(log), "--run", "r", code=2)
    assert "no line reads as a known training log" in out.stderr and "name the values with --pattern" in out.stderr
    heads = tmp_path / "heads.log"  # a step and a global step a line: counters alone
    heads.write_text("".join(f"STEP: {s}/8 -- GLOBAL_STEP: {s} -- objective {3 - s / 10:.2f}\n" for s in range(1, 9)))
    out = cli("import", "auto", str(heads), "--run", "r", code=2)
    assert "only counters were read (global_step, step) on 8 line(s)" in out.stderr
    assert "name them with --pattern, or a mapping's lines" in out.stderr
    cli(
        "import",
        "textlog",
        str(heads),
        "--run",
        "r",
        "--pattern",
        r"GLOBAL_STEP: (?P<step>\d+) -- objective (?P<loss>\S+)",
    )
    with Ledger(tmp_path / "yieldgate.db", readonly=True) as led:
        assert led.steps("r")["loss"].tolist() == [round(3 - s / 10, 2) for s in range(1, 9)]
