"""`make test` (issue #36 item 3): its closing line times pytest alone (a newcomer's first `make test` spends minutes
installing .venv, and the fast tier's time must not be read off a clock that counts them), and a green run ends
without a `KeyboardInterrupt` traceback from a worker stopped while it finalised (tests/support/worker_exit.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_make_test_times_pytest_after_the_one_time_install(tmp_path: Path):
    # Run from `make test-all` too: a make inside a make would print its directory and take the outer one's flags.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    plan = subprocess.run(
        ["make", "--no-print-directory", "-n", "test", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    installed = plan.index("--group dev")  # the one-time install of the development environment
    started = plan.index("start=$(date +%s)")
    ran = plan.index("-m pytest")
    said = plan.index("s of pytest (the one-time install")
    assert installed < started < ran < said, plan
    assert "|| status=$?" in plan[ran:said] and plan.rstrip().endswith("exit $status"), plan  # a red run stays red


def test_make_test_may_skip_collecting_the_integration_folder():
    """`make test` passes --ignore=tests/integration: that holds only while every module there is wholly slow."""
    for module in sorted((ROOT / "tests" / "integration").glob("test_*.py")):
        source = module.read_text(encoding="utf-8")
        assert "\npytestmark = pytest.mark.slow" in source or "\npytestmark = [pytest.mark.slow" in source, (
            f"{module.name} is under tests/integration/ but not marked slow as a whole: `make test` would never run it"
        )


SLOW_FINALIZER = """
import gc
import signal
import time

gc.disable()  # only an explicit collection frees the cycle: pytest's closing one (after the report) or ours (before)
# SIGINT raises, as in a terminal: a shell's background job (a CI runner's, say) inherits it ignored, and execnet's
# SIGINT then changes nothing
signal.signal(signal.SIGINT, signal.default_int_handler)


class Slow:
    def __init__(self):
        self.me = self  # a reference cycle: only a garbage collection frees it

    def __del__(self):
        time.sleep(6)  # past execnet's 5 s


def test_leaves_a_slow_finalizer_to_the_collector():
    Slow()
"""

# The suite's own hook, as tests/conftest.py declares it: the test fails if that stops collecting before the report
COLLECT_BEFORE_REPORTING = """
from tests.conftest import pytest_sessionfinish  # noqa: F401
"""


@pytest.mark.slow  # two pytest-xdist sessions of 6 s each
def test_a_slow_finalizer_ends_a_green_xdist_run_without_a_keyboardinterrupt(tmp_path: Path):
    def run(folder: Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", str(folder)]
        return subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env, timeout=120)

    for name in ("bare", "ours"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "test_finalizer.py").write_text(SLOW_FINALIZER)
    (tmp_path / "ours" / "conftest.py").write_text(COLLECT_BEFORE_REPORTING)
    bare, ours = run(tmp_path / "bare"), run(tmp_path / "ours")
    # Without the collection before the report, execnet's SIGINT lands in the finalizer (the traceback issue #36
    # saw), though the run stays green; with it, the finalizer runs to its end before the worker reports.
    assert bare.returncode == 0 and "KeyboardInterrupt" in bare.stdout + bare.stderr, bare.stdout + bare.stderr
    assert ours.returncode == 0 and "KeyboardInterrupt" not in ours.stdout + ours.stderr, ours.stdout + ours.stderr
    assert "1 passed" in ours.stdout, ours.stdout
