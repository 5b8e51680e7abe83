"""The package's import graph, read from the source with ast (nothing is imported): no cycle
among retrieval_qa modules, and no arrow from a lower layer (data, evaluation, losses,
encoders) up to a higher one (training, app, cli, analysis). Imports inside functions count:
a lazy import is still an arrow between two modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "retrieval_qa"
LOWER = ("data", "evaluation", "losses", "encoders")
HIGHER = ("training", "app", "cli", "analysis")


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
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = {t for node in ast.walk(tree)
                       if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _targets(name, is_package, node, modules)
                       if t in modules and t != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path a -> ... -> a, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
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


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_is_read():
    graph = import_graph()
    assert "retrieval_qa.app.sweep_run" in graph["retrieval_qa.cli.sweep"]
    assert "retrieval_qa.data.pool_index" in graph["retrieval_qa.data.datamodule"]


def test_no_import_cycles():
    cycle = _cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_from_a_lower_layer_into_a_higher_one():
    upward = sorted(f"{a} -> {b}" for a, targets in import_graph().items()
                    if _layer(a) in LOWER for b in targets if _layer(b) in HIGHER)
    assert not upward, f"imports from {LOWER} into {HIGHER}: {upward}"


def test_the_checks_find_a_cycle_and_an_upward_arrow():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert _layer("retrieval_qa.data.datamodule") in LOWER
    assert _layer("retrieval_qa.cli") in HIGHER


def test_data_imports_no_method_or_embedding_module():
    above = ("embeddings", "models", "mining", "export", "baselines", *HIGHER, *LOWER[1:])
    upward = sorted(f"{a} -> {b}" for a, targets in import_graph().items()
                    if _layer(a) == "data" for b in targets if _layer(b) in above)
    assert not upward, f"data/ imports from the layers above it: {upward}"
