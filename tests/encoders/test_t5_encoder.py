"""An encoder-decoder checkpoint (T5 1.1) loads as its encoder alone: T5EncoderModel, no
decoder inputs wanted, token type ids left out, and the SDE / ADE sharing switches work on
T5's ``shared`` embedding table. A tiny random T5 (gated-gelu, d_model 32, 2 layers) with a
word tokenizer, saved to a folder as a hub checkpoint is."""

from __future__ import annotations

import pytest
import torch
from helpers import WORDS, save_tiny_t5, towers_conf, word_tokenizer

from retrieval_qa.encoders import PretrainedTokenEncoder, build_dual_towers
from retrieval_qa.pretrained import load_model, model_from_config, resolve_pretrained


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-t5")
    return folder, save_tiny_t5(folder, word_tokenizer(WORDS))


def _batch(folder, texts=("what is the city", "the fact of the place is a city")):
    tok = word_tokenizer(WORDS)
    return dict(tok(list(texts), padding=True, return_tensors="pt"))


def test_load_model_gives_the_encoder_with_its_weights(t5_dir):
    from transformers import T5EncoderModel

    folder, full = t5_dir
    model = load_model(resolve_pretrained(str(folder)))
    assert isinstance(model, T5EncoderModel)
    assert not any(name.startswith("decoder") for name, _ in model.named_parameters())
    torch.testing.assert_close(model.shared.weight, full.shared.weight)
    torch.testing.assert_close(model.encoder.block[1].layer[1].DenseReluDense.wi_0.weight,
                               full.encoder.block[1].layer[1].DenseReluDense.wi_0.weight)
    assert isinstance(model_from_config(full.config), T5EncoderModel)


def test_encoder_runs_without_decoder_inputs_and_drops_token_types(t5_dir):
    folder, full = t5_dir
    encoder = PretrainedTokenEncoder.from_pretrained(str(folder),
                                                     gradient_checkpointing=False).eval()
    batch = _batch(folder)
    assert "token_type_ids" in batch                 # the word tokenizer gives them
    assert encoder.hidden_size == 32 and encoder.input_dim == 32
    assert not encoder.takes_token_types
    states = encoder(**batch)
    assert states.shape == (2, batch["input_ids"].shape[1], 32)
    expected = full.encoder(input_ids=batch["input_ids"],
                            attention_mask=batch["attention_mask"]).last_hidden_state
    torch.testing.assert_close(states, expected)
    assert encoder.token_embedder is encoder.model.shared


def _towers(folder, sharing):
    return build_dual_towers(towers_conf(
        encoder={"type": "pretrained", "pretrained": str(folder), "fallback": None},
        pooler={"type": "mean"}, projection={"dim": 16}, sharing=sharing))


def _train_step(model, folder):
    q = _batch(folder, ["what is the city", "who is a fact"])
    a = _batch(folder, ["the city is a place", "a fact of the place", "the the"])
    qe, ae = model(q, a)
    (qe.sum() + ae.sum()).backward()
    return qe, ae


@pytest.mark.parametrize("sharing", ["sde", "ade", "ade_ste", "ade_fte", "ade_spl"])
def test_sharing_switches_on_t5_shared_embeddings(t5_dir, sharing):
    folder, _ = t5_dir
    model = _towers(folder, sharing)
    qe, ae = _train_step(model, folder)
    assert qe.shape == (2, 16) and ae.shape == (3, 16)
    q_model = model.question_tower.token_encoder.model
    a_model = model.answer_tower.token_encoder.model
    if sharing == "sde":
        assert q_model is a_model
        return
    assert q_model is not a_model
    if sharing == "ade_ste":                         # one table, read by both encoders
        assert a_model.shared is q_model.shared
        assert a_model.encoder.embed_tokens is q_model.shared
        assert q_model.shared.weight.grad is not None
    else:
        assert a_model.shared is not q_model.shared
    for m in (q_model, a_model):
        assert m.encoder.embed_tokens.weight is m.shared.weight   # T5 reads the table it exposes
        frozen = sharing == "ade_fte"
        assert m.shared.weight.requires_grad is not frozen
        assert (m.shared.weight.grad is None) is frozen
        assert m.encoder.block[0].layer[0].SelfAttention.q.weight.grad is not None
