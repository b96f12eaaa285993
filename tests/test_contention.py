"""The demo and `compare` say when the machine lies (issue #36, item 4): a run recorded by a real Tracker while
other processes burn every CPU is measured as contended from what it recorded (the share of wanted CPU time spent
waiting for a CPU, the load per CPU), and the warning says time-axis verdicts are unreliable while the verdict at
equal tokens stands. No number here is made up: the host extras are what the Tracker measured."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from yieldgate import api
from yieldgate.analysis.conditions import contention, contention_summary, contention_warnings
from yieldgate.analysis.load import load_run
from yieldgate.ledger import Ledger

TRAIN = textwrap.dedent(
    """
    import sys, time
    from yieldgate import Tracker
    from yieldgate.track.config import TrackerConfig

    def work(n):  # a training step's worth of pure-Python CPU work
        total = 0
        for i in range(n):
            total += i * i
        return total

    cfg = TrackerConfig(telemetry_every_s=0.2, log_every_s=0.2, flush_every_s=0.5)
    with Tracker(sys.argv[2], ledger=sys.argv[1], config=cfg, suffix_if_taken=False) as tr:
        print("ready", flush=True)  # imports done: the test starts the burners now
        end, step = time.monotonic() + float(sys.argv[3]), 0
        while time.monotonic() < end or step < 4:
            work(20_000)
            step += 1
            tr.step(tokens=1000, loss=5.0 / step)
            if step % 10 == 0 or step == 2:
                tr.eval({"val/loss": 5.0 / step})
    """
)


def _record_under_load(ledger: Path, runs: tuple[str, ...], seconds: float) -> None:
    """Train `runs` at once, each a real Tracker in its own process; once their imports are done, start more
    CPU burners than the host has CPUs, for as long as they train."""
    trainers = [
        subprocess.Popen(
            [sys.executable, "-c", TRAIN, str(ledger), run, str(seconds)], stdout=subprocess.PIPE, text=True
        )
        for run in runs
    ]
    burners: list[subprocess.Popen[bytes]] = []
    try:
        for t in trainers:
            assert t.stdout is not None and t.stdout.readline().strip() == "ready"
        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) + 2)
        ]
        for t in trainers:
            assert t.wait(timeout=120) == 0
    finally:
        for group in (burners, trainers):
            for p in group:
                p.kill()
                p.wait()


@pytest.mark.slow
def test_a_run_recorded_beside_cpu_burners_is_contended_and_the_warning_says_so(tmp_path: Path) -> None:
    ledger = tmp_path / "loaded.db"
    _record_under_load(ledger, ("busy-a", "busy-b"), 3.0)
    with Ledger(str(ledger), readonly=True) as led:
        runs = {name: load_run(led, name) for name in ("busy-a", "busy-b")}
        compared = api.compare("busy-a", "busy-b", ledger=led, at="time")
    host = runs["busy-a"].host
    assert host is not None and set(host["key"]) >= {"host/cpu_wait", "host/cpus", "host/load_1m"}
    measured = contention({name: [(r.steps, r.host)] for name, r in runs.items()})
    assert measured.contended, measured.sides
    # the run's threads waited for a CPU a good share of the time they wanted one: more runnable tasks than CPUs
    assert (measured.sides["busy-a"]["cpu_wait_pct"] or 0) > 20, measured.sides
    warning, per_token = contention_warnings(measured)
    assert "time-axis verdicts" in warning and "unreliable" in warning and "busy-a" in warning
    assert "equal tokens stands" in per_token
    assert contention_summary(measured) == [warning, per_token]
    # `compare` says the same of these runs in its warnings (what the CLI and --json print)
    assert any("unreliable" in w for w in compared.warnings)
    assert any("equal tokens stands" in w for w in compared.warnings)


def test_a_run_without_host_contention_records_checks_nothing() -> None:
    """An imported run (no host extras): nothing is judged, and the demo's line says the time axis is unchecked."""
    steps = pd.DataFrame({"step": [1, 2], "tokens_per_s": [100.0, 110.0]})
    measured = contention({"A": [(steps, None)], "B": [(steps, None)]})
    assert not measured.contended
    assert contention_warnings(measured) == []
    assert contention_summary(measured) == [
        "host contention not recorded for these runs: time-axis verdicts unchecked against host load"
    ]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_the_host_sampler_reads_this_process_and_the_host_from_proc() -> None:
    from yieldgate.track.host import HostContention

    sampler = HostContention()
    end = time.monotonic() + 0.05
    while time.monotonic() < end:  # some CPU time to account for, over a few clock ticks
        pass
    sample = sampler.sample()
    assert sample["host/cpus"] == os.cpu_count()
    assert 0.0 <= sample["host/cpu_wait"] <= 100.0 and 0.0 <= sample["host/cpu_steal"] <= 100.0
