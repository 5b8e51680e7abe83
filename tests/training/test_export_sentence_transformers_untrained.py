"""`rqa export --format sentence-transformers experiment=...`: an experiment's untrained model
straight to a sentence-transformers folder, with the embeddings of the suite's own export."""

from __future__ import annotations

import io
import json

import pytest
import torch
from helpers import tiny_overrides

pytest.importorskip("sentence_transformers")


def test_untrained_experiment_exports_in_both_formats(setup_dirs, tmp_path, monkeypatch,
                                                      one_thread):
    from sentence_transformers import SentenceTransformer

    from retrieval_qa.cli import main
    from retrieval_qa.models.artifact import load_artifact

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp_path / "cache"))
    settings = tiny_overrides(setup_dirs, tmp_path / "runs", "threads=1")

    def rqa(*argv):
        out = io.StringIO()
        assert main([str(a) for a in argv], stdout=out) == 0
        return json.loads(out.getvalue().strip().splitlines()[-1])

    native = rqa("export", "--output", tmp_path / "rqa", *settings)
    st_out = rqa("export", "--format", "sentence-transformers", "--output", tmp_path / "st",
                 *settings)
    assert st_out["trained"] is False and st_out["format"] == "sentence-transformers"
    texts = ["what is fact 1 of place 2", "the city number 3", "where"]
    reference = load_artifact(native["checkpoint"])  # same seed: the same untrained weights
    st = SentenceTransformer(str(tmp_path / "st"), trust_remote_code=True, device="cpu",
                             local_files_only=True)
    q = st.encode_query(texts, convert_to_tensor=True)
    assert float((q - reference.encode_questions(texts, progress=False)).abs().max()) < 1e-5
    d = st.encode_document(texts, convert_to_tensor=True)
    assert float((d - reference.encode_answers(texts, progress=False)).abs().max()) < 1e-5
    assert torch.isfinite(q).all()
