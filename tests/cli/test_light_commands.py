"""What prints a plan or a config imports no torch, Lightning or transformers (they take
seconds to import): ``rqa train --cfg``, ``rqa sweep NAME --dry-run`` and
``experiments/endx_analyses.py --dry-run``, each run in a fresh interpreter whose
``sys.modules`` is read at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "pytorch_lightning", "lightning_fabric", "transformers")

#: runs ``main`` of a command (argv after the program), then prints the heavy modules loaded
PROBE = """\
import json, runpy, sys
argv = json.loads(sys.argv[1])
code = 0
if argv[0] == "rqa":
    from retrieval_qa.cli.main import main
    code = main(argv[1:])
else:
    sys.argv = argv
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code or 0
heavy = sorted(m for m in {HEAVY} if m in sys.modules)
print("HEAVY " + json.dumps(heavy), file=sys.stderr)
sys.exit(code)
""".replace("{HEAVY}", repr(HEAVY))


def _probe(argv: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = {**os.environ, "RQA_LEDGER": str(tmp_path / "ledger.jsonl")}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    line = next((x for x in done.stderr.splitlines() if x.startswith("HEAVY ")), None)
    assert line is not None, done.stderr[-2000:]
    return done, json.loads(line.removeprefix("HEAVY "))


@pytest.mark.parametrize("argv", [
    ["rqa", "train", "--cfg", "experiment=dual_gru"],
    ["rqa", "train", "--cfg", "experiment=endx_bert", "profile=cpu"],
    ["rqa", "sweep", "dual_vs_endx", "--dry-run"],
    ["experiments/endx_analyses.py", "--dry-run"],
], ids=["train-cfg", "train-cfg-endx-bert", "sweep-dry-run", "endx-analyses-dry-run"])
def test_a_printed_plan_or_config_imports_no_torch_lightning_or_transformers(argv, tmp_path):
    done, heavy = _probe(argv, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert heavy == [], f"{' '.join(argv)} imported {heavy}"


def test_the_dry_run_of_the_endx_analyses_names_its_folders_portably(tmp_path):
    done, _ = _probe(["experiments/endx_analyses.py", "--dry-run"], tmp_path)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["results_dir"] == "runs/endx"  # conf's default, relative to the repository
