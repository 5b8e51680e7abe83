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
    assert again["question_unit"] == "question_text" and again["kind"] == "run file"
    # the per-question record beside it (gzip): the same metrics, from its exact ranks
    code, record, _ = _run(capsys, "metrics", "--run-file",
                           str(tmp_path / "run.questions.jsonl.gz"))
    assert code == 0 and record["kind"] == "per-question record"
    assert record["metrics"] == pytest.approx(obj["metrics"], abs=1e-3)
    assert record["question_unit"] == "question_text"


def test_result_keeps_the_json_in_a_file_too(capsys, tiny_squad_file, tmp_path):
    """--result FILE: the JSON printed, also in FILE; a device there is refused before any
    work (exit 2, nothing replaced)."""
    args = ["data", "stats", "--dataset", "reqa_squad", "--pool", "dev",
            "--data-dir", str(tiny_squad_file.parents[1])]
    code, obj, _ = _run(capsys, *args, "--result", str(tmp_path / "out" / "stats.json"))
    assert code == 0 and json.loads((tmp_path / "out" / "stats.json").read_text()) == obj
    code, obj, err = _run(capsys, *args, "--result", "/dev/null")
    assert code == 2 and obj is None and "--result" in err


def test_metrics_names_a_gzip_file_that_is_no_record(capsys, tmp_path):
    import gzip

    other = tmp_path / "other.jsonl.gz"
    other.write_bytes(gzip.compress(b'{"a": 1}\n'))
    code, obj, err = _run(capsys, "metrics", "--run-file", str(other))
    assert code == 2 and obj is None and len(err.strip().splitlines()) == 1
    assert "other.jsonl.gz" in err and "per-question record" in err


def test_unknown_override_fails_with_key_named(capsys, tiny_squad_file):
    code, obj, err = _run(capsys, "evaluate", "--data-dir", str(tiny_squad_file.parents[1]),
                          "--quiet", "k_one=0.9")
    assert code == 2 and obj is None and "k_one" in err


def test_missing_data_is_a_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr("retrieval_qa.data.sources.repo_root", lambda: tmp_path / "repo")
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


def _parsers(parser, path=("rqa",)):
    """Every parser of the command line with its command words, subcommands included."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_help_shows_an_example_and_the_defaults():
    from retrieval_qa.cli import build_parser

    parsers = list(_parsers(build_parser()))
    assert len(parsers) >= 18  # rqa, 9 commands, data stats, 7 analyses
    for path, parser in parsers:
        text = parser.format_help()
        assert "example" in text.lower(), path
        leaf = not any(a.__class__.__name__ == "_SubParsersAction" for a in parser._actions)
        if leaf or path == ("rqa",):  # a group (rqa data, rqa analyze) has no settings
            assert "default" in text.lower(), path
        assert "``" not in text and ":class:" not in text, path  # no reStructuredText


def test_help_texts_of_the_common_options_and_the_train_listing():
    from retrieval_qa.cli import build_parser

    parsers = dict(_parsers(build_parser()))
    named = {"--model", "--dataset", "--checkpoint", "--input", "--side", "--run-file"}
    seen = set()
    for path, parser in parsers.items():
        for action in parser._actions:
            for option in named.intersection(action.option_strings):
                seen.add(option)
                assert action.help and len(action.help) > 20, (path, option)
    assert seen == named
    helps = {path: parser.format_help() for path, parser in parsers.items()}
    evaluate = helps[("rqa", "evaluate")]
    assert "(default: reqa_squad)" in " ".join(evaluate.split())
    encode = " ".join(helps[("rqa", "encode")].split())
    assert "--input FILE UTF-8 text file, one text per line" in encode
    assert "--side {question,answer} the tower" in encode and "(default: question)" in encode
    train = helps[("rqa", "train")]
    assert "dual_gru" in train and "paper, cpu, gpu" in train and "profiles" in train
    assert "ENDX analyses" not in helps[("rqa",)]
    assert "t-SNE" in helps[("rqa", "analyze")]


def test_importing_the_command_line_imports_no_heavy_library():
    """`rqa --help`, argument errors and a mistyped training setting must not wait for torch or
    Lightning: the command line imports them only in the command that needs them, after its
    settings are checked."""
    import subprocess
    import sys

    code = ("import io, sys; from retrieval_qa.cli import build_parser, main; "
            "build_parser().parse_args(['evaluate', '--quiet']); "
            "assert main(['train', 'experiment=dual_gru', 'trainer.max_steps=abc'], "
            "stdout=io.StringIO()) == 2; "
            "print([m for m in ('torch', 'pytorch_lightning', 'lightning', 'transformers', "
            "'bm25s', 'wandb', 'matplotlib') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_bm25_progress_is_one_display_per_stage(capsys, tiny_squad_file):
    """Building the pool, the BM25 index and the retrieval each show one display named after
    its stage; bm25s's own bars (Split strings, BM25S Count Tokens, ...) never show."""
    assert main(["evaluate", "--data-dir", str(tiny_squad_file.parents[1]), "--no-cache"]) == 0
    err = capsys.readouterr().err
    stages = ("pool reqa_squad/dev ... ", "BM25 index ... ", "BM25 retrieval: ")
    segments = [s for line in err.split("\n") for s in line.split("\r") if s.strip()]
    assert segments and all(s.startswith(stages) for s in segments), segments
    lines = [line for line in err.split("\n") if line.strip()]
    assert len(lines) <= len(stages)
    assert "pool reqa_squad/dev ... built in" in err and "4 questions, 5 candidates" in err
    assert main(["evaluate", "--data-dir", str(tiny_squad_file.parents[1]), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
