"""experiments/mining_answer_check.py: the miner's scored neighbours counted by status, by
whether they hold a SQuAD answer string of their question and by whether they lie in its
paragraph; an unknown question id is an error naming the file."""

from __future__ import annotations

import json

import pytest

from experiments import mining_answer_check as C
from tests.helpers import TINY_SQUAD, write_json_gz

datasets = pytest.importorskip("datasets")


def scored_folder(tmp_path, rows):
    mined = tmp_path / "mined"
    datasets.Dataset.from_list(rows).save_to_disk(str(mined / "scored"))
    (mined / "summary.json").write_text(json.dumps(
        {"pool": "train[tiny]", "paths": {"classifier": "c", "retriever": "r"}}))
    return mined


def row(qid, answer, status, p):
    return {"question_id": qid, "answer": answer, "status": status, "probability": p}


def test_counts_answer_strings_and_paragraphs_per_status(tmp_path):
    data = tmp_path / "data"
    write_json_gz(data / "squad" / "train-v1.1.json.gz", TINY_SQUAD)
    mined = scored_folder(tmp_path, [
        row("q1", "Paris is the capital of France.", "mined", 0.95),      # answer, paragraph
        row("q1", "Berlin is in Germany.", "mined", 0.6),                 # its paragraph, no answer
        row("q2", "The eiffel tower is tall.", "mined", 0.75),            # answer (case folded)
        row("q4", "Munich is in Bavaria.", "below_threshold", 0.1),       # paragraph only
        row("q5", "Paris is the capital of France.", "below_threshold", 0.2),  # neither
    ])
    out = C.check(mined, data)
    table = out["by_status"]
    assert table["mined"] == {"pairs": 3, "has_answer_percent": 66.67,
                              "same_paragraph_percent": 66.67}
    assert table["below_threshold"] == {"pairs": 2, "has_answer_percent": 0.0,
                                        "same_paragraph_percent": 50.0}
    assert table["mined, p in [0.5, 0.7)"]["pairs"] == 1
    assert table["mined, p in [0.7, 0.9)"]["has_answer_percent"] == 100.0
    assert table["mined, p in [0.9, 1.0)"]["same_paragraph_percent"] == 100.0
    assert out["rows"] == 5 and out["pool"] == "train[tiny]"


def test_a_question_id_not_in_the_squad_file_is_an_error(tmp_path):
    data = tmp_path / "data"
    write_json_gz(data / "squad" / "train-v1.1.json.gz", TINY_SQUAD)
    mined = scored_folder(tmp_path, [row("nope", "Paris.", "mined", 0.9)])
    with pytest.raises(ValueError, match="train-v1.1.json.gz"):
        C.check(mined, data)
