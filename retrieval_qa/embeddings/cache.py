"""On-disk cache of computed embeddings: ``<cache root>/embeddings/<key>/`` holds
``vectors.pt`` (a dict of tensors) and ``meta.json`` (settings, sources with their sha256,
statistics, seconds it took). The key hashes the settings, the sha256 of every source file
(texts and vectors), :data:`EMBEDDING_VERSION` and the sha256 of the code that computes the
vectors, so a changed source, setting or rule is never served stale vectors. A folder is
written whole and renamed; one that cannot be read back (a file missing, empty, truncated or
garbage, another version, meta.json's tensor shapes not those of vectors.pt) is computed
again with a warning naming the file."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch

from ..data.cache import cache_root
from ..data.io import file_sha256
from ..written import Damaged, atomic_dir, check, read_back, read_json, rebuilding

EMBEDDING_VERSION = "1"
log = logging.getLogger(__name__)
_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def source_sha256(path: str | Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) within a process.

    Args:
        path: the file.
    """
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
    """The cache folder's name: 24 hex digits of the sha256 of ``settings``, ``sources``,
    :data:`EMBEDDING_VERSION` and :func:`code_sha256`.

    Args:
        settings: what was computed (JSON-serialisable).
        sources: the source files' names -> sha256.
    """
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
    says ``cache: hit|miss|off`` and where the folder is.

    Args:
        settings: what is computed (JSON-serialisable; part of the key).
        sources: the source files' names -> sha256 (part of the key).
        compute: computes ``(tensors, notes)`` on a miss.
        cache_dir: the cache's root; None: :func:`~retrieval_qa.data.cache.cache_root`'s
            default.
        use_cache: read and write the cache; False: always compute, write nothing.
    """
    folder = cache_root(cache_dir) / "embeddings" / cache_key(settings, sources)
    if use_cache and os.path.lexists(folder):
        try:
            tensors, meta = _read(folder)
            return tensors, {**meta, "cache": "hit", "cache_folder": str(folder)}
        except Damaged as damage:
            rebuilding(damage, log)
    tensors, notes = compute()
    meta = {"settings": settings, "sources": sources, "version": EMBEDDING_VERSION,
            "shapes": {k: list(v.shape) for k, v in tensors.items()}, **notes}
    if use_cache:
        with atomic_dir(folder) as tmp:
            torch.save(tensors, tmp / "vectors.pt")
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    return tensors, {**meta, "cache": "miss" if use_cache else "off",
                     "cache_folder": str(folder) if use_cache else None}


def _read(folder: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, meta) of a cache folder, or :class:`~retrieval_qa.written.Damaged`."""
    meta = read_json(folder / "meta.json", ("settings", "sources", "shapes"),
                     version=("version", EMBEDDING_VERSION))
    vectors = folder / "vectors.pt"
    tensors = read_back(vectors, lambda p: torch.load(p, map_location="cpu", weights_only=True),
                        "a saved dict of tensors")
    shapes = {k: list(v.shape) for k, v in tensors.items()} \
        if isinstance(tensors, dict) and all(isinstance(v, torch.Tensor)
                                             for v in tensors.values()) else None
    check(shapes == meta["shapes"], vectors, f"tensors {shapes}, meta.json says {meta['shapes']}")
    return tensors, meta
