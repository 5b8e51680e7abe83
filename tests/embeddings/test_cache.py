from pathlib import Path

import numpy as np
import pytest
from helpers import TINY_SQUAD, damage

from retrieval_qa.data.paragraphs import build_paragraph_task
from retrieval_qa.data.squad import parse_squad
from retrieval_qa.embeddings import base
from retrieval_qa.embeddings.static import read_vectors


def _vectors(folder, scale=1.0):
    words = sorted({w for text in ("what is the capital of france ? paris berlin germany "
                                   "where tower eiffel munich bavaria which state has in it")
                    for w in text.split()})
    rng = np.random.default_rng(0)
    np.save(folder / "m.npy", (scale * rng.standard_normal((len(words), 8))).astype(np.float32))
    (folder / "vocab.txt").write_text("\n".join(words))
    return read_vectors("tiny", folder / "m.npy", folder / "vocab.txt")


@pytest.fixture
def task():
    paragraphs, _ = parse_squad(TINY_SQUAD)
    return build_paragraph_task(paragraphs, "dev", "tiny.json", "sha-of-tiny")


def test_second_run_is_a_cache_hit_and_computes_nothing(tmp_path, task, monkeypatch):
    vectors = _vectors(tmp_path)
    q1, p1, meta1 = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                         cache_dir=tmp_path / "c")
    assert meta1["cache"] == "miss" and q1.shape == (5, 8) and p1.shape == (2, 8)

    def boom(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr(base, "embed_texts", boom)
    q2, p2, meta2 = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                         cache_dir=tmp_path / "c")
    assert meta2["cache"] == "hit" and (q2 == q1).all() and (p2 == p1).all()
    assert set(meta2["sources"]) == {"task", "vectors:m.npy", "vectors:vocab.txt"}
    with pytest.raises(AssertionError, match="recomputed"):   # other settings: another entry
        base.task_embeddings(task, "static:tiny", idf=False, vectors=vectors,
                             cache_dir=tmp_path / "c")


def test_changed_source_invalidates(tmp_path, task):
    vectors = _vectors(tmp_path)
    q1, _, m1 = base.task_embeddings(task, "static:tiny", vectors=vectors, cache_dir=tmp_path)
    vectors = _vectors(tmp_path, scale=2.0)       # same paths, new contents
    _, _, m2 = base.task_embeddings(task, "static:tiny", vectors=vectors, cache_dir=tmp_path)
    assert m2["cache"] == "miss" and m2["cache_folder"] != m1["cache_folder"]
    task.source_sha256 = "another-squad-file"
    _, _, m3 = base.task_embeddings(task, "static:tiny", vectors=vectors, cache_dir=tmp_path)
    assert m3["cache"] == "miss"
    _, _, m4 = base.task_embeddings(task, "static:tiny", vectors=vectors, cache_dir=tmp_path)
    assert m4["cache"] == "hit"


def test_bad_model_name_says_the_form():
    with pytest.raises(ValueError, match="static:<name>"):
        base.parse_model("glove50")


def _damage(folder, name, how):
    import json

    import torch

    path = folder / name
    data = path.read_bytes()
    if damage(path, how):
        return path
    if how == "older_format":  # the meta of the first layout: no tensor shapes
        meta = json.loads(data)
        del meta["shapes"]
        path.write_text(json.dumps(meta))
    elif how == "other_version":
        meta = json.loads(data)
        meta["version"] = "0"
        path.write_text(json.dumps(meta))
    elif how == "other_shapes":  # vectors of another computation under this key
        tensors = torch.load(path, weights_only=True)
        torch.save({k: v[:1] for k, v in tensors.items()}, path)
    elif how == "not_tensors":
        torch.save([1, 2, 3], path)
    return path


@pytest.mark.parametrize("name, how", [
    *[("vectors.pt", how) for how in ("truncated", "empty", "garbage", "other_shapes",
                                      "not_tensors")],
    *[("meta.json", how) for how in ("truncated", "empty", "garbage", "older_format",
                                     "other_version")]])
def test_a_damaged_cache_is_computed_again_with_a_warning(tmp_path, task, name, how, caplog):
    import logging

    vectors = _vectors(tmp_path)
    q1, p1, meta1 = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                         cache_dir=tmp_path / "c")
    path = _damage(Path(meta1["cache_folder"]), name, how)
    with caplog.at_level(logging.WARNING):
        q2, p2, meta2 = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                             cache_dir=tmp_path / "c")
    (warning,) = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert warning.startswith(f"damaged cache {path} (") and warning.endswith("): rebuilding")
    assert meta2["cache"] == "miss" and meta2["cache_folder"] == meta1["cache_folder"]
    assert (q2 == q1).all() and (p2 == p1).all()  # the same computation, the same vectors
    _, _, meta3 = base.task_embeddings(task, "static:tiny", idf=True, vectors=vectors,
                                       cache_dir=tmp_path / "c")
    assert meta3["cache"] == "hit"  # written again whole
