"""Gradient caching gives the plain in-batch softmax's loss and gradients (penalty and
per-pair weights included; the end-to-end run is in tests/training/test_train.py)."""

from __future__ import annotations

import pytest
import torch

from retrieval_qa.models.grad_cache import grad_cache_step
from retrieval_qa.registry import config_values, instantiate
from retrieval_qa.training.compose import compose

VOCAB = 40


def _module(*extra: str):
    cfg = compose(["experiment=dual_gru", "profile=cpu", f"model.towers.encoder.vocab_size={VOCAB}",
                   "model.towers.encoder.embedding_dim=8", "model.towers.encoder.hidden_size=8",
                   "model.towers.encoder.dropout=0.0", "model.towers.pooler.hops=2",
                   "model.towers.pooler.attention_dim=4", *extra])
    torch.manual_seed(0)
    return instantiate(cfg.model, "model", evaluation=config_values(cfg.eval))


def _batch(rows: int, length: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(rows, length, dtype=torch.long)
    mask[::3, length // 2:] = 0  # some padding
    return {"input_ids": torch.randint(1, VOCAB, (rows, length), generator=g) * mask,
            "attention_mask": mask}


def _grads(module) -> dict:
    return {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("mini_batch", [1, 3, 7])
def test_loss_and_gradients_equal_the_plain_step(mini_batch):
    module = _module("model.loss.penalty_coef=0.5", "model.loss.similarity=cosine",
                     "model.loss.scale=20")
    q_batch, a_batch = _batch(7, 6, 1), _batch(7, 9, 2)
    weight = torch.tensor([1.0, 0.25, 0.81, 1.0, 0.5, 2.0, 1.0])
    q, a, penalty = module.towers.encode_pair(q_batch, a_batch)
    plain = module.loss(q, a, weight) + 0.5 * penalty
    plain.backward()
    expected = _grads(module)
    module.zero_grad()
    loss, cached_penalty = grad_cache_step(
        module.towers.question_tower.encode, module.towers.answer_tower.encode, q_batch,
        a_batch, lambda q, a: module.loss(q, a, weight), mini_batch, torch.Tensor.backward, 0.5)
    torch.testing.assert_close(loss + 0.5 * cached_penalty, plain.detach())
    got = _grads(module)
    assert got.keys() == expected.keys() and expected
    # float32 summation order differs between one batch and its mini-batches: on one AVX2
    # machine the GRU's gradients (entries up to about 1) differ by up to 4.8e-7; a wrong
    # gradient would be off by orders of magnitude more
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=2e-6, msg=name)


def test_dropout_masks_are_replayed():
    """With dropout, the second pass draws the first pass's masks (the RNG is replayed), so
    the surrogate's gradient belongs to the loss that was computed."""
    module = _module("model.towers.encoder.dropout=0.5")
    q_batch, a_batch = _batch(6, 5, 3), _batch(6, 5, 4)
    seen = []

    def encode(**inputs):
        emb, pen = module.towers.question_tower.encode(**inputs)
        seen.append(emb.detach().clone())
        return emb, pen

    grad_cache_step(encode, module.towers.answer_tower.encode, q_batch, a_batch, module.loss,
                    2, torch.Tensor.backward, 0.0)
    first, second = seen[:3], seen[3:]
    for x, y in zip(first, second, strict=True):
        torch.testing.assert_close(x, y)


def test_endx_refuses_it():
    with pytest.raises(ValueError, match="gradient_cache"):
        cfg = compose(["experiment=endx_gru", "profile=cpu", "model.gradient_cache.mini_batch_size=4",
                       f"model.towers.encoder.vocab_size={VOCAB}", "model.towers.encoder.embedding_dim=8",
                       "model.towers.encoder.hidden_size=8"])
        instantiate(cfg.model, "model", evaluation=config_values(cfg.eval))
