"""Probe campaigns: real probes in worker processes, rankings with ties, decision accuracy, resumption."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
import yaml

from yieldgate.analysis.ranking import decision_accuracy, rank, resolved_pairs
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.probe.campaign import load_campaign, plan

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

SHAKESPEARE = {
    "sources": [{"name": "shakespeare-modern"}],
    "tokenizer": {"name": "bpe-512", "vocab_size": 512},
    "filters": [{"kind": "min_chars", "params": {"min": 200}}],
    "dedup": {"kind": "exact"},
}
SHUFFLED = {**SHAKESPEARE, "sources": [{"name": "shakespeare-modern", "shuffled_share": 0.5}]}


def write(tmp_path: Path, spec: dict, name: str = "campaign.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def control(name: str = "control", **over) -> dict:
    """The pair of known order: a clean recipe against the same recipe with half its documents shuffled."""
    spec = {
        "name": name,
        "recipes": {"clean": SHAKESPEARE, "half-shuffled": SHUFFLED},
        "seeds": 3,
        "budgets": [12_000, 24_000, 48_000],
        "probe": {"batch_size": 16, "evals": 4, "eval_sequences": 24},
        "data": {"max_chars_per_source": 300_000},
    }
    return {**spec, **over}


def test_campaign_files_are_validated_with_one_line_errors(tmp_path):
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(SHAKESPEARE))
    ok = load_campaign(write(tmp_path, {"name": "c", "recipes": {"a": "r.yaml"}, "seeds": 2, "budgets": [100, 200]}))
    assert ok.seeds == [0, 1] and ok.recipes["a"].sources[0].name == "shakespeare-modern"
    for spec, message in [
        ({"name": "c/d", "recipes": {"a": SHAKESPEARE}, "budgets": [100]}, "name 'c/d' must be"),
        ({"name": "c", "recipes": {"a": SHAKESPEARE}, "budgets": [100, 100]}, "budgets repeat a value"),
        ({"name": "c", "recipes": {"a": SHAKESPEARE}, "budgets": [100], "seed": 3}, "seed: unknown field"),
        ({"name": "c", "recipes": {"a": "missing.yaml"}, "budgets": [100]}, "missing.yaml: no such file"),
        ({"name": "c", "recipes": {}, "budgets": [100]}, "recipes: "),
        ({"name": "c", "recipes": {"a": SHAKESPEARE}, "budgets": [0]}, "budgets must be > 0"),
    ]:
        with pytest.raises(InputError, match=message) as err:
            load_campaign(write(tmp_path, spec, "bad.yaml"))
        assert "\n" not in str(err.value)


def test_plan_keys_probes_by_recipe_seed_and_budget(tmp_path):
    campaign = load_campaign(write(tmp_path, control(eval_sources=["milton"])))
    specs = plan(campaign)
    assert len(specs) == 2 * 3 * 3 and [s.tokens for s in specs[:6]] == [48_000] * 6  # largest budgets first
    assert len({s.key for s in specs}) == len(specs) and len({s.run for s in specs}) == len(specs)
    assert specs[0].run == "control/clean/s0/t48000"
    # Evaluated on milton too, never trained on it.
    assert [(s.name, s.weight) for s in specs[0].recipe.sources] == [("shakespeare-modern", 1.0), ("milton", 0.0)]
    again = plan(load_campaign(write(tmp_path, control(eval_sources=["milton"], seeds=[0, 1, 2]))))
    assert [s.key for s in again] == [s.key for s in specs]
    other = plan(load_campaign(write(tmp_path, control(eval_sources=["milton"], probe={"batch_size": 8}))))
    assert not {s.key for s in other} & {s.key for s in specs}


def test_ranking_marks_ties_and_decision_accuracy_counts_agreeing_pairs():
    # a and b differ consistently by seed (resolved although their seed scatter overlaps); c is a coin flip.
    scores = {"a": {0: 1.0, 1: 1.5, 2: 2.0}, "b": {0: 1.1, 1: 1.6, 2: 2.1}, "c": {0: 0.5, 1: 2.5, 2: 1.2}}
    out = rank(scores, lower_is_better=True, level=0.9)
    assert [e["recipe"] for e in out["order"]] == ["c", "a", "b"]  # by mean: 1.4, 1.5, 1.6
    pair = next(p for p in out["pairs"] if {p["a"], p["b"]} == {"a", "b"})
    assert pair["resolved"] and pair["better"] == "a"
    assert all(not p["resolved"] for p in out["pairs"] if "c" in (p["a"], p["b"]))
    assert [e["ties"] for e in out["order"]] == [["a", "b"], ["c"], ["c"]]
    assert rank(scores, lower_is_better=False, level=0.9)["order"][0]["recipe"] == "b"
    acc = decision_accuracy(
        {10: {"a": 1, "b": 2, "c": 3}, 20: {"a": 1, "b": 3, "c": 2}, 40: {"a": 1, "b": 2, "c": 3}},
        resolved_at_largest={frozenset("ab")},
    )
    assert acc["10"]["accuracy"] == 1.0 and acc["20"]["accuracy"] == pytest.approx(2 / 3)
    assert acc["20"]["accuracy_resolved"] == 1.0 and acc["20"]["resolved_pairs"] == 1


def test_a_campaign_ranks_real_probes_and_resolves_the_known_pair(tmp_path, cli, ledger_path):
    path = write(tmp_path, control())
    out = cli.json("probe", str(path), "--workers", "2")
    assert len(out["run"]["finished"]) == 18 and not out["run"]["failed"]
    summary = out["summary"]
    top = summary["rankings"]["48000"]["bpb"]
    assert [e["recipe"] for e in top["order"]] == ["clean", "half-shuffled"]
    (pair,) = top["pairs"]
    assert pair["resolved"] and pair["better"] == "clean", pair  # 3 seeds resolve the known order
    assert set(summary["decision_accuracy"]) == {"12000", "24000"}
    for budget, entry in summary["decision_accuracy"].items():  # one rule: abstaining where that budget's ranking ties
        decided = resolved_pairs(summary["rankings"][budget]["bpb"])
        assert entry["abstained"] == (0.0 if decided else 1.0), (budget, entry)
    assert summary["forecasts"]["clean"]["available"]
    with Ledger(ledger_path, readonly=True) as led:
        stored = led.campaign("control")
        assert stored["summary"]["decision_accuracy"] == summary["decision_accuracy"]
        runs = led.runs().set_index("name")
        assert (runs.loc[[s for s in runs.index if s.startswith("control/")], "status"] == "finished").all()
        meta = led.meta("control/half-shuffled/s2/t48000")["probe"]
        assert (meta["recipe"], meta["seed"], meta["tokens"]) == ("half-shuffled", 2, 48_000)
        created = runs["created_at"].copy()
    again = cli.json("probe", str(path))  # nothing to do: every probe is in the ledger
    assert again["run"]["finished"] == [] and len(again["run"]["skipped"]) == 18
    with Ledger(ledger_path, readonly=True) as led:
        assert led.runs().set_index("name")["created_at"].equals(created)
    shown = cli("campaign", "control")
    assert "half-shuffled" in shown.stdout and "decision accuracy at 12,000 tokens" in shown.stdout


def test_a_failing_probe_is_recorded_and_the_campaign_goes_on(tmp_path, cli, ledger_path):
    broken = {"sources": [{"name": "nowhere", "path": str(tmp_path / "no-such-dir")}]}
    spec = {
        "name": "f",
        "recipes": {"ok": SHAKESPEARE, "broken": broken},
        "seeds": [0],
        "budgets": [4096],
        "probe": {"batch_size": 8, "evals": 2, "eval_sequences": 8},
        "data": {"max_chars_per_source": 100_000},
    }
    result = cli("probe", str(write(tmp_path, spec)), "--workers", "1", "--json", code=1)  # a probe failed
    out = json.loads(result.stdout)
    assert "1 of 2 probe(s) failed; the first, f/broken/s0/t4096" in result.stderr
    assert out["run"]["finished"] == ["f/ok/s0/t4096"]
    assert list(out["run"]["failed"]) == ["f/broken/s0/t4096"]
    assert "neither a built-in source" in out["run"]["failed"]["f/broken/s0/t4096"]
    with Ledger(ledger_path, readonly=True) as led:
        assert led.run_info("f/broken/s0/t4096")["status"] == "failed"
        assert "neither a built-in source" in led.meta("f/broken/s0/t4096")["error"]
    assert out["summary"]["failed"] == out["run"]["failed"]


def test_an_interrupted_campaign_resumes_without_redoing_finished_probes(tmp_path):
    ledger = tmp_path / "c.db"
    seeds = 8  # about 2 s a probe on a quiet machine: the interrupt lands with several still to train
    spec = {
        "name": "r",
        "recipes": {"clean": SHAKESPEARE},
        "seeds": seeds,
        "budgets": [8192],
        "probe": {"batch_size": 8, "evals": 2, "eval_sequences": 8},
        "data": {"max_chars_per_source": 150_000},
    }
    path = write(tmp_path, spec)
    cmd = [sys.executable, "-m", "yieldgate", "--ledger", str(ledger), "probe", str(path), "--workers", "1", "--json"]
    # SIGINT as a terminal's Ctrl-C finds it: a test run started in the background (`make test-all &`) has it
    # ignored, and a child inherits that, so the campaign would not hear the interrupt at all.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    finished = 0
    deadline = time.monotonic() + 120
    while finished < 1 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        # A plain read of the runs table, at once: opening a Ledger checks the file's headers first, which waits
        # for a writer's checkpoints to settle, and the campaign could finish meanwhile.
        with contextlib.suppress(sqlite3.OperationalError):  # not created yet, or locked for a moment
            with closing(sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)) as db:
                finished = db.execute("SELECT COUNT(*) FROM runs WHERE status = 'finished'").fetchone()[0]
    assert proc.poll() is None, proc.communicate()
    os.kill(proc.pid, signal.SIGINT)  # as Ctrl-C does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run the same command again" in err, err
    with Ledger(ledger, readonly=True) as led:
        runs = led.runs().set_index("name")
    done_before = runs.index[runs["status"] == "finished"]
    assert 1 <= len(done_before) < seeds
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    result = json.loads(rerun.stdout)["run"]
    assert sorted(result["skipped"]) == sorted(done_before)
    assert len(result["finished"]) == seeds - len(done_before) and not result["failed"]
    with Ledger(ledger, readonly=True) as led:
        after = led.runs().set_index("name")
        assert (after["status"] == "finished").all() and len(after) == seeds
        assert after.loc[done_before, "created_at"].equals(runs.loc[done_before, "created_at"])
        for name in after.index:  # a probe trained twice would hold duplicate or restarted steps
            steps = led.steps(name)["step"].to_numpy()
            assert np.array_equal(steps, np.arange(1, len(steps) + 1))


def test_the_ray_executor_runs_the_same_probes(tmp_path, cli_for, ledger_location):
    """Ray's workers write into the same ledger: a SQLite file, and a PostgreSQL schema (the team ledger)."""
    pytest.importorskip("ray")
    cli, ledger_path = cli_for(ledger_location), ledger_location
    spec = {
        "name": "ray",
        "recipes": {"clean": SHAKESPEARE},
        "seeds": [0, 1],
        "budgets": [4096],
        "probe": {"batch_size": 8, "evals": 2, "eval_sequences": 8},
        "data": {"max_chars_per_source": 100_000},
    }
    out = cli.json("probe", str(write(tmp_path, spec)), "--executor", "ray", "--workers", "2")
    assert sorted(out["run"]["finished"]) == ["ray/clean/s0/t4096", "ray/clean/s1/t4096"]
    with Ledger(ledger_path, readonly=True) as led:
        for run in out["run"]["finished"]:
            assert led.run_info(run)["status"] == "finished" and len(led.evals(run)) > 0
    local = cli.json("probe", str(write(tmp_path, spec)))  # the local executor sees them as done
    assert len(local["run"]["skipped"]) == 2


