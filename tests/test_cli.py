import json

import pytest

from retrieval_qa.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out.strip().splitlines()[-1]) if out.strip() else None), err


def test_data_stats_prints_json(capsys, tiny_squad_file):
    code, obj, _ = _run(capsys, "data", "stats", "--dataset", "reqa_squad", "--pool", "dev",
                        "--data-dir", str(tiny_squad_file.parents[1]))
    assert code == 0
    assert {k: obj[k] for k in ("candidates", "qa_inputs", "questions", "answer_sentences")} == {
        "candidates": 5, "qa_inputs": 5, "questions": 4, "answer_sentences": 4}
    assert obj["pool"] == "dev" and obj["dataset"] == "reqa_squad"


def test_evaluate_bm25_and_recompute_from_run_file(capsys, tiny_squad_file, tmp_path):
    run = tmp_path / "run.jsonl"
    code, obj, _ = _run(capsys, "evaluate", "--model", "bm25", "--dataset", "reqa_squad",
                        "--pool", "dev", "--data-dir", str(tiny_squad_file.parents[1]),
                        "--run-file", str(run), "--quiet", "k1=0.9")
    assert code == 0
    assert set(obj["metrics"]) >= {"mrr", "r@1", "r@5", "r@10", "p@1", "mrr@100"}
    assert obj["settings"]["k1"] == 0.9 and obj["model"] == "bm25"
    assert obj["questions"] == 4 and obj["candidates"] == 5 and obj["seconds"] >= 0
    assert obj["question_unit"] == "question_text"
    code, again, _ = _run(capsys, "metrics", "--run-file", str(run))
    assert again["metrics"] == pytest.approx(obj["metrics"], abs=1e-3)
    assert again["question_unit"] == "question_text"


def test_unknown_override_fails_with_key_named(capsys, tiny_squad_file):
    code, obj, err = _run(capsys, "evaluate", "--data-dir", str(tiny_squad_file.parents[1]),
                          "--quiet", "k_one=0.9")
    assert code == 2 and obj is None and "k_one" in err


def test_missing_data_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr("retrieval_qa.data.registry.repo_root", lambda: tmp_path / "repo")
    monkeypatch.delenv("RQA_DATA_DIR", raising=False)
    code, _, err = _run(capsys, "data", "stats", "--data-dir", str(tmp_path))
    assert code == 2 and "squad/dev-v1.1.json.gz" in err


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_data_dir_that_does_not_exist_is_an_error_naming_it(capsys, tmp_path, monkeypatch, how):
    missing = tmp_path / "nonexistent"
    argv = ["data", "stats"]
    if how == "flag":
        argv += ["--data-dir", str(missing)]
    else:
        monkeypatch.setenv("RQA_DATA_DIR", str(missing))
    code, obj, err = _run(capsys, *argv)
    assert code == 2 and obj is None
    assert str(missing) in err and ("--data-dir" if how == "flag" else "$RQA_DATA_DIR") in err


def test_encode_refuses_blank_lines_naming_the_line(capsys, tmp_path):
    texts = tmp_path / "q.txt"
    texts.write_text("first question?\n\nthird question?\n")
    code, obj, err = _run(capsys, "encode", "--checkpoint", str(tmp_path / "no-model"),
                          "--input", str(texts), "--output", str(tmp_path / "q.pt"))
    assert code == 2 and obj is None and "line 2 is blank" in err


def test_progress_goes_to_stderr_and_json_is_the_only_stdout(capsys, tiny_squad_file):
    code = main(["evaluate", "--data-dir", str(tiny_squad_file.parents[1])])  # with progress
    out, err = capsys.readouterr()
    assert code == 0 and len(out.splitlines()) == 1 and json.loads(out)["questions"] == 4
