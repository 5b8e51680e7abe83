"""Token ids of a list of texts, computed once and cached, and padded batches cut from them.

A training step or an evaluation batch then only gathers rows of integer arrays (no
tokenizer call in the loop, cheap in DataLoader workers), so a GPU is not kept waiting by
the host. :class:`TokenizedTexts` holds each text's ids truncated at ``max_length`` (special
tokens included), exactly what the tokenizer gives for that text alone, stored flat
(``ids`` with ``offsets``); :meth:`TokenizedTexts.batch` pads a selection of rows to the
longest of them, or up to a multiple of ``pad_to_multiple_of`` (a small set of sequence
lengths, so shapes repeat: compiled kernels and the CUDA caching allocator reuse them). The
batch holds the same tensors as :func:`~.collate.encode_texts` of the same texts (tested).

Caching: ``cache_root()/tokenized/<key>.arrow``, keyed by the tokenizer (class and its
serialised vocabulary and rules), ``max_length`` and the sha256 of the texts (and contexts),
so any change of text, tokenizer or length gets its own file. Written whole and renamed; a
file that cannot be read back (empty, truncated, garbage, not one row per text) is rebuilt
with a warning naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import torch

from ..written import Damaged, atomic_path, check, read_back, rebuilding
from .cache import cache_root

CACHE_VERSION = "1"
log = logging.getLogger(__name__)


def tokenizer_fingerprint(tokenizer) -> str:
    """A digest of what decides the ids: class, special tokens, vocabulary and rules (not
    where the tokenizer was loaded from).

    Args:
        tokenizer: a Hugging Face tokenizer.
    """
    h = hashlib.sha256()
    h.update(type(tokenizer).__name__.encode() + b"\0")
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # its rules, less the truncation / padding state of the last call
        rules = json.loads(backend.to_str())
        rules.pop("truncation", None)
        rules.pop("padding", None)
        h.update(json.dumps(rules, sort_keys=True).encode())
    else:  # a slow tokenizer: its vocabulary
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(json.dumps([tokenizer.padding_side, tokenizer.pad_token_id,
                         getattr(tokenizer, "model_max_length", None)]).encode())
    return h.hexdigest()


def _texts_digest(texts: Sequence[str], contexts: Sequence[str] | None) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode() + b"\0")
    if contexts is not None:
        h.update(b"\1")
        for c in contexts:
            h.update(c.encode() + b"\0")
    return h.hexdigest()


def tokenize_rows(tokenizer, texts: Sequence[str], max_length: int,
                  contexts: Sequence[str] | None = None) -> dict[str, list[list[int]]]:
    """Unpadded ids of each text (``input_ids``, and ``token_type_ids`` where the tokenizer
    makes them), truncated at ``max_length``. With ``contexts`` each row is the pair (text,
    context) with only the context truncated, unless the text alone is too long (then both).

    Args:
        tokenizer: a Hugging Face tokenizer.
        texts: the texts.
        max_length: the cap, in tokens.
        contexts: a second segment per text; None: none.
    """
    keys = ("input_ids", "token_type_ids")
    if contexts is None:
        enc = tokenizer(list(texts), truncation=True, max_length=max_length)
        return {k: enc[k] for k in keys if k in enc}
    try:
        enc = tokenizer(list(texts), list(contexts), truncation="only_second",
                        max_length=max_length)
        return {k: enc[k] for k in keys if k in enc}
    except Exception:  # noqa: BLE001 - a sentence alone is too long for only_second
        out: dict[str, list] = {}
        for text, context in zip(texts, contexts, strict=True):
            # one-element lists: an empty context stays an (empty) second segment, as in
            # the batched call above
            try:
                row = tokenizer([text], [context], truncation="only_second",
                                max_length=max_length)
            except Exception:  # noqa: BLE001 - this row: cut both segments
                row = tokenizer([text], [context], truncation="longest_first",
                                max_length=max_length)
            for k in keys:
                if k in row:
                    out.setdefault(k, []).append(row[k][0])
        return out


def _flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter(chain.from_iterable(rows), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


class TokenizedTexts:
    """Ids of ``n`` texts stored flat: row ``i`` is ``ids[offsets[i]:offsets[i + 1]]``;
    ``type_ids`` alike.

    Args:
        ids: the ids of every text, one after another.
        offsets: ``[n + 1]`` where each text's ids start (and the last ends).
        type_ids: the segment ids, laid out as ``ids``; None: the tokenizer makes none.
        pad_id: the padding id.
        padding_side: ``right`` or ``left``.
    """

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, type_ids: np.ndarray | None,
                 pad_id: int, padding_side: str = "right") -> None:
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side={padding_side!r}; expected right or left")
        self.ids, self.offsets, self.type_ids = ids, offsets, type_ids
        self.pad_id, self.padding_side = int(pad_id), padding_side

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> list[int]:
        return np.diff(self.offsets).tolist()

    @classmethod
    def build(cls, tokenizer, texts: Sequence[str], max_length: int,
              contexts: Sequence[str] | None = None, cache: bool = True) -> TokenizedTexts:
        """Tokenise ``texts`` once (read from the cache when the same tokenizer, length and
        texts were tokenised before)."""
        path = None
        if cache:
            key = hashlib.sha256(json.dumps([
                CACHE_VERSION, tokenizer_fingerprint(tokenizer), max_length,
                _texts_digest(texts, contexts)]).encode()).hexdigest()[:24]
            path = cache_root() / "tokenized" / f"{key}.arrow"
            if path.exists():
                try:
                    return cls._read(path, tokenizer, len(texts))
                except Damaged as damage:
                    rebuilding(damage, log)
        rows = tokenize_rows(tokenizer, texts, max_length, contexts)
        ids, offsets = _flat(rows["input_ids"])
        type_ids = _flat(rows["token_type_ids"])[0] if "token_type_ids" in rows else None
        out = cls(ids, offsets, type_ids, tokenizer.pad_token_id or 0, tokenizer.padding_side)
        if path is not None:
            out._write(path)
        return out

    # ---- cache file ---------------------------------------------------------------------
    def _write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = {"input_ids": pa.ListArray.from_arrays(pa.array(self.offsets.astype(np.int32)),
                                                          pa.array(self.ids))}
        if self.type_ids is not None:
            columns["token_type_ids"] = pa.ListArray.from_arrays(
                pa.array(self.offsets.astype(np.int32)), pa.array(self.type_ids))
        table = pa.table(columns)
        with atomic_path(path) as tmp, ipc.new_file(tmp, table.schema) as writer:
            writer.write_table(table)

    @classmethod
    def _read(cls, path: Path, tokenizer, rows: int) -> TokenizedTexts:
        """The cache file of ``rows`` texts, or :class:`~retrieval_qa.written.Damaged`."""
        def read(p: Path):
            with ipc.open_file(p) as reader:
                table = reader.read_all()
            col = table.column("input_ids").combine_chunks()
            offsets = col.offsets.to_numpy().astype(np.int64)
            ids = col.values.to_numpy().astype(np.int32)
            check(len(offsets) == rows + 1 and offsets[0] == 0 and offsets[-1] == len(ids),
                  p, f"{len(offsets) - 1} rows of ids for {rows} texts")
            type_ids = None
            if "token_type_ids" in table.column_names:
                type_ids = table.column("token_type_ids").combine_chunks().values.to_numpy()
                check(len(type_ids) == len(ids), p, "token_type_ids and input_ids differ")
                type_ids = type_ids.astype(np.int32)
            return ids, offsets, type_ids

        ids, offsets, type_ids = read_back(path, read, "an Arrow table of token ids")
        return cls(ids, offsets, type_ids, tokenizer.pad_token_id or 0, tokenizer.padding_side)

    # ---- batches ------------------------------------------------------------------------
    def batch(self, rows: Sequence[int], pad_to_multiple_of: int | None = None
              ) -> dict[str, torch.Tensor]:
        """``{"input_ids", "attention_mask"[, "token_type_ids"]}`` of ``rows``, each
        ``LongTensor[B, L]``: L is the longest row, rounded up to a multiple of
        ``pad_to_multiple_of`` when given."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        lengths = ends - starts
        width = int(lengths.max()) if len(rows) else 0
        if pad_to_multiple_of and width % pad_to_multiple_of:
            width += pad_to_multiple_of - width % pad_to_multiple_of
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64) if self.type_ids is not None else None
        for r, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            n = e - s
            cols = slice(0, n) if self.padding_side == "right" else slice(width - n, width)
            ids[r, cols] = self.ids[s:e]
            mask[r, cols] = 1
            if types is not None:
                types[r, cols] = self.type_ids[s:e]
        out = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
        if types is not None:
            out["token_type_ids"] = torch.from_numpy(types)
        return out
