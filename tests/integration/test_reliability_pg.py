"""Faults of a team ledger on PostgreSQL, tried on the test server (`make pg-start`; `make test-all` starts it):
the server stopped under a running Tracker, a server not there when the run starts, and many processes writing
while `yieldgate compare` reads. Each keeps its docs/reliability.md row true (tests/support/reliability.py)."""

from __future__ import annotations

import gc
import json
import logging
import multiprocessing as mp
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import PG_URL, pg_ledger_url
from tests.support.reliability import check
from yieldgate.ledger import EvalRecord, Ledger

pytestmark = pytest.mark.slow  # real processes and a server stopped and started: `make test-all`

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def frozen_heap():
    """pytest's own objects moved out of the garbage collector's reach for the test. In this process (pytest, torch,
    pandas) a full collection takes ~150 ms, and one that the writer thread's allocations set off (merging a spill
    file) holds the interpreter lock that long, so a Tracker call that waits for it measures pytest's heap, not the
    Tracker (a training process with a large heap has the same pause: reported, not hidden, in the review)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def _server(action: str) -> None:
    """Stop (`halt`) or start again (`resume`) the test server that .ci/pg started."""
    subprocess.run([str(REPO / ".ci" / "pg"), action], check=True, timeout=120)


@pytest.fixture
def pg_url():
    state = REPO / ".pg" / "url"
    if not PG_URL or not state.exists() or state.read_text().strip() != PG_URL:
        pytest.skip("needs the test server of `make pg-start` (.ci/pg), which these tests stop and start")
    with pg_ledger_url() as url:
        yield url


def _loop(tracker, seconds: float, timings: list[float], start: int) -> int:
    """Cheap steps for `seconds`, each Tracker call timed; returns the next step number."""
    step = start
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        tracker.step(step=step, tokens=128, samples=1, loss=1.0 / step)
        if step % 100 == 0:
            tracker.eval({"val/loss": 1.0 / step})
        timings.append(time.perf_counter() - t)
        step += 1
        time.sleep(0.002)
    return step


@pytest.mark.parametrize("down", [5.0, pytest.param(30.0, marks=pytest.mark.soak)])
def test_a_server_stopped_mid_run_costs_no_row_and_no_slow_step(pg_url, tmp_path, down, caplog, frozen_heap):
    from yieldgate.track.tracker import Tracker, TrackerConfig

    timings: list[float] = []
    cfg = TrackerConfig(flush_every_s=0.2, spill_dir=str(tmp_path))
    with Tracker("through-a-restart", ledger=pg_url, config=cfg) as tr:
        step = _loop(tr, 1.0, timings, 1)
        stopper = threading.Thread(target=_server, args=("halt",))
        stopper.start()  # pg_ctl waits for the server to go: the loop goes on meanwhile
        step = _loop(tr, down, timings, step)
        stopper.join()
        starter = threading.Thread(target=_server, args=("resume",))
        starter.start()
        step = _loop(tr, 1.0, timings, step)
        starter.join()
        step = _loop(tr, 1.5, timings, step)
    stats = tr.stats
    with Ledger(pg_url, readonly=True) as led:
        stored = led.steps("through-a-restart")["step"].tolist()
        evals = led.evals("through-a-restart")["step"].tolist()
        status = led.run_info("through-a-restart")["status"]
    assert stored == list(range(1, step)) and evals == list(range(100, step, 100)) and status == "finished"
    assert "cannot take step records now; they are kept in" in caplog.text  # it spilled
    assert stats["faults"] >= 1 and stats["dropped_rows"] == 0 and stats["spilled_rows"] == 0
    assert stats["spill_path"] is None and not list(tmp_path.glob("yieldgate-spill-*"))  # merged and removed
    assert stats["written_rows"] == step - 1
    assert max(timings) < 0.05, f"a Tracker call took {max(timings) * 1e3:.1f} ms while the server was down"
    check(
        "PostgreSQL server stopped mid-run, then restarted (5 s here, 30 s in `make soak`)",
        "no Tracker call slowed (each < 50 ms); rows spill to a side file from the first failed flush and reach "
        "the ledger at the first flush after the restart",
        str(step - 1 - len(set(stored))),
    )


def test_a_server_not_there_at_start_is_written_once_it_is(pg_url, tmp_path, caplog, frozen_heap):
    from yieldgate.track.tracker import Tracker, TrackerConfig

    Ledger(pg_url).close()  # the schema exists; the server then goes away before the run starts
    _server("halt")
    try:
        t = time.perf_counter()
        tr = Tracker("late-server", ledger=pg_url, config=TrackerConfig(flush_every_s=0.2, spill_dir=str(tmp_path)))
        opened = time.perf_counter() - t
        timings: list[float] = []
        step = _loop(tr, 1.5, timings, 1)
    finally:
        _server("resume")
    step = _loop(tr, 1.5, timings, step)
    tr.close()
    with Ledger(pg_url, readonly=True) as led:
        stored = led.steps("late-server")["step"].tolist()
        status = led.run_info("late-server")["status"]
    assert stored == list(range(1, step)) and status == "finished"
    assert "cannot take step records now; they are kept in" in caplog.text
    assert tr.stats["dropped_rows"] == 0 and tr.stats["spill_path"] is None
    assert max(timings) < 0.05 and opened < 1.0, (max(timings), int(np.argmax(timings)), len(timings), opened)
    check(
        "PostgreSQL server unreachable when the run starts",
        "the Tracker starts anyway (connection refused at once); rows spill to a side file and reach the ledger "
        "once the server answers",
        str(step - 1 - len(set(stored))),
    )


# -- 16 Trackers, 2 writers of one run, and a reader ------------------------------------------------------------

TRACKERS, STEPS, EVAL_EVERY = 16, 300, 50
SHARED_ROWS, SHARED_BATCH = 1500, 50


def _tracker_process(i: int, url: str, log_path: str, go) -> None:
    import torch

    from yieldgate.track.tracker import Tracker, TrackerConfig

    torch.set_num_threads(1)
    logging.basicConfig(filename=log_path, level=logging.WARNING, force=True)
    sys.stderr = open(log_path, "a", buffering=1)  # noqa: SIM115 - this process's stderr, to the end
    go.wait()
    tr = Tracker(f"pg-{i:02d}-{'ab'[i % 2]}", ledger=url, config=TrackerConfig(log_every_steps=10, flush_every_s=0.5))
    for step in range(1, STEPS + 1):
        loss = 3.0 / step ** (0.3 + 0.01 * i)
        tr.step(tokens=512, samples=4, loss=loss)
        if step % EVAL_EVERY == 0:
            tr.eval({"val/loss": loss * 1.05})
        time.sleep(0.005)
    tr.close()
    print("stats", json.dumps({k: tr.stats[k] for k in ("faults", "dropped_rows", "spilled_rows")}), file=sys.stderr)


def _shared_run_process(part: int, url: str, go) -> None:
    """One of two processes writing one run: steps [part * SHARED_ROWS, (part + 1) * SHARED_ROWS), in batches
    that interleave with the other's, so each append merges blocks the other just wrote."""
    go.wait()
    with Ledger(url) as led:
        for start in range(part * SHARED_ROWS, (part + 1) * SHARED_ROWS, SHARED_BATCH):
            steps = np.arange(start, start + SHARED_BATCH)
            led.append_steps("shared", {"step": steps, "tokens": 100.0 * (steps + 1), "signals/gns": steps * 0.5})
            led.append_evals("shared", [EvalRecord(step=int(steps[-1]), task="val", metric="loss", value=1.0)])


