import pytest
from helpers import eval_conf, write_jsonl_gz

from retrieval_qa.data.mrqa import read_mrqa
from retrieval_qa.data.multireqa import build_multireqa, parse_candidate_id, read_boundaries
from retrieval_qa.errors import DataFormatError

CTX = "Ray died in Rome. He was 60. Rome is in Italy."


def _qa(qid, question, spans):
    return {"qid": qid, "question": question, "answers": ["x"],
            "detected_answers": [{"text": "x", "char_spans": spans}]}


def _mrqa(tmp_path, qas=None, context=CTX):
    rows = [{"header": {"dataset": "Toy", "split": "dev"}},
            {"context": context, "qas": qas if qas is not None else [
                _qa("a1", "Where did Ray die?", [[12, 15]]),      # "Rome" in sentence 0
                _qa("a2", "How old was he?", [[25, 26]]),         # "60" in sentence 1
                _qa("a3", "Crossing?", [[14, 20]])]}]             # crosses a boundary
    return write_jsonl_gz(tmp_path / "mrqa.jsonl.gz", rows)


def _bounds(tmp_path, rows=None):
    rows = rows if rows is not None else [
        {"candidate_id": "Toy_a1/a2/a3/_0", "response_start": 0, "response_end": 17},
        {"candidate_id": "Toy_a1/a2/a3/_1", "response_start": 18, "response_end": 28},
        {"candidate_id": "Toy_a1/a2/a3/_2", "response_start": 29, "response_end": 46}]
    return write_jsonl_gz(tmp_path / "candidates.json.gz", rows)


def test_mrqa_spans_become_end_exclusive(tmp_path):
    header, contexts, _ = read_mrqa(_mrqa(tmp_path))
    assert header["dataset"] == "Toy"
    q = contexts[0].qas[0]
    assert CTX[slice(*q.spans[0])] == "Rome"
    assert contexts[0].key == "a1/a2/a3"


def test_mrqa_span_outside_context_is_an_error(tmp_path):
    path = _mrqa(tmp_path, qas=[_qa("a1", "Q?", [[40, 99]])])
    with pytest.raises(DataFormatError, match=r"line 2, qid 'a1': char_span \[40, 99\] lies outside"):
        read_mrqa(path)
    _, contexts, report = read_mrqa(path, strict=False)
    assert report.skipped_count == 1 and contexts[0].qas == ()


def test_mrqa_duplicate_qid(tmp_path):
    path = _mrqa(tmp_path, qas=[_qa("a1", "Q?", [[0, 2]]), _qa("a1", "R?", [[0, 2]])])
    with pytest.raises(DataFormatError, match="duplicate qid"):
        read_mrqa(path)


def test_candidate_id_parsing():
    assert parse_candidate_id("SQuAD_x/y/_12") == ("SQuAD", "x/y", 12)
    with pytest.raises(ValueError):
        parse_candidate_id("SQuAD_x_1")


def test_boundary_errors(tmp_path):
    path = _bounds(tmp_path, [{"candidate_id": "Toy_a/_0", "response_start": 5, "response_end": 5}])
    with pytest.raises(DataFormatError, match=r"line 1 \(Toy_a/_0\): bad offsets"):
        read_boundaries(path)
    path = _bounds(tmp_path, [{"candidate_id": "Toy_a/_0", "response_start": 0}])
    with pytest.raises(DataFormatError, match="needs candidate_id, response_start"):
        read_boundaries(path)


def test_build_multireqa_joins_and_finds_gold(tmp_path):
    bounds, _ = read_boundaries(_bounds(tmp_path))
    _, contexts, _ = read_mrqa(_mrqa(tmp_path))
    pool, notes = build_multireqa(bounds, contexts, "multireqa_toy", "test")
    assert [c.text for c in pool.candidates] == ["Ray died in Rome.", "He was 60.",
                                                 "Rome is in Italy."]
    assert pool.questions == ["Where did Ray die?", "How old was he?"]
    assert pool.question_unit == "mrqa_qid" and pool.question_ids == ["a1", "a2"]
    assert pool.gold == [[0], [1]]
    # the crossing answer is contained in no sentence: reported, not silently dropped
    assert notes["questions_without_gold"] == 1 and notes["no_gold_qids"] == ["a3"]
    assert notes["question_ids"] == 3 and notes["questions_with_gold"] == 2


def test_unresolved_boundary_is_an_error_or_counted(tmp_path):
    bounds, _ = read_boundaries(_bounds(tmp_path, [
        {"candidate_id": "Toy_zz/_0", "response_start": 0, "response_end": 3},
        {"candidate_id": "Toy_a1/a2/a3/_0", "response_start": 0, "response_end": 99}]))
    _, contexts, _ = read_mrqa(_mrqa(tmp_path))
    with pytest.raises(DataFormatError, match="no MRQA context has these qids"):
        build_multireqa(bounds, contexts, "t", "test", "b.json.gz")
    _, notes = build_multireqa(bounds, contexts, "t", "test", "b.json.gz", strict=False)
    assert notes["skipped_boundaries"]["skipped"] == 2
    assert "beyond the context" in notes["skipped_boundaries"]["examples"][1]


