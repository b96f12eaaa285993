"""Probes a campaign lost track of (issue #46, item 5): a trainer's process group dies with its worker (the keeper,
`probe/campaign/keeper.py`, outlives the worker just long enough to stop it), and an attempt whose end the campaign
recorded writes its run no more (`Ledger.release_claim`): an orphan never turns a failed run into a finished one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.reliability import check
from yieldgate.ledger import Ledger
from yieldgate.ledger.owners import Owner
from yieldgate.probe.campaign.keeper import command_line
from yieldgate.probe.campaign.own import ENV_LEDGER, ENV_OWNER, ENV_RUN
from yieldgate.track.tracker import Tracker, TrackerConfig

pytestmark = pytest.mark.slow  # processes started and killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, its parent not reaping it) is gone for this purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def _wait(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_attempt_whose_end_was_recorded_writes_its_run_no_more(tmp_path, monkeypatch):
    """A trainer's Tracker writes as the probe's worker (ENV_OWNER). Once the campaign records the attempt's end (the
    worker died), the trainer, still alive, keeps its rows in a spill file and never ends the run `finished`."""
    db = tmp_path / "l.db"
    worker = Owner.this_process()
    with Ledger(db) as led:
        led.claim_run("c/a/s0/t100", owner=worker, source="probe")
    monkeypatch.setenv(ENV_RUN, "c/a/s0/t100")
    monkeypatch.setenv(ENV_LEDGER, str(db))
    monkeypatch.setenv(ENV_OWNER, json.dumps([worker.host, worker.pid, worker.started, worker.namespace]))
    tr = Tracker(config=TrackerConfig(flush_every_s=0.05, log_every_steps=1))
    for _ in range(5):
        tr.step(tokens=64, loss=1.0)
    _wait(lambda: tr.stats["written_rows"] >= 5)
    with Ledger(db) as led, led.transaction():  # the campaign: its worker died during the probe
        led.set_status("c/a/s0/t100", "failed")
        led.release_claim("c/a/s0/t100")
    for _ in range(5):
        tr.step(tokens=64, loss=1.0)
    tr.close()
    with Ledger(db, readonly=True) as led:
        assert led.run_info("c/a/s0/t100")["status"] == "failed"
        assert led.steps("c/a/s0/t100")["step"].tolist() == [1, 2, 3, 4, 5]
    assert tr.stats["spilled_rows"] == 5 and tr.stats["dropped_rows"] == 0


TRAIN = """
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
while True:
    time.sleep(0.1)
