"""What a method's ``build`` reads from ``model.towers.encoder`` (models/method.py): a missing
key is an error naming it and the file to add it to, and a random token table takes its size
from the tokenizer that the data module uses (no vocab_size in any config)."""

from __future__ import annotations

import json

import pytest
from helpers import TINY_SQUAD, make_dirs, tiny

from retrieval_qa.errors import UnknownKeyError
from retrieval_qa.models.dual_encoder import DualEncoderModule
from retrieval_qa.pretrained import load_tokenizer
from retrieval_qa.training.compose import compose


@pytest.mark.parametrize("numbers", [10, 40])
def test_a_random_token_table_has_a_row_per_tokenizer_id(tmp_path, numbers):
    root, _ = dirs = make_dirs(tmp_path, TINY_SQUAD, numbers=numbers)
    size = len(load_tokenizer(str(root / "tokenizer")))  # its ids: 0 to size - 1
    cfg = tiny(dirs, tmp_path / "runs")
    assert cfg.model.towers.encoder.vocab_size is None  # no config gives it
    built = DualEncoderModule.build(cfg)
    assert cfg.model.towers.encoder.vocab_size == size
    for tower in (built.module.towers.question_tower, built.module.towers.answer_tower):
        assert tower.token_encoder.embedder.vocab_size == size
    export = json.loads((built.module.export(tmp_path / "model") / "model.json").read_text())
    assert export["towers"]["encoder"]["vocab_size"] == size  # the artefact rebuilds its table


def test_a_vocab_size_other_than_the_tokenizers_is_an_error(tmp_path):
    dirs = make_dirs(tmp_path, TINY_SQUAD)
    cfg = tiny(dirs, tmp_path / "runs", "model.towers.encoder.vocab_size=7")
    with pytest.raises(ValueError, match=r"vocab_size=7.*gives \d+ ids.*leave vocab_size null"):
        DualEncoderModule.build(cfg)


@pytest.mark.parametrize("missing", ["fallback", "pretrained"])
def test_a_missing_encoder_key_names_it_and_the_file_to_fix(tmp_path, monkeypatch, missing):
    encoder = {"pretrained": "minilm", "fallback": "minilm"}
    del encoder[missing]
    folder = tmp_path / "conf" / "experiment"
    folder.mkdir(parents=True)
    (folder / "bare.yaml").write_text(json.dumps({
        "description": "a method whose encoder settings lack a key",
        "defaults": {"model": None},
        "model": {"_target_": "retrieval_qa.models.dual_encoder.DualEncoderModule",
                  "towers": {"encoder": encoder}}}))
    monkeypatch.setenv("RQA_CONF_PATH", str(tmp_path / "conf"))
    cfg = compose(["experiment=bare"])
    with pytest.raises(UnknownKeyError, match=rf"model\.towers\.encoder has no '{missing}'.*"
                                              r"conf/experiment/bare\.yaml"):
        DualEncoderModule.build(cfg)


def test_the_table_covers_the_largest_id_of_a_vocabulary_with_gaps():
    from omegaconf import OmegaConf

    from retrieval_qa.models.method import set_vocab_size

    class Gapped:  # ids 0, 1 and 5: a word listed twice keeps its later id
        def get_vocab(self):
            return {"[PAD]": 0, "a": 1, "b": 5}

    encoder = OmegaConf.create({"embedding_dim": 4, "vocab_size": None})
    set_vocab_size(encoder, Gapped())
    assert encoder.vocab_size == 6
    pretrained = OmegaConf.create({"embedding_dim": None, "vocab_size": None})
    set_vocab_size(pretrained, Gapped())  # the checkpoint's own embeddings: nothing to size
    assert pretrained.vocab_size is None
