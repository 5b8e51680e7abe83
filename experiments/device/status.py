"""A turn's progress and what comes back from it: each item's state, the bundle of results
and small artefacts (one .tar.gz of at most 15 MiB), the carry sets' parts (a few a call, the
rest at the next), and here, collecting them."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

from . import carry
from .checklist import ARTEFACTS, BUNDLE_LIMIT, LOG_FILE, RECORD, STATUS_FILE, Item
from .records import finished, tail

RETURNED = "returned.txt"      # in WORK_ROOT/carry: the carry files already handed back


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _figure(data: dict) -> str:
    key = next((k for k in ("dev_pool_seconds", "ratio_ours_over_st", "mrr", "table_seconds",
                            "jobs_seconds") if data.get(k) is not None), None)
    return f", {key} {data[key]}" if key else ""


def status_text(items: list[Item], output_root: Path, work_root: Path) -> str:
    """Each item's state (passed / failed / partial / running / not run) and its main figure,
    whether a detached run is alive, the carry files still to bring back, and the tail of
    its log."""
    state = {}
    if (work_root / STATUS_FILE).is_file():
        state = json.loads((work_root / STATUS_FILE).read_text())
    is_alive = bool(state) and state.get("state") == "running" and alive(int(state["pid"]))
    running = state.get("running", {}) if is_alive else {}
    waiting = state.get("waiting", {})
    lines = []
    for item in items:
        data = finished(item, output_root)
        partial = output_root / f"{item.id}.partial.json"
        if item.id in running:
            text = f"running since {running[item.id]}"
        elif data is not None:
            text = f"{data['status']} in {data['seconds']:.0f}s" + _figure(data)
        elif partial.is_file():
            data = json.loads(partial.read_text())
            text = (f"partial ({len(data.get('runs') or {})} runs kept)" if item.resumable else
                    f"interrupted after {data['seconds']:.0f}s at a deadline (runs again)")
        elif item.id in waiting:
            text = f"not run: {waiting[item.id]}"
        else:
            text = f"not run (about {item.minutes:g} min)"
        lines.append(f"{item.id:<34}{text}")
    head = "device-check: never started here" if not state else (
        f"device-check {'running' if is_alive else 'not running'} (pid {state['pid']}, "
        f"{state['state']}; at {state['updated_at']}: {state['seconds_left']} s to its deadline)")
    left = sum(i.minutes for i in items if finished(i, output_root) is None)
    owed = carry_files(work_root, unreturned=True)
    log = tail(work_root / LOG_FILE, 1500)
    return "\n".join([head, *lines, f"left: about {left:g} GPU minutes",
                      *([f"carry files still to bring back: {len(owed)} (poll again)"]
                        if owed else []),
                      *(["--- log tail ---", log] if log else [])])


def bundle(target: Path, output_root: Path, work_root: Path) -> Path:
    """One .tar.gz of the results so far (checklist/*.json) and the small artefacts of the
    work root (each run's result.json, config.yaml and per-question record, Lightning CSV
    logs, Table 2's row JSONs, the turn's ledger of test-pool looks), the status and the log;
    if it would pass the limit, the logs are left out first, then every artefact."""
    members = [(p, f"checklist/{p.name}") for p in sorted(output_root.glob("*.json"))]
    members += [(work_root / n, f"work/{n}") for n in (STATUS_FILE, LOG_FILE)
                if (work_root / n).is_file()]
    files = [p for p in sorted(work_root.rglob("*")) if p.is_file()
             and not {"checkpoints", "carry", "carried"} & set(p.relative_to(work_root).parts)]
    kept = [p for p in files if p.name in ARTEFACTS or RECORD.fullmatch(p.name)
            or re.fullmatch(r".+-(dev|train)\.json", p.name)]
    logs = [p for p in files if p.suffix == ".csv" or p.name == "item.log"]
    target.parent.mkdir(parents=True, exist_ok=True)
    for extra in (sorted(kept + logs), kept, []):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for path, name in members + [(p, f"work/{p.relative_to(work_root)}")
                                         for p in extra]:
                tar.add(path, arcname=name)
        if buffer.tell() <= BUNDLE_LIMIT:
            target.write_bytes(buffer.getvalue())
            return target
    raise SystemExit(f"the results alone pass {BUNDLE_LIMIT} bytes: bring them back in parts")


def carry_files(work_root: Path, unreturned: bool = False) -> list[Path]:
    """This machine's carry files (manifests first), or those not yet handed back."""
    root = work_root / "carry"
    if not root.is_dir():
        return []
    files = sorted(root.glob("*/carry-*"), key=lambda p: (not p.name.endswith(".json"),
                                                         p.parent.name, p.name))
    if not unreturned:
        return files
    returned = set((root / RETURNED).read_text().split()) if (root / RETURNED).is_file() else set()
    return [p for p in files if f"{p.parent.name}/{p.name}" not in returned]


