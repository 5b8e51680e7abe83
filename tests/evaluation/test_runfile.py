"""Run files and per-question records that were damaged after they were written (cut short at
a line boundary or inside a line, emptied, overwritten, of mixed formats) are refused by every
command that reads them, naming the file, what is wrong and the fix, with exit status 2;
never a traceback, never metrics of fewer questions."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from helpers import damage

from retrieval_qa.cli import main
from retrieval_qa.evaluation.per_question import beside_run_file
from retrieval_qa.evaluation.runfile import COUNT_KEY


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A BM25 run file (and its per-question record) of the tiny pool, and its metrics."""
    from helpers import TINY_SQUAD, write_json_gz

    root = tmp_path_factory.mktemp("runfile")
    data = write_json_gz(root / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD).parents[1]
    run = root / "bm25.jsonl"
    out = io.StringIO()
    assert main(["evaluate", "--model", "bm25", "--dataset", "reqa_squad", "--pool", "dev",
                 "--data-dir", str(data), "--run-file", str(run), "--quiet"], stdout=out) == 0
    return run, json.loads(out.getvalue())["metrics"]


def _run(capsys, *argv):
    capsys.readouterr()
    out = io.StringIO()
    code = main(list(argv), stdout=out)
    return code, out.getvalue(), capsys.readouterr().err


def _copy(written, tmp_path):
    run = tmp_path / written[0].name
    shutil.copy(written[0], run)
    shutil.copy(beside_run_file(written[0]), beside_run_file(run))
    return run


def test_every_record_counts_the_pool_questions(written):
    lines = written[0].read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)[COUNT_KEY] == 4 for line in lines)


def _damage(path, how):
    lines = path.read_text().splitlines(keepends=True)
    if how == "last_line_lost":  # cut at a line boundary: still valid JSON lines
        path.write_text("".join(lines[:-1]))
    elif how == "cut_mid_line":
        path.write_text("".join(lines)[:-30])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes(range(256)) * 4)
    elif how == "mixed_formats":  # a line of another run file (of another pool) in the middle
        other = json.loads(lines[1])
        other[COUNT_KEY] = 7
        path.write_text("".join([lines[0], json.dumps(other) + "\n", *lines[2:]]))
    else:
        raise AssertionError(how)


EXPECTED = {"last_line_lost": "3 records for a pool of 4 questions (truncated)",
            "cut_mid_line": "line 4: not JSON", "empty": "no records (an empty file)",
            "garbage": "not UTF-8 text", "mixed_formats": f"records disagree on {COUNT_KEY}"}


@pytest.mark.parametrize("how", list(EXPECTED))
def test_rqa_metrics_refuses_a_damaged_run_file(written, tmp_path, capsys, how):
    run = _copy(written, tmp_path)
    _damage(run, how)
    code, out, err = _run(capsys, "metrics", "--run-file", str(run))
    assert code == 2 and out == "" and "Traceback" not in err
    assert str(run) in err and EXPECTED[how] in err
    assert "write it again with the command that wrote it" in err  # the fix


@pytest.mark.parametrize("how", ["last_line_lost", "cut_mid_line", "empty"])
def test_rqa_compare_refuses_a_damaged_run_file(written, tmp_path, capsys, how):
    run = _copy(written, tmp_path)
    _damage(run, how)
    code, out, err = _run(capsys, "compare", str(written[0]), str(run))
    assert code == 2 and out == "" and str(run) in err and EXPECTED[how] in err


@pytest.mark.parametrize("how, expected", [
    ("truncated", "not gzipped UTF-8 text"), ("empty", "empty file"),
    ("garbage", "not gzipped UTF-8 text"), ("older_format", "format 'rqa-per-question/0'")])
def test_rqa_compare_refuses_a_damaged_per_question_record(written, tmp_path, capsys, how,
                                                           expected):
    import gzip

    record = beside_run_file(_copy(written, tmp_path))
    if not damage(record, how):  # an older format
        lines = gzip.decompress(record.read_bytes()).decode().splitlines(keepends=True)
        header = json.loads(lines[0])
        header["format"] = "rqa-per-question/0"
        record.write_bytes(gzip.compress("".join([json.dumps(header) + "\n", *lines[1:]])
                                         .encode()))
    code, out, err = _run(capsys, "compare", str(beside_run_file(written[0])), str(record))
    assert code == 2 and out == "" and "Traceback" not in err
    assert str(record) in err and expected in err
    assert "write it again with the command that wrote it" in err


def test_a_run_file_of_the_older_format_is_still_read(written, tmp_path, capsys):
    """Files written before records counted their pool: no count to check, same metrics."""
    run = _copy(written, tmp_path)
    records = [json.loads(line) for line in run.read_text().splitlines()]
    run.write_text("".join(json.dumps({k: v for k, v in r.items() if k != COUNT_KEY}) + "\n"
                           for r in records))
    code, out, _ = _run(capsys, "metrics", "--run-file", str(run))
    assert code == 0
    assert json.loads(out)["metrics"] == pytest.approx(written[1], abs=1e-4)
