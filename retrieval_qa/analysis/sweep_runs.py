"""The run folders of a sweep (``rqa sweep``'s ``runs/sweeps/<name>/``, or the per-run copies
beside a committed table): read by the sweep tables (:mod:`.sweeps`) and by ``rqa compare``
(:mod:`.compare`) alike."""

from __future__ import annotations

import json
from pathlib import Path


def load_sweep_runs(sweep_dir: str | Path) -> list[dict]:
    """Every run of a sweep folder as ``{"sweep": <sweep.json>, "report": <result.json> or
    None, "run_dir": ...}``, in the sweep's order."""
    root = Path(sweep_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"--sweep {sweep_dir}: no such folder (`rqa sweep FILE` writes "
                                "runs/sweeps/<name>/)")
    runs = []
    for info_file in sorted(root.rglob("sweep.json")):
        info = json.loads(info_file.read_text(encoding="utf-8"))
        result = info_file.parent / "result.json"
        report = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else None
        runs.append({"sweep": info, "report": report, "run_dir": str(info_file.parent)})
    if not runs:
        raise FileNotFoundError(f"--sweep {sweep_dir}: no run folders (sweep.json) under it; "
                                "run `rqa sweep FILE` first")
    runs.sort(key=lambda r: r["sweep"].get("index", 0))
    return runs
