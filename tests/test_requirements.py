"""Version floors checked at run time: the error names the package, the version found, the
one needed, what needs it and the fix."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from retrieval_qa import requirements
from retrieval_qa.requirements import VersionError, release, require


def test_release_reads_the_numeric_part():
    assert release("2.13.0+cpu") == (2, 13, 0)
    assert release("6.0.0rc1") == (6, 0, 0)
    assert release("2.4") < release("2.13.0") and release("5.2.1") < release("6.0")


def test_an_old_or_missing_package_names_what_is_needed(monkeypatch):
    monkeypatch.setattr(requirements, "version", lambda dist: "5.2.1")
    with pytest.raises(VersionError) as e:
        require("sentence-transformers", "6.0", "the sentence-transformers export")
    assert str(e.value) == ("the sentence-transformers export needs sentence-transformers >= "
                            "6.0; 5.2.1 is installed (fix: pip install -U "
                            "'sentence-transformers>=6.0')")
    assert require("sentence-transformers", "5.2", "x") == "5.2.1"
    monkeypatch.undo()
    with pytest.raises(VersionError, match="not installed"):
        require("no-such-package-rqa", "1.0", "a test")


def test_the_export_with_an_old_sentence_transformers_is_a_usage_error(monkeypatch, tmp_path,
                                                                       capsys):
    from retrieval_qa.cli import main

    monkeypatch.setattr(requirements, "version", lambda dist: "5.2.1")
    for name in ("retrieval_qa.export.sentence_transformers",
                 "retrieval_qa.export.native_modules"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    folder = tmp_path / "model"
    folder.mkdir()
    assert main(["export", "--format", "sentence-transformers", "--checkpoint", str(folder),
                 "--output", str(tmp_path / "st")]) == 2
    err = capsys.readouterr().err
    assert "needs sentence-transformers >= 6.0; 5.2.1 is installed" in err
    monkeypatch.undo()
    importlib.import_module("retrieval_qa.export.sentence_transformers")  # loads again


def test_fused_optimisers_on_an_old_torch_say_which_torch_they_need(monkeypatch):
    from retrieval_qa.models import optim

    def refuse(*args, **kwargs):  # what torch < 2.4 raises for fused=True on CPU tensors
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors "
                           "of supported devices: ['cuda', 'xpu', 'privateuseone']")

    monkeypatch.setattr(optim, "instantiate", refuse)
    monkeypatch.setattr(torch, "__version__", "2.3.1")
    with pytest.raises(VersionError, match=r"need torch >= 2.4, 2.3.1 is installed"):
        optim.build_optimizer([torch.nn.Parameter(torch.zeros(2))], {"name": "adamw"})
    monkeypatch.setattr(torch, "__version__", "2.13.0")
    with pytest.raises(RuntimeError, match="fused=True"):  # a newer torch: its own error
        optim.build_optimizer([torch.nn.Parameter(torch.zeros(2))], {"name": "adamw"})
