import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_code_compiles_and_names_existing_api(path):
    nb = json.loads(path.read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells
    for i, src in enumerate(cells):
        compile(src, f"{path.name}[cell {i}]", "exec")
    # the imports of the first cell must resolve against the package
    namespace: dict = {}
    exec("\n".join(line for line in cells[0].splitlines()
                   if line.startswith(("from ", "import "))), namespace)
