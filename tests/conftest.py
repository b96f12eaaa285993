from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Under pytest-xdist (`make test`) each worker gets its share of the cores for torch's and BLAS's thread pools: two
# workers each running two threads on two cores made tiny tensor ops wait on one another (a 20-step GNS test took
# 23 s; with one thread, 11 s on the same busy machine). Before numpy and torch load here, and in every subprocess.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _SHARE = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _SHARE)

import numpy as np  # noqa: E402 - after the thread settings above
import pytest
from typer.testing import CliRunner

from yieldgate.cli import app
from yieldgate.ledger import Ledger


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "yieldgate.db"


PG_URL = os.environ.get("YIELDGATE_TEST_PG_URL")
NO_PG = (
    "YIELDGATE_TEST_PG_URL is not set: `make pg-start` starts a throwaway PostgreSQL server and prints it "
    "(`make test-all` does both)"
)


@contextmanager
def pg_ledger_url() -> Iterator[str]:
    """A URL of an empty PostgreSQL ledger: a schema of its own on the test server, dropped afterwards."""
    if not PG_URL:
        pytest.skip(NO_PG)
    psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed: pip install '.[postgres]'")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_location(request, tmp_path: Path) -> Iterator[str]:
    """A new ledger on each backend: a SQLite file, and a PostgreSQL schema (skipped without the test server)."""
    if request.param == "sqlite":
        yield str(tmp_path / "yieldgate.db")
    else:
        with pg_ledger_url() as url:
            yield url


@pytest.fixture
def ledger(ledger_path: Path):
    with Ledger(ledger_path) as led:
        yield led


class Cli:
    """Drives the `yieldgate` command as a user would, against one ledger file."""

    def __init__(self, ledger_path: Path) -> None:
        self.ledger_path = ledger_path
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0) -> Any:
        result = self.runner.invoke(app, ["--ledger", str(self.ledger_path), *args])
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)


@pytest.fixture
def cli(ledger_path: Path) -> Cli:
    return Cli(ledger_path)


@pytest.fixture
def cli_for():
    """A `Cli` for any ledger file."""
    return Cli


@pytest.fixture(scope="session")
def chromium() -> str:
    """The system Chromium that Playwright drives (`executable_path`). `make browsers` installs it (`make test-all`
    depends on it); a test never installs anything, and skips when it is absent."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Chromium is not installed: run `make browsers` (apt-get install chromium, as root)")
    return found


@pytest.fixture(scope="session")
def text() -> np.ndarray:
    """About 540 kB of real text (Python's standard library, training side of a split by module) as bytes."""
    from tests.support.helpers import stdlib_corpus

    train, _, _ = stdlib_corpus(600_000)
    return train


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    from tests.support import reliability
    from tests.support.worker_exit import collect_before_reporting

    collect_before_reporting(session)

    if reliability.WRITE and reliability.measured:
        reliability.write_table()