CTX2 = "Ada was born in Paris. She wrote code."


def _shared_string_files(tmp_path):
    """Two contexts asking the same templated string under two qids (RelationExtraction-like),
    plus a third qid repeating the string of the first context in it."""
    rows = [{"header": {"dataset": "Toy", "split": "dev"}},
            {"context": CTX, "qas": [_qa("r1", "Where was the person born?", [[12, 15]]),
                                     _qa("r3", "How old?", [[25, 26]])]},
            {"context": CTX2, "qas": [_qa("r2", "Where was the person born?", [[16, 20]])]}]
    mrqa = write_jsonl_gz(tmp_path / "mrqa.jsonl.gz", rows)
    bounds = _bounds(tmp_path, [
        {"candidate_id": "Toy_r1/r3/_0", "response_start": 0, "response_end": 17},
        {"candidate_id": "Toy_r1/r3/_1", "response_start": 18, "response_end": 28},
        {"candidate_id": "Toy_r2/_0", "response_start": 0, "response_end": 22},
        {"candidate_id": "Toy_r2/_1", "response_start": 23, "response_end": 38}])
    return mrqa, bounds


def _shared_string_pool(tmp_path):
    mrqa, bounds = _shared_string_files(tmp_path)
    b, _ = read_boundaries(bounds)
    _, contexts, _ = read_mrqa(mrqa)
    return build_multireqa(b, contexts, "multireqa_toy", "test")


def test_multireqa_counts_per_question_id_not_per_string(tmp_path):
    pool, notes = _shared_string_pool(tmp_path)
    # one unit per qid: the shared string stays two questions, each with its own gold
    assert pool.question_unit == "mrqa_qid"
    assert pool.question_ids == ["r1", "r3", "r2"]
    assert pool.questions == ["Where was the person born?", "How old?",
                              "Where was the person born?"]
    assert pool.gold == [[0], [1], [2]]  # merged by string, r1 would have gold [0, 2]
    assert notes["question_unit"] == "mrqa_qid" and notes["question_ids"] == 3
    assert notes["questions_with_gold"] == 3 and notes["questions_without_gold"] == 0


def test_qid_pool_survives_the_cache_and_reports_its_unit(tmp_path):
    from retrieval_qa.data.cache import load_cached_pool, save_pool
    from retrieval_qa.data.stats import pool_stats

    pool, notes = _shared_string_pool(tmp_path)
    save_pool(pool, notes, tmp_path / "cache")
    back, back_notes = load_cached_pool(tmp_path / "cache")
    assert back.question_unit == "mrqa_qid" and back.question_ids == pool.question_ids
    assert back.questions == pool.questions and back.gold == pool.gold
    assert back_notes == notes
    stats = pool_stats(back)
    assert stats["question_unit"] == "mrqa_qid"
    assert stats["questions"] == 3 and stats["distinct_question_strings"] == 2
    assert stats["answers_per_question"]["max"] == 1  # per qid, not the union per string


def test_evaluation_and_run_file_name_the_qid(tmp_path):
    import torch

    from retrieval_qa.evaluation import DenseScorer, evaluate, read_run_file

    pool, _ = _shared_string_pool(tmp_path)
    # both copies of the string get the same scores: sentence 0 best, then 2
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    c = torch.tensor([[3.0, 0.0], [0.0, 1.0], [2.0, 0.0], [1.0, 0.0]])
    result = evaluate(pool, DenseScorer(q, c), run_file=tmp_path / "run.jsonl", progress=False,
                      **eval_conf())
    assert result.ranks.tolist() == [1.0, 1.0, 2.0]  # r2's gold is sentence 2, ranked second
    assert result.summary()["question_unit"] == "mrqa_qid"
    run = read_run_file(tmp_path / "run.jsonl")
    assert [r["question_id"] for r in run] == ["r1", "r3", "r2"]
    assert {r["question_unit"] for r in run} == {"mrqa_qid"}


def test_subpools_of_a_qid_pool_keep_shared_strings_apart(tmp_path):
    from retrieval_qa.data.caps import cap_questions
    from retrieval_qa.data.split import train_val_split
    from retrieval_qa.data.subsets import one_to_many_subset

    pool, _ = _shared_string_pool(tmp_path)
    capped = cap_questions(pool, 2, seed=0)
    assert capped.question_unit == "mrqa_qid" and len(capped.question_ids) == 2
    for i, qid in enumerate(capped.question_ids):
        gold_ids = {capped.candidates[c].id for c in capped.gold[i]}
        assert gold_ids == {p.answer_id for p in pool.pairs if p.question_id == qid}
    train, val = train_val_split(pool, 0.5, seed=0)
    assert val.question_unit == "mrqa_qid"
    assert {p.question for p in train}.isdisjoint(val.questions)  # no string on both sides
    assert len(train) + len(val.pairs) == len(pool.pairs)
    sub = one_to_many_subset(pool, 1)
    assert sub.question_ids == pool.question_ids and sub.gold == pool.gold
