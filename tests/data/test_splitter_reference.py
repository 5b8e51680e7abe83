"""The splitter against the reference ReQA splitter, paragraph by paragraph, on real SQuAD.

``fixtures/reference_splits.json.gz`` holds the boundaries that the reference ``sb_sed.py``
(google/retrieval-qa-eval) gives on every paragraph of SQuAD dev and train, recorded by
``experiments/record_reference_splits.py``. The test skips a file that is absent or whose
sha256 differs from the recorded one (another edition of SQuAD)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from conftest import shared_data_dir

from retrieval_qa.data.io import file_sha256, load_json
from retrieval_qa.data.splitter import split_sentences

FIXTURE = Path(__file__).parent / "fixtures" / "reference_splits.json.gz"
pytestmark = pytest.mark.integration


def context_digest(context: str) -> str:
    """As in experiments/record_reference_splits.py."""
    return hashlib.sha1(context.encode("utf-8")).hexdigest()[:10]


def _recorded() -> dict:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["dev-v1.1.json.gz", "train-v1.1.json.gz"])
def test_every_paragraph_is_split_as_the_reference_splits_it(name):
    path = shared_data_dir() / "squad" / name
    if not path.is_file():
        pytest.skip(f"{path} not found (set RQA_DATA_DIR to ../shared/data)")
    recorded = _recorded()["files"][name]
    if file_sha256(path) != recorded["sha256"]:
        pytest.skip(f"{path} is not the SQuAD file the reference boundaries were recorded on")
    contexts = [p["context"] for a in load_json(path)["data"] for p in a["paragraphs"]]
    assert len(contexts) == len(recorded["paragraphs"])
    differing = []
    for i, (context, (digest, flat)) in enumerate(zip(contexts, recorded["paragraphs"],
                                                      strict=True)):
        assert context_digest(context) == digest, f"paragraph {i} is not the recorded one"
        ours = [x for span in split_sentences(context) for x in span]
        if ours != flat:
            differing.append((i, [context[s:e] for s, e in split_sentences(context)],
                              [context[s:e] for s, e in zip(flat[::2], flat[1::2], strict=True)]))
    assert not differing, (f"{len(differing)} of {len(contexts)} paragraphs differ; first: "
                           f"{differing[:3]}")
