"""The data module's training pairs part alone: the split's pairs plus extra sources with
their weights, source pairs overlapping the validation pool dropped and counted, and the
weights set by hand."""

from __future__ import annotations

import json

import pytest

from retrieval_qa.data.loading import load_pool
from retrieval_qa.data.pair_sources import PairSource
from retrieval_qa.data.training_pairs import TrainingPairs
from retrieval_qa.data.types import QAPair


@pytest.fixture
def val_pool(tiny_squad_file):
    pool, _ = load_pool("reqa_squad", "dev", data_dir=tiny_squad_file.parents[1])
    return pool


def pair(question: str, answer: str) -> QAPair:
    return QAPair(question, answer, answer, question, answer)


SPLIT = [pair("what is fact 1?", "fact 1 ."), pair("what is fact 2?", "fact 2 .")]


def test_without_sources_the_split_pairs_and_no_weights(val_pool):
    training = TrainingPairs()
    training.set_split(SPLIT, val_pool)
    assert training.pairs == SPLIT and training.pairs is not SPLIT
    assert training.weights is None and training.report is None
    training.set_weights([0.5, 2])
    assert training.weights == [0.5, 2.0]
    with pytest.raises(ValueError, match="1 weights for 2 training pairs"):
        training.set_weights([1.0])
    training.set_weights(None)
    assert training.weights is None


def test_sources_follow_the_split_minus_the_validation_overlap(val_pool):
    leaks = [pair(val_pool.questions[0], "a sentence only mined ."),         # its question
             pair("a question only mined?", val_pool.candidates[0].text)]    # its answer
    kept = [pair("where is fact 3?", "fact 3 ."), pair("where is fact 4?", "fact 4 .")]
    training = TrainingPairs([PairSource("mined", [kept[0], *leaks, kept[1]],
                                         [0.25, 0.5, 0.5, 0.75])])
    training.set_split(SPLIT, val_pool)
    assert training.pairs == SPLIT + kept
    assert training.weights == [1.0, 1.0, 0.25, 0.75]
    assert training.report == [{"name": "mined", "pairs": 4, "kept": 2,
                                "dropped_validation_overlap": 2}]


def test_a_source_added_after_the_split_is_merged_at_once(val_pool):
    training = TrainingPairs()
    training.add("early", [pair("q early?", "a early .")])   # before the split: kept for it
    assert training.pairs is None
    training.set_split(SPLIT, val_pool)
    late = pair("q late?", "a late .")
    training.add("late", [late], [3.0])
    assert training.pairs[-1] == late and training.weights == [1.0, 1.0, 1.0, 3.0]
    assert [r["name"] for r in training.report] == ["early", "late"]


def test_from_config_reads_the_files_with_their_default_weight(val_pool, tmp_path):
    path = tmp_path / "extra.jsonl"
    path.write_text(json.dumps({"question": "q1?", "answer": "a1 .", "weight": 0.25}) + "\n"
                    + json.dumps({"question": "q2?", "answer": "a2 ."}) + "\n")
    training = TrainingPairs.from_config([{"path": str(path), "weight": 0.5}])
    assert [s.name for s in training.sources] == ["extra"]
    training.set_split(SPLIT, val_pool)
    assert training.weights == [1.0, 1.0, 0.25, 0.5]
    assert TrainingPairs.from_config(None).sources == []
