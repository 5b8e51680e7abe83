"""Token encoders: output shapes, padding invariance, embedder options."""

from __future__ import annotations

import pytest
import torch

from retrieval_qa.encoders import (
    PretrainedTokenEncoder,
    RecurrentTokenEncoder,
    TokenEmbedder,
    TransformerTokenEncoder,
)

VOCAB, EMB, HIDDEN = 100, 16, 32


def embedder(seed: int = 0) -> TokenEmbedder:
    torch.manual_seed(seed)
    return TokenEmbedder(VOCAB, EMB, padding_idx=0)


def recurrent(kind: str, bidirectional: bool = True, **settings) -> RecurrentTokenEncoder:
    settings = {"hidden_size": HIDDEN, "num_layers": 2, "dropout": 0.0, **settings}
    return RecurrentTokenEncoder(embedder(), kind=kind, bidirectional=bidirectional,
                                 **settings).eval()


def transformer(positions: str = "learned", embedding=None, **settings
                ) -> TransformerTokenEncoder:
    settings = {"hidden_size": HIDDEN, "num_layers": 2, "num_heads": 4, "feedforward_dim": None,
                "dropout": 0.0, "max_positions": 64, **settings}
    return TransformerTokenEncoder(embedding or embedder(), positions=positions,
                                   **settings).eval()


ENCODERS = {
    **{f"{k}-{'bi' if b else 'uni'}": (lambda k=k, b=b: recurrent(k, b))
       for k in ("rnn", "gru", "lstm") for b in (True, False)},
    "transformer-learned": lambda: transformer("learned"),
    "transformer-sinusoidal": lambda: transformer("sinusoidal"),
}


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_shapes(name, batch_factory):
    encoder = ENCODERS[name]()
    ids, mask = batch_factory([5, 3, 1], total_length=6)
    states = encoder(ids, mask)
    assert encoder.hidden_size == HIDDEN
    assert states.shape == (3, 6, HIDDEN)
    assert torch.isfinite(states).all()


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_padding_invariance(name, batch_factory, pad_factory):
    encoder = ENCODERS[name]()
    ids, mask = batch_factory([6, 4, 2])
    more_ids, more_mask = pad_factory(ids, mask, 5)
    with torch.no_grad():
        short, long = encoder(ids, mask), encoder(more_ids, more_mask)
    keep = mask.bool()
    torch.testing.assert_close(long[:, :6][keep], short[keep], atol=1e-5, rtol=1e-5)
    # padded positions carry no state
    assert long[~more_mask.bool()].abs().max() == 0


def test_recurrent_backward_direction_starts_at_last_token(batch_factory):
    """Packing: in one layer, the backward half of the last real token sees only that token
    (without packing it would have run over the padding first)."""
    encoder = recurrent("gru", num_layers=1)
    ids, mask = batch_factory([3], total_length=8)
    with torch.no_grad():
        full = encoder(ids, mask)
        alone = encoder(ids[:, 2:3], mask[:, 2:3])
    torch.testing.assert_close(full[0, 2, HIDDEN // 2:], alone[0, 0, HIDDEN // 2:])


def test_recurrent_rejects_bad_options():
    with pytest.raises(ValueError, match="kind"):
        recurrent("cnn")
    with pytest.raises(ValueError, match="even"):
        recurrent("gru", hidden_size=33)


def test_transformer_rejects_bad_options(batch_factory):
    with pytest.raises(ValueError, match="positions"):
        transformer("rotary")
    with pytest.raises(ValueError, match="divisible"):
        transformer(num_heads=5)
    encoder = transformer(max_positions=4)
    with pytest.raises(ValueError, match="max_positions"):
        encoder(*batch_factory([6]))


def test_transformer_projects_embeddings_to_hidden_size():
    encoder = transformer()
    assert isinstance(encoder.input_projection, torch.nn.Linear)
    same = transformer(embedding=TokenEmbedder(VOCAB, HIDDEN, padding_idx=0))
    assert isinstance(same.input_projection, torch.nn.Identity)


def test_pretrained_encoder_shapes_and_padding(tiny_bert_factory, batch_factory, pad_factory):
    encoder = PretrainedTokenEncoder(tiny_bert_factory(), gradient_checkpointing=False)
    assert encoder.hidden_size == HIDDEN
    ids, mask = batch_factory([6, 3])
    more_ids, more_mask = pad_factory(ids, mask, 4)
    with torch.no_grad():
        short, long = encoder(ids, mask), encoder(more_ids, more_mask)
    assert short.shape == (2, 6, HIDDEN) and long.shape == (2, 10, HIDDEN)
    keep = mask.bool()
    torch.testing.assert_close(long[:, :6][keep], short[keep], atol=1e-5, rtol=1e-4)


def test_pretrained_encoder_passes_token_type_ids(tiny_bert_factory, batch_factory):
    encoder = PretrainedTokenEncoder(tiny_bert_factory(), gradient_checkpointing=False)
    ids, mask = batch_factory([6])
    types = torch.zeros_like(ids)
    types[:, 3:] = 1
    with torch.no_grad():
        plain = encoder(ids, mask)
        zeros = encoder(ids, mask, torch.zeros_like(ids))
        segmented = encoder(ids, mask, types)
    torch.testing.assert_close(plain, zeros)
    assert not torch.allclose(plain, segmented)


def test_pretrained_encoder_gradient_checkpointing(tiny_bert_factory, batch_factory):
    encoder = PretrainedTokenEncoder(tiny_bert_factory(), gradient_checkpointing=True).train()
    assert any(getattr(m, "gradient_checkpointing", False) for m in encoder.model.modules())
    ids, mask = batch_factory([5, 2])
    encoder(ids, mask).sum().backward()
    assert encoder.model.embeddings.word_embeddings.weight.grad is not None


def test_pretrained_token_embedder_is_the_embeddings_module(tiny_bert_factory):
    encoder = PretrainedTokenEncoder(tiny_bert_factory(), gradient_checkpointing=False)
    assert encoder.token_embedder is encoder.model.embeddings
    encoder.freeze_token_embedder()
    emb = encoder.model.embeddings
    for table in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings):
        assert not table.weight.requires_grad
    assert encoder.model.encoder.layer[0].attention.self.query.weight.requires_grad


def test_token_embedder_from_matrix_copies_and_freezes():
    matrix = torch.randn(VOCAB, EMB)
    table = TokenEmbedder.from_matrix(matrix, padding_idx=0)
    assert (table.vocab_size, table.embedding_dim) == (VOCAB, EMB)
    torch.testing.assert_close(table.embedding.weight.detach(), matrix)
    assert table.embedding.weight.data_ptr() != matrix.data_ptr()
    assert not table.frozen
    table.freeze()
    assert table.frozen and not table.embedding.weight.requires_grad
    frozen = TokenEmbedder(VOCAB, EMB, padding_idx=0, freeze=True)
    assert frozen.frozen
    with pytest.raises(ValueError, match="shape"):
        TokenEmbedder(VOCAB, EMB, padding_idx=0, weight=torch.zeros(3, 3))


def test_token_embedder_from_local_checkpoint(tiny_checkpoint, tiny_bert_factory):
    table = TokenEmbedder.from_pretrained(tiny_checkpoint, freeze=True)
    expected = tiny_bert_factory().get_input_embeddings().weight
    torch.testing.assert_close(table.embedding.weight, expected)
    assert table.frozen and "local directory" in table.source
