"""retrieval_qa.written: a file or folder is replaced whole or not at all, and a file that does
not read back is Damaged, naming it and what is wrong."""

from __future__ import annotations

import json

import pytest

from retrieval_qa.errors import InputFileError
from retrieval_qa.written import (
    Damaged,
    atomic_dir,
    atomic_path,
    read_back,
    read_json,
    read_json_or_refuse,
    refuse,
    write_text,
)


def test_a_file_is_replaced_only_when_written_whole(tmp_path):
    path = tmp_path / "sub" / "f.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash while writing")
    assert path.read_text() == "old" and sorted(p.name for p in path.parent.iterdir()) == ["f.json"]
    with atomic_path(path) as tmp:
        assert tmp.parent == path.parent and tmp.name.startswith(".f.json.")
        tmp.write_text("new")
        assert path.read_text() == "old"  # the old file until the block ends
    assert path.read_text() == "new" and len(list(path.parent.iterdir())) == 1


def test_a_folder_is_replaced_only_when_written_whole(tmp_path):
    folder = tmp_path / "cache"
    with atomic_dir(folder) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(OSError), atomic_dir(folder) as tmp:
        (tmp / "a").write_text("2")
        raise OSError("disk full")
    assert (folder / "a").read_text() == "1" and [p.name for p in tmp_path.iterdir()] == ["cache"]
    with atomic_dir(folder) as tmp:
        (tmp / "b").write_text("3")
    assert sorted(p.name for p in folder.iterdir()) == ["b"]  # the old contents are gone


@pytest.mark.parametrize("content, problem", [
    (None, "missing"), (b"", "empty file"), (b'{"a": ', "not JSON"),
    (b"\xff\xfe\x00garbage", "not JSON"), (b"[1, 2]", "not a JSON object"),
    (b'{"a": 1, "format": 1}', "no 'b' (an older format, or damaged)"),
    (b'{"a": 1, "b": 2, "format": 0}', "format 0; this version reads 1"),
    (b'{"a": 1, "b": 2}', "no format version (an older format)")])
def test_read_json_names_the_file_and_the_damage(tmp_path, content, problem):
    path = tmp_path / "meta.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(Damaged) as e:
        read_json(path, ("a", "b"), version=("format", 1))
    assert e.value.path == str(path) and problem in e.value.problem
    assert str(e.value).startswith(f"{path}: ")


def test_read_back_passes_what_reads_and_a_refusal_names_file_damage_and_fix(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"a": 1, "format": 1}))
    assert read_json(path, ("a",), version=("format", 1)) == {"a": 1, "format": 1}
    assert read_back(path, lambda p: p.read_text()[:1], "text") == "{"
    path.write_text("{")
    with pytest.raises(InputFileError) as e:
        read_json_or_refuse(path, "run report", "run it again")
    assert str(e.value) == (f"run report {path}: damaged: not JSON (Expecting property name "
                            "enclosed in double quotes: line 1 column 2 (char 1)) (fix: run it "
                            "again)")
    assert str(refuse(Damaged(path, "empty file"), "x", "y")) == f"x {path}: damaged: empty " \
                                                                "file (fix: y)"
