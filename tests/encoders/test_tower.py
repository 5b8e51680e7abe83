"""Tower.encode in length-sorted chunks (``encoder.chunk_rows``): the same embeddings,
penalty and gradients as the whole batch, on every encoder type and pooler."""

import pytest
import torch

from retrieval_qa.encoders.builders import build_tower

LENGTHS = [3, 12, 5, 12, 1, 7, 9, 2, 4, 11]   # mixed, ties, longer than two chunks


def _pair(config_factory, tiny_checkpoint, encoder_type, pooler, rows):
    if encoder_type == "pretrained":
        cfg = config_factory("pretrained", encoder={"pretrained": tiny_checkpoint})
    else:
        cfg = config_factory(encoder_type)
    cfg["pooler"]["type"] = pooler
    torch.manual_seed(0)
    whole = build_tower(cfg).eval()
    cfg["encoder"]["chunk_rows"] = rows
    chunked = build_tower(cfg).eval()
    chunked.load_state_dict(whole.state_dict())
    return whole, chunked


@pytest.mark.parametrize("encoder_type", ["pretrained", "gru", "transformer"])
@pytest.mark.parametrize("pooler", ["multihop_attention", "mean", "cls"])
def test_chunked_encode_equals_whole_batch(encoder_type, pooler, config_factory,
                                           tiny_checkpoint, batch_factory):
    whole, chunked = _pair(config_factory, tiny_checkpoint, encoder_type, pooler, rows=4)
    ids, mask = batch_factory(LENGTHS, total_length=14)   # two all-padding columns too
    types = torch.zeros_like(ids) if encoder_type == "pretrained" else None
    emb, pen = whole.encode(ids, mask, types)
    emb_c, pen_c = chunked.encode(ids, mask, types)
    torch.testing.assert_close(emb_c, emb, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.as_tensor(pen_c), torch.as_tensor(pen), atol=1e-5,
                               rtol=1e-5)
    g = torch.randn_like(emb)
    grads = [torch.autograd.grad((e * g).sum(), list(t.parameters()), allow_unused=True)
             for e, t in ((emb, whole), (emb_c, chunked))]
    for a, b in zip(*grads, strict=True):
        if a is None:
            assert b is None
        else:
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def test_chunks_are_cut_to_their_own_longest(config_factory, tiny_checkpoint, batch_factory):
    whole, chunked = _pair(config_factory, tiny_checkpoint, "pretrained", "mean", rows=5)
    seen = []
    encode = chunked._encode
    chunked._encode = lambda ids, mask, types: seen.append(tuple(ids.shape)) or \
        encode(ids, mask, types)
    ids, mask = batch_factory(LENGTHS, total_length=14)
    chunked.encode(ids, mask)
    assert seen == [(5, 5), (5, 12)]          # lengths sorted: 1,2,3,4,5 | 7,9,11,12,12
    whole_rows = []
    whole._encode = lambda ids, mask, types: whole_rows.append(ids.shape) or (None, None)
    whole.encode(ids[:5], mask[:5])           # not more rows than a chunk: one call, as is
    assert whole_rows == [(5, 14)]


def test_chunk_rows_must_be_positive(config_factory):
    cfg = config_factory("gru")
    cfg["encoder"]["chunk_rows"] = 0
    with pytest.raises(ValueError, match="chunk_rows"):
        build_tower(cfg)