def test_an_unknown_executor_is_refused_before_anything_is_written(tmp_path, cli, ledger_path):
    result = cli("probe", str(write(tmp_path, control())), "--executor", "k8s", code=2)
    assert "--executor must be one of local, ray, slurm" in result.stderr
    assert not ledger_path.exists()


def test_a_probe_another_live_process_trains_is_left_to_it(tmp_path):
    """Two `yieldgate probe` commands on one campaign: the probe the other one is training is skipped here, its
    run untouched, instead of being replaced under it (the claim is one write transaction)."""
    from tests.support.claims import set_claim
    from yieldgate.probe.campaign import run_probe

    spec = plan(
        load_campaign(
            write(tmp_path, {"name": "shared", "recipes": {"clean": SHAKESPEARE}, "seeds": 1, "budgets": [8192]})
        )
    )[0]
    ledger = tmp_path / "c.db"
    with Ledger(ledger) as led:
        led.create_run(spec.run, source="probe")
        led.set_meta(spec.run, "probe", spec.meta())
        led.append_steps(spec.run, [{"step": 1, "tokens": 512.0}, {"step": 2, "tokens": 1024.0}])
    # the other command's worker, on another node, heard from just now
    set_claim(ledger, spec.run, host="node-7", pid=4242, started=1.0, heartbeat=time.time())
    result = run_probe(spec, str(ledger))
    assert result["status"] == "skipped" and "host node-7, pid 4242" in result["reason"], result
    with Ledger(ledger, readonly=True) as led:
        assert led.steps(spec.run)["tokens"].tolist() == [512.0, 1024.0]
        assert led.run_info(spec.run)["status"] == "running"


