"""The run folders of a sweep (``rqa sweep``'s ``runs/sweeps/<name>/``, or the per-run copies
beside a committed table): read by ``rqa compare`` (:mod:`.compare`) and by the sweep package
above this one (:mod:`retrieval_qa.sweeps`: its table, and its runner's check of finished
runs) alike."""

from __future__ import annotations

from pathlib import Path

from ..written import read_json_or_refuse, read_report


def read_run_plan(path: str | Path) -> dict:
    """A sweep run's ``sweep.json`` (its parameters and command), refused when damaged.

    Args:
        path: the run's ``sweep.json``.
    """
    return read_json_or_refuse(
        path, "sweep run file", "delete the result.json beside it and run the same `rqa sweep` "
        "command again: the run resumes from its last checkpoint and both files are written "
        "again")


def load_sweep_runs(sweep_dir: str | Path) -> list[dict]:
    """Every run of a sweep folder as ``{"sweep": <sweep.json>, "report": <result.json> or
    None, "run_dir": ...}``, in the sweep's order.

    Args:
        sweep_dir: the sweep's folder (``runs/sweeps/<name>/``, or a table's per-run copies).
    """
    root = Path(sweep_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"--sweep {sweep_dir}: no such folder (`rqa sweep FILE` writes "
                                "runs/sweeps/<name>/)")
    runs = []
    for info_file in sorted(root.rglob("sweep.json")):
        info = read_run_plan(info_file)
        result = info_file.parent / "result.json"
        report = read_report(result) if result.is_file() else None
        runs.append({"sweep": info, "report": report, "run_dir": str(info_file.parent)})
    if not runs:
        raise FileNotFoundError(f"--sweep {sweep_dir}: no run folders (sweep.json) under it; "
                                "run `rqa sweep FILE` first")
    runs.sort(key=lambda r: r["sweep"].get("index", 0))
    return runs
