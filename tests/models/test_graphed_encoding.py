"""GraphedEncoder: fixed-shape padding that leaves every real row's embedding unchanged, and
the eager fallback when a tower cannot be captured. (The graphs themselves need CUDA; on the
CPU the same padded shapes run eagerly.)"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertModel

from retrieval_qa.models.graphed_encoding import GraphedEncoder


def bert_mean_tower(seed: int = 0):
    torch.manual_seed(seed)
    bert = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32,
                                max_position_embeddings=64)).eval()

    def encode(input_ids, attention_mask, token_type_ids=None):
        states = bert(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return F.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)

    return encode


def batch(lengths: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for r, n in enumerate(lengths):
        mask[r, :n] = 1
    ids = torch.randint(1, 50, (len(lengths), width), generator=gen) * mask
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def test_width_rounds_up_to_the_multiple_and_stops_at_the_maximum():
    enc = GraphedEncoder(lambda **_: None, torch.device("cpu"), rows=4, max_width=40, pad_id=0)
    assert [enc.width(w) for w in (1, 16, 17, 33, 40)] == [16, 16, 32, 40, 40]


def test_pad_fills_rows_and_columns_and_no_row_is_fully_masked():
    enc = GraphedEncoder(lambda **_: None, torch.device("cpu"), rows=5, max_width=64, pad_id=7)
    b = batch([3, 5])
    padded = enc.pad(b)
    assert {k: tuple(v.shape) for k, v in padded.items()} == {
        "input_ids": (5, 16), "attention_mask": (5, 16), "token_type_ids": (5, 16)}
    assert torch.equal(padded["input_ids"][:2, :5], b["input_ids"])
    assert (padded["input_ids"][:, 5:] == 7).all() and (padded["input_ids"][2:] == 7).all()
    assert torch.equal(padded["attention_mask"][:2, :5], b["attention_mask"])
    assert padded["attention_mask"][:2, 5:].sum() == 0
    assert padded["attention_mask"][2:].sum(1).tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="6 rows for an encoder of 5 rows"):
        enc.pad(batch([2] * 6))


def test_padded_batches_give_the_embeddings_of_the_batch_alone():
    fn = bert_mean_tower()
    enc = GraphedEncoder(fn, torch.device("cpu"), rows=8, max_width=48, pad_id=0)
    with torch.inference_mode():
        for lengths in ([5, 3, 9], [20, 17], [1]):
            b = batch(lengths, seed=len(lengths))
            out = enc(b)
            assert out.shape == (len(lengths), 16)
            # not exact: padded rows and columns change the shapes of float32 reductions;
            # the embeddings are unit vectors, 1e-5 is about a hundred float32 steps
            torch.testing.assert_close(out, fn(**b), atol=1e-5, rtol=0)


def test_a_failed_capture_warns_once_and_encodes_eagerly(caplog):
    fn = bert_mean_tower()
    enc = GraphedEncoder(fn, torch.device("cpu"), rows=4, max_width=32, pad_id=0)
    enc.use_graphs = True  # as on a GPU; the capture cannot work here

    def fail(padded):
        raise RuntimeError("operation not permitted when stream is capturing")

    enc._capture = fail
    b = batch([4, 2])
    with caplog.at_level(logging.WARNING), torch.inference_mode():
        out = enc(b)
        again = enc(batch([6]))
    assert not enc.use_graphs and enc.failure.startswith("RuntimeError: operation not permitted")
    assert sum("CUDA graphs off" in r.message for r in caplog.records) == 1
    torch.testing.assert_close(out, fn(**b), atol=1e-5, rtol=0)
    assert again.shape == (1, 16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graph_replays_match_eager_encoding_on_a_gpu():
    fn_cpu = bert_mean_tower()
    device = torch.device("cuda")
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32,
                                max_position_embeddings=64)).eval().to(device)

    def fn(input_ids, attention_mask, token_type_ids=None):
        states = bert(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        return F.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)

    enc = GraphedEncoder(fn, device, rows=8, max_width=48, pad_id=0)
    with torch.inference_mode():
        for lengths in ([5, 3, 9], [20, 17], [4, 2, 8, 1]):  # the first and last share a shape
            b = batch(lengths, seed=len(lengths))
            out = enc(b).cpu()  # another device's kernels: unit vectors within 1e-4
            torch.testing.assert_close(out, fn_cpu(**b), atol=1e-4, rtol=0)
    assert enc.failure is None and len(enc.graphs) == 2
