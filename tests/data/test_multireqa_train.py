"""MultiReQA SQuAD train rebuilt from its boundaries over the SQuAD train text (no MRQA train
file): the same pool as the MRQA path on the same data, and every kind of mismatch counted."""

from __future__ import annotations

import copy

from helpers import synthetic_squad, write_json_gz, write_jsonl_gz
from mining_helpers import boundaries_of, mrqa_lines, write_multireqa_dir

from retrieval_qa.data import load_pool
from retrieval_qa.data.mrqa import read_mrqa
from retrieval_qa.data.multireqa import Boundary, build_multireqa, parse_candidate_id
from retrieval_qa.data.multireqa_train import boundary_problems, rebuild_multireqa_train
from retrieval_qa.data.squad import parse_squad


def _boundaries(rows) -> list[Boundary]:
    return [Boundary(r["candidate_id"], parse_candidate_id(r["candidate_id"])[1],
                     r["response_start"], r["response_end"]) for r in rows]


def _via_mrqa(squad, tmp_path, salt):
    path = write_jsonl_gz(tmp_path / f"{salt}.jsonl.gz", mrqa_lines(squad, salt))
    _, contexts, _ = read_mrqa(path)
    return build_multireqa(_boundaries(boundaries_of(squad, salt=salt)), contexts,
                           "multireqa_squad", "train")


def test_boundary_problems_accept_sentence_spans_and_name_the_rest():
    text = " One two. Three four.  Five."
    assert boundary_problems(text, [(0, 9), (10, 21), (23, 28)]) == []  # leading space inside
    assert "not whitespace" in boundary_problems(text, [(0, 7), (10, 21), (23, 28)])[0]
    assert "outside" in boundary_problems(text, [(0, 9), (10, 40)])[0]
    assert "after the last span" in boundary_problems(text, [(0, 9), (10, 21)])[0]
    assert "overlaps" in boundary_problems(text, [(0, 9), (5, 21), (23, 28)])[0]


def test_rebuild_gives_the_pool_of_the_mrqa_path(tmp_path):
    squad = synthetic_squad(12)
    paragraphs, _ = parse_squad(squad)
    rebuilt, notes = rebuild_multireqa_train(_boundaries(boundaries_of(squad, salt="t")),
                                             paragraphs)
    reference, _ = _via_mrqa(squad, tmp_path, "t")
    assert notes["rebuilt"] and notes["rebuild"]["matched_contexts"] == 12
    assert notes["rebuild"]["unmatched_contexts"] == 0
    assert {(c.text, c.context) for c in rebuilt.candidates} == \
        {(c.text, c.context) for c in reference.candidates}
    assert len(rebuilt.candidates) == len(reference.candidates)
    assert sorted((p.question, p.answer, p.context) for p in rebuilt.pairs) == \
        sorted((p.question, p.answer, p.context) for p in reference.pairs)
    assert rebuilt.question_unit == "mrqa_qid"
    assert sorted(rebuilt.question_ids) == sorted(
        qa["id"] for a in squad["data"] for p in a["paragraphs"] for qa in p["qas"])


def _case_squad():
    """Four paragraphs: an ordinary one, one starting with a space, a decoy with the same
    length and whitespace layout as the ordinary one (but whose answer would fall between
    its sentences), and a repeated text whose two copies MRQA keeps as one context."""
    ordinary = "Alpha is the first. Beta is second."
    decoy = "Gamma is the thingy Delta is sixth."  # same length, a space where ordinary breaks
    assert len(decoy) == len(ordinary)
    para = lambda c, qas: {"context": c, "qas": qas}  # noqa: E731
    q = lambda i, text, ans, start: {"id": i, "question": text,  # noqa: E731
                                     "answers": [{"answer_start": start, "text": ans}]}
    repeated = "Omega is last. It ends here."
    return {"version": "1.1", "data": [{"title": "T", "paragraphs": [
        para(ordinary, [q("a1", "What is first?", "Alpha", 0)]),
        para(" Lead space here. Then more.", [q("b1", "What leads?", "Lead", 1)]),
        para(decoy, [q("d1", "What is the thing?", "thingy Delta", 13)]),
        para(repeated, [q("r1", "What is last?", "Omega", 0)]),
        para(repeated, [q("r2", "What ends?", "ends", 18)]),
    ]}]}


