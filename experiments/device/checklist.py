"""The checklist file (experiments/queues/device_checklist.txt): its paths, the kinds of item
and the items, in priority order.

Each line is ``ID MINUTES KIND COMMAND``; ``{experiment}`` in the ID stands for one item per
experiment of conf/experiment/ (less :data:`SAME_GPU_PROFILE`). MINUTES is the item's
estimate on one H100/H200, and no item may be longer than :data:`TURN_SECONDS`, what one turn
leaves the checklist: an item that cannot finish in one turn is cut into stages that can
(the checklist's header says how).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKLIST = ROOT / "experiments" / "queues" / "device_checklist.txt"
OUTPUT_ROOT = ROOT / "results" / "gpu" / "checklist"
WORK_ROOT = ROOT / "runs" / "device-check"
REHEARSAL_ROOT = ROOT / "runs" / "device-rehearsal"   # --device cpu: its work and results
COLLECTED = ROOT / "runs" / "device-collected"        # --unbundle: a turn's logs and run files
CARRY_IN = ROOT / ".device" / "carry"                 # carried in: the last turns' carry sets
#: smoke: 30 steps, capped pools; bench: a side-by-side bench; evaluate: `rqa evaluate`;
#: train: full-pool `rqa train` runs (their reports recorded); table2: rows of
#: `make reproduce-table2`; computed: figures computed from other items' records; queue: a
#: resumable run_queue.py (kept for longer leases); recipe: a `make` recipe whole, its
#: trainings' reports and its steps' times recorded; cmd: any command
KINDS = ("smoke", "bench", "evaluate", "train", "table2", "computed", "queue", "recipe", "cmd")
VERSIONS = ("torch", "transformers", "pytorch-lightning", "sentence-transformers", "numpy")


class _SameProfiles(Mapping):
    """:func:`retrieval_qa.sweeps.experiments.same_profiles`, composed when first read."""

    def _data(self) -> dict[str, str]:
        from retrieval_qa.sweeps.experiments import same_profiles

        return same_profiles()

    def __getitem__(self, key: str) -> str:
        return self._data()[key]

    def __iter__(self):
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return repr(self._data())


#: experiments whose composed paper and gpu profiles are another experiment's (a CPU recipe's
#: variant: distill_hour's are distill's), derived from conf/ when first read: no
#: {experiment} item of their own (the checklist names their smoke item explicitly);
#: tests/training/test_profiles_run.py runs them under their base's name
SAME_GPU_PROFILE: Mapping[str, str] = _SameProfiles()
MIN_SLICE_S = {"cuda": 240.0, "cpu": 0.0}   # a resumable item starts with at least this left
GRACE_S = {"cuda": 45.0, "cpu": 8.0}        # SIGTERM this long before the deadline
#: one turn: 15 minutes of device time, less the machine's start and the first call (about
#: 2.5 min) and the last poll (about 1 min): the deadline start.sh gets (docs/reproduce.md)
TURN_DEADLINE_S = 690.0
#: what a turn leaves the checklist's items: that deadline less the SIGTERM grace
TURN_SECONDS = TURN_DEADLINE_S - GRACE_S["cuda"]
STATUS_FILE, LOG_FILE, PID_FILE = "status.json", "device-check.log", "device-check.pid"
BUNDLE_LIMIT = 15 * 2**20                   # one file back from the device: at most 16 MiB
#: small files of the work root a bundle brings back; ledger.jsonl: the turn's test-pool looks
#: (env.sh points $RQA_LEDGER there), for `rqa ledger --ledger` here
ARTEFACTS = ("result.json", "config.yaml", "table2.md", "ledger.jsonl")
#: the ledger family ($RQA_LEDGER_FAMILY) of an item's test-pool looks, by its kind, after
#: "gpu_" (a GPU turn: results/gpu/claims.yaml's families) or "rehearsal_": a turn's looks
#: never join a CPU study's family
LEDGER_FAMILY = {"train": "papers", "table2": "table2", "evaluate": "bench"}
#: the per-question records of the turn's tests (a run's, a stage evaluation's), which `rqa
#: ledger --keep` commits with their looks
RECORD = re.compile(r"(per_question|.+\.questions)\.jsonl\.gz")
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: placeholders that make an item wait for another: {carried:ID} (its carry set, restored)
#: and {record:ID} (its JSON, finished)
NEEDS = re.compile(r"\{(carried|record):([A-Za-z0-9_.-]+)\}")


@dataclass
class Item:
    id: str
    minutes: float
    kind: str
    command: str          # with placeholders, as in the checklist

    @property
    def resumable(self) -> bool:
        return self.kind == "queue"

    def needs(self) -> list[tuple[str, str]]:
        """``(what, ID)`` of each item this one waits for: ``carried`` or ``record``."""
        return NEEDS.findall(self.command)


def parse_checklist(path: Path = CHECKLIST, experiments: list[str] | None = None) -> list[Item]:
    """The items of ``path``, a ``{experiment}`` line expanded over conf/experiment.

    Args:
        path: a checklist file (``ID MINUTES KIND COMMAND`` a line; ``#`` comments).
        experiments: what ``{experiment}`` expands to (default: conf/experiment's names less
            :data:`SAME_GPU_PROFILE`).
    """
    if experiments is None:
        from retrieval_qa.config import conf_names

        experiments = [e for e in conf_names("experiment") if e not in SAME_GPU_PROFILE]
    items: list[Item] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 3)
        try:
            ident, minutes, kind, command = parts[0], float(parts[1]), parts[2], parts[3]
        except (IndexError, ValueError):
            raise ValueError(f"{path}:{number}: expected 'ID MINUTES KIND COMMAND', got "
                             f"{line.strip()!r}") from None
        if kind not in KINDS:
            raise ValueError(f"{path}:{number}: kind {kind!r} is not one of {KINDS}")
        names = experiments if "{experiment}" in ident else [None]
        for name in names:
            sub = (lambda t, n=name: t.replace("{experiment}", n)) if name else (lambda t: t)
            if not ID_PATTERN.fullmatch(sub(ident)):
                raise ValueError(f"{path}:{number}: item id {sub(ident)!r}: letters, digits, "
                                 "'_', '.' and '-' only (it names files that come back)")
            items.append(Item(sub(ident), minutes, kind, sub(command)))
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: an item id is used twice: "
                         f"{sorted({i for i in ids if ids.count(i) > 1})}")
    for item in items:
        unknown = sorted({ident for _, ident in item.needs()} - set(ids))
        if unknown:
            raise ValueError(f"{path}: item {item.id} waits for {unknown}, which no line is")
    return items


def plan_turns(items: list[Item], done: set[str], turn_seconds: float = TURN_SECONDS
               ) -> tuple[list[list[Item]], list[Item]]:
    """The turns the runner would make of the items not ``done``, by their estimates: each
    turn takes the items in order that fit what is left of it and whose awaited items ran in
    an earlier turn or earlier in this one (one after another: the smoke items' four at a time
    is not counted). Returns (the turns, the items no turn can take)."""
    pending = [i for i in items if i.id not in done]
    finished = set(done)
    turns: list[list[Item]] = []
    while pending:
        room, turn = turn_seconds, []
        for item in list(pending):
            if all(ident in finished for _, ident in item.needs()) \
                    and item.minutes * 60 <= room:
                room -= item.minutes * 60
                turn.append(item)
                finished.add(item.id)
                pending.remove(item)
        if not turn:
            break
        turns.append(turn)
    return turns, pending
