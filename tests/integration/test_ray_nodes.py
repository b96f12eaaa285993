"""A campaign on a Ray cluster whose nodes live in separate network namespaces, writing one PostgreSQL ledger, and a
node lost while it trains (issue #46 items 5 and 7).

Three network namespaces stand for three machines: the head (the campaign's driver, no CPUs for probes) and two
worker nodes, joined by a bridge on a private subnet inside the head's namespace; nothing listens on this machine's
own interfaces. Ray runs with token authentication. The ledger is the test PostgreSQL server, reached from every
namespace through its Unix socket (a network namespace shares the file system, not 127.0.0.1). Each node has one
CPU: the first two probes train on one node each, the next two after them; while those two train, one node is lost
(every process in its namespace killed at once: raylet, Ray workers, the trainer). Every probe ends exactly once,
the probe trained by the lost node ends failed, the probes it finished before stay finished with their records, no
probe trains twice, and the campaign exits 1.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import yaml

from tests.conftest import pg_ledger_url
from tests.support.reliability import check
from yieldgate.ledger import Ledger

pytestmark = pytest.mark.slow  # a Ray cluster started, a node killed

TRAIN = (
    "import glob, os, sys, time\n"
    "open(f'pid-{sys.argv[1]}-{os.getpid()}', 'w').write(os.readlink('/proc/self/ns/net'))\n"
    "time.sleep(2 if len(glob.glob('pid-*')) <= 2 else 25)  # the first two fast, the next two long\n"
    "from yieldgate import Tracker\n"
    "tr = Tracker()\n"
    "tr.step(tokens=64, loss=1.0)\n"
    "tr.eval({'val/bpb': 2.0})\n"
    "tr.close()\n"
)


def _why_not() -> str | None:
    """Why this machine cannot make network namespaces and a Ray cluster in them, or None."""
    if find_spec("ray") is None:
        return "ray is not installed"
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "network namespaces need root and iproute2 (`ip`)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def _in(ns: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *args], env=env, capture_output=True, text=True, timeout=120)


class Namespaces:
    """The head's namespace and the nodes' (named after this process, on a subnet of its own), bridged in the head's."""

    def __init__(self, nodes: int) -> None:
        tag = f"yg{os.getpid() % 100_000}"
        self.subnet = f"10.231.{os.getpid() % 250}"
        self.head = f"{tag}h"
        self.nodes = [f"{tag}n{i}" for i in range(nodes)]
        self.made: list[str] = []

    def address(self, i: int) -> str:
        """The head's address (0) and node i's (i + 1)."""
        return f"{self.subnet}.{i + 1}"

    def up(self) -> None:
        for ns in (self.head, *self.nodes):
            _ip("netns", "add", ns)
            self.made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", self.head, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.head, "addr", "add", f"{self.address(0)}/24", "dev", "br0")
        _ip("-n", self.head, "link", "set", "br0", "up")
        for i, ns in enumerate(self.nodes, start=1):
            near, far = f"{ns}a", f"{ns}b"
            _ip("link", "add", near, "type", "veth", "peer", "name", far)
            _ip("link", "set", near, "netns", self.head)
            _ip("link", "set", far, "netns", ns)
            _ip("-n", self.head, "link", "set", near, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", far)
            _ip("-n", ns, "link", "set", far, "up")

    def kill(self, ns: str) -> None:
        """Every process in `ns` killed at once: the machine is gone."""
        listed = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
        for pid in listed.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def down(self) -> None:
        for ns in reversed(self.made):
            self.kill(ns)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

    def identity(self, ns: str) -> str:
        """What `readlink /proc/PID/ns/net` says for a process in `ns`."""
        return f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]"


