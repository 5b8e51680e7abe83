"""experiments/record_subset.py: a whole pool's record restricted to a --max-questions draw
pairs with the subset's own record (same fingerprint, the same gold ranks); a record of
another pool is refused."""

from __future__ import annotations

import pytest

from experiments import record_subset as S
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.errors import InputFileError
from retrieval_qa.evaluation.per_question import build_records, read_per_question, write_records
from retrieval_qa.pipeline.tuning import question_subset

TEXTS = ["Paris is in France.", "France borders Spain.", "Rome is in Italy.",
         "Bern is in Switzerland.", "Oslo is in Norway."]
QUESTIONS = ["Where is Paris?", "What borders Spain?", "Where is Rome?", "Where is Bern?",
             "Where is Oslo?", "Which country borders France?"]
GOLD = [[0], [1], [2], [3], [4], [1]]
RANKS = [1.0, 2.5, 3.0, 1.0, 4.0, 2.0]


def toy_pool() -> RetrievalPool:
    return RetrievalPool("toy", "dev", [Candidate(str(i), t, t, str(i))
                                         for i, t in enumerate(TEXTS)],
                         questions=QUESTIONS, gold=GOLD)


def test_the_restricted_record_is_the_subsets_record(tmp_path):
    pool = toy_pool()
    whole = tmp_path / "whole.questions.jsonl.gz"
    write_records(whole, *build_records(pool, RANKS, RANKS, (1, 5)))
    subset = question_subset(pool, 3, seed=0)
    header, rows = S.restrict(read_per_question(whole), pool, subset)
    rank_of = dict(zip(QUESTIONS, RANKS, strict=True))
    expected = build_records(subset, [rank_of[q] for q in subset.questions],
                             [rank_of[q] for q in subset.questions], (1, 5))
    assert (header, rows) == expected
    assert header["questions"] == 3 and [r["id"] for r in rows] == ["0", "1", "2"]


def test_a_record_of_another_pool_is_refused(tmp_path):
    pool = toy_pool()
    other = RetrievalPool("toy", "dev", pool.candidates, questions=QUESTIONS[:5], gold=GOLD[:5])
    path = tmp_path / "other.questions.jsonl.gz"
    write_records(path, *build_records(other, RANKS[:5], None, (1,)))
    with pytest.raises(InputFileError, match="other.questions.jsonl.gz: is not a record of the "
                                             "whole toy/dev pool"):
        S.restrict(read_per_question(path), pool, question_subset(pool, 2, seed=0))
