"""VAE towers (Cross-VAEs 3.2): Gaussian heads over GRU + multi-hop attention towers,
reparameterisation, the mean as the embedding, sharing modes, rebuilding from the config."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import towers_conf
from omegaconf import OmegaConf

from retrieval_qa.encoders import DualTowers
from retrieval_qa.encoders.vae import (
    GaussianHead,
    VAEDualTowers,
    build_vae_towers,
    reparameterize,
    towers_from_config,
)
from retrieval_qa.training.compose import load_group

VOCAB, LATENT = 60, 6


def vae_config(sharing: str = "ade", **extra) -> dict:
    """conf/model/vae.yaml's towers (the one source of their settings), tiny, with ``extra``."""
    cfg = OmegaConf.to_container(load_group("model", "vae").towers)
    cfg["encoder"].update(vocab_size=VOCAB, embedding_dim=8, hidden_size=12, dropout=0.0)
    cfg["pooler"].update(hops=2, attention_dim=5)
    return {**cfg, "latent_dim": LATENT, "sharing": sharing, **extra}


def batch(size: int = 3, length: int = 6, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (size, length), generator=gen)
    mask = torch.ones_like(ids)
    mask[0, length - 2:] = 0
    return {"input_ids": ids * mask, "attention_mask": mask}


def test_reparameterisation_gives_the_mean_when_the_variance_is_zero():
    mean = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    logvar = torch.full((1, 3), float("-inf"))
    z = reparameterize(mean, logvar)
    assert torch.equal(z, mean)  # exact: mean + 0 * noise
    z.sum().backward()
    assert torch.equal(mean.grad, torch.ones_like(mean))  # finite gradient, no NaN


def test_reparameterisation_samples_the_posterior():
    torch.manual_seed(0)
    mean = torch.tensor([1.0, -2.0]).expand(20000, 2)
    logvar = torch.log(torch.tensor([0.25, 4.0])).expand(20000, 2)
    z = reparameterize(mean, logvar)
    assert torch.allclose(z.mean(0), torch.tensor([1.0, -2.0]), atol=0.05)
    assert torch.allclose(z.std(0), torch.tensor([0.5, 2.0]), atol=0.05)


def test_a_tower_samples_in_training_and_gives_the_mean_otherwise():
    torch.manual_seed(0)
    towers = build_vae_towers(vae_config())
    b = batch()
    tower = towers.question_tower
    tower.train()
    z, mean, logvar, _ = tower.latent(**b)
    assert z.shape == mean.shape == logvar.shape == (3, LATENT)
    assert not torch.allclose(z, mean)
    # zero variance: the sample is the mean, also in training mode
    with torch.no_grad():
        tower.head.logvar.weight.zero_()
        tower.head.logvar.bias.fill_(-math.inf)
    z, mean, *_ = tower.latent(**b)
    assert torch.equal(z, mean)
    tower.eval()
    with torch.no_grad():
        tower.head.logvar.bias.zero_()
    z, mean, *_ = tower.latent(**b)
    assert torch.equal(z, mean)


def test_encode_is_the_posterior_mean_in_both_modes():
    torch.manual_seed(0)
    towers = build_vae_towers(vae_config())
    b = batch()
    for train in (True, False):  # exact: the same computation on the same batch, twice
        towers.train(train)
        mean, _ = towers.question_tower.posterior(**b)
        assert torch.equal(towers.encode_question(**b), mean)
        assert torch.equal(towers.encode_question(**b), towers.encode_question(**b))
        mean_a, _ = towers.answer_tower.posterior(**b)
        assert torch.equal(towers.encode_answer(**b), mean_a)


def test_the_dual_towers_interface():
    towers = build_vae_towers(vae_config())
    assert isinstance(towers, DualTowers) and towers.output_dim == towers.latent_dim == LATENT
    counts = towers.trainable_parameters()
    assert counts["total"] == counts["question"] + counts["answer"]  # ade: nothing shared
    q, a = towers(batch(), batch(size=4))
    assert q.shape == (3, LATENT) and a.shape == (4, LATENT)
    (zq, *_, pen_q), (za, *_, pen_a) = towers.latents(batch(), batch(size=4))
    assert pen_q.ndim == 0 and pen_q > 0 and pen_a > 0  # multi-hop attention penalty
    assert zq.shape == (3, LATENT) and za.shape == (4, LATENT)
    assert isinstance(towers.question_tower.head, GaussianHead)
    assert towers.question_tower.head.mean.in_features == 2 * 12  # 2 hops x hidden 12, concat


def test_sharing_modes():
    sde = build_vae_towers(vae_config("sde"))
    assert sde.question_tower is sde.answer_tower
    ade = build_vae_towers(vae_config("ade"))
    assert ade.question_tower.head is not ade.answer_tower.head
    spl = build_vae_towers(vae_config("ade_spl"))
    assert spl.question_tower.head is spl.answer_tower.head  # the head is the projection
    assert spl.question_tower.token_encoder is not spl.answer_tower.token_encoder
    ste = build_vae_towers(vae_config("ade_ste"))
    assert ste.question_tower.token_embedder is ste.answer_tower.token_embedder
    fte = build_vae_towers(vae_config("ade_fte"))
    assert fte.question_tower.token_embedder.frozen and fte.answer_tower.token_embedder.frozen


def test_rebuilt_from_the_config_with_the_state_dict():
    torch.manual_seed(0)
    towers = build_vae_towers(vae_config()).eval()
    state = towers.state_dict()
    assert all(k.startswith(("question_tower.", "answer_tower.")) for k in state)
    torch.manual_seed(1)
    again = towers_from_config(towers.config)
    assert isinstance(again, VAEDualTowers)
    again.load_state_dict(state)  # strict: the same modules
    again.eval()
    b = batch()  # exact: the same weights, shapes and kernels
    assert torch.equal(again.encode_question(**b), towers.encode_question(**b))
    assert torch.equal(again.encode_answer(**b), towers.encode_answer(**b))
    vae = vae_config()
    plain = towers_from_config(towers_conf(encoder=vae["encoder"], pooler=vae["pooler"]))
    assert type(plain) is DualTowers


def test_config_errors():
    with pytest.raises(ValueError, match="projection"):
        build_vae_towers(vae_config(projection={"dim": 4}))
    with pytest.raises(ValueError, match="sharing"):
        build_vae_towers(vae_config("both"))
    with pytest.raises(ValueError, match="latent_dim"):
        build_vae_towers(vae_config(latent_dim=0))
    with pytest.raises(ValueError, match=r"unknown key.*'hidden'"):
        build_vae_towers(vae_config(encoder={**vae_config()["encoder"], "hidden": 3}))
    with pytest.raises(ValueError, match="chunk_rows"):
        build_vae_towers(vae_config(encoder={**vae_config()["encoder"], "chunk_rows": 8}))
