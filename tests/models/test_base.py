"""RetrievalModule's evaluation inside Lightning: the candidate embeddings reassembled from
the loaders' batches, each copy of an encoder input taking its first copy's embedding."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from helpers import eval_conf, word_tokenizer

from retrieval_qa.data.collate import TextCollator, first_copies
from retrieval_qa.data.types import Candidate
from retrieval_qa.models.base import RetrievalModule


class BatchDependentTowers(torch.nn.Module):
    """Embeddings of the first word, plus a term that depends on the batch: what the float
    rounding of batched kernels does to an input encoded in two different batches."""

    output_dim = 3

    def encode_answer(self, input_ids, **_):
        return torch.nn.functional.one_hot(input_ids[:, 1] % 3, 3).float() + 1e-6 * len(input_ids)


class Module(RetrievalModule):
    def __init__(self):
        super().__init__({"name": "adam", "lr": 1e-3}, "dot", eval_conf())
        self.towers = BatchDependentTowers()


def test_copies_encoded_in_different_batches_take_the_first_copys_embedding():
    tokenizer = word_tokenizer(["paris", "berlin", "rome"])
    texts = ["paris", "berlin", "paris", "rome", "paris"]
    cands = [Candidate(f"c{i}", t, f"paragraph {i}", f"d{i}") for i, t in enumerate(texts)]
    items = [(i, c, (i, s)) for i, (c, s) in enumerate(zip(cands, first_copies(texts),
                                                           strict=True))]
    module = Module()
    module.trainer = SimpleNamespace(world_size=1)
    collate = TextCollator(tokenizer, 8, side="answer")
    for batch in (items[:1], items[1:4], items[4:]):  # the three copies in batches of 1, 3, 1
        module.validation_step(collate(batch), 0, dataloader_idx=0)
    encoded = torch.cat([part[1] for part in module._eval_buffers["answer"]])  # in pool order
    assert not torch.equal(encoded[0], encoded[2])  # the batch term sets the copies apart
    candidates, documents = module._gather_candidates()
    assert documents.tolist() == [0, 1, 2, 3, 4]
    # exact: a copy takes its first copy's row, nothing is recomputed
    assert torch.equal(candidates[2], candidates[0]) and torch.equal(candidates[4], candidates[0])
    assert torch.equal(candidates[1], encoded[1]) and torch.equal(candidates[3], encoded[3])
