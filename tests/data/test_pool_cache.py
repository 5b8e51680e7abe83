"""A damaged pool cache (a file truncated, emptied, overwritten with garbage, of an older
format, or tables that do not fit together) is rebuilt with a warning naming the file, and the
rebuilt pool equals the one first built; `rqa data stats` goes on with exit status 0."""

from __future__ import annotations

import io
import json
import logging

import pyarrow.ipc as ipc
import pytest
from helpers import damage

from retrieval_qa.data import load_pool
from retrieval_qa.data.cache import CACHE_FORMAT

TABLES = ("docs.arrow", "candidates.arrow", "questions.arrow", "pairs.arrow")


def _table(path):
    with ipc.open_file(path) as reader:
        return reader.read_all()


def _write_table(table, path):
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)


def _damage(path, how):
    data = path.read_bytes()
    if damage(path, how):
        return
    if how == "older_format" and path.suffix == ".json":  # the meta of the first layout
        meta = json.loads(data)
        del meta["format"]
        path.write_text(json.dumps(meta))
    elif how == "older_format":  # a table without one of its columns
        table = _table(path)
        _write_table(table.drop_columns([table.column_names[-1]]), path)
    elif how == "other_format":
        meta = json.loads(data)
        meta["format"] = "rqa-pool-cache/1"
        path.write_text(json.dumps(meta))
    elif how == "missing_key":
        meta = json.loads(data)
        del meta["notes"]
        path.write_text(json.dumps(meta))
    elif how == "row_lost":  # one row less: the other tables point at what is gone
        table = _table(path)
        _write_table(table.slice(0, table.num_rows - 1), path)
    else:
        raise AssertionError(how)


@pytest.fixture
def built(tiny_squad_file, tmp_path):
    cache = tmp_path / "cache"
    pool, notes = load_pool("reqa_squad", "dev", data_dir=tiny_squad_file.parents[1],
                            cache_dir=cache)
    (folder,) = cache.iterdir()
    return pool, notes, folder


def _reload(tiny_squad_file, folder):
    return load_pool("reqa_squad", "dev", data_dir=tiny_squad_file.parents[1],
                     cache_dir=folder.parent)


CASES = [("meta.json", how) for how in ("truncated", "empty", "garbage", "older_format",
                                        "other_format", "missing_key")]
CASES += [(name, how) for name in TABLES for how in ("truncated", "empty", "garbage",
                                                     "older_format")]
CASES += [("docs.arrow", "row_lost"), ("candidates.arrow", "row_lost")]


@pytest.mark.parametrize("name, how", CASES)
def test_a_damaged_cache_file_is_rebuilt_with_a_warning(built, tiny_squad_file, name, how,
                                                        caplog):
    pool, notes, folder = built
    assert json.loads((folder / "meta.json").read_text())["format"] == CACHE_FORMAT
    _damage(folder / name, how)
    with caplog.at_level(logging.WARNING):
        again, again_notes = _reload(tiny_squad_file, folder)
    (warning,) = [r.getMessage() for r in caplog.records if "damaged cache" in r.getMessage()]
    if how == "row_lost":  # found where another table points at the lost row
        assert warning.startswith(f"damaged cache {folder}") and name in warning
    else:
        assert warning.startswith(f"damaged cache {folder / name} (")
    assert warning.endswith("): rebuilding")
    assert again == pool and again_notes["skipped_records"] == notes["skipped_records"]
    caplog.clear()
    third, _ = _reload(tiny_squad_file, folder)  # rebuilt whole: read back, no warning
    assert third == pool and not caplog.records


@pytest.mark.parametrize("how", ["a_file", "empty_folder"])
def test_a_cache_folder_that_is_not_one_is_rebuilt(built, tiny_squad_file, how, caplog):
    pool, _, folder = built
    import shutil

    shutil.rmtree(folder)
    if how == "a_file":
        folder.write_text("x")
    else:
        folder.mkdir()
    with caplog.at_level(logging.WARNING):
        again, _ = _reload(tiny_squad_file, folder)
    assert again == pool and folder.is_dir()
    assert any(f"damaged cache {folder}" in r.getMessage() for r in caplog.records)


def test_a_crash_while_writing_leaves_no_cache(tiny_squad_file, tmp_path, monkeypatch):
    from retrieval_qa.data import cache as cache_module

    def crash(table, path):
        raise OSError("disk full")

    monkeypatch.setattr(cache_module, "_write", crash)
    load_pool("reqa_squad", "dev", data_dir=tiny_squad_file.parents[1],
              cache_dir=tmp_path / "cache")  # a cache that cannot be written: a warning
    assert list((tmp_path / "cache").iterdir()) == []  # no half folder, no temporary one
    assert cache_module.load_cached_pool(tmp_path / "cache" / "x") is None  # a miss, no damage


def test_rqa_data_stats_rebuilds_a_truncated_pool_cache(tiny_squad_file, tmp_path,
                                                        monkeypatch, caplog):
    from retrieval_qa.cli import main

    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["data", "stats", "--dataset", "reqa_squad", "--data-dir",
            str(tiny_squad_file.parents[1])]
    first = io.StringIO()
    assert main(argv, stdout=first) == 0
    (folder,) = (tmp_path / "cache").iterdir()
    for name, how in (("questions.arrow", "truncated"), ("meta.json", "empty")):
        _damage(folder / name, how)
        caplog.clear()
        out = io.StringIO()
        with caplog.at_level(logging.WARNING):  # on stderr under `rqa` (logging's last resort)
            assert main(argv, stdout=out) == 0
        assert any(f"damaged cache {folder / name}" in r.getMessage() for r in caplog.records)
        assert json.loads(out.getvalue()) == json.loads(first.getvalue())



def test_the_warning_reaches_stderr_of_the_command(tiny_squad_file, tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "RQA_CACHE_DIR": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "retrieval_qa.cli", "data", "stats", "--dataset",
            "reqa_squad", "--data-dir", str(tiny_squad_file.parents[1])]
    first = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    (folder,) = (tmp_path / "cache").iterdir()
    _damage(folder / "questions.arrow", "truncated")
    again = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert f"damaged cache {folder / 'questions.arrow'} (not an Arrow table" in again.stderr
