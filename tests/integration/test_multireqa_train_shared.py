"""The MultiReQA train rebuild on the real files (skipped when ../shared/data is absent): on
dev, where the MRQA file exists, the rebuild gives the MRQA path's candidates exactly; on a
sample of train contexts the boundaries fit the SQuAD train text."""

from __future__ import annotations

import random

import pytest

from retrieval_qa.data import load_pool
from retrieval_qa.data.multireqa import read_boundaries
from retrieval_qa.data.multireqa_train import (
    RebuildReport,
    group_boundaries,
    match_contexts,
    merge_repeated_paragraphs,
    rebuild_multireqa_train,
)
from retrieval_qa.data.squad import read_squad

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_rebuild_of_dev_equals_the_mrqa_pool(shared_data):
    bounds, _ = read_boundaries(shared_data / "multireqa/dev/SQuAD/candidates.json.gz")
    paragraphs, _ = read_squad(shared_data / "squad/dev-v1.1.json.gz")
    rebuilt, notes = rebuild_multireqa_train(bounds, paragraphs, pool="test")
    reference, _ = load_pool("multireqa_squad", "test", shared_data)
    assert notes["rebuild"]["matched_contexts"] == 2067
    assert {(c.id, c.text, c.context) for c in rebuilt.candidates} == \
        {(c.id, c.text, c.context) for c in reference.candidates}  # all 10,642


def test_a_sample_of_train_boundaries_fits_the_squad_train_text(shared_data):
    bounds, _ = read_boundaries(shared_data / "multireqa/train/SQuAD/candidates.json.gz")
    paragraphs, _ = read_squad(shared_data / "squad/train-v1.1.json.gz")
    groups = group_boundaries(bounds)
    keys = random.Random(0).sample(sorted(groups), 400)
    report = RebuildReport()
    matched = match_contexts({k: groups[k] for k in keys}, merge_repeated_paragraphs(paragraphs),
                             report)
    # on the whole file 7 of 18,885 contexts find no paragraph (results/mining/README.md)
    assert len(matched) >= 398, report.unmatched_examples
