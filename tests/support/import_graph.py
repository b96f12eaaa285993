"""The package's import graph, read with `ast` (nothing is imported), and the rules LAYOUT.md draws on it.

A module's imports are every `import` and `from ... import` in its file, at any depth (an import inside a function
is still a dependency), except those under `if TYPE_CHECKING:` (annotations only: nothing runs), which
`read_graph(type_only=True)` counts too. `from pkg import
name` is an edge to `pkg.name` when that is a module, else to `pkg`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Graph", "read_graph", "cycles", "layer_of", "arrows_up", "broken_nevers", "LAYERS", "NEVERS"]


@dataclass
class Graph:
    """Modules by dotted name (with their files) and the imports between them."""

    files: dict[str, Path]
    internal: dict[str, set[str]] = field(default_factory=dict)
    """module -> the package's modules it imports."""
    external: dict[str, set[str]] = field(default_factory=dict)
    """module -> the top-level names of the other packages it imports (`rich`, `typer`, ...)."""
    unresolved: list[str] = field(default_factory=list)
    """`module:line: name` for every import of one of the package's modules that does not exist (a stale path left by
    a move: mypy, told to ignore missing imports, does not see it)."""


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def read_graph(root: Path, *, type_only: bool = False) -> Graph:
    """The import graph of the package whose folder is `root` (e.g. src/yieldgate); `type_only`: imports under `if
    TYPE_CHECKING:` count too (a circle through annotations alone is still two modules that need each other)."""
    files = _modules(root)
    top = root.name
    graph = Graph(files)

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    for module, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = set() if type_only else _type_checking_nodes(tree)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        inside, outside = set(), set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
                wanted = [t for t in targets if t.split(".")[0] == top]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
                wanted = [source] if source.split(".")[0] == top else []
            else:
                continue
            graph.unresolved += [f"{module}:{node.lineno}: {name}" for name in wanted if name not in files]
            for target in targets:
                if target.split(".")[0] == top:
                    found = known(target)
                    if found == top and target != top:
                        continue  # a module that does not exist: `unresolved`, not an import of the package root
                    if found and found != module:
                        inside.add(found)
                else:
                    outside.add(target.split(".")[0])
        graph.internal[module] = inside
        graph.external[module] = outside
    return graph


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


# The layers of LAYOUT.md, lowest first: a module may import its own layer and those below, never one above.
# Producers (the tracker, importers, probes) write the ledger; analysis reads it; the gate decides; the report
# renders; `api` is the one door, with the CLI and the dashboard in front of it. The gate sits below the producers
# (issue #48): a Tracker given a policy asks the gate at each evaluation, as it asks analysis's online detectors,
# and the gate, which reads only the ledger through analysis, never imports a producer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "yieldgate._version",
            "yieldgate.errors",
            "yieldgate.util",
            "yieldgate.names",
            "yieldgate.aliases",
            "yieldgate.manifest",
            "yieldgate.config_files",
        ),
    ),
    ("store", ("yieldgate.ledger",)),
    ("data", ("yieldgate.data",)),
    ("analysis", ("yieldgate.analysis",)),
    ("gate", ("yieldgate.gate",)),
    ("producers", ("yieldgate.track", "yieldgate.ingest")),
    ("probes", ("yieldgate.probe",)),
    ("report", ("yieldgate.report",)),
    ("door", ("yieldgate.api", "yieldgate.demo")),
    ("front", ("yieldgate.cli", "yieldgate.serve", "yieldgate.__main__", "yieldgate")),
]

# The design's never-rules, beyond the layers: (importer prefix, imported prefix, why). A prefix ending in a
# dot-free top-level name that is not ours (`rich`, `typer`, `plotly`) is another package.
NEVERS: list[tuple[str, str, str]] = [
    *[("yieldgate.ledger", screen, "the store knows no screen") for screen in ("rich", "typer", "plotly")],
    *[
        ("yieldgate.analysis", other, "analysis never renders or decides")
        for other in ("yieldgate.report", "yieldgate.gate", "rich", "typer", "plotly")
    ],
    *[
        ("yieldgate.ingest", other, "importers only translate")
        for other in ("yieldgate.analysis", "yieldgate.gate", "yieldgate.probe", "yieldgate.track")
    ],
    *[("yieldgate.track", other, "the tracker has no CLI") for other in ("yieldgate.cli", "typer")],
]


def _within(module: str, prefix: str) -> bool:
    """`module` is `prefix` or inside it; the package's own name (`yieldgate`) names only its `__init__`."""
    if prefix == "yieldgate":
        return module == prefix
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """The index of the layer `module` belongs to (its longest matching prefix), None if no layer names it."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if _within(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def arrows_up(graph: Graph, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Every import from a lower layer to a higher one, as `a (layer) -> b (layer)`."""
    out = []
    for a, targets in sorted(graph.internal.items()):
        la = layer_of(a, layers)
        for b in sorted(targets):
            lb = layer_of(b, layers)
            if la is not None and lb is not None and lb > la:
                out.append(f"{a} ({layers[la][0]}) -> {b} ({layers[lb][0]})")
    return out


def broken_nevers(graph: Graph, nevers: list[tuple[str, str, str]] = NEVERS) -> list[str]:
    """Every import a never-rule forbids, as `a -> b: why`."""
    out = []
    for a in sorted(graph.files):
        imported = graph.internal.get(a, set()) | graph.external.get(a, set())
        for prefix, banned, why in nevers:
            if _within(a, prefix):
                out += [f"{a} -> {b}: {why}" for b in sorted(imported) if _within(b, banned)]
    return out


def summary(root: Path) -> dict[str, object]:
    """The figures of the package's layout: modules, modules at the root, circles, arrows up, broken never-rules,
    the largest module and the functions over 80 lines."""
    graph = read_graph(root)
    lines = {m: len(p.read_text().splitlines()) for m, p in graph.files.items()}
    long = []
    for path in graph.files.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                if node.end_lineno - node.lineno + 1 > 80:
                    long.append(f"{path.relative_to(root)}:{node.name}")
    largest = max(lines, key=lines.__getitem__)
    return {
        "modules": len(graph.files),
        "root_modules": sum(1 for m, p in graph.files.items() if m.count(".") == 1 and p.name != "__init__.py"),
        "circles": len(cycles(graph.internal)),
        "arrows_up": len(arrows_up(graph)),
        "never_rules_broken": len(broken_nevers(graph)),
        "largest_module": f"{largest} ({lines[largest]} lines)",
        "modules_over_600_lines": sum(1 for n in lines.values() if n > 600),
        "functions_over_80_lines": len(long),
    }


if __name__ == "__main__":  # python -m tests.support.import_graph [src/yieldgate]
    import json
    import sys

    print(json.dumps(summary(Path(sys.argv[1] if len(sys.argv) > 1 else "src/yieldgate")), indent=2))
