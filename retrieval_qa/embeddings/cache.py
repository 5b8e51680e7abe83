"""On-disk cache of computed embeddings: ``<cache root>/embeddings/<key>/`` holds
``vectors.pt`` (a dict of tensors) and ``meta.json`` (settings, sources with their sha256,
statistics, seconds it took). The key hashes the settings, the sha256 of every source file
(texts and vectors), :data:`EMBEDDING_VERSION` and the sha256 of the code that computes the
vectors, so a changed source, setting or rule is never served stale vectors."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from ..data.cache import cache_root
from ..data.io import file_sha256

EMBEDDING_VERSION = "1"
_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def source_sha256(path: str | Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) within a process."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_MEMO:
        _SHA_MEMO[key] = file_sha256(path)
    return _SHA_MEMO[key]


def code_sha256() -> list[str]:
    """The sha256 of the modules that compute embeddings (read as files: importing them here
    would make a cycle with :mod:`.base`, which caches through this module)."""
    here = Path(__file__).parent
    return [file_sha256(here / f"{m}.py") for m in ("base", "contextual", "idf", "pooling",
                                                    "static")]


def cache_key(settings: dict, sources: dict[str, str]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"settings": settings, "sources": sources,
                         "version": EMBEDDING_VERSION, "code": code_sha256()},
                        sort_keys=True).encode())
    return h.hexdigest()[:24]


def cached(settings: dict, sources: dict[str, str],
           compute: Callable[[], tuple[dict[str, torch.Tensor], dict]],
           cache_dir: str | Path | None = None, use_cache: bool = True
           ) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors for ``settings``/``sources`` (name -> sha256): read from the cache, or
    computed by ``compute() -> (tensors, notes)`` and written atomically. The returned meta
    says ``cache: hit|miss|off`` and where the folder is."""
    folder = cache_root(cache_dir) / "embeddings" / cache_key(settings, sources)
    if use_cache and (folder / "meta.json").is_file():
        meta = json.loads((folder / "meta.json").read_text())
        tensors = torch.load(folder / "vectors.pt", map_location="cpu", weights_only=True)
        return tensors, {**meta, "cache": "hit", "cache_folder": str(folder)}
    tensors, notes = compute()
    meta = {"settings": settings, "sources": sources, "version": EMBEDDING_VERSION, **notes}
    if use_cache:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
        torch.save(tensors, tmp / "vectors.pt")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    return tensors, {**meta, "cache": "miss" if use_cache else "off",
                     "cache_folder": str(folder) if use_cache else None}