def test_a_wsd_probe_separates_the_stable_phase_yield_from_the_cooldown_gain():
    """A probe whose LR decays over its last fifth: the second-half yield mixes the cooldown's annealing gain with the
    data's; the stable phase's yield and the cooldown's gain are reported apart, exactly."""
    import pandas as pd

    from yieldgate.analysis.probe_scores import COOLDOWN_GAIN, STABLE_YIELD, YIELD, probe_scores

    tokens = np.arange(0, 11) * 1e8  # evaluations every 1e8 tokens up to 1e9
    loss = 4.0 - 0.1 * np.arange(11)
    loss[9:] -= [0.2, 0.4]  # the cooldown (from 8e8 tokens) buys 0.4 more than the stable trend
    evals = pd.DataFrame({"step": np.arange(11) * 10, "tokens": tokens, "task": "val", "metric": "loss", "value": loss})
    steps = pd.DataFrame(
        {
            "step": np.arange(0, 101),
            "tokens": np.arange(0, 101) * 1e7,
            "lr": np.r_[np.full(81, 1e-3), np.linspace(0.85e-3, 1e-4, 20)],
        }
    )
    scores = probe_scores(evals, None, steps)
    assert scores[YIELD] == pytest.approx((loss[5] - loss[10]) / 5e8 * 1e9)
    # the decay starts at step 81 (tokens 8.1e8): the stable phase's second half is 4.05e8 to 8.1e8
    at = lambda t: np.interp(t, tokens, loss)  # noqa: E731
    assert (
        scores[STABLE_YIELD] == pytest.approx((at(4.05e8) - at(8.1e8)) / 4.05e8 * 1e9) == pytest.approx(0.425 / 0.405)
    )
    assert scores[COOLDOWN_GAIN] == pytest.approx(at(8.1e8) - loss[10]) == pytest.approx(0.57)
    assert scores[YIELD] > scores[STABLE_YIELD]  # the second half's yield counts the cooldown's gain as data
    constant = steps.assign(lr=1e-3)
    assert STABLE_YIELD not in probe_scores(evals, None, constant) and COOLDOWN_GAIN not in probe_scores(evals)


