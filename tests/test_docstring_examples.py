"""The examples in the public API's docstrings run as written (doctests).

Examples that need data or downloaded weights are marked ``# doctest: +SKIP``; the others run
on tiny random tensors or tiny configs and print only CPU-independent output (shapes, bools,
ints, exact values)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest


def _modules_with_examples() -> list[str]:
    """Every module of the package whose source holds a docstring example (``>>> ``): found,
    never listed by hand, so a new module's examples run without an edit here."""
    package = Path(__file__).resolve().parents[1] / "retrieval_qa"
    names = []
    for path in sorted(package.rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            parts = path.relative_to(package.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    tests = [t for t in finder.find(module, name) if t.examples]
    if not tests:
        pytest.skip(f"{name}: '>>> ' in its source is not a docstring example")
    for test in sorted(tests, key=lambda t: t.name):
        runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)
