"""The one runner changed no plan: every committed queue, the device checklist (on the GPU and
in the CPU rehearsal, and the turns its estimates make) and every conf/sweeps file plan the
steps recorded before the refactor (plans_before.json.gz, written by the old planners: the
queue's ``plan``, the checklist's ``steps_of``, the sweep's ``plan_runs``).

gpu_all.txt's lines after its first pass are made from conf/ now (``@experiments``, in conf's
order): each of its sections plans the same steps as before, the first pass (written by hand)
in the same order too."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import sys
from pathlib import Path

import pytest

from experiments.device import checklist as C
from experiments.device import commands as K
from retrieval_qa.sweeps import plan as P
from retrieval_qa.sweeps import queue as Q

REPO = Path(__file__).resolve().parents[2]
ROOT = Path("/PLAN/root")
#: checklist items added since the record (a smoke item derived from an experiment added to
#: conf/ since then, and the recipe items; their own tests: tests/test_device_check.py); the
#: record's items are compared alone
ADDED = {"smoke-distill_plus", "recipe-distill_plus", "recipe-reader_q12k"}
#: CPU recipes added to conf/ since the record whose gpu profile is another experiment's
#: (variant: its base); like the record's variants, they add no checklist item
ADDED_VARIANTS = {"distill_plus6": "distill_plus"}
#: estimates revised since the record from a measured turn (item: the recorded minutes), the
#: checklist's data, not its planner: the record's items are compared with these minutes
REVISED = {"smoke-distill_hour": 2.0}


def recorded_items() -> list:
    return [dataclasses.replace(i, minutes=REVISED.get(i.id, i.minutes))
            for i in C.parse_checklist() if i.id not in ADDED]


@pytest.fixture(scope="module")
def before() -> dict:
    with gzip.open(Path(__file__).parent / "plans_before.json.gz", "rt") as f:
        return json.load(f)


def _plain(value):
    return json.loads(json.dumps(value, default=str))


def queue_plan(name: str) -> list[dict]:
    rows = []
    for run in Q.parse_queue(REPO / "experiments" / "queues" / name):
        cmd, where, _, marker, _ = Q.plan(run, ROOT)
        rows.append({"folder": run.folder, "words": run.words, "section": run.section,
                     "argv": ["python" if a == sys.executable else a for a in cmd],
                     "where": str(where.relative_to(ROOT)),
                     "marker": None if marker is None else str(marker.relative_to(ROOT))})
    return _plain(rows)


def checklist_plan(device: str) -> list[dict]:
    ctx = K.Context(device, Path("/PLAN/out"), Path("/PLAN/work"), math.inf,
                    grace=C.GRACE_S[device])
    rows = []
    for item in recorded_items():
        steps = K.steps_of(item, ctx)
        rows.append({"id": item.id, "minutes": item.minutes, "kind": item.kind,
                     "command": item.command, "needs": item.needs(),
                     "parallel": item.kind == "smoke" and len(steps) == 1,
                     "steps": [[s.argv, None if s.skip_if is None else str(s.skip_if)]
                               for s in steps]})
    return _plain(rows)


def sweep_plan(path: Path) -> list[dict]:
    sweep = P.load_sweep(path)
    runs = P.plan_runs(sweep, P.sweep_name(sweep, path), "runs/sweeps")
    return _plain([{"index": r.index, "params": r.params, "label": r.label,
                    "overrides": r.overrides, "run_dir": r.run_dir, "command": r.command}
                   for r in runs])


def _by_section(rows: list[dict]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["section"], []).append(json.dumps(row, sort_keys=True))
    return {k: sorted(v) for k, v in out.items()}


def test_the_endx_queue_plans_the_same_steps(before):
    assert queue_plan("gpu_endx_vs_dual.txt") == before["queues"]["gpu_endx_vs_dual.txt"]


def test_the_gpu_queue_made_from_conf_plans_the_same_steps(before):
    now, then = queue_plan("gpu_all.txt"), before["queues"]["gpu_all.txt"]
    assert _by_section(now) == _by_section(then)
    first = [r for r in then if r["section"].startswith("first pass")]
    assert now[:len(first)] == first          # the hand-written first pass, in its order


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_checklist_plans_the_same_items_and_steps(before, device):
    now, then = checklist_plan(device), before["checklist"][device]
    assert [r["id"] for r in now] == [r["id"] for r in then]
    for a, b in zip(now, then, strict=True):
        assert a == b, a["id"]


def test_the_checklist_makes_the_same_turns_and_variants(before):
    turns, _ = C.plan_turns(recorded_items(), set())
    assert [[i.id for i in t] for t in turns] == before["checklist"]["turns"]
    assert dict(C.SAME_GPU_PROFILE) == {**before["checklist"]["same_gpu_profile"],
                                        **ADDED_VARIANTS}


@pytest.mark.parametrize("name", sorted(p.stem for p in (REPO / "conf" / "sweeps").glob("*.yaml")))
def test_every_sweep_plans_the_same_runs(before, name):
    assert sweep_plan(REPO / "conf" / "sweeps" / f"{name}.yaml") == before["sweeps"][name]
