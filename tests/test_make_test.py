"""`make test`'s closing line times pytest alone (issue #36 item 3): a newcomer's first `make test` spends minutes
installing .venv, and the fast tier's time must not be read off a clock that counts them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
