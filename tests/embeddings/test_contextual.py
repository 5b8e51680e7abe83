import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizerFast

from retrieval_qa.embeddings.contextual import combine_layers, encode_layers, one_layer
from retrieval_qa.embeddings.idf import IDF

WORDS = "the cat sat on mat dog ran far away bird".split()


@pytest.fixture(scope="module")
def tiny():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=16,
                                 max_position_embeddings=32)).eval()
    return tok, model


def _reference(text, tok, model, weights_of=None):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    x = torch.tensor([[tok.cls_token_id, *ids, tok.sep_token_id]])
    hs = torch.stack(model(input_ids=x, output_hidden_states=True).hidden_states, 1)[0, :, 1:-1]
    w = torch.ones(len(ids)) if weights_of is None else torch.tensor(weights_of(ids)).float()
    return (hs * w[None, :, None]).sum(1) / w.sum()


def test_per_layer_means_match_a_plain_forward(tiny):
    tok, model = tiny
    texts = ["the cat sat on the mat", "dog ran", "bird"]
    idf = IDF([tok(t, add_special_tokens=False)["input_ids"] for t in texts[:2]])
    plain, weighted, notes = encode_layers(texts, tok, model, idf, batch_size=2)
    assert plain.shape == (3, 3, 8) and notes["windows"] == 3
    for i, t in enumerate(texts):
        torch.testing.assert_close(plain[i], _reference(t, tok, model), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(weighted[i], _reference(t, tok, model, idf.weights),
                                   atol=1e-5, rtol=1e-4)


def test_long_text_is_encoded_in_windows(tiny):
    tok, model = tiny
    text = "the cat sat on the mat dog ran far away"
    plain, _, notes = encode_layers([text], tok, model, window=4)
    assert notes["windows"] == 3 and notes["texts_over_window"] == 1
    ids = tok(text, add_special_tokens=False)["input_ids"]
    parts = [_reference(tok.decode(ids[lo:lo + 4]), tok, model) * len(ids[lo:lo + 4])
             for lo in range(0, len(ids), 4)]
    torch.testing.assert_close(plain[0], sum(parts) / len(ids), atol=1e-5, rtol=1e-4)


def test_combine_layers():
    pooled = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    torch.testing.assert_close(combine_layers(pooled, one_layer(2, 1)), torch.tensor([[0.0, 1.0]]))
    torch.testing.assert_close(combine_layers(pooled, [0.5, 0.5]),
                               torch.nn.functional.normalize(torch.tensor([[0.5, 1.0]])))
    with pytest.raises(ValueError, match="token-embedding"):
        combine_layers(pooled, [1.0])