def test_rebuild_counts_what_does_not_fit():
    squad = _case_squad()
    paragraphs, _ = parse_squad(squad)
    ordinary, lead, decoy, repeated = (squad["data"][0]["paragraphs"][i]["context"]
                                       for i in (0, 1, 2, 3))
    rows = [  # MultiReQA-style lines: sentence index k after "/_"
        ("SQuAD_qa1/_0", 0, 19), ("SQuAD_qa1/_1", 20, len(ordinary)),
        ("SQuAD_qb1/_0", 0, 17), ("SQuAD_qb1/_1", 18, len(lead)),
        ("SQuAD_qd1/_0", 0, 18), ("SQuAD_qd1/_1", 19, len(decoy)),   # fits no text: cut mid-word
        ("SQuAD_qr1/qr2/_0", 0, 14), ("SQuAD_qr1/qr2/_1", 15, len(repeated)),
    ]
    bounds = [Boundary(c, parse_candidate_id(c)[1], s, e) for c, s, e in rows]
    pool, notes = rebuild_multireqa_train(bounds, paragraphs)
    report = notes["rebuild"]
    assert report["repeated_paragraphs_merged"] == 1
    # the ordinary context fits both the ordinary text and the decoy: the decoy's answer
    # ("thingy Delta") would cross its sentences, so the ordinary text wins; the lead
    # context also fits the repeated text (same length, a space at 17), which has two
    # questions for its one qid
    assert report["ambiguous_contexts"] == 2
    assert report["matched_contexts"] == 3 and report["unmatched_contexts"] == 1
    assert report["boundaries_of_unmatched"] == 2
    assert report["paragraphs_without_context"] == 1 and report["questions_without_context"] == 1
    texts = {c.id: c.text for c in pool.candidates}
    assert texts["SQuAD_qa1/_0"] == "Alpha is the first."
    assert texts["SQuAD_qb1/_0"] == "Lead space here."  # stripped
    assert "SQuAD_qd1/_0" not in texts
    gold = {p.question_id: p.answer for p in pool.pairs}
    assert gold == {"a1": "Alpha is the first.", "b1": "Lead space here.",
                    "r1": "Omega is last.", "r2": "It ends here."}


def test_answers_across_sentences_are_counted_not_dropped_silently():
    squad = _case_squad()
    squad["data"][0]["paragraphs"] = squad["data"][0]["paragraphs"][:1]
    squad["data"][0]["paragraphs"][0]["qas"].append(
        {"id": "x", "question": "What spans?", "answers": [{"answer_start": 13,
                                                            "text": "first. Beta"}]})
    paragraphs, _ = parse_squad(squad)
    text = paragraphs[0].context
    bounds = [Boundary("SQuAD_q1/q2/_0", "q1/q2", 0, 19),
              Boundary("SQuAD_q1/q2/_1", "q1/q2", 20, len(text))]
    pool, notes = rebuild_multireqa_train(bounds, paragraphs)
    assert notes["rebuild"]["answers_across_sentences"] == 1
    assert notes["questions_without_gold"] == 1 and notes["questions_with_gold"] == 1
    assert pool.question_ids == ["a1"]


def test_load_pool_rebuilds_when_the_mrqa_train_file_is_absent(tmp_path):
    root = write_multireqa_dir(tmp_path / "data")
    pool, notes = load_pool("multireqa_squad", "train", root)
    assert notes["rebuilt"] and "REBUILT" in pool.source and "train-v1.1" in pool.source
    assert notes["rebuild"]["unmatched_contexts"] == 0
    assert pool.question_unit == "mrqa_qid" and len(pool.questions) == len(pool.pairs) > 40
    again, notes2 = load_pool("multireqa_squad", "train", root)  # from the cache
    assert "cache" in notes2 and again.source == pool.source
    assert [(p.question, p.answer) for p in again.pairs] == [(p.question, p.answer)
                                                             for p in pool.pairs]
    test, _ = load_pool("multireqa_squad", "test", root)  # the MRQA path, untouched
    assert "REBUILT" not in test.source and len(test.questions) > 20


def test_a_changed_squad_file_is_rebuilt_not_served_from_the_cache(tmp_path):
    root = write_multireqa_dir(tmp_path / "data", n_paragraphs=6)
    first, _ = load_pool("multireqa_squad", "train", root)
    squad = synthetic_squad(6)
    changed = copy.deepcopy(squad)
    changed["data"][0]["paragraphs"][0]["qas"][0]["question"] = "A new question?"
    write_json_gz(root / "squad" / "train-v1.1.json.gz", changed)
    second, notes = load_pool("multireqa_squad", "train", root)
    assert "cache" not in notes
    assert "A new question?" in second.questions and "A new question?" not in first.questions
