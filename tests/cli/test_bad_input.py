"""Every subcommand given bad input (a wrong option, a mistyped config override, a file that is
missing, empty, binary or of the wrong kind, options that conflict): exit status 2, one line on
stderr naming the key, file or record and the fix, no traceback, and nothing written (no run
folder, no output) in the working folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TINY_SQUAD, write_json_gz

from retrieval_qa.cli import main

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "results" / "compare"  # committed per-question records

BAD_SWEEP_TYPE = """\
method: grid
parameters:
  experiment: {value: dual_gru}
  trainer.max_steps: {values: [abc]}
command: [rqa, train, "${args_no_hyphens}"]
"""

# id: (argv with {in} = the folder of input files, {data} = a tiny data folder; words the
# error line must hold: what is wrong and where)
CASES = {
    # rqa train: overrides checked against the composed config before anything runs
    "train int key given text": (["train", "experiment=dual_gru", "trainer.max_steps=abc"],
                                 ["'trainer.max_steps=abc'", "an integer", "fix:"]),
    "train float key given text": (["train", "experiment=dual_gru", "model.optimizer.lr=abc"],
                                   ["model.optimizer.lr", "a number", "fix:"]),
    "train int key given a float": (["train", "experiment=dual_gru", "trainer.max_steps=1.5"],
                                    ["trainer.max_steps", "an integer"]),
    "train bool key given text": (["train", "experiment=dual_gru", "trainer.deterministic=yes?"],
                                  ["trainer.deterministic", "true or false"]),
    "train list items of another type": (["train", "experiment=dual_gru", "eval.ks=[a, b]"],
                                         ["eval.ks", "a list of integers"]),
    "train section given a number": (["train", "experiment=dual_gru", "model.towers=3"],
                                     ["model.towers", "set one of its keys"]),
    "train value not YAML": (["train", "experiment=dual_gru", "eval.ks=[1, 5"],
                             ["eval.ks", "not valid YAML"]),
    "train not key=value": (["train", "experiment=dual_gru", "seed"],
                            ["'seed'", "key=value"]),
    "train unknown key": (["train", "experiment=dual_gru", "trainer.max_step=5"],
                          ["trainer.max_step", "Did you mean"]),
    "train no experiment": (["train", "profile=cpu"], ["experiment=NAME", "dual_gru"]),
    "train unknown experiment": (["train", "experiment=no_such_method"],
                                 ["experiment/no_such_method.yaml", "dual_gru"]),
    "train unknown profile": (["train", "experiment=dual_gru", "profile=laptop"],
                              ["'laptop'", "profiles"]),
    "train threads": (["train", "experiment=dual_gru", "threads=many"], ["threads", "auto"]),
    "train resume missing": (["train", "experiment=dual_gru", "resume={in}/none.ckpt"],
                             ["none.ckpt", "no such checkpoint", "resume=auto"]),
    "train value of the right type that no builder knows": (
        ["train", "experiment=dual_gru", "model.towers.encoder.type=foo"], ["foo"]),
    "train unknown compile mode": (["train", "experiment=dual_gru", "trainer.compile=fast"],
                                   ["trainer.compile='fast'", "reduce-overhead"]),
    "train bad value of a profile run": (["train", "experiment=dual_gru", "profile=cpu",
                                          "data.batch_size=big"], ["data.batch_size"]),
    # rqa export
    "export override type": (["export", "--output", "out", "experiment=dual_gru",
                              "data.batch_size=x"], ["data.batch_size", "an integer"]),
    "export checkpoint missing": (["export", "--checkpoint", "{in}/none", "--format",
                                   "sentence-transformers", "--output", "out"],
                                  ["--checkpoint", "none", "is not a folder"]),
    "export checkpoint without format": (["export", "--checkpoint", "{in}", "--output", "out"],
                                         ["--format sentence-transformers"]),
    "export checkpoint with settings": (["export", "--checkpoint", "{in}", "--format",
                                         "sentence-transformers", "--output", "out",
                                         "seed=1"], ["seed=1", "drop"]),
    "export st-modules without format": (["export", "--output", "out", "--st-modules",
                                          "native", "experiment=dual_gru"],
                                         ["--st-modules native", "--format sentence-transformers"]),
    "export unknown format": (["export", "--format", "onnx", "--output", "out"],
                              ["--format", "invalid choice"]),
    # rqa evaluate
    "evaluate model and checkpoint": (["evaluate", "--model", "bm25", "--checkpoint", "X"],
                                      ["--model bm25", "--checkpoint X", "do not combine"]),
    "evaluate checkpoint missing": (["evaluate", "--checkpoint", "{in}/none", "--quiet"],
                                    ["none does not exist"]),
    "evaluate checkpoint is a file": (["evaluate", "--checkpoint", "{in}/run.jsonl"],
                                      ["run.jsonl is a file"]),
    "evaluate checkpoint folder without export": (["evaluate", "--checkpoint", "{in}"],
                                                  ["no model.json"]),
    "evaluate bm25 setting type": (["evaluate", "--data-dir", "{data}", "k1=abc"],
                                   ["'k1=abc'", "a number"]),
    "evaluate bm25 unknown setting": (["evaluate", "--data-dir", "{data}", "k_one=1"],
                                      ["k_one"]),
    "evaluate settings with checkpoint": (["evaluate", "--checkpoint", "{in}", "k1=1"],
                                          ["k1=1", "--model bm25 only"]),
    "evaluate idf with bm25": (["evaluate", "--idf"], ["--idf", "frozen embeddings"]),
    "evaluate work dir without checkpoint": (["evaluate", "--work-dir", "w"], ["--work-dir"]),
    "evaluate max questions without pipeline": (["evaluate", "--checkpoint", "{in}",
                                                  "--max-questions", "5"],
                                                 ["--max-questions", "--pipeline"]),
    "evaluate run file is a folder": (["evaluate", "--run-file", "{in}"],
                                      ["--run-file", "is a folder"]),
    "evaluate negative subset": (["evaluate", "--min-questions-per-answer", "-1"],
                                 ["--min-questions-per-answer", ">= 0"]),
    "evaluate unknown dataset": (["evaluate", "--dataset", "squad2"],
                                 ["--dataset", "invalid choice"]),
    "evaluate unknown pool": (["evaluate", "--data-dir", "{data}", "--pool", "valid"],
                              ["'valid'", "dev"]),
    "evaluate layer weights": (["evaluate", "--model", "contextual:minilm", "--dataset",
                                "squad_paragraphs", "--layer-weights", "a,b"],
                               ["--layer-weights", "1,0,0,0,0,0,0"]),
    # rqa encode
    "encode empty input": (["encode", "--checkpoint", "{in}", "--input", "{in}/empty.txt",
                            "--output", "q.pt"], ["--input", "empty.txt", "is empty"]),
    "encode binary input": (["encode", "--checkpoint", "{in}", "--input", "{in}/binary.txt",
                             "--output", "q.pt"], ["--input", "binary.txt", "UTF-8"]),
    "encode missing input": (["encode", "--checkpoint", "{in}", "--input", "{in}/none.txt",
                              "--output", "q.pt"], ["--input", "none.txt", "does not exist"]),
    "encode input is a folder": (["encode", "--checkpoint", "{in}", "--input", "{in}",
                                  "--output", "q.pt"], ["--input", "is a folder"]),
    "encode blank line": (["encode", "--checkpoint", "{in}", "--input", "{in}/blank.txt",
                           "--output", "q.pt"], ["blank.txt", "line 2 is blank"]),
    "encode output is a folder": (["encode", "--checkpoint", "{in}", "--input",
                                   "{in}/texts.txt", "--output", "{in}"],
                                  ["--output", "is a folder"]),
    "encode checkpoint missing": (["encode", "--checkpoint", "{in}/none", "--input",
                                   "{in}/texts.txt", "--output", "q.pt"],
                                  ["none does not exist"]),
    "encode unknown side": (["encode", "--checkpoint", "{in}", "--input", "{in}/texts.txt",
                             "--output", "q.pt", "--side", "context"], ["--side"]),
    # rqa metrics
    "metrics not a run file": (["metrics", "--run-file", "{in}/other.jsonl"],
                               ["other.jsonl", "record 1", "no 'gold_rank'", "fix:"]),
    "metrics not JSON": (["metrics", "--run-file", "{in}/texts.txt"],
                         ["texts.txt", "line 1", "not JSON"]),
    "metrics binary": (["metrics", "--run-file", "{in}/binary.txt"],
                       ["binary.txt", "not UTF-8"]),
    "metrics empty": (["metrics", "--run-file", "{in}/empty.txt"], ["empty.txt", "no records"]),
    "metrics missing": (["metrics", "--run-file", "{in}/none.jsonl"],
                        ["none.jsonl", "does not exist"]),
    "metrics bad rank": (["metrics", "--run-file", "{in}/rank0.jsonl"],
                         ["rank0.jsonl", "record 2", "gold_rank 0"]),
    "metrics ks": (["metrics", "--run-file", "{in}/run.jsonl", "--ks", "0,5"], ["--ks"]),
    # rqa sweep
    "sweep YAML syntax": (["sweep", "{in}/broken.yaml", "--dry-run"],
                          ["broken.yaml", "not valid YAML", "line 2"]),
    "sweep not a mapping": (["sweep", "{in}/list.yaml", "--dry-run"],
                            ["list.yaml", "not a sweep file"]),
    "sweep missing": (["sweep", "no_such_sweep", "--dry-run"], ["'no_such_sweep'", "endx"]),
    "sweep override type": (["sweep", "{in}/bad_type.yaml", "--dry-run"],
                            ["run 1", "trainer.max_steps", "an integer"]),
    "sweep run numbers": (["sweep", "{in}/bad_type.yaml", "--runs", "one"], ["--runs"]),
    "sweep count not a number": (["sweep", "{in}/bad_type.yaml", "--count", "two"],
                                 ["--count", "'two' is not a whole number"]),
    # rqa data stats
    "data stats unknown pool": (["data", "stats", "--data-dir", "{data}", "--pool", "test"],
                                ["'test'", "dev"]),
    "data stats missing data dir": (["data", "stats", "--data-dir", "{in}/none"],
                                    ["none", "--data-dir"]),
    "threads": (["--threads", "many", "data", "stats", "--data-dir", "{data}"],
                ["threads", "auto"]),
    # rqa mine
    "mine classifier missing": (["mine", "--classifier", "{in}/none", "--retriever", "{in}",
                                 "--output", "mined"], ["--classifier", "does not exist"]),
    "mine flag type": (["mine", "--classifier", "{in}", "--retriever", "{in}", "--output",
                        "mined", "--top-k", "ten"], ["--top-k"]),
    # rqa analyze
    "analyze model not NAME=DIR": (["analyze", "one-to-many", "--model", "{in}",
                                    "--data-dir", "{data}"], ["expected NAME=PATH"]),
    "analyze model missing": (["analyze", "tsne", "--model", "A={in}/none", "--data-dir",
                               "{data}"], ["--model", "A=", "does not exist"]),
    "analyze report missing": (["analyze", "side-by-side", "--report", "A={in}/none"],
                               ["A=", "no result.json"]),
    "analyze side-by-side nothing": (["analyze", "side-by-side"], ["--report", "--sweep"]),
    "analyze sweep missing": (["analyze", "side-by-side", "--sweep", "{in}/none"],
                              ["--sweep", "no such folder"]),
    "analyze similarity without ENDX": (["analyze", "similarity", "--dual-model", "{in}"],
                                        ["--endx-run"]),
    "analyze unknown analysis": (["analyze", "tables"], ["invalid choice"]),
    # a mistyped name: the close ones named (difflib), then the choices
    "mistyped command": (["evalute"], ["'evalute'", "did you mean 'evaluate'?"]),
    "train mistyped experiment": (["train", "experiment=dual_gruu"],
                                  ["did you mean 'dual_gru'", "available in experiment/"]),
    "train mistyped profile": (["train", "experiment=dual_gru", "profile=cpuu"],
                               ["did you mean 'cpu'?", "profiles"]),
    "train mistyped group file": (["train", "experiment=dual_gru", "model=dual_encodr"],
                                  ["did you mean 'dual_encoder'?"]),
    "evaluate mistyped dataset": (["evaluate", "--dataset", "reqa_sqad"],
                                  ["did you mean 'reqa_squad'", "multireqa_bioasq"]),
    "evaluate mistyped pool": (["evaluate", "--data-dir", "{data}", "--pool", "devv"],
                               ["'devv'", "did you mean 'dev'?"]),
    "evaluate mistyped pipeline": (["evaluate", "--pipeline", "hybrid_rf"],
                                   ["did you mean 'hybrid_rrf'", "hybrid_convex"]),
    "sweep mistyped file": (["sweep", "vae", "--dry-run"], ["did you mean 'vaes'?"]),
    "compare mistyped metric": (["compare", str(RECORDS / "bm25.questions.jsonl.gz"),
                                 str(RECORDS / "bm25_context.questions.jsonl.gz"), "--metrics",
                                 "mr"], ["--metrics mr", "did you mean 'mrr'?"]),
    "analyze mistyped analysis": (["analyze", "one-to-mny"], ["did you mean 'one-to-many'?"]),
}


@pytest.fixture
def inputs(tmp_path) -> Path:
    d = tmp_path / "inputs"
    d.mkdir()
    (d / "empty.txt").write_text("")
    (d / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary")
    (d / "blank.txt").write_text("first\n\nthird\n")
    (d / "texts.txt").write_text("a question?\nanother?\n")
    (d / "other.jsonl").write_text('{"question": "q"}\n')
    (d / "run.jsonl").write_text('{"gold_rank": 1}\n{"gold_rank": 3}\n')
    (d / "rank0.jsonl").write_text('{"gold_rank": 1}\n{"gold_rank": 0}\n')
    (d / "broken.yaml").write_text("method: grid\nparameters: {seed: [1, 2\n")
    (d / "list.yaml").write_text("- method\n- grid\n")
    (d / "bad_type.yaml").write_text(BAD_SWEEP_TYPE)
    return d


@pytest.fixture
def data_dir(tmp_path) -> Path:
    write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    return tmp_path / "data"


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's errors
        return e.code


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, inputs, data_dir, tmp_path,
                                                         monkeypatch, capsys):
    argv, words = CASES[case]
    argv = [a.format(**{"in": inputs, "data": data_dir}) for a in argv]
    cwd = tmp_path / "cwd"  # the command's working folder: run folders go to runs/ here
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = _exit_code(argv)
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (case, err)
    assert out == ""
    assert len(lines) == 1 and "error" in lines[0], err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert list(cwd.iterdir()) == []  # no run folder, no output


def test_the_installed_command_shows_no_traceback(tmp_path):
    """The entry point in a fresh process (`python -m retrieval_qa.cli`), as a user runs it:
    the type error of an override and an unreadable file, each one line and exit 2."""
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00binary")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), "HF_HUB_OFFLINE": "1"}
    for argv, word in ((["train", "experiment=dual_gru", "trainer.max_steps=abc"],
                        "trainer.max_steps"),
                       (["encode", "--checkpoint", ".", "--input", "binary.txt", "--output",
                         "q.pt"], "binary.txt")):
        proc = subprocess.run([sys.executable, "-m", "retrieval_qa.cli", *argv], cwd=tmp_path,
                              env=env, capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and word in proc.stderr
        assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary.txt"]


def test_a_good_override_of_each_type_still_composes():
    """The type check lets through what the keys take: an int for a float, null anywhere, a
    number for a string (trainer.precision=16), a list of ints, a mapping for a section."""
    from retrieval_qa.training.compose import compose

    cfg = compose(["experiment=dual_gru", "model.optimizer.lr=1", "trainer.max_epochs=null",
                   "trainer.precision=16", "eval.ks=[1, 3]", "trainer.devices=2",
                   "model.towers.projection={dim: 8}", "seed=${eval.top_k}"])
    assert cfg.model.optimizer.lr == 1 and cfg.trainer.max_epochs is None
    assert cfg.trainer.precision == 16 and list(cfg.eval.ks) == [1, 3]
    assert cfg.model.towers.projection.dim == 8 and cfg.seed == cfg.eval.top_k


def test_metrics_reads_a_good_run_file(inputs, capsys):
    assert main(["metrics", "--run-file", str(inputs / "run.jsonl"), "--ks", "1,3"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["r@1"] == 50.0 and metrics["r@3"] == 100.0