def _socket_url(url: str) -> str:
    """The ledger URL through the server's Unix socket: the same server, reachable from any network namespace."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW unix_socket_directories").fetchone()
    assert row is not None
    folders = str(row[0])
    parts = urlsplit(url)
    auth = f"{parts.username}:{parts.password}" if parts.password else str(parts.username)
    query = f"host={quote(folders.split(',')[0].strip(), safe='')}&port={parts.port}"
    return f"postgresql://{auth}@{parts.path}?{query}" + (f"&{parts.query}" if parts.query else "")


@pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))
def test_a_node_lost_mid_campaign_loses_no_finished_probe(tmp_path):
    with pg_ledger_url() as url:
        ledger = _socket_url(url)
        spaces = Namespaces(nodes=2)
        env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(16),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        ray = str(Path(sys.executable).with_name("ray"))
        temp = tempfile.mkdtemp(prefix="ygray", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
        head = f"{spaces.address(0)}:6399"
        try:
            spaces.up()
            started = _in(
                spaces.head,
                *(ray, "start", "--head", "--node-ip-address", spaces.address(0), "--port", "6399"),
                *("--num-cpus", "0", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"),
                env=env,
            )
            assert started.returncode == 0, started.stderr[-2000:]
            for i, ns in enumerate(spaces.nodes, start=1):
                joined = _in(
                    ns,
                    *(ray, "start", "--address", head, "--node-ip-address", spaces.address(i), "--num-cpus", "1"),
                    "--disable-usage-stats",
                    env=env,
                )
                assert joined.returncode == 0, joined.stderr[-2000:]
            _campaign(tmp_path, spaces, ledger, head, env)
        finally:
            spaces.down()
            shutil.rmtree(temp, ignore_errors=True)


def _campaign(folder: Path, spaces: Namespaces, ledger: str, head: str, env: dict[str, str]) -> None:
    (folder / "train.py").write_text(TRAIN)
    (folder / "a.jsonl").write_text('{"text": "x"}\n')
    spec = {
        "name": "nodes",
        "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
        "seeds": [0, 1, 2, 3],
        "budgets": [100],
        "trainer": {"command": f"{sys.executable} train.py {{seed}}", "timeout": 120},
    }
    (folder / "c.yaml").write_text(yaml.safe_dump(spec))
    command = [sys.executable, "-m", "yieldgate", "--ledger", ledger, "probe", "c.yaml", "--executor", "ray"]
    driver = subprocess.Popen(
        ["ip", "netns", "exec", spaces.head, *command, "--address", head, "--json"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 180
        while len(list(folder.glob("pid-*"))) < 4:  # the first two trained; the next two train now (25 s)
            assert time.monotonic() < deadline and driver.poll() is None, "the probes did not all start"
            time.sleep(0.2)
        time.sleep(1)  # each late trainer has written where it runs
        started = sorted(folder.glob("pid-*"), key=lambda p: p.stat().st_mtime)
        where = {p.name.split("-")[1]: p.read_text() for p in started}
        lost = spaces.nodes[1]
        on_lost = sorted(seed for seed, ns in where.items() if ns == spaces.identity(lost))
        late = list(where)[2:]
        (hit,) = [s for s in late if s in on_lost]  # one of the two long probes trains on the node to be lost
        spaces.kill(lost)
        _, err = driver.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the campaign still waits on its probes 180 s after a node was lost")
    finally:
        driver.kill()
    assert driver.returncode == 1, (driver.returncode, err.decode()[-2000:])  # 1: a probe failed
    survived = [s for s in on_lost if s != hit]
    assert survived, f"no probe finished on the lost node before it went: {where}"
    with Ledger(ledger, readonly=True) as led:
        status = {s: led.run_info(f"nodes/a/s{s}/t100")["status"] for s in "0123"}
        assert status[hit] == "failed" and led.steps(f"nodes/a/s{hit}/t100").empty, status
        for s in "0123":
            if s != hit:
                assert status[s] == "finished" and len(led.steps(f"nodes/a/s{s}/t100")) == 1, status
                assert len(led.evals(f"nodes/a/s{s}/t100")) == 1
    assert len(list(folder.glob("pid-*"))) == 4  # none trained twice
    assert not subprocess.run(["ip", "netns", "pids", lost], capture_output=True, text=True).stdout.split()
    check(
        "Ray campaign across network namespaces, one PostgreSQL ledger: a worker node lost while a probe trains",
        f"the probe it trained ends failed once; the {len(survived)} it finished before keep their records; "
        "the other node's probes finish; none trains twice; the campaign exits 1",
        "0",
    )
