"""The first hour from a checkout (issue #36, items 1 and 3): the first install line a newcomer reads works today
(a checkout or a wheel built there; the package is on no index yet), `make wheel` builds the wheel alone, and
`make demo` is the quick worked example."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _install_block(page: Path) -> str:
    text = page.read_text()
    section = text[text.index("## Install") :]
    found = re.search(r"```console\n(.*?)```", section, re.S)
    assert found is not None, page
    return found.group(1)


def test_the_first_install_lines_install_from_a_checkout_or_a_wheel():
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        block = _install_block(page)
        assert "pip install '.[torch]'" in block, page
        assert "dist/yieldgate-" in block and "[torch]" in block, page
        assert "pip install 'yieldgate[" not in block, page  # a package index the project is not on


def test_make_wheel_builds_the_wheel_without_the_development_extras(tmp_path: Path):
    plan = subprocess.run(
        ["make", "-n", "wheel", f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "-m build --wheel" in plan
    assert "--group" not in plan and "[all]" not in plan and "'.[" not in plan


def test_make_demo_is_the_quick_worked_example_and_demo_full_the_whole_one(tmp_path: Path):
    def plan(target: str) -> str:
        args = ["make", "-n", target, f"VENV={tmp_path / 'venv'}"]
        return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert "yieldgate demo --quick" in plan("demo")
    full = plan("demo-full")
    assert "yieldgate demo" in full and "--quick" not in full