def test_probes_keep_the_mfu_warning_out_of_the_terminal_and_no_other(caplog):
    """A CPU has no known peak FLOP/s: every probe's Tracker says MFU is not recorded (its meta keeps why) on its own
    logger, `yieldgate.track.mfu`; the campaign's terminal does not repeat it while the campaign runs, and any other
    warning still shows, whatever its text (the logger is silenced by name, no message is matched)."""
    import logging

    from yieldgate.probe.campaign import quiet_mfu_warnings

    mfu, track = logging.getLogger("yieldgate.track.mfu"), logging.getLogger("yieldgate.track")
    with caplog.at_level(logging.WARNING, logger="yieldgate.track"):
        with quiet_mfu_warnings():
            mfu.warning("yieldgate: %s not recorded for run %r: %s", "mfu", "p", "unknown device 'cpu'")
            track.warning("yieldgate: %s not recorded for run %r: %s", "signals/gns", "p", "one microbatch")
            track.warning("yieldgate: %s not recorded for run %r: %s", "mfu", "q", "said on another logger")
        mfu.warning("yieldgate: %s not recorded for run %r: %s", "mfu", "r", "after the campaign")
    assert [r.getMessage() for r in caplog.records] == [
        "yieldgate: signals/gns not recorded for run 'p': one microbatch",
        "yieldgate: mfu not recorded for run 'q': said on another logger",
        "yieldgate: mfu not recorded for run 'r': after the campaign",
    ]
