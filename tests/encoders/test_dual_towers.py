"""Towers and the SDE / ADE sharing switches: each shares or freezes exactly what it says."""

from __future__ import annotations

import copy

import pytest
import torch

from retrieval_qa.encoders import (
    DualTowers,
    MeanPooler,
    Projection,
    RecurrentTokenEncoder,
    TokenEmbedder,
    Tower,
    build_dual_towers,
)
from retrieval_qa.encoders.poolers import attention_penalty

VOCAB, EMB = 100, 16


def param_ids(module: torch.nn.Module) -> set[int]:
    return {id(p) for p in module.parameters()}


def numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def batches(batch_factory):
    q_ids, q_mask = batch_factory([5, 3, 2], seed=1)
    a_ids, a_mask = batch_factory([7, 6, 4, 2], seed=2)
    return (
        {"input_ids": q_ids, "attention_mask": q_mask},
        {"input_ids": a_ids, "attention_mask": a_mask},
    )


def recurrent(kind: str, num_layers: int) -> RecurrentTokenEncoder:
    return RecurrentTokenEncoder(TokenEmbedder(VOCAB, EMB, padding_idx=0), kind=kind,
                                 hidden_size=8, num_layers=num_layers, bidirectional=True,
                                 dropout=0.0)


def small_tower(projection: int | None = None) -> Tower:
    proj = Projection(8, projection, bias=False) if projection else None
    return Tower(recurrent("gru", 1), MeanPooler(8), proj, normalize=False, chunk_rows=None)


def test_tower_forward_normalize_and_penalty(batch_factory):
    tower = Tower(recurrent("lstm", 2), MeanPooler(8), Projection(8, 5, bias=False),
                  normalize=True, chunk_rows=None)
    ids_, mask = batch_factory([4, 2])
    out = tower(ids_, mask)
    assert out.shape == (2, 5) and tower.output_dim == 5
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(2))
    emb, penalty = tower.encode(ids_, mask)
    torch.testing.assert_close(emb, out)
    assert penalty.item() == 0.0
    bare = Tower(tower.token_encoder, MeanPooler(8), torch.nn.Linear(8, 3), normalize=False,
                 chunk_rows=None)
    assert bare.output_dim == 3


@pytest.mark.parametrize("encoder_type", ["gru", "transformer"])
def test_sde_is_one_tower(encoder_type, config_factory, batch_factory):
    model = build_dual_towers(config_factory(encoder_type, "sde"))
    assert model.question_tower is model.answer_tower
    counts = model.trainable_parameters()
    assert counts["question"] == counts["answer"] == counts["total"]
    q, a = model(*batches(batch_factory))
    assert q.shape == (3, model.output_dim) and a.shape == (4, model.output_dim)


@pytest.mark.parametrize("encoder_type", ["lstm", "transformer"])
def test_ade_shares_nothing(encoder_type, config_factory, batch_factory):
    model = build_dual_towers(config_factory(encoder_type, "ade"))
    assert model.question_tower is not model.answer_tower
    assert not param_ids(model.question_tower) & param_ids(model.answer_tower)
    counts = model.trainable_parameters()
    assert counts["question"] == counts["answer"]
    assert counts["total"] == counts["question"] + counts["answer"]
    q, a = model(*batches(batch_factory))
    assert q.shape[1] == a.shape[1]


@pytest.mark.parametrize("encoder_type", ["gru", "transformer"])
def test_ade_ste_shares_the_embedding_object(encoder_type, config_factory, batch_factory):
    model = build_dual_towers(config_factory(encoder_type, "ade_ste"))
    q_tower, a_tower = model.question_tower, model.answer_tower
    assert q_tower is not a_tower
    assert a_tower.token_embedder is q_tower.token_embedder
    assert a_tower.token_encoder.embedder.embedding is q_tower.token_encoder.embedder.embedding
    shared = param_ids(q_tower) & param_ids(a_tower)
    assert shared == param_ids(q_tower.token_embedder)
    counts = model.trainable_parameters()
    assert counts["total"] == counts["question"] + counts["answer"] - VOCAB * EMB
    # both sides train the one table
    q, a = model(*batches(batch_factory))
    (q.sum() + a.sum()).backward()
    assert q_tower.token_embedder.embedding.weight.grad is not None


@pytest.mark.parametrize("encoder_type", ["rnn", "transformer"])
def test_ade_fte_freezes_both_embedders(encoder_type, config_factory, batch_factory):
    ade = build_dual_towers(config_factory(encoder_type, "ade")).trainable_parameters()
    model = build_dual_towers(config_factory(encoder_type, "ade_fte"))
    for tower in (model.question_tower, model.answer_tower):
        assert not tower.token_embedder.embedding.weight.requires_grad
    assert not param_ids(model.question_tower) & param_ids(model.answer_tower)
    counts = model.trainable_parameters()
    assert counts["question"] == ade["question"] - VOCAB * EMB
    assert counts["total"] == ade["total"] - 2 * VOCAB * EMB
    q, a = model(*batches(batch_factory))
    (q.sum() + a.sum()).backward()
    embedder = model.question_tower.token_embedder
    assert embedder.embedding.weight.grad is None
    rest = param_ids(model.question_tower) - param_ids(embedder)
    assert all(p.grad is not None for p in model.question_tower.parameters() if id(p) in rest)


def test_ade_spl_shares_the_projection(config_factory, batch_factory):
    model = build_dual_towers(config_factory("gru", "ade_spl", projection={"dim": 12}))
    q_tower, a_tower = model.question_tower, model.answer_tower
    assert a_tower.projection is q_tower.projection
    assert a_tower.token_embedder is not q_tower.token_embedder
    assert param_ids(q_tower) & param_ids(a_tower) == param_ids(q_tower.projection)
    counts = model.trainable_parameters()
    assert counts["total"] == counts["question"] + counts["answer"] - numel(q_tower.projection)
    q, a = model(*batches(batch_factory))
    assert q.shape == (3, 12) and a.shape == (4, 12)


