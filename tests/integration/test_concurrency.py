"""Four training processes write eight runs into one ledger at once, each through the Tracker as a user's
loop would, while another process runs `yieldgate compare` over them again and again. Afterwards every
run holds exactly the steps and evals its loop recorded, once each, and no "database is locked" (or any
other fault) reached a user: not a writer's log, not the reader's stderr."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import subprocess
import sys
import time

import pytest

from tests.support.reliability import check
from yieldgate.ledger import Ledger

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

WRITERS, STEPS, EVAL_EVERY = 4, 600, 50
RUNS = [f"w{w}-{side}" for w in range(WRITERS) for side in "ab"]


def _writer(w: int, ledger: str, log_path: str, go) -> None:
    """One training process with two runs side by side (two Trackers), flushing every 0.1 s."""
    import torch

    from yieldgate.track.tracker import Tracker, TrackerConfig

    torch.set_num_threads(1)
    logging.basicConfig(filename=log_path, level=logging.WARNING, force=True)
    sys.stderr = open(log_path, "a", buffering=1)  # noqa: SIM115 - this process's stderr, to the end
    go.wait()
    cfg = TrackerConfig(log_every_steps=10, flush_every_s=0.1)
    trackers = [Tracker(f"w{w}-{side}", ledger=ledger, config=cfg) for side in "ab"]
    for step in range(1, STEPS + 1):
        for k, tr in enumerate(trackers):
            loss = 3.0 / step ** (0.3 + 0.05 * k)
            tr.step(tokens=512, samples=4, loss=loss)
            if step % EVAL_EVERY == 0:
                tr.eval({"val/loss": loss * 1.05})
        time.sleep(0.012)
    stats = []
    for tr in trackers:
        tr.close()
        stats.append(tr.stats)
    print(
        "stats",
        json.dumps([{k: s[k] for k in ("faults", "dropped_rows", "spilled_rows")} for s in stats]),
        file=sys.stderr,
    )


def test_four_processes_write_eight_runs_while_compare_reads(tmp_path):
    ledger = tmp_path / "shared.db"
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    logs = [tmp_path / f"writer{w}.log" for w in range(WRITERS)]
    procs = [ctx.Process(target=_writer, args=(w, str(ledger), str(logs[w]), go)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    go.set()  # all four open the (not yet existing) ledger together: its creation races too
    reads = []
    while any(p.is_alive() for p in procs) or not reads:
        proc = subprocess.run(
            [sys.executable, "-m", "yieldgate", "--ledger", str(ledger), "compare", "w*-a", "w*-b", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        reads.append((proc.returncode, proc.stderr))
    for p in procs:
        p.join(timeout=60)
    assert len(reads) >= 3, reads  # the reader read while the writers wrote
    # and once more after the last writer closed: the writers may all finish before a read finds both sides
    proc = subprocess.run(
        [sys.executable, "-m", "yieldgate", "--ledger", str(ledger), "compare", "w*-a", "w*-b", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    reads.append((proc.returncode, proc.stderr))
    assert [p.exitcode for p in procs] == [0] * WRITERS

    # The reader: exit 0, or — only while the runs do not yet have the evals to compare — one line, exit 2.
    early = [err for code, err in reads if code != 0]
    assert all(code in (0, 2) for code, _ in reads), reads
    assert all(err.count("\n") == 1 and err.startswith("error: ") for err in early), early
    assert all("no run named or matching" in err or "fewer than two evaluations" in err for err in early), early
    assert not any("locked" in err or "Traceback" in err for _, err in reads), reads
    first_ok = next((i for i, (code, _) in enumerate(reads) if code == 0), None)
    assert first_ok is not None, reads[-3:]
    assert all(code == 0 for code, _ in reads[first_ok:]), reads  # once comparable, always comparable

    # The writers: nothing reported, nothing dropped or left in a spill file.
    writer_logs = [log.read_text() for log in logs]
    assert not any("locked" in text or "Traceback" in text for text in writer_logs), writer_logs
    stats = [s for text in writer_logs for s in json.loads(text.split("stats ", 1)[1])]
    assert all(s == {"faults": 0, "dropped_rows": 0, "spilled_rows": 0} for s in stats), stats

    # Exact counts: every step and every eval once.
    lost = duplicated = 0
    with Ledger(ledger, readonly=True) as led:
        assert sorted(led.runs()["name"]) == sorted(RUNS)
        for run in RUNS:
            steps, evals = led.steps(run)["step"].tolist(), led.evals(run)
            assert steps == list(range(1, STEPS + 1)), run
            assert evals["step"].tolist() == list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY)), run
            assert led.run_info(run)["status"] == "finished"
            lost += STEPS - len(set(steps)) + STEPS // EVAL_EVERY - evals["step"].nunique()
            duplicated += len(steps) - len(set(steps)) + len(evals) - evals["step"].nunique()
    check(
        f"{WRITERS} processes writing {len(RUNS)} runs to one ledger while `yieldgate compare` reads it",
        f"every step and eval stored once ({duplicated} duplicated); compare exits 0 from the runs' first evals "
        'on (before: exit 2, one line: no such run yet, or too few evals); no "database is locked" anywhere',
        str(lost),
    )
