"""experiments/rerank_shift.py: the reranker's changes to each question's top sentence read from
two run files (by text, so a copy is no change), the name drops among them, and the MRR each
group of questions moved; mismatched run files refused."""

from __future__ import annotations

import json

import pytest

from experiments import rerank_shift as S

TEXT = {"a": "Guni-Guni is a 2012 horror film by Regal.",
        "a2": "Guni-Guni is a 2012 horror film by Regal.",
        "b": "Irreversi is a 2010 film.", "c": "The film was released by Regal in 2012.",
        "d": "Paris is in France.", "e": "France borders Spain."}


def rec(question, top, gold_rank):
    return {"question": question, "top_ids": [top], "gold_rank": gold_rank}


def test_names_are_the_capitalised_or_numeric_words_after_the_first():
    assert S.names("What studio released Guni-Guni in 2012?") == {"guni-guni", "2012"}
    assert S.names("Who?") == set()
    assert S.carried({"guni-guni", "2012"}, TEXT["c"]) == 1


def test_changes_name_drops_and_the_mrr_each_group_moved():
    q1, q2, q3, q4 = ("What studio released Guni-Guni?", "Which studio made Guni-Guni?",
                      "Where is Paris?", "Who made Guni-Guni?")
    fused = [rec(q1, "a", 1), rec(q2, "a", 2), rec(q3, "d", 2), rec(q4, "a", 1)]
    reranked = [rec(q1, "b", 2),    # drops the name: worse, 1 -> 1/2
                rec(q2, "c", 1),    # c lacks guni-guni: a drop, better
                rec(q3, "e", 1),    # paris dropped, better
                rec(q4, "a2", 1)]   # a copy of the same text: no change
    out = S.shift(fused, reranked, TEXT)
    assert out["questions"] == 4 and out["top_changed"] == 3
    assert out["name_drops"] == 3 and out["changed_better"] == 2 and out["changed_worse"] == 1
    assert out["worse_pct_of_name_drops"] == pytest.approx(100 / 3, abs=0.01)
    assert out["worse_pct_of_other_changes"] is None
    # per question: -0.5, +0.5, +0.5, 0 -> +0.5 over 4 questions = 12.5 MRR points
    assert out["mrr_change"] == pytest.approx(12.5)
    assert out["mrr_change_name_drops"] == pytest.approx(12.5)
    assert out["mrr_change_top_kept"] == 0 and out["mrr_change_other_changes"] == 0
    assert "mrr_change_other_gold" not in out
    split = S.shift(fused, reranked, TEXT, [True, False, False, True])
    assert split["questions_whole_paragraph_gold"] == 2
    assert split["mrr_change_whole_paragraph_gold"] == pytest.approx(-12.5)  # -0.5 + 0
    assert split["mrr_change_other_gold"] == pytest.approx(25.0)             # +0.5 + 0.5
    with pytest.raises(ValueError, match="gold flags"):
        S.shift(fused, reranked, TEXT, [True])


def test_a_change_that_keeps_the_names_is_not_a_drop():
    q = "When did Regal release Guni-Guni?"
    out = S.shift([rec(q, "a", 2)], [rec(q, "c", 1)], TEXT)  # c carries regal, not guni-guni
    assert out["name_drops"] == 1
    out = S.shift([rec("When did Regal release it?", "a", 2)],
                  [rec("When did Regal release it?", "c", 1)], TEXT)
    assert out["name_drops"] == 0 and out["mrr_change_other_changes"] == pytest.approx(50.0)


def test_run_files_of_other_questions_or_lengths_are_refused(tmp_path):
    with pytest.raises(ValueError, match="1 fused and 2 reranked"):
        S.shift([rec("q?", "a", 1)], [rec("q?", "a", 1)] * 2, TEXT)
    with pytest.raises(ValueError, match="part at question"):
        S.shift([rec("q?", "a", 1)], [rec("r?", "a", 1)], TEXT)
    with pytest.raises(SystemExit, match="no run file"):
        S.read_run(tmp_path / "missing.run.jsonl")
    path = tmp_path / "x.run.jsonl"
    path.write_text(json.dumps(rec("q?", "a", 1)) + "\n")
    assert S.read_run(path) == [rec("q?", "a", 1)]


def test_a_report_whose_run_file_was_written_over_is_refused(tmp_path, monkeypatch):
    from retrieval_qa.data.types import Candidate, RetrievalPool

    pool = RetrievalPool("toy", "dev", [Candidate(k, v, v, k) for k, v in TEXT.items()],
                         questions=["Where is Paris?"], gold=[[4]])
    monkeypatch.setattr("retrieval_qa.data.load_pool", lambda dataset, name: (pool, None))
    fused, reranked = tmp_path / "fused.run.jsonl", tmp_path / "reranked.run.jsonl"
    fused.write_text(json.dumps(rec("Where is Paris?", "d", 1)) + "\n")
    reranked.write_text(json.dumps(rec("Where is Paris?", "e", 2)) + "\n")
    report = {"pipeline": "toy", "dataset": "toy", "pool": "dev", "fusion": {},
              "stages": [{"stage": "fused (convex)", "run_file": str(fused),
                          "metrics": {"mrr": 100.0}},
                         {"stage": "reranked top-10", "run_file": str(reranked),
                          "metrics": {"mrr": 50.0}, "reranker_top_k": 10,
                          "reranker_weight": 0.5, "reranker_gate": None,
                          "confidence_mean": 0.7}]}
    out = S.report_shift(report)
    assert out["top_changed"] == 1 and out["name_drops"] == 1
    assert out["mrr_change"] == pytest.approx(-50.0) and out["weight"] == 0.5
    report["stages"][1]["metrics"]["mrr"] = 60.0
    with pytest.raises(SystemExit, match="reranked.run.jsonl scores MRR 50.0000"):
        S.report_shift(report)


def test_a_report_of_a_question_subset_is_read_on_that_subset(tmp_path, monkeypatch):
    from retrieval_qa.data.types import Candidate, RetrievalPool
    from retrieval_qa.pipeline.tuning import question_subset

    pool = RetrievalPool("toy", "dev", [Candidate(k, v, v, k) for k, v in TEXT.items()],
                         questions=["Where is Paris?", "Who made Guni-Guni?"], gold=[[4], [0]])
    monkeypatch.setattr("retrieval_qa.data.load_pool", lambda dataset, name: (pool, None))
    asked = question_subset(pool, 1, 7).questions[0]
    top = {"Where is Paris?": "d", "Who made Guni-Guni?": "a"}[asked]
    files = {}
    for name in ("fused", "reranked"):
        files[name] = tmp_path / f"{name}.run.jsonl"
        files[name].write_text(json.dumps(rec(asked, top, 1)) + "\n")
    report = {"pipeline": "toy", "dataset": "toy", "pool": "dev", "fusion": {}, "questions": 1,
              "settings": {"tuning": {"split_seed": 7}},
              "stages": [{"stage": "fused (convex)", "run_file": str(files["fused"]),
                          "metrics": {"mrr": 100.0}},
                         {"stage": "reranked top-10", "run_file": str(files["reranked"]),
                          "metrics": {"mrr": 100.0}, "reranker_top_k": 10,
                          "reranker_weight": 0.5, "reranker_gate": None,
                          "confidence_mean": 0.7}]}
    out = S.report_shift(report)  # one gold flag for the one question, not two
    assert out["questions"] == 1 and out["questions_whole_paragraph_gold"] == 1
