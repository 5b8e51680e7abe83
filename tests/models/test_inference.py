"""DualEncoderInference: each distinct input is encoded once, so copies share one embedding."""

from __future__ import annotations

import torch
from helpers import word_tokenizer

from retrieval_qa.data.types import Candidate
from retrieval_qa.models.inference import DualEncoderInference


class PaddingDependentTowers(torch.nn.Module):
    """Embeddings of the first word, plus a term that depends on the batch's padded length:
    what the float rounding of batched kernels does to an input encoded in two batches."""

    output_dim = 3

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.rows = 0

    def encode_answer(self, input_ids, **_):
        self.rows += len(input_ids)
        return torch.nn.functional.one_hot(input_ids[:, 1] % 3, 3).float() + 1e-6 * input_ids.shape[1]

    encode_question = encode_answer


def test_copies_are_encoded_once_and_share_the_embedding():
    tokenizer = word_tokenizer(["paris", "berlin", "rome"])
    towers = PaddingDependentTowers()
    model = DualEncoderInference(towers, tokenizer, {"max_question_length": 8,
                                                     "max_answer_length": 8, "similarity": "dot"})
    # longest first, 2 a batch: [1, 0] padded to 5 tokens, then [2, 3] to 3, had "paris" been
    # encoded twice
    texts = ["paris", "rome berlin paris", "paris", "berlin"]
    cands = [Candidate(f"c{i}", t, "", f"d{i}") for i, t in enumerate(texts)]
    emb = model.encode_answers(cands, batch_size=2, progress=False)
    assert towers.rows == 3
    # exact: a copy takes its first copy's row, nothing is recomputed
    assert torch.equal(emb[0], emb[2]) and not torch.equal(emb[0], emb[3])
    q = model.encode_questions(texts, batch_size=2, progress=False)
    assert torch.equal(q, emb)  # exact: the same towers on the same batches
