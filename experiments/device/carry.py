"""What one GPU turn leaves for the next: a carry set, in parts that fit what comes back.

A turn brings back at most 8 files of at most 16 MiB a call, and the next turn carries in at
most 64 MiB, the checkout and ``.device/`` included. A carry set is one item's output that a
later item reads (``{carried:ID}`` in the checklist), in one of two forms:

* ``weights``: a training run's newest checkpoint (its chosen best one when the run finished;
  else ``last.ckpt``, else ``last-weights.ckpt``): the state dict alone (no optimiser state),
  every floating tensor cast to bfloat16 (the others as they are), with the run's
  ``config.yaml``, the checkpoint's step and each tensor's dtype. Restored as
  ``weights.ckpt`` (``{"state_dict": ...}`` in the recorded dtypes: each weight is its bf16
  rounding, a relative change of at most 2**-8) and ``config.yaml``.
* ``folder``: a small folder (mined pairs, say) as one tar.xz, restored file for file.

Either is one blob cut into parts of at most ``part_bytes`` (default :data:`PART_BYTES`),
written as ``carry-ID.part01`` ... beside ``carry-ID.manifest.json`` (the parts' sizes and
SHA-256, the blob's, what it holds): flat names, as a turn's files come back. Restoring checks
every part and the whole before anything is written.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import shutil
import tarfile
from pathlib import Path

PART_BYTES = 15 * 2**20      # one file back from the device: at most 16 MiB
CAST = "bfloat16"
WEIGHTS_FILE, CONFIG_FILE, ABOUT_FILE = "weights.ckpt", "config.yaml", "carry.json"


def names(ident: str) -> tuple[str, str]:
    """(the manifest's file name, the parts' prefix) of item ``ident``'s carry set."""
    return f"carry-{ident}.manifest.json", f"carry-{ident}.part"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def newest_checkpoint(run_dir: Path) -> Path:
    """The checkpoint whose weights a run's carry set holds: the best one its finished report
    names (what it exported and tested), else the newest of ``last.ckpt`` and
    ``last-weights.ckpt``; FileNotFoundError naming the folder when there is none."""
    result = run_dir / "result.json"
    if result.is_file():
        best = json.loads(result.read_text()).get("best_training_checkpoint")
        if best and (run_dir / "checkpoints" / Path(best).name).is_file():
            return run_dir / "checkpoints" / Path(best).name
    found = [p for p in (run_dir / "checkpoints" / n for n in ("last.ckpt", "last-weights.ckpt"))
             if p.is_file()]
    if not found:
        raise FileNotFoundError(f"{run_dir}: no checkpoint to carry (checkpoints/last.ckpt or "
                                "last-weights.ckpt); the run stopped before its first one")
    return max(found, key=lambda p: p.stat().st_mtime_ns)


def to_bf16(state: dict) -> tuple[dict, dict]:
    """(``state`` with every floating tensor cast to bfloat16, each entry's dtype before)."""
    import torch

    dtypes, cast = {}, {}
    for key, value in state.items():
        if torch.is_tensor(value):
            dtypes[key] = str(value.dtype).removeprefix("torch.")
            value = value.detach().cpu()
            cast[key] = value.to(torch.bfloat16) if value.is_floating_point() else value.clone()
        else:
            cast[key] = value
    return cast, dtypes


def from_bf16(state: dict, dtypes: dict) -> dict:
    """The recorded dtypes back (a bf16 value is exact in float32: no second rounding)."""
    import torch

    return {k: (v.to(getattr(torch, dtypes[k])) if k in dtypes else v) for k, v in state.items()}