def test_sixteen_trackers_and_two_writers_of_one_run_while_compare_reads(pg_url, tmp_path):
    Ledger(pg_url).create_run("shared")
    # A fork server that has imported the Tracker (and torch) once: 18 processes start in a moment, not 18 imports.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["yieldgate.track.tracker"])
    go = ctx.Event()
    logs = [tmp_path / f"tracker{i}.log" for i in range(TRACKERS)]
    procs = [ctx.Process(target=_tracker_process, args=(i, pg_url, str(logs[i]), go)) for i in range(TRACKERS)]
    procs += [ctx.Process(target=_shared_run_process, args=(part, pg_url, go)) for part in range(2)]
    for p in procs:
        p.start()
    go.set()
    compare = [sys.executable, "-m", "yieldgate", "--ledger", pg_url, "compare", "pg-*-a", "pg-*-b", "--json"]
    reads = []
    deadline = time.monotonic() + 240
    while (any(p.is_alive() for p in procs) or not reads) and time.monotonic() < deadline:
        proc = subprocess.run(compare, capture_output=True, text=True, timeout=120)
        reads.append((proc.returncode, proc.stderr))
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * len(procs), "a writer failed or deadlocked"
    proc = subprocess.run(compare, capture_output=True, text=True, timeout=120)
    reads.append((proc.returncode, proc.stderr))

    assert all(code in (0, 2) for code, _ in reads), reads
    assert all(
        err.count("\n") == 1 and ("no run named or matching" in err or "fewer than two evaluations" in err)
        for code, err in reads
        if code != 0
    ), reads
    assert not any("Traceback" in err for _, err in reads), reads
    texts = [log.read_text() for log in logs]
    assert not any("Traceback" in text or "deadlock" in text for text in texts), texts
    stats = [json.loads(text.split("stats ", 1)[1]) for text in texts]
    said = sorted({line for text in texts for line in text.splitlines() if "yieldgate tracker:" in line})
    assert all(s == {"faults": 0, "dropped_rows": 0, "spilled_rows": 0} for s in stats), (stats, said)

    lost = duplicated = 0
    with Ledger(pg_url, readonly=True) as led:
        for i in range(TRACKERS):
            run = f"pg-{i:02d}-{'ab'[i % 2]}"
            steps, evals = led.steps(run)["step"].tolist(), led.evals(run)["step"].tolist()
            assert steps == list(range(1, STEPS + 1)) and evals == list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY))
            assert led.run_info(run)["status"] == "finished"
            lost += STEPS - len(set(steps)) + STEPS // EVAL_EVERY - len(set(evals))
            duplicated += len(steps) - len(set(steps)) + len(evals) - len(set(evals))
        shared = led.steps("shared")
        extras = led.extras("shared")
        assert shared["step"].tolist() == list(range(2 * SHARED_ROWS))
        assert np.array_equal(shared["tokens"].to_numpy(), 100.0 * (np.arange(2 * SHARED_ROWS) + 1))
        assert extras["step"].tolist() == list(range(2 * SHARED_ROWS))
        assert len(led.evals("shared")) == 2 * SHARED_ROWS // SHARED_BATCH
        lost += 2 * SHARED_ROWS - shared["step"].nunique()
        duplicated += len(shared) - shared["step"].nunique()
    assert proc.returncode == 0, proc.stderr  # every run whole: compare reads them all
    check(
        f"{TRACKERS} Tracker processes and 2 processes writing one run (distinct steps) to a PostgreSQL ledger "
        "while `yieldgate compare` reads it",
        f"every step and eval stored once ({duplicated} duplicated); no deadlock, no fault in any writer; compare "
        "exits 0 once the runs have evals (before: exit 2, one line)",
        str(lost),
    )
