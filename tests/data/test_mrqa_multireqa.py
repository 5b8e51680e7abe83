import pytest
from helpers import write_jsonl_gz

from retrieval_qa.data.errors import DataFormatError
from retrieval_qa.data.mrqa import read_mrqa
from retrieval_qa.data.multireqa import build_multireqa, parse_candidate_id, read_boundaries

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
    assert pool.gold == [[0], [1]]
    # the crossing answer is contained in no sentence: reported, not silently dropped
    assert notes["questions_without_gold"] == 1 and notes["no_gold_qids"] == ["a3"]


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