def _write(blob: bytes, about: dict, target: Path, ident: str, part_bytes: int) -> Path:
    """``blob`` in parts of at most ``part_bytes`` and the manifest, into ``target/ident``
    (replacing an earlier set of that item). Returns the manifest."""
    if part_bytes < 1:
        raise ValueError(f"part_bytes={part_bytes}: give a positive size")
    folder = target / ident
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    manifest_name, prefix = names(ident)
    count = max(1, -(-len(blob) // part_bytes))
    if count > 99:
        raise ValueError(f"{ident}: {len(blob)} bytes make {count} parts of {part_bytes}: "
                         "more than 99 (give larger parts)")
    parts = []
    for i in range(count):
        chunk = blob[i * part_bytes:(i + 1) * part_bytes]
        name = f"{prefix}{i + 1:02d}"
        (folder / name).write_bytes(chunk)
        parts.append({"name": name, "bytes": len(chunk), "sha256": _sha(chunk)})
    manifest = {**about, "item": ident, "bytes": len(blob), "sha256": _sha(blob),
                "part_bytes": part_bytes, "parts": parts}
    (folder / manifest_name).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder / manifest_name


def pack_weights(run_dir: Path, target: Path, ident: str, part_bytes: int = PART_BYTES
                 ) -> Path:
    """Run ``run_dir``'s weights (:func:`newest_checkpoint`), bf16, as item ``ident``'s carry
    set under ``target``; returns its manifest."""
    import torch

    checkpoint = newest_checkpoint(run_dir)
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state, dtypes = to_bf16(saved["state_dict"])
    buffer = io.BytesIO()
    torch.save({"state_dict": state}, buffer)
    config = run_dir / CONFIG_FILE
    about = {"kind": "weights", "cast": CAST, "dtypes": dtypes,
             "source": f"{run_dir.name}/checkpoints/{checkpoint.name}",
             "global_step": saved.get("global_step"), "epoch": saved.get("epoch"),
             "finished": (run_dir / "result.json").is_file(),
             "config": config.read_text() if config.is_file() else None}
    return _write(buffer.getvalue(), about, target, ident, part_bytes)


def pack_folder(folder: Path, target: Path, ident: str, only: list[str] | None = None,
                part_bytes: int = PART_BYTES) -> Path:
    """``folder`` (or its entries ``only``) as one tar.xz, item ``ident``'s carry set under
    ``target``; returns its manifest."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no folder to carry")
    entries = sorted(folder.iterdir()) if only is None else [folder / n for n in only]
    missing = [str(p) for p in entries if not p.exists()]
    if missing:
        raise FileNotFoundError(f"nothing to carry at {', '.join(missing)}")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in entries:
            tar.add(path, arcname=path.name)
    blob = lzma.compress(buffer.getvalue(), preset=6)
    return _write(blob, {"kind": "folder", "source": folder.name,
                         "entries": [p.name for p in entries]}, target, ident, part_bytes)


def read_set(folder: Path, ident: str) -> tuple[dict, bytes]:
    """The manifest and the whole blob of ``folder``'s carry set of ``ident``, every part and
    the whole checked (ValueError naming the part that is missing or differs)."""
    manifest_name, _ = names(ident)
    manifest = json.loads((folder / manifest_name).read_text())
    chunks = []
    for part in manifest["parts"]:
        path = folder / part["name"]
        if not path.is_file():
            raise ValueError(f"{path}: missing (a turn brings the parts back over several "
                             "calls: fetch the rest, then collect them)")
        data = path.read_bytes()
        if len(data) != part["bytes"] or _sha(data) != part["sha256"]:
            raise ValueError(f"{path}: {len(data)} bytes whose SHA-256 differs from the "
                             "manifest's: damaged or from another turn")
        chunks.append(data)
    blob = b"".join(chunks)
    if _sha(blob) != manifest["sha256"]:
        raise ValueError(f"{folder}: the parts of {ident} do not make the recorded whole")
    return manifest, blob


def restore(folder: Path, ident: str, into: Path) -> dict:
    """Item ``ident``'s carry set in ``folder``, checked, restored into ``into`` (replaced
    whole): weights as ``weights.ckpt`` (their recorded dtypes) and ``config.yaml``, a folder
    file for file; ``carry.json`` says what it is. Returns the manifest."""
    manifest, blob = read_set(folder, ident)
    tmp = into.parent / f".{into.name}.restoring"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    if manifest["kind"] == "weights":
        import torch

        saved = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)
        state = from_bf16(saved["state_dict"], manifest["dtypes"])
        torch.save({"state_dict": state, "global_step": manifest.get("global_step"),
                    "carried": f"{CAST} round trip"}, tmp / WEIGHTS_FILE)
        if manifest.get("config"):
            (tmp / CONFIG_FILE).write_text(manifest["config"])
    else:
        with tarfile.open(fileobj=io.BytesIO(lzma.decompress(blob)), mode="r") as tar:
            tar.extractall(tmp, filter="data")
    about = {k: v for k, v in manifest.items() if k not in ("parts", "config", "dtypes")}
    (tmp / ABOUT_FILE).write_text(json.dumps(about, indent=2) + "\n")
    if into.exists():
        shutil.rmtree(into)
    tmp.rename(into)
    return manifest


def find_set(ident: str, sources: list[Path]) -> Path | None:
    """The first of ``sources/ident`` that holds ``ident``'s manifest, or None."""
    manifest_name, _ = names(ident)
    return next((s / ident for s in sources if (s / ident / manifest_name).is_file()), None)


def gather(files: list[Path], target: Path) -> list[str]:
    """Returned carry files (``carry-ID.manifest.json``, ``carry-ID.partNN``) into
    ``target/ID/``, where the next turn's pack carries them in; returns the items."""
    items = set()
    for path in files:
        name = path.name
        if not name.startswith("carry-"):
            continue
        ident = name.removeprefix("carry-").rsplit(".manifest.json", 1)[0] \
            if name.endswith(".manifest.json") else name.removeprefix("carry-").rsplit(".part", 1)[0]
        (target / ident).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / ident / name)
        items.add(ident)
    return sorted(items)
