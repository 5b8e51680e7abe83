"""Every number read from a run file or a per-question record is checked (issue 76, item 4):
a rank that is NaN (``NaN < 1`` is false), infinite, below 1, not a whole number or a half
(ranks are averages over ties), or beyond the pool's candidates; a score that is not
finite; a candidate listed twice; a question or id held twice; columns that disagree with the
ranks. Each is refused naming the file, the record and its line, and the fix, by the readers
and through `rqa metrics` / `rqa compare` (status 2, one line), never printed as a metric."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
import torch
from helpers import eval_conf

from retrieval_qa.cli import main
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.errors import DataFormatError
from retrieval_qa.evaluation import DenseScorer, evaluate
from retrieval_qa.evaluation.per_question import (
    beside_run_file,
    from_run_file,
    read_per_question,
)
from retrieval_qa.evaluation.runfile import (
    CANDIDATES_KEY,
    COUNT_KEY,
    metrics_from_run_file,
    read_run_file,
)

N_Q, N_C = 6, 9
FIX = "write it again with the command that wrote it"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A run file (top 3, doc ranks) of a toy pool, with its per-question record."""
    g = torch.Generator().manual_seed(0)
    cands = [Candidate(f"c{i}", f"sentence {i}", f"doc {i % 3}", f"d{i % 3}") for i in range(N_C)]
    pool = RetrievalPool("toy", "dev", cands, [f"What is thing {i}?" for i in range(N_Q)],
                         [[i % N_C] for i in range(N_Q)])
    q = torch.randint(-2, 3, (N_Q, 4), generator=g).float()  # ties: half ranks
    c = torch.randint(-2, 3, (N_C, 4), generator=g).float()
    run = tmp_path_factory.mktemp("read") / "run.jsonl"
    evaluate(pool, DenseScorer(q, c), run_file=run, progress=False, **eval_conf(top_k=3))
    return run


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _record_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def _write_record(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    return path


def test_written_files_carry_the_pools_counts_and_read_back(written):
    records = read_run_file(written)
    assert {r[COUNT_KEY] for r in records} == {N_Q} and {r[CANDIDATES_KEY] for r in records} \
        == {N_C}
    assert any(r["gold_rank"] % 1 for r in records)  # ties: a half rank, accepted
    record = read_per_question(beside_run_file(written))
    assert record.header["candidates"] == N_C
    assert from_run_file(written, record.ks).metrics() == record.metrics()


@pytest.mark.parametrize("value, words", [
    (float("nan"), "gold_rank nan is not a rank (not a finite number)"),
    (float("inf"), "gold_rank inf is not a rank (not a finite number)"),
    (0, "gold_rank 0 is not a rank (a number >= 1)"),
    (-2.5, "gold_rank -2.5 is not a rank (a number >= 1)"),
    (2.25, "gold_rank 2.25 is not a rank (ranks are whole numbers or halves"),
    ("3", "gold_rank '3' is not a rank"),
    (None, "gold_rank None is not a rank"),
    (True, "gold_rank True is not a rank"),
    (N_C + 0.5, f"gold_rank {N_C + 0.5} is beyond the pool's {N_C} candidates"),
])
def test_a_run_file_with_a_bad_rank_is_refused_naming_the_record_and_line(
        written, tmp_path, capsys, value, words):
    records = _lines(written)
    records[2]["gold_rank"] = value
    run = _write(tmp_path / "bad.jsonl", records)
    with pytest.raises(DataFormatError) as e:
        read_run_file(run)
    message = str(e.value)
    assert message.startswith(f"{run}: record 3 (line 3): {words}") and FIX in message
    capsys.readouterr()
    assert main(["metrics", "--run-file", str(run)], stdout=io.StringIO()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "NaN" not in err[0].replace("nan is", "")
    assert main(["compare", str(written), str(run)], stdout=io.StringIO()) == 2
    assert words in capsys.readouterr().err


def test_a_doc_rank_is_checked_as_a_rank(written, tmp_path):
    records = _lines(written)
    records[0]["doc_rank"] = float("nan")
    with pytest.raises(DataFormatError, match=r"record 1 \(line 1\): doc_rank nan"):
        read_run_file(_write(tmp_path / "bad.jsonl", records))


def test_files_written_before_the_candidate_count_are_checked_without_the_bound(written,
                                                                               tmp_path):
    records = [{k: v for k, v in r.items() if k != CANDIDATES_KEY} for r in _lines(written)]
    records[0]["gold_rank"] = 1000.0  # no count to bound it: read
    assert read_run_file(_write(tmp_path / "old.jsonl", records))[0]["gold_rank"] == 1000.0
    records[0]["gold_rank"] = float("nan")  # the other checks hold
    with pytest.raises(DataFormatError, match="not a finite number"):
        read_run_file(_write(tmp_path / "old.jsonl", records))


@pytest.mark.parametrize("change, words", [
    (lambda r: r.update(top_scores=[1.0, float("nan"), 0.5]), "top_scores[1] nan is not a "
                                                             "finite score"),
    (lambda r: r.update(top_scores=[float("inf"), 1.0, 0.5]), "top_scores[0] inf"),
    (lambda r: r.update(top_scores="high"), "top_scores 'high' is not a list of scores"),
    (lambda r: r.update(top_ids=[r["top_ids"][0]] * 3), "top_ids lists a candidate twice"),
    (lambda r: r.update(top_ids=r["top_ids"][:2]), "2 top_ids for 3 top_scores"),
])
def test_scores_and_lists_are_checked(written, tmp_path, change, words):
    records = _lines(written)
    change(records[1])
    with pytest.raises(DataFormatError) as e:
        read_run_file(_write(tmp_path / "bad.jsonl", records))
    assert "record 2 (line 2): " + words in str(e.value)


@pytest.mark.parametrize("key, value, words", [
    (CANDIDATES_KEY, 0, "pool_candidates 0 is not a count of candidates"),
    (CANDIDATES_KEY, "9", "pool_candidates '9' is not a count"),
])
def test_a_candidate_count_that_is_no_count_is_refused(written, tmp_path, key, value, words):
    records = _lines(written)
    for r in records:
        r[key] = value
    with pytest.raises(Exception, match=words) as e:
        read_run_file(_write(tmp_path / "bad.jsonl", records))
    assert FIX in str(e.value)
    records[0][key] = N_C + 1
    with pytest.raises(Exception, match="records disagree on pool_candidates"):
        read_run_file(_write(tmp_path / "bad.jsonl", records))


def test_a_question_id_held_twice_is_refused(written, tmp_path):
    """MRQA qid units: the same text under two ids is two questions (read), the same id in
    two records is refused; records without ids (text units) are paired by row."""
    records = _lines(written)
    for i, r in enumerate(records):
        r.update(question="the same text", question_id=f"q{i}")
    assert len(read_run_file(_write(tmp_path / "ids.jsonl", records))) == N_Q
    assert from_run_file(tmp_path / "ids.jsonl", (1,)).ids == [f"q{i}" for i in range(N_Q)]
    records[3]["question_id"] = "q0"
    with pytest.raises(DataFormatError) as e:
        from_run_file(_write(tmp_path / "ids.jsonl", records), (1, 5))
    assert "record 4 (line 4): question_id 'q0' again (record 1 holds it)" in str(e.value)


def test_metrics_from_run_file_refuses_a_bad_rank_it_reads(written, tmp_path):
    records = _lines(written)
    records[5]["doc_rank"] = float("-inf")
    with pytest.raises(DataFormatError, match="doc_rank -inf is not a rank"):
        metrics_from_run_file(_write(tmp_path / "bad.jsonl", records), ks=(1,))


def test_blank_lines_shift_the_line_not_the_record(written, tmp_path):
    records = _lines(written)
    records[1]["gold_rank"] = float("nan")
    run = tmp_path / "blank.jsonl"
    run.write_text("\n" + "".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DataFormatError, match=r"record 2 \(line 3\)"):
        read_run_file(run)


# ---- per-question records -------------------------------------------------------------------


@pytest.mark.parametrize("row, change, words", [
    (2, {"gold_rank": float("nan")}, "line 3: gold_rank nan is not a rank (not a finite"),
    (2, {"gold_rank": float("inf")}, "line 3: gold_rank inf is not a rank"),
    (2, {"gold_rank": 0.5}, "line 3: gold_rank 0.5 is not a rank (a number >= 1)"),
    (2, {"gold_rank": 1.75}, "line 3: gold_rank 1.75 is not a rank (ranks are whole"),
    (2, {"gold_rank": N_C + 1}, f"line 3: gold_rank {N_C + 1} is beyond the pool's {N_C}"),
    (3, {"doc_rank": float("nan")}, "line 4: doc_rank nan is not a rank"),
    (3, {"id": "0"}, "line 4: id '0' again (line 2 holds it)"),
    (3, {"id": [1]}, "line 4: id [1] is not a question id"),
    (1, {"rr": 0.123}, "line 2: rr 0.123 is not 1 / its rank"),
    (1, {"rr": float("nan")}, "line 2: rr nan is not 1 / its rank"),
    (1, {"doc_rr": 2.0}, "line 2: doc_rr 2.0 is not 1 / its rank"),
    (1, {"r@1": 7}, "line 2: r@1 7 disagrees with its gold_rank"),
    (1, {"answer_words": -1}, "line 2: answer_words -1 is not a count"),
    (0, {"candidates": 0}, "line 1: candidates 0 is not a count"),
    (0, {"ks": [1, 1]}, "line 1: ks [1, 1] is not a list of cut-offs"),
    (0, {"ks": [0, 5]}, "line 1: ks [0, 5] is not a list of cut-offs"),
    (0, {"metrics": {"mrr": float("nan")}}, "line 1: metrics holds a value that is not a "
                                            "finite number"),
    (0, {"metrics": {"mrr": 99.0}}, "line 1: metrics mrr 99.0 disagrees with the"),
])
def test_a_record_with_a_bad_number_is_refused_naming_the_line(written, tmp_path, capsys, row,
                                                               change, words):
    rows = _record_lines(beside_run_file(written))
    rows[row] = {**rows[row], **change}
    path = _write_record(tmp_path / "bad.questions.jsonl.gz", rows)
    with pytest.raises(DataFormatError) as e:
        read_per_question(path)
    assert str(e.value).startswith(f"{path}: {words}") and FIX in str(e.value), str(e.value)
    capsys.readouterr()
    assert main(["compare", str(beside_run_file(written)), str(path)],
                stdout=io.StringIO()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_a_record_written_before_the_candidate_count_reads_without_the_bound(written,
                                                                            tmp_path):
    rows = _record_lines(beside_run_file(written))
    del rows[0]["candidates"]
    record = read_per_question(_write_record(tmp_path / "old.questions.jsonl.gz", rows))
    assert record.header.get("candidates") is None and len(record.ids) == N_Q