def test_ade_spl_adds_a_square_projection_by_default(config_factory):
    model = build_dual_towers(config_factory("gru", "ade_spl"))
    pooled = model.question_tower.pooler.output_dim
    assert isinstance(model.question_tower.projection, Projection)
    assert model.output_dim == pooled
    assert model.question_tower.projection.linear.weight.shape == (pooled, pooled)


def test_pretrained_sharing_via_local_checkpoint(config_factory, tiny_checkpoint, batch_factory):
    enc = {"type": "pretrained", "pretrained": tiny_checkpoint, "vocab_size": None,
           "embedding_dim": None}
    pooler = {"type": "mean"}
    ade = build_dual_towers(config_factory("gru", "ade", encoder=enc, pooler=pooler))
    q_model, a_model = ade.question_tower.token_encoder.model, ade.answer_tower.token_encoder.model
    assert q_model is not a_model and not param_ids(q_model) & param_ids(a_model)
    for (name, p), (_, r) in zip(q_model.named_parameters(), a_model.named_parameters(),
                                 strict=True):
        torch.testing.assert_close(p, r, msg=f"{name} should start from the same checkpoint")

    ste = build_dual_towers(config_factory("gru", "ade_ste", encoder=enc, pooler=pooler))
    q_enc, a_enc = ste.question_tower.token_encoder, ste.answer_tower.token_encoder
    assert a_enc.model.embeddings is q_enc.model.embeddings
    assert a_enc.model.embeddings.word_embeddings is q_enc.model.embeddings.word_embeddings
    assert a_enc.model.encoder is not q_enc.model.encoder
    shared = numel(q_enc.model.embeddings)
    counts = ste.trainable_parameters()
    assert counts["total"] == counts["question"] + counts["answer"] - shared

    fte = build_dual_towers(config_factory("gru", "ade_fte", encoder=enc, pooler=pooler))
    tables = 0
    for tower in (fte.question_tower, fte.answer_tower):
        emb = tower.token_encoder.model.embeddings
        for table in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings):
            assert not table.weight.requires_grad
            tables += table.weight.numel()
    assert fte.trainable_parameters()["total"] == ade.trainable_parameters()["total"] - tables
    q, a = fte(*batches(batch_factory))
    assert q.shape == (3, 32) and a.shape == (4, 32)


def test_penalty_sums_both_sides_even_for_sde(config_factory, batch_factory):
    model = build_dual_towers(config_factory("gru", "sde"))
    q_batch, a_batch = batches(batch_factory)
    q, a, penalty = model.encode_pair(q_batch, a_batch)
    torch.testing.assert_close(q, model.encode_question(**q_batch))
    pooler, encoder = model.question_tower.pooler, model.question_tower.token_encoder
    expected = 0.0
    for batch in (q_batch, a_batch):
        states = encoder(batch["input_ids"], batch["attention_mask"])
        expected += attention_penalty(pooler.attention(states, batch["attention_mask"])).item()
    assert penalty.item() == pytest.approx(expected, rel=1e-5)
    assert penalty.requires_grad
    mean_model = build_dual_towers(config_factory("gru", "ade", pooler={"type": "mean"}))
    assert mean_model.encode_pair(q_batch, a_batch).penalty.item() == 0.0


def test_copy_and_pickle_after_a_training_forward(config_factory, batch_factory, tmp_path):
    """Penalties are returned, not recorded: copies and checkpoints after a training
    forward hold no batch graph."""
    model = build_dual_towers(config_factory("gru", "ade_spl"))
    assert model.encode_pair(*batches(batch_factory)).penalty.requires_grad
    copy.deepcopy(model)  # no graph to copy
    torch.save(model, tmp_path / "model.pt")
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    assert loaded.answer_tower.projection is loaded.question_tower.projection
    q_batch, a_batch = batches(batch_factory)
    model.eval(), loaded.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(q_batch, a_batch)[1], model(q_batch, a_batch)[1])


def test_forward_passes_token_type_ids(config_factory, tiny_checkpoint, batch_factory):
    enc = {"type": "pretrained", "pretrained": tiny_checkpoint, "vocab_size": None,
           "embedding_dim": None}
    model = build_dual_towers(config_factory("gru", "sde", encoder=enc,
                                             pooler={"type": "cls"})).eval()
    q_batch, a_batch = batches(batch_factory)
    types = torch.zeros_like(a_batch["input_ids"])
    types[:, 2:] = 1
    with torch.no_grad():
        _, plain = model(q_batch, a_batch)
        _, typed = model(q_batch, {**a_batch, "token_type_ids": types})
    assert not torch.allclose(plain, typed)


def test_dual_towers_validates_its_arguments():
    tower, other = small_tower(4), small_tower(4)
    with pytest.raises(ValueError, match="sde"):
        DualTowers(tower, other, sharing="sde")
    with pytest.raises(ValueError, match="distinct"):
        DualTowers(tower, tower, sharing="ade")
    with pytest.raises(ValueError, match=r"sharing='siamese'.*'sde'.*'ade_spl'"):
        DualTowers(tower, other, sharing="siamese")
    with pytest.raises(ValueError, match="projection"):
        DualTowers(small_tower(), small_tower(), sharing="ade_spl")
    with pytest.raises(ValueError, match="embedding size"):
        DualTowers(small_tower(4), small_tower(5), sharing="ade")
    assert DualTowers(tower, None, sharing="sde").answer_tower is tower
