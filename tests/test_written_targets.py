"""retrieval_qa.written: writes never destroy (a link is written through, a device, FIFO,
socket or folder where a file goes is refused), a fault of the machine names the file written,
and the temporary file or folder is removed whatever stops the write."""

from __future__ import annotations

import errno
import os
import socket
import stat

import pytest

from retrieval_qa.errors import InputFileError, machine_fault
from retrieval_qa.evaluation.runfile import RunFileWriter
from retrieval_qa.written import atomic_dir, atomic_path, make_folder, write_target, write_text


def _names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_link_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "run.jsonl"
    target.write_text("old")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new" and _names(tmp_path / "real") == ["run.jsonl"]
    assert _names(tmp_path) == ["link.jsonl", "real"]  # nothing left beside the link
    dangling = tmp_path / "dangling.jsonl"  # a link to a file not written yet: created
    dangling.symlink_to(tmp_path / "real" / "new.jsonl")
    write_text(dangling, "x")
    assert dangling.is_symlink() and (tmp_path / "real" / "new.jsonl").read_text() == "x"


def test_a_link_to_a_folder_is_written_through_by_atomic_dir(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "old").write_text("1")
    link = tmp_path / "cache"
    link.symlink_to(real)
    with atomic_dir(link) as tmp:
        (tmp / "new").write_text("2")
    assert link.is_symlink() and _names(real) == ["new"] and _names(tmp_path) == ["cache", "real"]


def test_a_device_is_refused_naming_it_and_left_alone(tmp_path):
    before = os.stat("/dev/null")
    with pytest.raises(InputFileError, match=r"--run-file /dev/null: is a character device, "
                                             r"not a file; writing would replace it \(fix:"):
        write_text("/dev/null", "x", what="--run-file")
    link = tmp_path / "null.jsonl"
    link.symlink_to("/dev/null")
    with pytest.raises(InputFileError, match=r"/dev/null: is a character device \(the target "
                                             rf"of the link {link}\)"), atomic_path(link):
        pass
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino
    assert link.is_symlink() and _names(tmp_path) == ["null.jsonl"]


def test_a_fifo_a_socket_and_a_folder_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputFileError, match="is a named pipe"):
        write_text(fifo, "x")  # refused before any open: a FIFO's open would block
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(InputFileError, match="is a folder, not a file"):
        write_text(folder, "x")
    path = tmp_path / "sock"
    if len(str(path)) < 100:  # AF_UNIX paths are short
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
            with pytest.raises(InputFileError, match="is a socket"):
                write_text(path, "x")
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    with pytest.raises(InputFileError, match="is a file, not a folder"), atomic_dir(a_file):
        pass
    assert a_file.read_text() == "keep"
    assert write_target(tmp_path / "new" / "x.json") == tmp_path / "new" / "x.json"


def test_a_file_where_a_folder_goes_is_not_a_directory_naming_it(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    for path in (a_file / "run.jsonl", a_file / "sub" / "run.jsonl"):
        with pytest.raises(NotADirectoryError) as e:
            write_text(path, "x")
        assert e.value.errno == errno.ENOTDIR and str(a_file) in e.value.filename
        assert str(a_file) in machine_fault(e.value) and "is a file" in machine_fault(e.value)
    with pytest.raises(NotADirectoryError):
        make_folder(a_file)
    assert a_file.read_text() == "keep" and _names(tmp_path) == ["file"]


def test_a_full_disk_names_the_file_written_and_leaves_nothing(tmp_path):
    path = tmp_path / "out" / "run.jsonl"
    write_text(path, "old")
    with pytest.raises(OSError) as e, atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what write() raises
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
    assert path.read_text() == "old" and _names(path.parent) == ["run.jsonl"]
    line = machine_fault(e.value)
    assert line.startswith(f"{path}: No space left on device (fix: free space")
    with pytest.raises(PermissionError) as e, atomic_dir(tmp_path / "cache") as tmp:
        (tmp / "a").write_text("1")
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp / "a"))
    assert e.value.filename == str(tmp_path / "cache" / "a")  # the real name, not the hidden one
    assert _names(tmp_path) == ["out"]


def test_a_writer_error_on_a_full_disk_is_enospc(tmp_path, monkeypatch):
    """torch's zip writer raises a RuntimeError on a full disk: with no space left it is
    ENOSPC naming the file; with space left it stays what it is."""
    import shutil

    path = tmp_path / "towers.pt"
    with pytest.raises(RuntimeError), atomic_path(path):
        raise RuntimeError("a bug")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10, 10, 0))
    with pytest.raises(OSError) as e, atomic_path(path) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
    assert isinstance(e.value.__cause__, RuntimeError) and _names(tmp_path) == []


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_any_stop_removes_the_temporary_file_or_folder(tmp_path, stop):
    path = tmp_path / "f.json"
    write_text(path, "old")
    with pytest.raises(stop), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise stop()
    with pytest.raises(stop), atomic_dir(tmp_path / "cache") as tmp:
        (tmp / "a").write_text("half")
        raise stop()
    with pytest.raises(stop), RunFileWriter(tmp_path / "run.jsonl") as out:
        out.write([{"gold_rank": 1}])
        raise stop()
    assert path.read_text() == "old" and _names(tmp_path) == ["f.json"]


def test_a_run_file_writer_on_a_full_disk_names_the_run_file(tmp_path):
    path = tmp_path / "run.jsonl"
    with pytest.raises(OSError) as e, RunFileWriter(path, "--run-file") as out:
        out.write([{"gold_rank": 1}])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert e.value.filename == str(path) and _names(tmp_path) == []
    with pytest.raises(InputFileError, match="--run-file /dev/null: is a character device"):
        RunFileWriter("/dev/null", "--run-file").__enter__()


@pytest.mark.parametrize("code, fix", [
    (errno.ENOSPC, "free space"), (errno.EDQUOT, "quota"), (errno.EACCES, "permissions"),
    (errno.EPERM, "permissions"), (errno.EROFS, "read-only"), (errno.ENOTDIR, "is a file"),
    (errno.EISDIR, "a folder"), (errno.ENOENT, "does not exist")])
def test_machine_faults_are_one_line_naming_path_and_fix(code, fix, monkeypatch, tmp_path):
    line = machine_fault(OSError(code, os.strerror(code), "/x/run.jsonl"))
    assert line.startswith(f"/x/run.jsonl: {os.strerror(code)} (fix: ") and fix in line
    assert "\n" not in line
    assert machine_fault(OSError(errno.ECONNRESET, "reset")) is None
    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp_path))
    line = machine_fault(OSError(code, os.strerror(code), str(tmp_path / "pool" / "a")))
    assert "set RQA_CACHE_DIR to another one" in line
