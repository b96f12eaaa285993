"""Goodput: checkpoint saves and the work restarts threw away, counted from a Tracker's records and from an
imported log whose steps go back."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from tests.support.helpers import CFG, batch
from yieldgate.analysis.goodput import goodput_of
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT
from yieldgate.track import Tracker


def _train(tr: Tracker, model, opt, text, rng, steps: range, saves: dict[int, float], path) -> dict[int, float]:
    """Real steps of the reference GPT; a checkpoint saved (and timed here too) every 5th step."""
    clock = {}
    for step in steps:
        x, y = batch(text, rng, 8)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tr.step(tokens=x.numel(), loss=loss.detach(), step=step)
        clock[step] = time.perf_counter()
        if step % 5 == 0:
            start = time.perf_counter()
            with tr.checkpoint():
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path / f"ckpt-{step}.pt")
                time.sleep(0.05)  # a slow file system
            saves[step] = time.perf_counter() - start
    return clock


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_a_resumed_tracker_run_counts_its_checkpoints_and_the_steps_it_redid(text, tmp_path):
    """Steps 1-23 with a checkpoint every 5 steps; the job dies and restarts from the step-20 checkpoint, so
    steps 21-23 are done again. Goodput counts the saves' time and the 3 lost steps' time, as measured here, each
    second once. The step-20 save of the first attempt is a save when its seconds are on step 20's kept record, and
    inside the lost work when step 20's record had left before the save ended (its seconds then ride on step 21's,
    set apart); which one depends on the writer's timing, the sum of the two does not. The save after the last
    step is kept at close."""
    ledger = tmp_path / "g.db"
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    saves: dict[int, float] = {}
    tr = Tracker("job", ledger=ledger)
    first = _train(tr, model, opt, text, rng, range(1, 24), saves, tmp_path)
    assert sorted(saves) == [5, 10, 15, 20]
    tr.close("failed", reason="node lost")
    state = torch.load(tmp_path / "ckpt-20.pt")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    tr = Tracker("job", ledger=ledger, resume=True, step=20)
    _train(tr, model, opt, text, rng, range(21, 31), saves, tmp_path)
    tr.close()
    with Ledger(ledger, readonly=True) as led:
        good = goodput_of(led, "job")
        wall = float(led.steps("job")["wall_s"].max())
    assert good is not None
    assert (good.restarts, good.steps_lost) == (1, 3) and good.checkpoints in (5, 6)
    step20 = saves[20] if good.checkpoints == 6 else 0.0
    assert good.checkpoint_s == pytest.approx(sum(saves.values()) - saves[20] + step20, abs=0.01)
    # The lost work: from the step-20 record (and its save, when that is counted as one) to the step-23 record of
    # the first attempt.
    assert good.lost_s == pytest.approx(first[23] - first[20] - step20, rel=0.1, abs=0.01)
    assert good.estimated == [] and good.unmeasured == [] and good.down_s == 0.0
    assert good.share == pytest.approx((wall - good.checkpoint_s - good.lost_s) / wall)
    assert 0.0 < good.share < 1.0


def test_an_imported_log_whose_steps_go_back_is_a_restart_with_its_lost_and_down_time(cli_for, tmp_path):
    """Steps 1-100 one second apart, then the job restarts from step 50 after 50 s down: one resume event,
    50 steps and 50 s lost, 50 s down, in `show`."""
    rows = ["step,loss,elapsed_s"]
    rows += [f"{s},{5 - s / 100:.3f},{s:.1f}" for s in range(1, 101)]
    rows += [f"{s},{5.01 - s / 100:.3f},{150 + s - 51:.1f}" for s in range(51, 121)]
    log = tmp_path / "restarted.csv"
    log.write_text("\n".join(rows) + "\n")
    ledger = tmp_path / "i.db"
    cli = cli_for(ledger)
    out = cli("import", "table", str(log), "--run", "r")
    assert "restarted.csv:102:thestepsgobackfrom100to51" in "".join((out.stdout + out.stderr).split())
    shown = cli.json("show", "r")["goodput"]
    assert (shown["restarts"], shown["steps_lost"], shown["lost_s"], shown["down_s"]) == (1, 50, 50.0, 50.0)
    assert shown["wall_s"] == 219.0 and shown["share"] == pytest.approx(119 / 219)
    assert "goodput 54.3%" in cli("show", "r").stdout
    with Ledger(ledger, readonly=True) as led:
        (event,) = led.events("r", kind="resume")["body"]
    assert event["old"] == {"step": 100} and event["resume"] == {"step": 50}
    # Imported again: the same records, nothing written twice.
    cli("import", "table", str(log), "--run", "r")
    with Ledger(ledger, readonly=True) as led:
        assert len(led.events("r", kind="resume")) == 1


def test_a_log_without_restarts_or_timed_saves_says_so(cli_for, tmp_path):
    log = tmp_path / "plain.csv"
    log.write_text("step,loss,elapsed_s\n" + "".join(f"{s},{5 - s / 100},{2.0 * s}\n" for s in range(1, 51)))
    ledger = tmp_path / "p.db"
    cli = cli_for(ledger)
    cli("import", "table", str(log), "--run", "p")
    assert "goodput 100.0% of 0.0278 h (checkpoint saves not timed)" in cli("show", "p").stdout
    assert cli.json("show", "p")["goodput"]["unmeasured"] == [
        "checkpoint saves: none timed (Tracker.checkpoint, time/checkpoint_s)"
    ]
