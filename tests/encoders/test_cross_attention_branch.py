"""CrossAttentionBranch with tiny stand-in token encoder and poolers (no dependency on real ones)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from retrieval_qa.encoders.cross_attention import CrossAttentionBlock
from retrieval_qa.encoders.cross_attention_branch import CrossAttentionBranch
from retrieval_qa.encoders.poolers import Pooler

VOCAB, H = 50, 16


class EmbeddingEncoder(nn.Module):
    """Stand-in token encoder: forward(input_ids, attention_mask, token_type_ids) -> [B, L, H]."""

    def __init__(self, hidden_size: int = H) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.emb = nn.Embedding(VOCAB, hidden_size)
        self.type_emb = nn.Embedding(2, hidden_size)
        self.seen_token_types: list[torch.Tensor | None] = []

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        self.seen_token_types.append(token_type_ids)
        x = self.emb(input_ids)
        if token_type_ids is not None:
            x = x + self.type_emb(token_type_ids)
        return x


class MeanPooler(Pooler):
    """Stand-in pooler: masked mean + linear; records the masks it was given."""

    def __init__(self, hidden_size: int = H, output_dim: int = 8) -> None:
        super().__init__()
        self.output_dim = output_dim
        self.proj = nn.Linear(hidden_size, output_dim)
        self.seen_masks: list[torch.Tensor] = []

    def forward(self, states, attention_mask):
        self.seen_masks.append(attention_mask)
        m = attention_mask.to(states.dtype).unsqueeze(-1)
        return self.proj((states * m).sum(1) / m.sum(1).clamp_min(1.0))


class PenaltyPooler(MeanPooler):
    """Stand-in with a Lin et al.-style penalty returned with each pooled batch."""

    def pool(self, states, attention_mask):
        out = self(states, attention_mask)
        return out, out.pow(2).mean()


def _batch(b: int, length: int, n_pad: int = 0, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.long)
    if n_pad:
        mask[0, -n_pad:] = 0
        ids[0, -n_pad:] = 0
    return {"input_ids": ids, "attention_mask": mask}


SETTINGS = {"num_heads": 4, "ffn_dim": None, "dropout": 0.0, "share": False, "activation": "relu"}


def _model(**kw) -> CrossAttentionBranch:
    torch.manual_seed(0)
    pooler = kw.pop("pooler", None) or MeanPooler()
    kw = {**SETTINGS, **kw}
    return CrossAttentionBranch(EmbeddingEncoder(), pooler, **kw).eval()


@pytest.mark.parametrize(("n", "m"), [(5, 9), (9, 3)])
def test_forward_shapes_and_pooling_masks(n: int, m: int) -> None:
    model = _model()
    q, a = _batch(3, n, n_pad=2, seed=1), _batch(3, m, n_pad=1, seed=2)
    r_q, r_a = model(q, a)
    assert r_q.shape == (3, 8) and r_a.shape == (3, 8)
    assert model.output_dim == 8 and model.hidden_size == H
    q_mask_seen, a_mask_seen = model.pooler.seen_masks
    # Question refined by answer has answer-length rows -> pooled with the answer mask.
    assert torch.equal(q_mask_seen, a["attention_mask"].bool())
    assert torch.equal(a_mask_seen, q["attention_mask"].bool())


def test_separate_blocks_by_default_and_shared_option() -> None:
    sep = _model()
    assert isinstance(sep.cross_attn_q, CrossAttentionBlock)
    assert sep.cross_attn_q is not sep.cross_attn_a
    shared = _model(share=True)
    assert shared.cross_attn_q is shared.cross_attn_a
    n_block = sum(p.numel() for p in sep.cross_attn_q.parameters())
    n_sep = sum(p.numel() for p in sep.parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_sep - n_shared == n_block


def test_question_side_depends_on_answer() -> None:
    """Cross-embeddings interact: changing the answer changes R^cross_q."""
    model = _model()
    q = _batch(2, 5, seed=1)
    r_q1, _ = model(q, _batch(2, 6, seed=2))
    r_q2, _ = model(q, _batch(2, 6, seed=3))
    assert not torch.allclose(r_q1, r_q2)


def test_padding_invariance_end_to_end() -> None:
    model = _model()
    q, a = _batch(2, 5, seed=1), _batch(2, 4, seed=2)
    r_q, r_a = model(q, a)
    q_pad = {
        "input_ids": torch.cat([q["input_ids"], torch.full((2, 3), 7)], dim=1),
        "attention_mask": torch.cat([q["attention_mask"], torch.zeros(2, 3, dtype=torch.long)], 1),
    }
    r_q_p, r_a_p = model(q_pad, a)
    torch.testing.assert_close(r_q_p, r_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r_a_p, r_a, atol=1e-5, rtol=1e-5)


def test_token_type_ids_are_passed_through() -> None:
    model = _model()
    q, a = _batch(2, 5), _batch(2, 4)
    q["token_type_ids"] = torch.zeros(2, 5, dtype=torch.long)
    model(q, a)
    seen = model.token_encoder.seen_token_types
    assert seen[0] is q["token_type_ids"] and seen[1] is None


def test_mismatched_batch_sizes_raise() -> None:
    with pytest.raises(ValueError, match="matched pairs"):
        _model()(_batch(2, 5), _batch(3, 5))


def test_penalty_passthrough() -> None:
    plain = _model()
    assert float(plain.encode_pair(_batch(2, 5), _batch(2, 4)).penalty) == 0.0
    model = _model(pooler=PenaltyPooler())
    r_q, r_a, penalty = model.encode_pair(_batch(2, 5), _batch(2, 4))
    expected = r_q.pow(2).mean() + r_a.pow(2).mean()  # both sides of a shared pooler
    torch.testing.assert_close(penalty, expected)
    penalty.backward()
    assert model.pooler.proj.weight.grad is not None


def test_separate_answer_modules() -> None:
    torch.manual_seed(0)
    model = CrossAttentionBranch(
        EmbeddingEncoder(), MeanPooler(), **SETTINGS,
        answer_token_encoder=EmbeddingEncoder(), answer_pooler=MeanPooler(),
    )
    model(_batch(2, 5), _batch(2, 4))
    assert len(model.token_encoder.seen_token_types) == 1
    assert len(model.answer_token_encoder.seen_token_types) == 1
    assert len(model.pooler.seen_masks) == 1 and len(model.answer_pooler.seen_masks) == 1
    with pytest.raises(ValueError, match="output_dim"):
        CrossAttentionBranch(EmbeddingEncoder(), MeanPooler(), **SETTINGS,
                             answer_pooler=MeanPooler(output_dim=4))


def test_gradients_reach_encoder_blocks_and_pooler() -> None:
    model = _model()
    r_q, r_a = model(_batch(2, 5, n_pad=1), _batch(2, 4))
    (r_q * r_a).sum().backward()
    for name, p in model.named_parameters():
        if name == "token_encoder.type_emb.weight":  # unused: no token_type_ids given
            continue
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def _cross_conf(**cross_attention) -> dict:
    """conf/model/endx.yaml's ``cross`` block (the one source of its settings) over tiny GRU
    towers, with ``cross_attention`` over its own."""
    from helpers import towers_conf

    from retrieval_qa.training.compose import load_group

    conf = OmegaConf.to_container(load_group("model", "endx").cross.cross_attention)
    towers = towers_conf(
        encoder={"type": "gru", "vocab_size": VOCAB, "embedding_dim": 16, "hidden_size": H,
                 "num_layers": 1},
        pooler={"type": "multihop_attention", "hops": 2, "attention_dim": 8})
    return {"encoder": towers["encoder"], "pooler": towers["pooler"],
            "cross_attention": {**conf, **cross_attention}}


def test_build_cross_attention_branch_from_config() -> None:
    from retrieval_qa.encoders.cross_attention_branch import build_cross_attention_branch

    cfg = OmegaConf.create(_cross_conf(num_heads=4, share=True, dropout=0.0))
    torch.manual_seed(0)
    model = build_cross_attention_branch(cfg)
    assert model.cross_attn_q is model.cross_attn_a and model.cross_attn_q.num_heads == 4
    assert model.output_dim == 2 * H
    r_q, r_a, penalty = model.encode_pair(_batch(2, 5, n_pad=1), _batch(2, 7))
    assert r_q.shape == r_a.shape == (2, 2 * H)
    assert penalty.item() > 0  # multi-hop penalty of both sides
    with pytest.raises(ValueError, match=r"unknown key.*'heads'"):
        build_cross_attention_branch(_cross_conf(heads=4))
    with pytest.raises(ValueError, match="unknown"):
        build_cross_attention_branch({**_cross_conf(), "projection": {}})


def test_the_branch_takes_every_setting_from_its_block() -> None:
    """Nothing is filled in: a block without a setting is an error naming it (conf/ holds
    them all; ENDX 4.4's 12 heads and separate blocks among them)."""
    from retrieval_qa.encoders.cross_attention_branch import build_cross_attention_branch

    cfg = _cross_conf()
    assert cfg["cross_attention"]["num_heads"] == 12 and cfg["cross_attention"]["share"] is False
    encoder = EmbeddingEncoder(hidden_size=24)
    model = build_cross_attention_branch(cfg, token_encoder=encoder)
    assert model.cross_attn_q.num_heads == 12 and model.cross_attn_q is not model.cross_attn_a
    del cfg["cross_attention"]["activation"]
    with pytest.raises(KeyError, match=r"cross\.cross_attention has no 'activation'"):
        build_cross_attention_branch(cfg, token_encoder=encoder)