def return_carry(work_root: Path, out: Path, max_files: int) -> tuple[list[str], int]:
    """Copy up to ``max_files`` carry files not yet handed back into ``out`` (flat, as the
    device tool brings files back) and note them as handed back. Returns (their names, how
    many are left for the next call)."""
    owed = carry_files(work_root, unreturned=True)
    chosen, left = owed[:max(0, max_files)], len(owed) - max(0, max_files)
    out.mkdir(parents=True, exist_ok=True)
    for path in chosen:
        shutil.copyfile(path, out / path.name)
    if chosen:
        with open(work_root / "carry" / RETURNED, "a") as f:
            f.write("".join(f"{p.parent.name}/{p.name}\n" for p in chosen))
    return [p.name for p in chosen], max(0, left)


def unbundle(source: Path, output_root: Path, work_to: Path, carry_to: Path | None = None
             ) -> list[str]:
    """The checklist JSONs of a bundle into ``output_root``, its work files (logs, each run's
    result.json, config.yaml, per-question record, CSV logs) under ``work_to``, the turn's
    ledger relinked to the records as they lie here (:func:`relink_looks`); the carry files
    lying beside the bundle into ``carry_to/ID/`` (the next turn's pack carries them in).
    Returns the files written."""
    written = []
    with tarfile.open(source) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if not member.isfile() or ".." in parts or Path(member.name).is_absolute():
                continue
            target = (output_root if parts[0] == "checklist" else work_to) / Path(*parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
            written.append(str(target))
    if (work_to / "ledger.jsonl").is_file():
        relink_looks(work_to / "ledger.jsonl", work_to)
    for final in output_root.glob("*.json"):     # a partial record that its item replaced
        if not final.name.endswith(".partial.json"):
            (output_root / final.name.replace(".json", ".partial.json")).unlink(missing_ok=True)
    if carry_to is not None:
        beside = sorted(p for p in source.parent.glob("carry-*") if p.is_file())
        for ident in carry.gather(beside, carry_to):
            written += [str(p) for p in sorted((carry_to / ident).iterdir())]
    return written


def relink_looks(ledger_file: Path, work_to: Path) -> int:
    """Point each look of a turn's collected ledger at its per-question record as it came
    back under ``work_to`` (the device logged its own machine's paths), so that `rqa ledger
    --keep ID --ledger LEDGER_FILE` commits it here. A record is the file under ``work_to``
    named by the longest tail of the logged path whose ranks digest to the look's; a look
    whose record did not come back keeps its path (`--keep` then says so). Returns how many
    looks were relinked."""
    from retrieval_qa.evaluation.ledger import append, ranks_digest, read
    from retrieval_qa.evaluation.per_question import read_per_question
    from retrieval_qa.written import atomic_path

    entries, relinked = read(ledger_file), 0
    for entry in entries:
        logged = Path(entry.get("record") or "")
        for start in range(int(logged.is_absolute()), len(logged.parts)):
            found = work_to.joinpath(*logged.parts[start:])
            if found.is_file() and (not entry.get("ranks") or ranks_digest(
                    read_per_question(found).ranks) == entry["ranks"]):
                entry["record"], relinked = str(found.resolve()), relinked + 1
                break
    with atomic_path(ledger_file, "ledger") as tmp:
        for entry in entries:
            append(entry, tmp)
    return relinked