"""


def test_the_keeper_stops_the_command_s_group_when_its_worker_dies(tmp_path):
    """The worker is a process that starts the command through a keeper, then is SIGKILLed: the command (a shell and
    the Python it runs, its own children) is gone within the keeper's grace."""
    (tmp_path / "train.py").write_text(TRAIN)
    pid_file = tmp_path / "pid"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; from yieldgate.probe.campaign.keeper import command_line; "
            f"subprocess.Popen(command_line({f'{sys.executable} train.py {pid_file}'!r}, None), "
            "start_new_session=True); time.sleep(3600)",
        ],
        cwd=tmp_path,
    )
    try:
        _wait(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        trainer = int(pid_file.read_text())
        assert _alive(trainer)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        killed_at = time.monotonic()
        _wait(lambda: not _alive(trainer), seconds=20)
        took = time.monotonic() - killed_at
    finally:
        worker.kill()
    check(
        "campaign worker killed (SIGKILL) while its probe's trainer command runs",
        "the keeper between them stops the command's whole process group (SIGTERM, SIGKILL after 10 s): no trainer "
        "is left orphaned to write its run or train beside a re-run (before: it ran on with no timeout)",
        "0",
    )
    assert took < 15, took


def test_the_keeper_holds_the_timeout_and_reports_a_signal_as_a_shell_does(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    started = time.monotonic()
    rc = subprocess.run(command_line(f"{sys.executable} train.py {tmp_path / 'pid'}", 1.0), cwd=tmp_path).returncode
    assert rc == 128 + signal.SIGTERM and time.monotonic() - started < 10
    assert subprocess.run(command_line("exit 3", None)).returncode == 3


def test_a_local_campaign_worker_killed_mid_probe_leaves_no_orphan(tmp_path):
    """A campaign of two slow probes on the local executor; one worker is SIGKILLed while its probe trains. Its
    trainer dies with it, its probe is failed once (not finished later by an orphan), and the campaign goes on."""
    train = tmp_path / "train.py"
    train.write_text(
        "import os, sys, time\n"
        "open(f'pid-{sys.argv[1]}', 'w').write(str(os.getpid()))\n"
        "time.sleep(float(sys.argv[2]))\n"
        "from yieldgate import Tracker\n"
        "tr = Tracker()\n"
        "tr.step(tokens=64, loss=1.0)\n"
        "tr.eval({'val/bpb': 2.0})\n"
        "tr.close()\n"
    )
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    spec = {
        "name": "k",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0],
        "budgets": [100],
        "trainer": {"command": f"{sys.executable} train.py {{seed}} 8"},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    db = tmp_path / "l.db"
    driver = subprocess.Popen(
        [sys.executable, "-m", "yieldgate", "--ledger", str(db), "probe", "c.yaml", "--workers", "1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait(lambda: (tmp_path / "pid-0").exists() and (tmp_path / "pid-0").read_text() != "", seconds=120)
        trainer = int((tmp_path / "pid-0").read_text())
        keeper = int(Path(f"/proc/{trainer}/stat").read_text().split(") ")[1].split()[1])  # its shell's, or itself
        while "keeper" not in Path(f"/proc/{keeper}/cmdline").read_text():
            keeper = int(Path(f"/proc/{keeper}/stat").read_text().split(") ")[1].split()[1])
        worker = int(Path(f"/proc/{keeper}/stat").read_text().split(") ")[1].split()[1])
        os.kill(worker, signal.SIGKILL)
        _wait(lambda: not _alive(trainer), seconds=20)
        out, err = driver.communicate(timeout=120)
    finally:
        driver.kill()
    assert driver.returncode in (1, 2), (driver.returncode, err.decode()[-2000:])
    time.sleep(10)  # the trainer would have finished its run by now
    with Ledger(db, readonly=True) as led:
        info = led.run_info("k/a/s0/t100")
        assert info["status"] == "failed", info
        assert led.steps("k/a/s0/t100").empty
    check(
        "local campaign: the worker training a probe SIGKILLed",
        "its trainer dies with it (the keeper); the probe ends `failed` once and stays so, no orphan writes it, and "
        "the campaign goes on (before: the orphan later turned `failed` into `finished`)",
        "0",
    )


def test_killing_one_local_worker_fails_its_probe_only(tmp_path):
    """Two workers, two probes: the worker of one is SIGKILLed mid-probe. That probe fails; the other trains to its
    end once (a process pool broke whole: it failed both, and the other trained again)."""
    (tmp_path / "train.py").write_text(
        "import os, sys, time\n"
        "open(f'pid-{sys.argv[1]}', 'w').write(str(os.getpid()))\n"
        "time.sleep(float(sys.argv[2]))\n"
        "from yieldgate import Tracker\n"
        "tr = Tracker()\n"
        "tr.step(tokens=64, loss=1.0)\n"
        "tr.eval({'val/bpb': 2.0})\n"
        "tr.close()\n"
    )
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    spec = {
        "name": "two",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0, 1],
        "budgets": [100],
        "trainer": {"command": f"{sys.executable} train.py {{seed}} 6"},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    db = tmp_path / "l.db"
    driver = subprocess.Popen(
        [sys.executable, "-m", "yieldgate", "--ledger", str(db), "probe", "c.yaml", "--workers", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        pids = [tmp_path / "pid-0", tmp_path / "pid-1"]
        _wait(lambda: all(p.exists() and p.read_text() != "" for p in pids), seconds=120)
        trainer = int(pids[0].read_text())
        parent = trainer
        while "keeper" not in Path(f"/proc/{parent}/cmdline").read_text():
            parent = int(Path(f"/proc/{parent}/stat").read_text().split(") ")[1].split()[1])
        worker = int(Path(f"/proc/{parent}/stat").read_text().split(") ")[1].split()[1])
        os.kill(worker, signal.SIGKILL)
        _, err = driver.communicate(timeout=180)
    finally:
        driver.kill()
    assert driver.returncode == 1, (driver.returncode, err.decode()[-2000:])
    with Ledger(db, readonly=True) as led:
        statuses = {r: led.run_info(r)["status"] for r in ("two/a/s0/t100", "two/a/s1/t100")}
        attempts = led.meta("two/a/s1/t100").get("attempts")
    assert statuses == {"two/a/s0/t100": "failed", "two/a/s1/t100": "finished"}, statuses
    assert attempts == 1  # trained once
    check(
        "local campaign of two workers: one worker SIGKILLed mid-probe",
        "its probe alone fails; the other worker's probe trains to its end once (before: the pool broke whole and "
        "failed both probes)",
        "0",
    )


@pytest.mark.skipif(not os.environ.get("YIELDGATE_TEST_SLURM_CONF"), reason="no Slurm cluster: make slurm-start")
def test_a_probe_requeued_by_slurm_runs_again_once_and_counts_once(tmp_path, monkeypatch):
    """`scontrol requeue` of a probe's job while it trains: the job is stopped and runs again; the probe ends
    `finished` once, counted once by the campaign, its `attempts` two (the stopped training and the whole one)."""
    import shutil
    import threading

    from yieldgate.probe.campaign import load_campaign
    from yieldgate.probe.campaign.executors import CampaignRun, run_campaign

    monkeypatch.setenv("SLURM_CONF", os.environ["YIELDGATE_TEST_SLURM_CONF"])
    assert shutil.which("scontrol")
    (tmp_path / "train.py").write_text(
        "import os, sys, time\n"
        "open(f'job-{os.getpid()}', 'w').write(os.environ.get('SLURM_JOB_ID', ''))\n"
        "time.sleep(6)\n"
        "from yieldgate import Tracker\n"
        "tr = Tracker()\n"
        "tr.step(tokens=64, loss=1.0)\n"
        "tr.eval({'val/bpb': 2.0})\n"
        "tr.close()\n"
    )
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    spec = {
        "name": "rq",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0],
        "budgets": [100],
        "trainer": {"command": f"{sys.executable} train.py", "slurm": {"array": False}},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "l.db")
    out: dict[str, object] = {}
    driver = threading.Thread(
        target=lambda: out.update(done=run_campaign(load_campaign(tmp_path / "c.yaml"), db, executor="slurm"))
    )
    driver.start()
    _wait(lambda: any(p.read_text() for p in tmp_path.glob("job-*")), seconds=120)
    (first,) = list(tmp_path.glob("job-*"))
    job = first.read_text()
    subprocess.run(["scontrol", "requeue", job], check=True)
    driver.join(timeout=300)
    done = out["done"]
    assert isinstance(done, CampaignRun)
    assert done.finished == ["rq/a/s0/t100"] and not done.failed, done
    assert len(list(tmp_path.glob("job-*"))) == 2  # trained again, once
    with Ledger(db, readonly=True) as led:
        assert led.run_info("rq/a/s0/t100")["status"] == "finished"
        assert led.meta("rq/a/s0/t100")["attempts"] == 2
        assert led.steps("rq/a/s0/t100")["step"].tolist() == [1]
    check(
        "Slurm: a probe's job requeued (`scontrol requeue`) while it trains",
        "the job runs again and trains the probe once more; it ends `finished` once, counted once by the campaign, "
        "its `attempts` 2",
        "0",
    )
