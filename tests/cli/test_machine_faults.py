"""Faults of the machine injected into the commands that write: a full disk mid-write, a
read-only folder, a file where a folder goes, an unwritable cache folder, Ctrl-C and SIGTERM,
a non-finite loss; and targets a write must not destroy (a device, a link, an earlier export).
Each ends with one line on stderr (no traceback) and exit status 2 (a fault: the path and the
fix) or 128+N (a signal), and leaves no partial file."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat

import pytest
from helpers import tiny_overrides

from retrieval_qa.cli import main
from retrieval_qa.evaluation import runfile
from retrieval_qa.evaluation.runfile import read_run_file


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what write() raises: no file named


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out.strip().splitlines()[-1]) if out.strip() else None), err


def _one_line(err: str) -> str:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def _evaluate(capsys, data_dir, run_file, *extra):
    return _run(capsys, "evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool",
                "dev", "--data-dir", data_dir, "--run-file", run_file, "--quiet", *extra)


@pytest.fixture
def data_dir(tiny_squad_file):
    return tiny_squad_file.parents[1]


def _names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


class Writer:
    """A run file's open file whose ``write`` writes half, then calls ``fault``."""

    def __init__(self, f, fault):
        self.f, self.fault = f, fault

    def write(self, text):
        self.f.write(text[: len(text) // 2])
        self.f.flush()  # half a file on disk, as a full disk leaves it
        self.fault()

    def flush(self):
        self.f.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _faulty_open(monkeypatch, fault):
    real = open
    monkeypatch.setattr(runfile, "open", lambda p, *a, **k: Writer(real(p, *a, **k), fault),
                        raising=False)


def _raise(e):
    def fault():
        raise e
    return fault


# ------------------------------------------------------------------- rqa evaluate --run-file


def test_a_full_disk_mid_run_file_is_one_line_naming_it(capsys, data_dir, tmp_path,
                                                         monkeypatch):
    _faulty_open(monkeypatch, _raise(enospc()))
    run = tmp_path / "out" / "run.jsonl"
    code, obj, err = _evaluate(capsys, data_dir, run)
    line = _one_line(err)
    assert code == 2 and obj is None
    assert line.startswith(f"rqa: error: {run}: No space left on device (fix: free space")
    assert _names(run.parent) == []  # neither the run file nor its partial


def test_a_read_only_folder_is_one_line_naming_the_file(capsys, data_dir, tmp_path,
                                                          monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    run = out / "run.jsonl"
    if os.geteuid() == 0:  # root writes into a read-only folder: the open fails as it would
        def denied(path, *args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

        monkeypatch.setattr(runfile, "open", denied, raising=False)
    else:
        out.chmod(0o555)
    try:
        code, obj, err = _evaluate(capsys, data_dir, run)
    finally:
        out.chmod(0o755)
    line = _one_line(err)
    assert code == 2 and f"{run}: Permission denied (fix: make it writable" in line
    assert _names(out) == []


def test_a_file_where_the_folder_goes_is_one_line_naming_it(capsys, data_dir, tmp_path):
    a_file = tmp_path / "results"
    a_file.write_text("keep")
    code, _, err = _evaluate(capsys, data_dir, a_file / "run.jsonl")
    line = _one_line(err)
    assert code == 2 and f"{a_file}: Not a directory (fix: a part of the path is a file" in line
    assert a_file.read_text() == "keep"


def test_a_device_is_refused_and_a_link_written_through(capsys, data_dir, tmp_path):
    inode = os.stat("/dev/null").st_ino
    code, _, err = _evaluate(capsys, data_dir, "/dev/null")
    line = _one_line(err)
    assert code == 2 and "--run-file /dev/null: is a character device" in line
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and os.stat("/dev/null").st_ino == inode
    target = tmp_path / "kept" / "run.jsonl"
    target.parent.mkdir()
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    code, obj, _ = _evaluate(capsys, data_dir, link)
    assert code == 0 and link.is_symlink() and len(read_run_file(target)) == obj["questions"]


def test_an_unwritable_cache_folder_in_training_is_one_line_naming_it(capsys, setup_dirs,
                                                                      tmp_path, monkeypatch,
                                                                      one_thread):
    """The pool cache is skipped with a warning; the tokenized one is an error naming it."""
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    monkeypatch.setenv("RQA_CACHE_DIR", str(a_file / "cache"))
    code, obj, err = _run(capsys, "train", *tiny_overrides(
        setup_dirs, tmp_path / "runs", "test_after_fit=false", "trainer.max_epochs=1"))
    assert code == 2 and obj is None and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"rqa: error: {a_file}/cache")
    assert "Not a directory" in last and "set RQA_CACHE_DIR to another one" in last
    assert a_file.read_text() == "keep"


@pytest.mark.parametrize("how", ["KeyboardInterrupt", "SIGINT"])
def test_ctrl_c_while_the_pool_is_built_exits_130_leaving_no_partial(capsys, data_dir, tmp_path,
                                                                      monkeypatch, how):
    import retrieval_qa.data.cache as cache

    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp_path / "cache"))
    real, calls = cache._write, []

    def write(table, path):  # the pool cache's second table
        calls.append(path)
        if len(calls) == 2:
            if how == "SIGINT":
                os.kill(os.getpid(), signal.SIGINT)
            else:
                raise KeyboardInterrupt
        real(table, path)

    monkeypatch.setattr(cache, "_write", write)
    before = signal.getsignal(signal.SIGINT)
    code, obj, err = _evaluate(capsys, data_dir, tmp_path / "run.jsonl")
    assert code == 130 and obj is None and _one_line(err).startswith("rqa: stopped by SIGINT")
    assert _names(tmp_path / "cache") == [] and not (tmp_path / "run.jsonl").exists()
    assert signal.getsignal(signal.SIGINT) is before  # rqa's handler is gone after the command


def test_sigterm_mid_run_file_exits_143_leaving_no_partial(capsys, data_dir, tmp_path,
                                                           monkeypatch):
    _faulty_open(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGTERM))
    before = signal.getsignal(signal.SIGTERM)
    run = tmp_path / "out" / "run.jsonl"
    code, obj, err = _evaluate(capsys, data_dir, run)
    assert code == 143 and obj is None and _one_line(err).startswith("rqa: stopped by SIGTERM")
    assert _names(run.parent) == [] and signal.getsignal(signal.SIGTERM) is before


