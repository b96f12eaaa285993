"""The package's layout holds: no import circle, no import from a lower layer to a higher one, the design's
never-rules (the store knows no screen, analysis never renders or decides, importers only translate, the tracker has
no CLI), every module placed in a layer and named in docs/layout.md. The import graph is read with `ast`
(`tests/support/import_graph.py`); the last tests break each rule on purpose in a package written to a temporary
folder and check that it is caught."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.support.import_graph import (
    LAYERS,
    arrows_up,
    broken_nevers,
    cycles,
    layer_of,
    read_graph,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "yieldgate"


@pytest.fixture(scope="module")
def graph():
    return read_graph(PACKAGE)


def test_the_import_graph_has_no_circle(graph):
    assert cycles(graph.internal) == []


def test_no_circle_even_through_imports_for_annotations_only():
    """Issue #44: two circles ran only through `if TYPE_CHECKING:` imports (the report's console and page, the
    importers' result types); modules that name each other's types still need each other."""
    assert cycles(read_graph(PACKAGE, type_only=True).internal) == []


def test_no_import_runs_from_a_lower_layer_to_a_higher_one(graph):
    assert arrows_up(graph) == []


def test_the_designs_never_rules_hold(graph):
    assert broken_nevers(graph) == []


def test_every_import_of_the_package_names_a_module_that_exists(graph):
    assert graph.unresolved == []


def test_every_module_has_a_layer(graph):
    assert [m for m in graph.files if layer_of(m) is None] == []


def test_docs_layout_names_every_module_and_no_other():
    """docs/layout.md's tables name each module by its path under src/yieldgate (`ledger/store.py`) in their first
    column; packages' `__init__.py` files are named by their folder."""
    text = (ROOT / "docs" / "layout.md").read_text()
    modules = {
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")
    }
    named = set(re.findall(r"^\| `([\w/]+\.py)` \|", text, flags=re.M))
    assert sorted(modules - named) == [], "modules docs/layout.md does not name"
    assert sorted(named - modules) == [], "docs/layout.md names modules that do not exist"


def test_every_public_import_docs_api_names_works():
    """docs/api.md's `from yieldgate import ...` lines and its `::: dotted.path` references import, as do the names of
    `yieldgate.__all__` (each loaded lazily on first use)."""
    import importlib

    import yieldgate

    text = (ROOT / "docs" / "api.md").read_text()
    for line in re.findall(r"^from (yieldgate[\w.]*) import (.+)$", text, flags=re.M):
        module = importlib.import_module(line[0])
        for name in (n.strip() for n in line[1].split(",")):
            assert hasattr(module, name), f"docs/api.md: from {line[0]} import {name}"
    references = re.findall(r"^::: (yieldgate[\w.]*)$", text, flags=re.M)
    assert references, "docs/api.md has no ::: references"
    for dotted in references:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes down from it
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            break
        else:
            raise AssertionError(f"docs/api.md: ::: {dotted} does not import")
    for name in yieldgate.__all__:
        assert getattr(yieldgate, name) is not None, name


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "yieldgate"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    return root


def test_a_circle_is_caught_even_through_a_function_level_import(tmp_path):
    root = _package(
        tmp_path,
        {
            "analysis/a.py": "from yieldgate.analysis import b\n",
            "analysis/b.py": "def f():\n    from yieldgate.analysis.c import g\n",
            "analysis/c.py": "from . import a\n",
            "analysis/d.py": "import typing\nif typing.TYPE_CHECKING:\n    from yieldgate.analysis import a\n",
        },
    )
    graph = read_graph(root)
    assert cycles(graph.internal) == [["yieldgate.analysis.a", "yieldgate.analysis.b", "yieldgate.analysis.c"]]
    assert graph.unresolved == []
    assert "yieldgate.analysis.a" not in graph.internal["yieldgate.analysis.d"]  # annotations only: no edge


def test_a_circle_through_annotations_only_is_caught_when_asked(tmp_path):
    root = _package(
        tmp_path,
        {
            "analysis/a.py": "import typing\nif typing.TYPE_CHECKING:\n    from yieldgate.analysis.b import T\n",
            "analysis/b.py": "from yieldgate.analysis import a\nT = int\n",
        },
    )
    assert cycles(read_graph(root).internal) == []
    assert cycles(read_graph(root, type_only=True).internal) == [["yieldgate.analysis.a", "yieldgate.analysis.b"]]


def test_an_arrow_up_and_each_never_rule_are_caught(tmp_path):
    root = _package(
        tmp_path,
        {
            "ledger/store.py": "import rich\nfrom yieldgate.report import console\n",
            "analysis/compare.py": "from yieldgate.report.console import render\n",
            "ingest/table.py": "from yieldgate.analysis import compare\n",
            "track/tracker.py": "import typer\ndef f():\n    from yieldgate.ledger_pg import masked\n",
            "report/console.py": "from yieldgate.analysis import compare\n",
        },
    )
    graph = read_graph(root)
    assert arrows_up(graph) == [
        "yieldgate.analysis.compare (analysis) -> yieldgate.report.console (report)",
        "yieldgate.ledger.store (store) -> yieldgate.report.console (report)",
    ]
    assert broken_nevers(graph) == [
        "yieldgate.analysis.compare -> yieldgate.report.console: analysis never renders or decides",
        "yieldgate.ingest.table -> yieldgate.analysis.compare: importers only translate",
        "yieldgate.ledger.store -> rich: the store knows no screen",
        "yieldgate.track.tracker -> typer: the tracker has no CLI",
    ]
    assert graph.unresolved == ["yieldgate.track.tracker:3: yieldgate.ledger_pg"]  # a path a move left behind
    assert [name for name, _ in LAYERS][layer_of("yieldgate.report.console")] == "report"
