"""Committing looks: a look of the working ledger (``runs/ledger.jsonl``) and its per-question
record join the committed ones (``results/ledger.jsonl``, ``results/<study>/records/``); ``rqa
ledger --keep``. The record is checked against the look's ranks digest, so a committed line
always names the record it came from."""

from __future__ import annotations

import filecmp
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputFileError
from ..portable_paths import portable_path
from ..written import atomic_path
from .ledger import append, ranks_digest, read
from .per_question import read_per_question


def keep(ids: Sequence[str], source: str | Path, into: str | Path, records: str | Path, *,
         stem: str | None = None, config: str | None = None,
         seed: int | None = None) -> list[dict]:
    """Commit looks: copy each look's per-question record into ``records`` and append its
    ledger line, pointing at the copy, to ``into`` (the ledger behind ``results/``).

    The copy is checked against the look: its ranks must digest to the line's ``ranks``.
    Nothing is written unless every look passes (a look already in ``into``, a record that is
    missing or belongs to another look, a copy that would replace another file: an error).

    Args:
        ids: the looks' ids (or unique prefixes) in ``source``.
        source: the ledger the looks were appended to (``runs/ledger.jsonl``).
        into: the committed ledger (``results/ledger.jsonl``).
        records: the folder of the study's records (``results/<study>/records``).
        stem: the copies' names are ``<stem>.<dataset>_<pool>.questions.jsonl.gz``; None:
            ``<family>_seed<seed>`` (``<family>`` without a seed).
        config: the label of the configuration in the results' looks tables; None: none.
        seed: the training seed of a look logged without one (a pipeline's checkpoints);
            a look logged with another seed is an error.

    Returns:
        The lines appended.
    """
    entries, into, records = read(source), Path(into), Path(records)
    done = {e["id"] for e in read(into)} if into.is_file() else set()
    plan = []
    for want in ids:
        found = [e for e in entries if e["id"].startswith(want)]
        if len(found) != 1:
            raise InputFileError("ledger", source, f"{len(found)} looks have the id {want!r}",
                                 "give an id (or a unique prefix) that `rqa ledger --looks` "
                                 "lists")
        entry = dict(found[0])
        if entry["id"] in done:
            raise InputFileError("ledger", into, f"already holds the look {entry['id']}",
                                 "leave that id out")
        if seed is not None:
            if entry.get("seed") not in (None, seed):
                raise InputFileError("ledger", source, f"the look {entry['id']} ran with seed "
                                     f"{entry['seed']}, not {seed}", "leave --seed out")
            entry["seed"] = seed
        record = Path(entry.get("record") or "")
        if not entry.get("record") or not record.is_file():
            raise InputFileError("ledger", source, f"the look {entry['id']}'s record "
                                 f"{entry.get('record')!r} is not a file",
                                 "run the command from the folder it ran in")
        if entry.get("ranks") and ranks_digest(read_per_question(record).ranks) \
                != entry["ranks"]:
            raise InputFileError("per-question record", record, f"is not the look "
                                 f"{entry['id']} (its ranks differ): a later evaluation "
                                 "replaced it", "evaluate again and keep the new look")
        name = stem or entry["family"] + ("" if entry.get("seed") is None
                                          else f"_seed{entry['seed']}")
        target = records / f"{name}.{entry['dataset']}_{entry['pool']}.questions.jsonl.gz"
        if any(target == t for _, t, _ in plan):
            raise InputFileError("ledger", source, f"two looks would be copied to {target}",
                                 "keep them one at a time, each with its own --stem")
        if target.exists() and not filecmp.cmp(record, target, shallow=False):
            raise InputFileError("per-question record", target, "exists and holds another "
                                 "look", "give another --stem")
        entry["record"] = portable_path(str(target.resolve()))
        if config is not None:
            entry["config"] = config
        plan.append((record, target, entry))
    for record, target, entry in plan:
        if not target.exists():
            with atomic_path(target, "--records") as tmp:
                shutil.copyfile(record, tmp)
        append(entry, into)
    return [entry for _, _, entry in plan]
