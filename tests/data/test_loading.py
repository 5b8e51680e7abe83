import pytest
from helpers import TINY_SQUAD, write_json_gz

from retrieval_qa.data import DataFileNotFoundError, load_pool
from retrieval_qa.data.registry import resolve_data_dir


def test_load_pool_builds_then_reads_cache(tmp_path, tiny_squad_file, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    data_dir = tiny_squad_file.parents[1]
    pool, notes = load_pool("reqa_squad", "dev", data_dir=data_dir)
    assert len(pool.candidates) == 5 and notes["skipped_records"]["skipped"] == 0
    cache = tmp_path / "c"
    first, _ = load_pool("reqa_squad", "dev", data_dir=data_dir, cache_dir=cache)
    assert len(list(cache.iterdir())) == 1
    second, _ = load_pool("reqa_squad", "dev", data_dir=data_dir, cache_dir=cache)
    assert second.candidates == first.candidates and second.gold == first.gold
    assert second.pairs == first.pairs and second.questions == first.questions
    # a changed source file gets a new cache entry (keyed by the file's hash)
    data = dict(TINY_SQUAD, version="1.1-edited")
    write_json_gz(tiny_squad_file, data)
    load_pool("reqa_squad", "dev", data_dir=data_dir, cache_dir=cache)
    assert len(list(cache.iterdir())) == 2


def test_missing_file_says_which_where_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("RQA_DATA_DIR", raising=False)
    monkeypatch.setattr("retrieval_qa.data.registry.repo_root", lambda: tmp_path / "repo")
    with pytest.raises(DataFileNotFoundError) as err:
        load_pool("reqa_squad", "train", data_dir=tmp_path / "nowhere")
    msg = str(err.value)
    assert "squad/train-v1.1.json.gz" in msg and str(tmp_path / "nowhere") in msg
    assert "rajpurkar.github.io" in msg and "--data-dir" in msg and "RQA_DATA_DIR" in msg


def test_data_dir_order(tmp_path, monkeypatch):
    monkeypatch.setenv("RQA_DATA_DIR", str(tmp_path / "env"))
    dirs = resolve_data_dir(tmp_path / "flag", tmp_path / "cfg")
    assert dirs[:3] == [tmp_path / "flag", tmp_path / "env", tmp_path / "cfg"]


def test_unknown_dataset_and_pool(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'reqa_nope'"):
        load_pool("reqa_nope", "dev", data_dir=tmp_path)
    with pytest.raises(ValueError, match="pool 'train' is not one of"):
        load_pool("multireqa_bioasq", "train", data_dir=tmp_path)
