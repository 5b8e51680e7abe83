"""The package's import graph, read from the source with ast (nothing is imported), checked
twice: between modules (no cycle among retrieval_qa modules) and between packages (each
package or module at the top of retrieval_qa is one node: no cycle, and no arrow from a layer
of LAYERS to a layer above it). Imports inside functions count: a lazy import is still an
arrow between two modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "retrieval_qa"

#: the layers of retrieval_qa, lowest first, each a tuple of the packages (and top-level
#: modules) in it: a package imports only from the layers below its own, never from its own
#: layer or above. Every package is listed, so a new one gets its place here.
LAYERS = (
    ("errors", "lazy"),
    ("written", "requirements", "registry", "portable_paths", "progress", "pretrained"),
    ("config",),  # conf/'s one reader: composition (registry), ranges, provenance, settings
    ("runtime",),  # the threads setting: config's
    ("data",),
    ("evaluation", "losses", "encoders"),
    ("models", "baselines"),
    ("embeddings", "export", "training"),
    ("classifiers",),
    ("mining",),
    ("pipeline", "analysis"),
    ("sweeps", "distill"),
    ("cli",),
)


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _targets(module: str, is_package: bool, node: ast.AST, known) -> list[str]:
    """The retrieval_qa modules an import statement loads (a name imported from a package is
    its submodule when there is one, else the package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "retrieval_qa"]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "retrieval_qa":
        return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
            for a in node.names]


def import_graph() -> dict[str, set[str]]:
    """Module -> the retrieval_qa modules it imports."""
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = {t for node in ast.walk(tree)
                       if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _targets(name, is_package, node, modules)
                       if t in modules and t != name}
    return graph


def package_of(module: str) -> str:
    """The package (or top-level module) of retrieval_qa that a module belongs to; "" for
    retrieval_qa itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package -> the packages its modules import (itself left out)."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if not (a := package_of(module)):
            continue
        out.setdefault(a, set()).update(b for t in targets if (b := package_of(t)) not in ("", a))
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path a -> ... -> a, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _level() -> dict[str, int]:
    return {package: i for i, layer in enumerate(LAYERS) for package in layer}


def upward(packages: dict[str, set[str]], level: dict[str, int]) -> list[str]:
    """The arrows from a package to one of its own layer or above."""
    return sorted(f"{a} -> {b}" for a, targets in packages.items() for b in targets
                  if level[b] >= level[a])


def test_the_graph_is_read():
    graph = import_graph()
    assert "retrieval_qa.sweeps.run" in graph["retrieval_qa.cli.sweep"]
    assert "retrieval_qa.data.pool_index" in graph["retrieval_qa.data.datamodule"]
    packages = package_graph(graph)
    assert {"sweeps", "analysis", "training"} <= packages["cli"]
    assert "analysis" in packages["sweeps"]


def test_no_module_import_cycles():
    cycle = _cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_package_has_one_layer_and_every_name_there_exists():
    names = [p for layer in LAYERS for p in layer]
    assert len(names) == len(set(names)), "a package in two layers of LAYERS"
    packages = {package_of(m) for m in import_graph()} - {""}
    assert not packages - set(names), (f"packages without a layer: {sorted(packages - set(names))}"
                                       " (give each its place in LAYERS)")
    assert not set(names) - packages, f"LAYERS names no package: {sorted(set(names) - packages)}"


def test_no_package_import_cycles():
    cycle = _cycle(package_graph(import_graph()))
    assert cycle is None, "package import cycle: " + " -> ".join(cycle)


def test_no_package_imports_from_its_own_layer_or_above():
    graph = import_graph()
    arrows = upward(package_graph(graph), _level())
    # each arrow with the modules that make it, for the fix
    where = {arrow: sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                           if f"{package_of(m)} -> {package_of(t)}" == arrow)
             for arrow in arrows}
    assert not arrows, f"imports up the layers of LAYERS: {where}"


def test_the_checks_find_a_cycle_and_an_upward_arrow():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    modules = {"retrieval_qa.data.x": {"retrieval_qa.training.y"},
               "retrieval_qa.training.y": {"retrieval_qa.data.z", "retrieval_qa.training.w"},
               "retrieval_qa.cli.analyze": {"retrieval_qa.sweeps.table"}}
    packages = package_graph(modules)
    assert packages == {"data": {"training"}, "training": {"data"}, "cli": {"sweeps"}}
    assert _cycle(packages) == ["data", "training", "data"]
    assert upward(packages, _level()) == ["data -> training"]
    assert upward({"evaluation": {"losses"}}, _level()) == ["evaluation -> losses"]


def test_the_shared_names_are_one_module_each_and_no_module_is_long():
    """registry, errors, ranking and config name one module (or package: config/) each (a
    reader who opens ``errors.py`` finds every error class), and no module passes 400
    lines."""
    modules = sorted(PACKAGE.rglob("*.py"))
    for name in ("registry", "errors", "ranking", "config"):
        named = [str(p.relative_to(PACKAGE)) for p in modules
                 if p.stem == name or (p.name == "__init__.py" and p.parent.name == name)]
        assert len(named) == 1, f"modules named {name}: {named}"
    long = {str(p.relative_to(PACKAGE)): n for p in modules
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, f"modules over 400 lines: {long}"
