"""DualEncoderInference: each distinct input is encoded once, so copies share one embedding."""

from __future__ import annotations

import pytest
import torch
from helpers import damage, word_tokenizer

from retrieval_qa.data.types import Candidate
from retrieval_qa.models.inference import DualEncoderInference


class PaddingDependentTowers(torch.nn.Module):
    """Embeddings of the first word, plus a term that depends on the batch's padded length:
    what the float rounding of batched kernels does to an input encoded in two batches."""

    output_dim = 3

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.rows = 0

    def encode_answer(self, input_ids, **_):
        self.rows += len(input_ids)
        return torch.nn.functional.one_hot(input_ids[:, 1] % 3, 3).float() + 1e-6 * input_ids.shape[1]

    encode_question = encode_answer


def _model(work_dir=None):
    tokenizer = word_tokenizer(["paris", "berlin", "rome"])
    return DualEncoderInference(PaddingDependentTowers(), tokenizer,
                                {"max_question_length": 8, "max_answer_length": 8,
                                 "similarity": "dot"}, work_dir=work_dir)


def _damage(path, how):
    if damage(path, how):
        return
    if how == "other_rows":  # a shard of fewer texts under this name
        saved = torch.load(path, weights_only=True)
        torch.save({**saved, "embeddings": saved["embeddings"][:1]}, path)
    elif how == "no_digest":  # not of the shard layout
        torch.save({"embeddings": torch.load(path, weights_only=True)["embeddings"]}, path)


TEXTS = ["paris", "rome berlin paris", "berlin", "rome", "berlin rome", "paris paris rome"]


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "other_rows", "no_digest"])
def test_a_damaged_encoding_shard_is_encoded_again_with_a_warning(tmp_path, monkeypatch, how,
                                                                 caplog):
    import logging

    from retrieval_qa.models import inference

    monkeypatch.setattr(inference, "SHARD_BATCHES", 1)  # shards of one batch: 2 texts
    first = _model(tmp_path / "work").encode_questions(TEXTS, batch_size=2, progress=False)
    shards = sorted((tmp_path / "work").glob("question-*.pt"))
    assert len(shards) == 3 and not list((tmp_path / "work").glob(".*"))  # no partial file
    _damage(shards[1], how)
    model = _model(tmp_path / "work")
    with caplog.at_level(logging.WARNING):
        again = model.encode_questions(TEXTS, batch_size=2, progress=False)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"damaged cache {shards[1]} (") and warning.endswith("rebuilding")
    assert model.towers.rows == 2  # that shard's two texts alone were encoded again
    assert torch.equal(again, first)  # the same texts in the same batches
    caplog.clear()
    third = _model(tmp_path / "work")
    third.encode_questions(TEXTS, batch_size=2, progress=False)
    assert third.towers.rows == 0 and not caplog.records  # written again whole


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    from mining_helpers import save_tiny_bert, save_tiny_retriever

    root = tmp_path_factory.mktemp("export")
    return save_tiny_retriever(root / "model", save_tiny_bert(root / "bert"))


@pytest.mark.parametrize("name, how", [
    *[("towers.pt", how) for how in ("truncated", "empty", "garbage")],
    *[("model.json", how) for how in ("truncated", "empty", "garbage", "older_format")]])
def test_a_damaged_export_is_refused_naming_the_file(export, tmp_path, name, how, capsys):
    import io
    import json
    import shutil

    from retrieval_qa.cli import main
    from retrieval_qa.errors import InputFileError
    from retrieval_qa.models.artifact import load_artifact

    folder = tmp_path / "model"
    shutil.copytree(export, folder)
    if how == "older_format":  # a model.json without the towers it rebuilds
        meta = json.loads((folder / name).read_text())
        del meta["towers"]
        (folder / name).write_text(json.dumps(meta))
    else:
        _damage(folder / name, how)
    with pytest.raises(InputFileError) as e:
        load_artifact(folder, map_location="cpu")
    message = str(e.value)
    assert message.startswith(f"exported model file {folder / name}: damaged: ")
    assert "export the model again" in message
    (tmp_path / "in.txt").write_text("paris\n")
    capsys.readouterr()
    code = main(["encode", "--checkpoint", str(folder), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "q.pt"), "--quiet"], stdout=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and str(folder / name) in err and "Traceback" not in err
    assert not (tmp_path / "q.pt").exists()


def test_copies_are_encoded_once_and_share_the_embedding():
    tokenizer = word_tokenizer(["paris", "berlin", "rome"])
    towers = PaddingDependentTowers()
    model = DualEncoderInference(towers, tokenizer, {"max_question_length": 8,
                                                     "max_answer_length": 8, "similarity": "dot"})
    # longest first, 2 a batch: [1, 0] padded to 5 tokens, then [2, 3] to 3, had "paris" been
    # encoded twice
    texts = ["paris", "rome berlin paris", "paris", "berlin"]
    cands = [Candidate(f"c{i}", t, "", f"d{i}") for i, t in enumerate(texts)]
    emb = model.encode_answers(cands, batch_size=2, progress=False)
    assert towers.rows == 3
    # exact: a copy takes its first copy's row, nothing is recomputed
    assert torch.equal(emb[0], emb[2]) and not torch.equal(emb[0], emb[3])
    q = model.encode_questions(texts, batch_size=2, progress=False)
    assert torch.equal(q, emb)  # exact: the same towers on the same batches
