"""Faults of the machine while the resumable checkpoint is written
(:meth:`~retrieval_qa.training.resumable_checkpoints.ResumableCheckpoints.save`): a full disk
mid-write ends ``rqa train`` with one line naming the checkpoint and the fix, exit status 2,
the previous ``last.ckpt`` whole and no temporary file; an interrupt (any BaseException)
mid-write removes the temporary file too."""

from __future__ import annotations

import errno
import json
import os
from types import SimpleNamespace

import lightning_fabric.plugins.io.torch_io as torch_io
import pytest
from helpers import tiny_overrides

from retrieval_qa.cli import main
from retrieval_qa.training.checkpoints import checkpoint_problem
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints


def _enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what write() raises: no file named


def test_a_full_disk_mid_checkpoint_is_one_line_naming_it(capsys, setup_dirs, tmp_path,
                                                          monkeypatch, one_thread):
    """The second ``last.ckpt`` (epoch 2's end) meets a full disk half-way through its bytes
    (Lightning's checkpoint writer patched): the first one is kept, whole."""
    real, writes = torch_io._atomic_save, []

    def save(checkpoint, path):
        if "last.ckpt" in os.path.basename(path):  # the resumable one, not best-*.ckpt
            writes.append(path)
            if len(writes) == 2:
                with open(path, "wb") as f:
                    f.write(b"PK\x03\x04" + b"\0" * 4096)  # half a checkpoint on disk
                raise _enospc()
        real(checkpoint, path)

    monkeypatch.setattr(torch_io, "_atomic_save", save)
    code = main(["train", *tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false",
                                          "trainer.max_epochs=2")])
    out, err = capsys.readouterr()
    checkpoints = tmp_path / "dual_gru" / "cpu-seed42" / "checkpoints"
    last = checkpoints / "last.ckpt"
    assert code == 2 and not out.strip() and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"rqa: error: {last}: No space left on device (fix: free space"), line
    assert len(writes) == 2 and all(str(w).endswith(".tmp") for w in writes)
    names = sorted(p.name for p in checkpoints.iterdir())
    assert not [n for n in names if n.endswith(".tmp")], names
    assert "last.ckpt" in names and checkpoint_problem(last) is None  # epoch 1's, whole
    assert not (tmp_path / "dual_gru" / "cpu-seed42" / "result.json").exists()
    # the same command on a disk with room resumes from epoch 1's checkpoint and finishes
    monkeypatch.setattr(torch_io, "_atomic_save", real)
    assert main(["train", *tiny_overrides(setup_dirs, tmp_path, "test_after_fit=false",
                                          "trainer.max_epochs=2")]) == 0
    report = json.loads(capsys.readouterr()[0].strip().splitlines()[-1])
    assert report["resumed_from"] == str(last) and report["epochs"] == 2


@pytest.mark.parametrize("fault", [KeyboardInterrupt, SystemExit, _enospc])
def test_any_error_mid_checkpoint_removes_its_temporary_file(tmp_path, fault):
    """A BaseException too (Ctrl-C, an exit): the previous checkpoint stays, nothing beside it."""
    saver = ResumableCheckpoints(tmp_path, every_n_steps=0, every_minutes=0,
                                 weights_every_minutes=0, check_every=1)
    (tmp_path / "last.ckpt").write_bytes(b"previous")

    def save_checkpoint(path, weights_only):
        with open(path, "wb") as f:
            f.write(b"half")
        raise fault()

    trainer = SimpleNamespace(is_global_zero=True, global_step=3,
                              save_checkpoint=save_checkpoint)
    expected = OSError if fault is _enospc else fault
    with pytest.raises(expected) as raised:
        saver.save(trainer)
    if fault is _enospc:  # named after the checkpoint, not its temporary file
        assert raised.value.filename == str(tmp_path / "last.ckpt")
    with pytest.raises(expected):
        saver.save_weights(trainer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]
    assert (tmp_path / "last.ckpt").read_bytes() == b"previous"
