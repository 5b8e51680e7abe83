"""EndxModule (eq. 13) on tiny random towers: where each loss's gradient goes, the cross
loss's own similarity, and GAM computed in each side's scoring space."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from retrieval_qa.models.endx import EndxModule
from retrieval_qa.training.compose import compose

VOCAB, WIDTH = 50, 16


def endx(*overrides: str) -> EndxModule:
    cfg = compose(["experiment=endx_gru", "profile=cpu", f"model.towers.encoder.vocab_size={VOCAB}",
                   f"model.towers.encoder.embedding_dim={WIDTH}",
                   f"model.towers.encoder.hidden_size={WIDTH}", "model.towers.encoder.dropout=0.0",
                   "model.towers.pooler.hops=2", "model.towers.pooler.attention_dim=8",
                   "model.cross.cross_attention.num_heads=2",
                   "model.cross.cross_attention.dropout=0.0", *overrides])
    model = OmegaConf.to_container(cfg.model, resolve=True)
    model.pop("_target_")
    torch.manual_seed(0)
    return EndxModule(**model, evaluation=OmegaConf.to_container(cfg.eval))


def batch(size: int = 4) -> dict:
    gen = torch.Generator().manual_seed(1)

    def side(length: int) -> dict:
        ids = torch.randint(1, VOCAB, (size, length), generator=gen)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    return {"question": side(5), "answer": side(7)}


def grads(module: EndxModule, **weights: float) -> dict[str, bool]:
    """Which parts receive a non-zero gradient when eq. 13 uses ``weights``."""
    module.weights = type(module.weights)(**weights)
    module.zero_grad()
    loss, _ = module.losses(batch(), epoch=10.0)  # past the ramp: every GAM weight at its final
    loss.backward()

    def touched(part) -> bool:
        return any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())

    return {"towers": touched(module.towers), "cross": touched(module.cross_branch)}


def test_cpu_profile_cross_loss_is_cosine_and_dual_keeps_the_inner_product():
    module = endx()
    assert (module.loss.similarity, module.loss.scale) == ("dot", 1.0)
    assert (module.cross_loss.similarity, module.cross_loss.scale) == ("cosine", 20.0)


def test_cross_loss_defaults_to_the_dual_loss_settings():
    cfg = compose(["experiment=endx_gru"])  # paper settings: eq. 5 like eq. 1
    assert dict(cfg.model.cross_loss) == {"similarity": "dot", "scale": 1.0}
    assert not cfg.model.gam.exclude_self  # eqs. 7-11 sum over all k


def test_each_loss_reaches_exactly_its_parameters():
    module = endx()
    assert grads(module, dual=1.0, cross=0.0, ga=0.0) == {"towers": True, "cross": False}
    assert grads(module, dual=0.0, cross=1.0, ga=0.0) == {"towers": False, "cross": True}
    # GAM, cross side detached (the default): a teacher for the towers only
    assert grads(module, dual=0.0, cross=0.0, ga=1.0) == {"towers": True, "cross": False}


def test_gam_into_the_cross_branch_when_not_detached():
    module = endx("model.gam.detach_cross=false")
    assert grads(module, dual=0.0, cross=0.0, ga=1.0) == {"towers": True, "cross": True}


def test_gam_terms_are_computed_on_each_sides_scores():
    module = endx()
    module.eval()
    b = batch()
    _, logs = module.losses(b, epoch=10.0)
    q, a = module.towers(b["question"], b["answer"])
    cq, ca = module.cross_branch(b["question"], b["answer"])
    # a|q: p(a_j | q_i) of each side is its own in-batch retrieval softmax
    p_cross = torch.softmax(module.cross_loss.scores(cq, ca), dim=-1)
    log_p_dual = torch.log_softmax(module.loss.scores(q, a), dim=-1)
    expected = (p_cross * (p_cross.log() - log_p_dual)).sum(-1).mean()
    assert logs["train/kl_aq"].item() == pytest.approx(expected.item(), rel=1e-5)


def test_checkpoints_of_the_branch_under_its_old_name_load(tmp_path):
    """Checkpoints written while the branch was ``cross_encoder`` load into ``cross_branch``."""
    saved = {k: v + 1 if v.is_floating_point() else v for k, v in endx().state_dict().items()}
    state = {(k.replace("cross_branch.", "cross_encoder.", 1) if k.startswith("cross_branch.")
              else k): v for k, v in saved.items()}
    assert any(k.startswith("cross_encoder.") for k in state)
    checkpoint = {"state_dict": state}
    fresh = endx()
    fresh.on_load_checkpoint(checkpoint)
    fresh.load_state_dict(checkpoint["state_dict"])
    for name, value in fresh.state_dict().items():
        assert torch.equal(value, saved[name]), name  # exact: copied, not computed


def test_a_pretrained_cross_branch_trains_in_train_mode(tmp_path):
    """from_pretrained leaves a Hugging Face model in eval mode: the branch's copy too must be
    put in train mode (its dropout on), as the towers are."""
    from helpers import WORDS, save_tiny_bert_model, word_tokenizer

    save_tiny_bert_model(tmp_path / "bert", word_tokenizer(WORDS))
    cfg = compose(["experiment=endx_bert", "profile=cpu",
                   f"model.towers.encoder.pretrained={tmp_path / 'bert'}",
                   "model.cross.cross_attention.num_heads=2"])
    model = OmegaConf.to_container(cfg.model, resolve=True)
    model.pop("_target_")
    module = EndxModule(**model, evaluation=OmegaConf.to_container(cfg.eval))
    assert module.cross_branch.token_encoder.model is not module.towers.question_tower.token_encoder.model
    assert all(m.training for m in module.modules())
