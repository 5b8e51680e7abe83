"""Table 2's time with ``JOBS=N`` rows at once, computed from its rows' times measured one at a
time (the device checklist's ``table2-*`` items), by the schedule that
``experiments/reproduce_table2.py --jobs N`` follows: the rows are submitted in the table's
order to a ``ThreadPoolExecutor`` of N workers, so each row starts when the first worker is
free and a worker runs its row's pools one after another (a row's time is the sum of its
pools'). That is a list schedule in table order; its makespan is the computed time.

It is a computation, not a measurement: it assumes each row runs at the speed it had alone,
while N rows share one GPU and the machine's cores. The whole table at ``JOBS=N`` stays
unmeasured (it does not fit one turn); this is the figure to state beside the rows' times.

    python experiments/device/schedule.py --jobs 4 --records RECORD_OR_FOLDER ... [--out F]
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)  # run as a script: the repository root first, not this folder
TABLE = "tables/endx_table2.yaml"
COMPUTED_KINDS = ("bm25", "train")    # the rows reproduce_table2 computes (not the quoted)
GOAL_SECONDS = 12 * 60                # results/BENCH.md: every row in under 12 minutes


def list_schedule(rows: list[tuple[str, float]], jobs: int) -> dict:
    """The list schedule of ``rows`` ((name, seconds), in submission order) on ``jobs``
    workers: each row to the worker free first (ties: the lowest worker).

    Args:
        rows: each row's name and its time alone, in the order they are submitted.
        jobs: workers (rows at once), at least 1.

    Returns:
        ``{"makespan": s, "rows": [{"row", "worker", "start", "end"}, ...]}``.

    Example:

        >>> list_schedule([("a", 3), ("b", 1), ("c", 1)], 2)["makespan"]
        3.0
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs}: at least one worker")
    free = [(0.0, worker) for worker in range(jobs)]
    placed = []
    for name, seconds in rows:
        start, worker = heapq.heappop(free)
        end = start + seconds
        placed.append({"row": name, "worker": worker, "start": start, "end": end})
        heapq.heappush(free, (end, worker))
    return {"makespan": max((p["end"] for p in placed), default=0.0), "rows": placed}


def table_rows(table: str = TABLE) -> list[str]:
    """The rows reproduce_table2 computes, in the table's order."""
    from retrieval_qa.config import load_yaml

    return [r["name"] for r in load_yaml(table)["rows"] if r["kind"] in COMPUTED_KINDS]


def record_files(records: Path | list[Path]) -> list[Path]:
    """The JSON files of ``records``: files as given, folders' ``*.json``."""
    paths = [records] if isinstance(records, Path) else list(records)
    return [f for p in paths for f in (sorted(p.glob("*.json")) if p.is_dir() else [p])]


def row_seconds(records: Path | list[Path]) -> tuple[dict[str, float], dict[str, str]]:
    """Each row's measured seconds (its pools' summed) from the passed ``table2`` records in
    ``records`` (files, or folders of them), and the record each came from."""
    seconds: dict[str, dict[str, float]] = {}
    source: dict[str, str] = {}
    for path in record_files(records):
        data = json.loads(path.read_text())
        if data.get("kind") != "table2" or data.get("status") != "passed":
            continue
        for stem, row in (data.get("rows") or {}).items():
            name, _, pool = stem.rpartition("-")
            if row.get("seconds") is not None:
                seconds.setdefault(name.replace("_", " "), {})[pool] = float(row["seconds"])
                source[name.replace("_", " ")] = path.name
    return {k: sum(v.values()) for k, v in seconds.items()}, source


def compute(records: Path | list[Path], jobs: int, table: str = TABLE) -> dict:
    """The JOBS=``jobs`` time of the table from ``records`` (see the module docstring)."""
    order = table_rows(table)
    seconds, source = row_seconds(records)
    missing = [r for r in order if r not in seconds]
    plan = list_schedule([(r, seconds[r]) for r in order if r in seconds], jobs)
    complete = not missing
    return {
        "computed": f"JOBS={jobs} time computed from the rows' times measured one at a time "
                    "(reproduce_table2's schedule: rows in table order, each to the first free "
                    "of the workers); not measured",
        "assumes": "each row runs at its speed alone while the rows share one GPU and the "
                   "machine's cores",
        "jobs": jobs, "rows": [{**p, "seconds": seconds[p["row"]], "record": source[p["row"]]}
                               for p in plan["rows"]],
        "missing_rows": missing, "complete": complete,
        "jobs_seconds": round(plan["makespan"], 1) if complete else None,
        "one_at_a_time_seconds": round(sum(seconds[r] for r in order if r in seconds), 1),
        "goal_seconds": GOAL_SECONDS,
        "goal_met_computed": (plan["makespan"] <= GOAL_SECONDS) if complete else None}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, nargs="+", required=True,
                    help="the checklist's records of the rows (its table2-* items), or a "
                         "folder of records")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--table", default=TABLE, help="under conf/ (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    out = compute(args.records, args.jobs, args.table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))
    if out["missing_rows"]:
        print(f"rows without a measured time: {', '.join(out['missing_rows'])}",
              file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
