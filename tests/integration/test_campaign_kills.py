"""The campaign kill matrix (issue #46) on the local, Ray and Slurm executors: a probe loses its trainer (SIGKILL),
its worker (the process running the probe: the pool's, Ray's, the Slurm job's; SIGKILL or SIGTERM, on Slurm
`scancel`), or outlives its timeout, beside a probe left alone. Every probe ends exactly once, as finished, failed or
killed; the one hit never later turns `finished`, and no probe trains twice. The Slurm cluster (`make slurm-start`,
`.ci/slurm`) runs without accounting, as a small cluster does: sacct tells of no job, and a job that ended without a
result is read from the controller (`slurm.queue_states`). (A node lost while a probe trains, `scontrol requeue`:
tests/integration/test_orphans.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml

from tests.support.reliability import check
from yieldgate.ledger import Ledger

pytestmark = pytest.mark.slow  # processes started and killed

SLURM = os.environ.get("YIELDGATE_TEST_SLURM_CONF", "")

TRAIN = (
    "import os, sys, time\n"
    "open(f'pid-{sys.argv[1]}-{os.getpid()}', 'w').write(os.environ.get('SLURM_JOB_ID', ''))\n"
    "time.sleep(30 if sys.argv[1] == '0' else 2)\n"
    "from yieldgate import Tracker\n"
    "tr = Tracker()\n"
    "tr.step(tokens=64, loss=1.0)\n"
    "tr.eval({'val/bpb': 2.0})\n"
    "tr.close()\n"
)


def _wait(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[1])


def _job_process(trainer: int) -> int:
    """The job's own process (submitit's worker running the probe): the ancestor of the trainer above its keeper."""
    pid = trainer
    while "keeper" not in Path(f"/proc/{pid}/cmdline").read_text():
        pid = _parent(pid)
    return _parent(pid)


def _hit(how: str, executor: str, trainer: int, job: str) -> None:
    if how == "trainer SIGKILL":
        os.kill(trainer, signal.SIGKILL)
    elif how == "worker SIGKILL":
        os.kill(_job_process(trainer), signal.SIGKILL)
    elif how == "worker SIGTERM" and executor == "slurm":
        subprocess.run(["scancel", job], check=True, env={**os.environ, "SLURM_CONF": SLURM})  # SIGTERM
    elif how == "worker SIGTERM":
        os.kill(_job_process(trainer), signal.SIGTERM)
    # "timeout": nothing to do; the probe's trainer.timeout stops it


EXECUTORS = [
    pytest.param("local", id="local"),
    pytest.param("ray", id="ray", marks=pytest.mark.skipif(find_spec("ray") is None, reason="ray is not installed")),
    pytest.param("slurm", id="slurm", marks=pytest.mark.skipif(not SLURM, reason="no Slurm cluster: make slurm-start")),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("how", ["trainer SIGKILL", "worker SIGKILL", "worker SIGTERM", "timeout"])
def test_a_probe_hit_ends_once_and_its_neighbour_trains_once(tmp_path, how, executor):
    """Two probes on two workers; seed 0's is hit while it trains (it sleeps 30 s first), seed 1's trains 2 s."""
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    trainer: dict = {"command": f"{sys.executable} train.py {{seed}}"}
    if executor == "slurm":
        trainer["slurm"] = {"array": False}
    if how == "timeout":
        trainer["timeout"] = 8  # passes during seed 0's 30 s sleep only
    spec = {
        "name": "km",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0, 1],
        "budgets": [100],
        "trainer": trainer,
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    db = tmp_path / "l.db"
    env = {**os.environ, "SLURM_CONF": SLURM} if SLURM else None
    command = ["probe", "c.yaml", "--executor", executor, "--workers", "2"]
    driver = subprocess.Popen(
        [sys.executable, "-m", "yieldgate", "--ledger", str(db), *command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait(lambda: any(p.read_text() or executor != "slurm" for p in tmp_path.glob("pid-0-*")), seconds=120)
        (started,) = list(tmp_path.glob("pid-0-*"))
        _hit(how, executor, int(started.name.split("-")[2]), started.read_text())
        _, err = driver.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{executor}, {how}: the campaign still waits on its probes after 240 s")
    finally:
        driver.kill()
    assert driver.returncode == 1, (driver.returncode, err.decode()[-2000:])  # 1: a probe failed
    time.sleep(3)  # a trainer left behind would write its run by now (it sleeps 30 s from its start)
    with Ledger(str(db), readonly=True) as led:
        assert led.run_info("km/a/s0/t100")["status"] in ("failed", "killed")
        assert led.steps("km/a/s0/t100").empty
        assert led.run_info("km/a/s1/t100")["status"] == "finished"
    assert len(list(tmp_path.glob("pid-0-*"))) == 1 and len(list(tmp_path.glob("pid-1-*"))) == 1  # none trained twice
    check(
        f"{executor} campaign: a probe hit by {how} while it trains",
        "that probe ends failed or killed once and stays so, its neighbour finishes having trained once, the "
        "campaign ends",
        "0",
    )


@pytest.mark.skipif(not SLURM, reason="no Slurm cluster: make slurm-start")
def test_a_probe_cancelled_before_it_starts_fails_once_and_the_campaign_ends(tmp_path, monkeypatch):
    """Both probes' jobs are submitted held (`sbatch --hold`); one is cancelled before it ever runs, the other
    released. Nothing of the cancelled probe ever ran: no claim in the ledger, no result file, and sacct (no
    accounting) tells of neither job. Its state comes from the controller: CANCELLED, and later no record at all
    (purged), both an end. Before, submitit kept it UNKNOWN and the campaign waited forever."""
    from yieldgate.probe.campaign import load_campaign
    from yieldgate.probe.campaign.executors import CampaignRun, run_campaign

    monkeypatch.setenv("SLURM_CONF", SLURM)
    (tmp_path / "train.py").write_text(TRAIN.replace("30 if", "2 if"))
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    held = {"array": False, "slurm_additional_parameters": {"hold": True}}
    spec = {
        "name": "pend",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0, 1],
        "budgets": [100],
        "trainer": {"command": f"{sys.executable} train.py {{seed}}", "slurm": held},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "l.db")
    out: dict[str, object] = {}
    driver = threading.Thread(
        target=lambda: out.update(done=run_campaign(load_campaign(tmp_path / "c.yaml"), db, executor="slurm")),
        daemon=True,
    )
    driver.start()

    def jobs() -> list[str]:
        listed = subprocess.run(
            ["squeue", "--noheader", "--name=yieldgate-pend", "--format=%i"], capture_output=True, text=True
        )
        return sorted(listed.stdout.split(), key=int)

    _wait(lambda: len(jobs()) == 2, seconds=60)
    first, second = jobs()  # submitted in the campaign's order: seed 0, then seed 1
    subprocess.run(["scancel", first], check=True)
    subprocess.run(["scontrol", "release", second], check=True)
    driver.join(timeout=120)
    if driver.is_alive():
        subprocess.run(["scancel", "--name=yieldgate-pend"], check=False)
    assert not driver.is_alive(), "the campaign still waits on a job cancelled before it started, after 120 s"
    done = out["done"]
    assert isinstance(done, CampaignRun)
    assert done.finished == ["pend/a/s1/t100"] and list(done.failed) == ["pend/a/s0/t100"], done
    assert not list(tmp_path.glob("pid-0-*")) and len(list(tmp_path.glob("pid-1-*"))) == 1
    check(
        "Slurm campaign: a probe's job cancelled before it started (nothing of it ran, no accounting)",
        "that probe ends failed once, read from the controller (CANCELLED); its neighbour finishes; the campaign "
        "ends (before: the job stayed UNKNOWN to submitit and the campaign waited forever)",
        "0",
    )
