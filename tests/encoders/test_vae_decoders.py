"""VAE decoders: the GRU decoder (teacher forcing, z through the initial state), the MLP
bag-of-words decoder, the tied output layer and the restricted output vocabulary."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn

from retrieval_qa.encoders import build_token_encoder
from retrieval_qa.encoders.vae_decoders import (
    GRUDecoder,
    MLPDecoder,
    OutputLayer,
    build_decoder,
    training_vocabulary,
    word_embedding,
)
from retrieval_qa.losses.reconstruction import TokenReconstructionLoss

VOCAB, EMB, LATENT = 40, 8, 5


def gru(embedding: nn.Embedding, **settings) -> GRUDecoder:
    return GRUDecoder(LATENT, embedding, **{"hidden_size": 7, "num_layers": 1, "dropout": 0.0,
                                            "tie_embeddings": True, **settings})


def table(seed: int = 0) -> nn.Embedding:
    torch.manual_seed(seed)
    return nn.Embedding(VOCAB, EMB, padding_idx=0)


def texts(lengths=(6, 4, 2), total: int | None = None, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    length = total or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), length), generator=gen)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return ids * mask, mask


def test_gru_decoder_shapes_targets_and_conditioning():
    dec = gru(table(), num_layers=2)
    ids, mask = texts()
    z = torch.randn(3, LATENT)
    logits, targets, tmask = dec(z, ids, mask)
    assert logits.shape == (3, 5, VOCAB)
    assert torch.equal(targets, ids[:, 1:]) and torch.equal(tmask, mask[:, 1:].bool())
    assert dec.initial_state(z).shape == (2, 3, 7)
    other, _, _ = dec(torch.randn(3, LATENT), ids, mask)
    assert not torch.allclose(logits, other)  # the output depends on z


def test_gru_decoder_is_causal_and_padding_does_not_matter():
    dec = gru(table())
    loss = TokenReconstructionLoss(reduction="sequence")
    ids, mask = texts()
    z = torch.randn(3, LATENT)
    logits, _, _ = dec(z, ids, mask)
    changed = ids.clone()
    changed[:, 4] = (changed[:, 4] % (VOCAB - 1)) + 1
    logits2, _, _ = dec(z, changed, mask)
    assert torch.allclose(logits[:, :4], logits2[:, :4])  # position t sees tokens <= t only
    padded = torch.cat([ids, torch.zeros(3, 3, dtype=ids.dtype)], 1)
    pmask = torch.cat([mask, torch.zeros(3, 3, dtype=mask.dtype)], 1)
    assert loss(*dec(z, padded, pmask)).item() == pytest.approx(loss(*dec(z, ids, mask)).item(),
                                                                rel=1e-6)


def test_mlp_decoder_scores_one_bag_of_words_per_text():
    dec = MLPDecoder(LATENT, table(), hidden_size=768, dropout=0.0, tie_embeddings=True)
    assert dec.hidden[0].out_features == 768  # section 4.3: one 768-unit hidden layer
    ids, mask = texts()
    logits, targets, tmask = dec(torch.randn(3, LATENT), ids, mask)
    assert logits.shape == (3, VOCAB)
    assert torch.equal(targets, ids[:, 1:]) and torch.equal(tmask, mask[:, 1:].bool())
    # order does not matter: the same tokens in another order cost the same
    flipped = ids.clone()
    flipped[0, 1:6] = ids[0, 1:6].flip(0)
    z = torch.randn(3, LATENT)
    loss = TokenReconstructionLoss(reduction="sequence")
    assert loss(*dec(z, flipped, mask)).item() == pytest.approx(loss(*dec(z, ids, mask)).item())


def test_tied_output_uses_the_embedding_table_and_adds_no_vocabulary_matrix():
    emb = table()
    dec = gru(emb)
    assert dec.output.embedding is emb and dec.embedding is emb
    own = [p for n, p in dec.named_parameters() if p is not emb.weight]
    assert not any(p.shape[0] == VOCAB and p.dim() == 2 for p in own)
    h = torch.randn(2, 7)
    expected = dec.output.to_embedding(h) @ emb.weight.T + dec.output.bias
    assert torch.allclose(dec.output(h), expected)
    untied = OutputLayer(7, emb, tie=False)
    assert untied.embedding is None and untied.weight.shape == (VOCAB, 7)


def test_restricted_output_vocabulary():
    emb = table()
    out = OutputLayer(7, emb, tie=True)
    h = torch.randn(2, 3, 7)
    full = out(h)
    kept = torch.tensor([3, 9, 1, 20, 9])
    out.restrict(kept)
    assert out.output_size == 4 and out.kept.tolist() == [1, 3, 9, 20]
    assert torch.allclose(out(h), full[..., [1, 3, 9, 20]])
    targets = torch.tensor([[3, 20, 5], [1, 9, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    positions, pmask = out.map_targets(targets, mask)
    assert positions.tolist() == [[1, 3, 0], [0, 2, 0]]
    assert pmask.tolist() == [[True, True, False], [True, True, False]]  # 5: not in the subset
    # the loss of the kept targets is the cross-entropy of the softmax over the subset
    sub = full[..., [1, 3, 9, 20]]
    loss = TokenReconstructionLoss(reduction="token")(out(h), positions, pmask)
    expected = torch.stack([F.cross_entropy(sub[0, 0:1], torch.tensor([1])),
                            F.cross_entropy(sub[0, 1:2], torch.tensor([3])),
                            F.cross_entropy(sub[1, 0:1], torch.tensor([0])),
                            F.cross_entropy(sub[1, 1:2], torch.tensor([2]))]).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    out.restrict(None)
    assert out.output_size == VOCAB and torch.allclose(out(h), full)
    with pytest.raises(ValueError, match="subset"):
        out.restrict([VOCAB])


def test_training_vocabulary_holds_every_target_token():
    from helpers import WORDS
    from transformers import BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = BertTokenizerFast(vocab=vocab)
    ids = training_vocabulary(tok, ["what is the city", "where is a place"], max_length=16,
                              chunk=1)
    expected = sorted({vocab[w] for w in "what is the city where a place".split()}
                      | {vocab["[SEP]"]})
    assert ids.tolist() == expected  # [CLS] is never a target; [SEP] ends every text
    short = training_vocabulary(tok, ["what is the city"], max_length=3)
    assert short.tolist() == sorted([vocab["what"], vocab["[SEP]"]])  # truncated as in training


def test_build_decoder_and_word_embedding(tiny_bert_factory):
    """``model.decoder`` names its class: by ``_target_`` (composition writes it) or by the
    short names of configs written before; its keys are the class's arguments."""
    from helpers import towers_conf

    from retrieval_qa.training.compose import load_group

    emb = table()
    conf = OmegaConf.to_container(load_group("model", "vae").decoder)  # type: gru
    assert isinstance(build_decoder({**conf, "hidden_size": 6}, LATENT, emb), GRUDecoder)
    mlp = {**conf, "type": "mlp"}  # num_layers: the GRU's, left out
    assert isinstance(build_decoder(mlp, LATENT, emb), MLPDecoder)
    target = {"_target_": "retrieval_qa.encoders.vae_decoders.MLPDecoder", "hidden_size": 6,
              "dropout": 0.0, "tie_embeddings": False, "output_vocab": "full"}
    assert isinstance(build_decoder(target, LATENT, emb), MLPDecoder)
    with pytest.raises(TypeError, match=r"model\.decoder \(_target_ .*MLPDecoder.*num_layers"):
        build_decoder({**target, "num_layers": 1}, LATENT, emb)
    with pytest.raises(ValueError, match="decoder.type"):
        build_decoder({**conf, "type": "lstm"}, LATENT, emb)
    with pytest.raises(ValueError, match=r"unknown key.*'hidden'"):
        build_decoder({**conf, "hidden": 3}, LATENT, emb)
    with pytest.raises(KeyError, match="output_vocab"):
        build_decoder({k: v for k, v in conf.items() if k != "output_vocab"}, LATENT, emb)
    encoder = build_token_encoder(towers_conf(encoder={
        "type": "gru", "vocab_size": VOCAB, "embedding_dim": EMB, "hidden_size": 6})["encoder"])
    assert word_embedding(encoder) is encoder.embedder.embedding
    from retrieval_qa.encoders import PretrainedTokenEncoder

    bert = tiny_bert_factory()
    encoder = PretrainedTokenEncoder(bert, gradient_checkpointing=False)
    assert word_embedding(encoder) is bert.embeddings.word_embeddings
