"""The examples in the public API's docstrings run as written (doctests).

Examples that need data or downloaded weights are marked ``# doctest: +SKIP``; the others run
on tiny random tensors or tiny configs and print only CPU-independent output (shapes, bools,
ints, exact values)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "retrieval_qa.losses.triplet",
    "retrieval_qa.losses.gam",
    "retrieval_qa.losses.gaussian_kl",
    "retrieval_qa.losses.listwise",
    "retrieval_qa.losses.matching",
    "retrieval_qa.losses.quadratic_conditional",
    "retrieval_qa.losses.reconstruction",
    "retrieval_qa.losses.distillation",
    "retrieval_qa.losses.in_batch_softmax",
    "retrieval_qa.encoders.builders",
    "retrieval_qa.encoders.poolers",
    "retrieval_qa.encoders.dual_towers",
    "retrieval_qa.encoders.tower",
    "retrieval_qa.encoders.projection",
    "retrieval_qa.encoders.token_embedder",
    "retrieval_qa.encoders.token_encoder",
    "retrieval_qa.encoders.recurrent_encoder",
    "retrieval_qa.encoders.transformer_encoder",
    "retrieval_qa.encoders.pretrained_encoder",
    "retrieval_qa.models.dual_encoder",
    "retrieval_qa.models.endx",
    "retrieval_qa.models.vae",
    "retrieval_qa.models.distill",
    "retrieval_qa.models.residual",
    "retrieval_qa.models.inference",
    "retrieval_qa.models.artifact",
    "retrieval_qa.training.compose",
    "retrieval_qa.evaluation.evaluator",
    "retrieval_qa.evaluation.metrics",
    "retrieval_qa.evaluation.ranking",
    "retrieval_qa.evaluation.search",
    "retrieval_qa.evaluation.rank_metrics",
    "retrieval_qa.evaluation.runfile",
    "retrieval_qa.evaluation.per_question",
    "retrieval_qa.pipeline.retrievers",
    "retrieval_qa.pipeline.rerankers",
    "retrieval_qa.pipeline.gate",
    "retrieval_qa.pipeline.composition",
    "retrieval_qa.pipeline.run",
    "retrieval_qa.data.loading",
    "retrieval_qa.data.sources",
    "retrieval_qa.data.types",
    "retrieval_qa.distill.teacher",
    "retrieval_qa.distill.datamodule",
    "retrieval_qa.distill.negatives",
    "retrieval_qa.export.sentence_transformers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name}: no docstring example"
    for test in sorted(tests, key=lambda t: t.name):
        runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)