# ---------------------------------------------------------------------------- rqa metrics


def test_metrics_on_an_unreadable_run_file_and_ctrl_c(capsys, data_dir, tmp_path, monkeypatch):
    run = tmp_path / "run.jsonl"
    assert _evaluate(capsys, data_dir, run)[0] == 0
    real = open

    def unreadable(path, *args, **kwargs):
        if os.fspath(path) == str(run):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runfile, "open", unreadable, raising=False)
    code, _, err = _run(capsys, "metrics", "--run-file", run)
    assert code == 2 and f"{run}: Permission denied" in _one_line(err)

    def interrupted(path, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runfile, "open", interrupted, raising=False)
    code, _, err = _run(capsys, "metrics", "--run-file", run)
    assert code == 130 and _one_line(err).startswith("rqa: stopped by SIGINT")


# ----------------------------------------------------------------------------- rqa export


def test_export_never_replaces_an_export_unless_asked(capsys, setup_dirs, tmp_path, one_thread):
    settings = tiny_overrides(setup_dirs, tmp_path / "runs")
    out = tmp_path / "model"
    code, obj, _ = _run(capsys, "export", "--output", out, *settings)
    assert code == 0 and obj["checkpoint"] == str(out) and obj["trained"] is False
    assert _names(tmp_path) == ["model"]  # the folder written whole, nothing beside it
    meta = (out / "model.json").read_bytes()
    (out / "notes.txt").write_text("mine")
    code, obj, err = _run(capsys, "export", "--output", out, *settings)
    line = _one_line(err)
    assert code == 2 and obj is None and f"--output {out}: holds an exported model" in line
    assert "--overwrite" in line and (out / "notes.txt").exists()
    assert (out / "model.json").read_bytes() == meta
    code, obj, _ = _run(capsys, "export", "--output", out, "--overwrite", *settings)
    assert code == 0 and "notes.txt" not in _names(out) and (out / "model.json").is_file()
    assert _names(tmp_path) == ["model"]
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    code, _, err = _run(capsys, "export", "--output", a_file, "--overwrite", *settings)
    assert code == 2 and "is a file, not a folder" in _one_line(err)
    assert a_file.read_text() == "keep"


@pytest.mark.parametrize("fault", ["ENOSPC", "KeyboardInterrupt", "SIGTERM"])
def test_export_interrupted_mid_write_leaves_nothing(capsys, setup_dirs, tmp_path, monkeypatch,
                                                     one_thread, fault):
    import torch

    def save(obj, path, *args, **kwargs):  # half the towers written, then the fault
        with open(path, "wb") as f:
            f.write(b"\0" * 1024)
        if fault == "SIGTERM":
            os.kill(os.getpid(), signal.SIGTERM)
        raise enospc() if fault == "ENOSPC" else KeyboardInterrupt

    monkeypatch.setattr(torch, "save", save)
    out = tmp_path / "exports" / "model"
    code, obj, err = _run(capsys, "export", "--output", out,
                          *tiny_overrides(setup_dirs, tmp_path / "runs"))
    line = _one_line(err)
    if fault == "ENOSPC":
        assert code == 2 and "No space left on device (fix: free space" in line
        assert str(out) in line
    else:
        assert code == {"KeyboardInterrupt": 130, "SIGTERM": 143}[fault]
        assert line.startswith(f"rqa: stopped by SIG{'INT' if code == 130 else 'TERM'}")
    assert _names(out.parent) == []  # no half export, no hidden partial folder


# ------------------------------------------------------------------------------ rqa train


def test_a_non_finite_loss_is_one_line_exit_2(capsys, setup_dirs, tmp_path, monkeypatch,
                                              one_thread):
    from retrieval_qa.losses import InBatchSoftmaxLoss

    monkeypatch.setattr(InBatchSoftmaxLoss, "compute_loss_from_embeddings",
                        lambda self, q, a, w=None: (q.sum() + a.sum()) * float("nan"))
    code, obj, err = _run(capsys, "train", *tiny_overrides(
        setup_dirs, tmp_path, "test_after_fit=false", "trainer.max_epochs=1"))
    assert code == 2 and obj is None and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("rqa: error: non-finite training loss at global step 0")
    assert "(fix: a lower learning rate" in last
