"""The first hour from a checkout (issue #36, items 1 and 3): the first install line a newcomer reads works today
(a checkout or a wheel built there; the package is on no index yet), `make wheel` builds the wheel alone, and
`make demo` is the quick worked example."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[1]


PAGES = (ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "docs" / "quickstart.md")
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_block(page: Path) -> str:
    """The first console block of a page's install section (the Quickstart's page opens with it)."""
    text = page.read_text()
    section = text[text.index("## Install") :] if "## Install" in text else text
    found = re.search(r"```console\n(.*?)```", section, re.S)
    assert found is not None, page
    return found.group(1)


def test_the_first_install_lines_install_from_a_checkout_or_a_wheel():
    for page in PAGES:
        block = install_block(page)
        assert "pip install '.[torch]'" in block, page
        assert "dist/yieldgate-" in block and "[torch]" in block, page
        assert "pip install 'yieldgate[" not in block, page  # a package index the project is not on


def test_every_page_gives_the_same_install_lines_with_the_cpu_build_of_torch_first():
    """Issue #43 item 3: `pip install '.[torch]'` alone brought CUDA torch and 19 `nvidia-*` packages to a CPU laptop,
    and the Quickstart gave a line that fails; the three pages a newcomer may start from give one block."""
    blocks = {page.relative_to(ROOT).as_posix(): install_block(page) for page in PAGES}
    assert len(set(blocks.values())) == 1, blocks
    first = next(iter(blocks.values())).splitlines()[0]
    assert first.startswith(CPU_TORCH), first


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


def test_every_install_of_make_says_what_it_installs(tmp_path: Path):
    """Issue #43 item 2: a first `make test` spent 22 of its 26 minutes in a quiet `pip install --quiet`. Every
    install step goes through .ci/pip-install, which says what it installs, a line per package pip collects, and the
    time it took, and keeps pip's exit status."""
    for target in ("demo", "test"):
        plan = subprocess.run(
            ["make", "--no-print-directory", "-n", target, f"VENV={tmp_path / 'venv'}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        installs = [line for line in plan.splitlines() if "pip install" in line or "pip-install" in line]
        assert installs and all(".ci/pip-install" in line for line in installs), installs
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "Collecting torch==2.13.0"\necho "Requirement already satisfied: x"\nexit $CODE\n')
    fake.chmod(0o755)
    ran = subprocess.run(
        [str(ROOT / ".ci" / "pip-install"), str(fake), "torch", "torch"],
        capture_output=True,
        text=True,
        env={"CODE": "0", "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0 and "  collecting torch==2.13.0" in ran.stdout and "Installed torch in" in ran.stdout
    failed = subprocess.run(
        [str(ROOT / ".ci" / "pip-install"), str(fake), "torch", "torch"],
        capture_output=True,
        text=True,
        env={"CODE": "3", "PATH": "/usr/bin:/bin"},
    )
    assert failed.returncode == 3 and "pip failed (exit 3)" in failed.stdout
