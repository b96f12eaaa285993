"""The ratchet on long functions (issue #30): no function in src/yieldgate over MAX_LINES lines (`end_lineno -
lineno + 1` of its `def`, docstring included) outside LONG_FUNCTIONS, and that list only shrinks: a function on it
that is now short enough, or gone, fails too, so that it is taken off. Beside it, ruff's C901 and PLR0915
(pyproject.toml) with per-file ignores that only shrink the same way (`RUFF_IGNORED`)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "yieldgate"
MAX_LINES = 80

# Functions over MAX_LINES today, by path under src/yieldgate and qualified name (length when listed). This list may
# only shrink: split a function along its own sections and take it off; never add one.
LONG_FUNCTIONS = frozenset(
    {
        "ledger/migrations.py:_initial",  # 95
    }
)

# pyproject.toml's [tool.ruff.lint.per-file-ignores] as it may at most be: each still needed, none added.
RUFF_IGNORED = {
    "src/yieldgate/aliases.py": {"C901"},
    "tests/test_serve.py": {"PLR0915"},
}


def function_lengths(root: Path = PACKAGE) -> dict[str, int]:
    """Every function and method under `root` (nested ones as `outer.<locals>.inner`) -> its length in lines."""
    lengths: dict[str, int] = {}

    def walk(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                lengths[f"{path}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, path, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, path, f"{prefix}{child.name}.")
            else:
                walk(child, path, prefix)

    for file in sorted(root.rglob("*.py")):
        walk(ast.parse(file.read_text(encoding="utf-8")), file.relative_to(root).as_posix(), "")
    return lengths


@functools.cache
def package_lengths() -> dict[str, int]:
    return function_lengths()


def test_no_new_function_over_80_lines():
    lengths = package_lengths()
    new = {f: n for f, n in lengths.items() if n > MAX_LINES and f not in LONG_FUNCTIONS}
    assert not new, (
        f"over {MAX_LINES} lines: {new}; split each along its own sections into named helpers "
        "(LONG_FUNCTIONS only shrinks)"
    )


def test_the_list_of_long_functions_only_shrinks():
    lengths = package_lengths()
    gone = sorted(f for f in LONG_FUNCTIONS if f not in lengths)
    short = {f: lengths[f] for f in LONG_FUNCTIONS if f in lengths and lengths[f] <= MAX_LINES}
    assert not gone, f"in LONG_FUNCTIONS but no longer in src/yieldgate: {gone}; take them off the list"
    assert not short, f"in LONG_FUNCTIONS but {MAX_LINES} lines or fewer now: {short}; take them off the list"


def test_the_measure_counts_every_def_with_its_docstring(tmp_path):
    (tmp_path / "m.py").write_text(
        'def f():\n    """Doc."""\n    return 1\n\n\nclass C:\n    def g(self):\n'
        "        def h():\n            pass\n\n        return h\n"
    )
    assert function_lengths(tmp_path) == {"m.py:f": 3, "m.py:C.g": 5, "m.py:C.g.<locals>.h": 2}


def test_ruff_per_file_ignores_only_shrink():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed: `make test` installs it with the dev group (pyproject.toml)")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"C901", "PLR0915"} <= set(config["select"])
    ignored = {path: set(codes) for path, codes in config.get("per-file-ignores", {}).items()}
    added = {
        p: codes - RUFF_IGNORED.get(p, set()) for p, codes in ignored.items() if codes - RUFF_IGNORED.get(p, set())
    }
    assert not added, f"per-file ignores added: {added}; split the function instead (the list only shrinks)"
    for path, codes in ignored.items():
        # The file checked with its own ignores lifted: each ignored code must still find something there.
        found = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                path,
                "--select",
                ",".join(sorted(codes)),
                "--config",
                "lint.per-file-ignores = {}",
                "--output-format",
                "json",
                "--exit-zero",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        left = codes - {d["code"] for d in json.loads(found.stdout)}
        assert not left, f"{path} no longer breaks {sorted(left)}: take it off per-file-ignores and RUFF_IGNORED"


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines():
    """Issue #30: a module that outgrows 600 lines is split by role (as `api/` was), never waved through."""
    long = {
        file.relative_to(PACKAGE).as_posix(): n
        for file in sorted(PACKAGE.rglob("*.py"))
        if (n := len(file.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long
