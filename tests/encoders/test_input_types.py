"""The input-type embedding of one shared tower (supervised-mining paper 4.2): a learned vector
per side added to every input token's embedding, zero at the start, trained per side, for
pretrained and trained-from-scratch token encoders."""

from __future__ import annotations

import pytest
import torch

from retrieval_qa.encoders import build_dual_towers

QUESTION, ANSWER = 0, 1


def bert_towers(config_factory, tiny_checkpoint, sharing="sde", input_types=True):
    torch.manual_seed(0)
    cfg = config_factory(
        encoder={"type": "pretrained", "pretrained": tiny_checkpoint, "fallback": None,
                 "vocab_size": None, "embedding_dim": None, "input_types": input_types},
        pooler={"type": "mean"}, sharing=sharing)
    return build_dual_towers(cfg).eval()


def test_sides_share_every_module_and_start_as_the_plain_tower(
        config_factory, tiny_checkpoint, batch_factory):
    typed = bert_towers(config_factory, tiny_checkpoint)
    plain = bert_towers(config_factory, tiny_checkpoint, input_types=False)
    q, a = typed.question_tower, typed.answer_tower
    assert q is not a and q.shares_modules_with(a)
    assert (q.input_type, a.input_type) == (QUESTION, ANSWER)
    assert torch.equal(q.input_types.weight, torch.zeros(2, 32))
    counts = typed.trainable_parameters()
    assert counts["question"] == counts["answer"] == counts["total"]
    assert counts["total"] == plain.trainable_parameters()["total"] + 2 * 32
    ids, mask = batch_factory([5, 3])
    with torch.no_grad():
        torch.testing.assert_close(typed.encode_question(ids, mask),
                                   plain.encode_question(ids, mask))
        torch.testing.assert_close(typed.encode_answer(ids, mask),
                                   plain.encode_answer(ids, mask))


def test_each_side_adds_its_own_vector_to_the_word_embeddings(
        config_factory, tiny_checkpoint, batch_factory):
    towers = bert_towers(config_factory, tiny_checkpoint)
    with torch.no_grad():
        towers.question_tower.input_types.weight.normal_()
    bert = towers.question_tower.token_encoder.model
    ids, mask = batch_factory([5, 3])
    with torch.no_grad():
        for side, encode in ((QUESTION, towers.encode_question), (ANSWER, towers.encode_answer)):
            words = bert.get_input_embeddings()(ids) + towers.question_tower.input_types.weight[side]
            states = bert(inputs_embeds=words, attention_mask=mask).last_hidden_state
            expected = (states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            torch.testing.assert_close(encode(ids, mask), expected)
        assert (towers.encode_question(ids, mask) - towers.encode_answer(ids, mask)).abs().max() > 1e-3


def test_a_side_trains_only_its_own_vector(config_factory, tiny_checkpoint, batch_factory):
    towers = bert_towers(config_factory, tiny_checkpoint)
    ids, mask = batch_factory([5, 3])
    towers.encode_question(ids, mask).pow(2).sum().backward()
    grad = towers.question_tower.input_types.weight.grad
    assert grad[QUESTION].abs().sum() > 0 and torch.equal(grad[ANSWER], torch.zeros(32))


@pytest.mark.parametrize("encoder_type", ["gru", "transformer"])
def test_trained_token_encoders_take_the_vector_on_their_embeddings(
        encoder_type, config_factory, batch_factory):
    torch.manual_seed(0)
    towers = build_dual_towers(config_factory(encoder_type, encoder={"input_types": True})).eval()
    table = towers.question_tower.input_types
    assert table.weight.shape == (2, 16)  # the token embeddings' width, not the states'
    ids, mask = batch_factory([5, 3])
    with torch.no_grad():
        same = towers.encode_question(ids, mask), towers.encode_answer(ids, mask)
        torch.testing.assert_close(*same)
        table.weight[ANSWER] = 1.0
        assert (towers.encode_question(ids, mask) - towers.encode_answer(ids, mask)).abs().max() > 1e-3
        torch.testing.assert_close(towers.encode_question(ids, mask), same[0])


def test_input_types_need_one_shared_tower(config_factory, tiny_checkpoint):
    with pytest.raises(ValueError, match="sharing='sde'"):
        bert_towers(config_factory, tiny_checkpoint, sharing="ade")
