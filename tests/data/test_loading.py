import re
import sys

import pytest
from helpers import TINY_SQUAD, write_json_gz

from retrieval_qa.data import DataDirNotFoundError, DataFileNotFoundError, load_pool
from retrieval_qa.data.sources import resolve_data_dir


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
    monkeypatch.setattr("retrieval_qa.data.sources.repo_root", lambda: tmp_path / "repo")
    (tmp_path / "nowhere").mkdir()
    with pytest.raises(DataFileNotFoundError) as err:
        load_pool("reqa_squad", "train", data_dir=tmp_path / "nowhere")
    msg = str(err.value)
    assert "squad/train-v1.1.json.gz" in msg and str(tmp_path / "nowhere") in msg
    assert "rajpurkar.github.io" in msg and "--data-dir" in msg and "RQA_DATA_DIR" in msg


def test_data_dir_order(tmp_path, monkeypatch):
    for name in ("flag", "env", "cfg"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("RQA_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "flag", tmp_path / "cfg") == [tmp_path / "flag"]
    assert resolve_data_dir(None, tmp_path / "cfg") == [tmp_path / "env"]
    monkeypatch.delenv("RQA_DATA_DIR")
    assert resolve_data_dir(None, tmp_path / "cfg") == [tmp_path / "cfg"]
    monkeypatch.setattr("retrieval_qa.data.sources.repo_root", lambda: tmp_path / "repo")
    assert resolve_data_dir() == [tmp_path / "shared" / "data"]


@pytest.mark.parametrize("given_by", ["--data-dir", "$RQA_DATA_DIR", "data.data_dir"])
def test_an_explicit_data_dir_that_does_not_exist_is_an_error(tmp_path, monkeypatch, given_by):
    missing = tmp_path / "nonexistent"
    monkeypatch.delenv("RQA_DATA_DIR", raising=False)
    args = {"--data-dir": (missing, None), "data.data_dir": (None, missing)}.get(given_by)
    if given_by == "$RQA_DATA_DIR":
        monkeypatch.setenv("RQA_DATA_DIR", str(missing))
        args = (None, None)
    with pytest.raises(DataDirNotFoundError, match=f"{missing}.*{re.escape(given_by)}"):
        resolve_data_dir(*args)


def test_cached_pool_reports_the_file_read_now(tmp_path):
    first = write_json_gz(tmp_path / "a" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    second = write_json_gz(tmp_path / "b" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    cache = tmp_path / "cache"
    pool, _ = load_pool("reqa_squad", "dev", data_dir=first.parents[1], cache_dir=cache)
    assert pool.source == str(first)
    again, notes = load_pool("reqa_squad", "dev", data_dir=second.parents[1], cache_dir=cache)
    assert "cache" in notes  # served from the cache built from the first copy
    assert again.source == str(second) and notes["skipped_records"]["path"] == str(second)


def test_no_hub_wait_offline_or_after_a_failed_probe(tmp_path, monkeypatch):
    import retrieval_qa.data.loading as loading

    (tmp_path / "empty").mkdir()
    calls = []

    class FakeDatasets:
        @staticmethod
        def load_dataset(*a, **k):
            calls.append(a)
            raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", FakeDatasets)
    monkeypatch.setattr(loading, "_hub_failed", False)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataFileNotFoundError, match="HF_HUB_OFFLINE=1"):
        load_pool("reqa_squad", "dev", data_dir=tmp_path / "empty")
    assert calls == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(DataFileNotFoundError, match="did not answer either: no network"):
        load_pool("reqa_squad", "dev", data_dir=tmp_path / "empty")
    assert len(calls) == 1
    monkeypatch.setattr(loading, "_hub_failed", False)  # a new process: the marker file stays
    with pytest.raises(DataFileNotFoundError, match="not asked again"):
        load_pool("reqa_squad", "dev", data_dir=tmp_path / "empty")
    assert len(calls) == 1


def test_unknown_dataset_and_pool(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'reqa_nope'"):
        load_pool("reqa_nope", "dev", data_dir=tmp_path)
    with pytest.raises(ValueError, match="pool 'train' is not one of"):
        load_pool("multireqa_bioasq", "train", data_dir=tmp_path)
