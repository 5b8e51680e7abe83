"""Bad input, tried on purpose: every reader and command gets malformed input and answers
with an error that names the file, the record and the fix (exit status 2 from `rqa`), and
nothing is dropped silently (a lenient read reports what it skipped). The README's
reliability section lists these cases."""

from __future__ import annotations

import copy
import gzip
import json

import pytest
from helpers import TINY_SQUAD, write_json_gz

from retrieval_qa.cli import main
from retrieval_qa.data.io import iter_json_lines
from retrieval_qa.errors import DataFormatError


def _squad(tmp_path, data) -> str:
    f = tmp_path / "squad" / "dev-v1.1.json.gz"
    f.parent.mkdir(parents=True)
    if isinstance(data, bytes):
        f.write_bytes(data)
    else:
        write_json_gz(f, data)
    return str(tmp_path)


def _edit(path: str, value):
    """TINY_SQUAD with the value at ``path`` (keys and indices joined by '/') replaced."""
    data = copy.deepcopy(TINY_SQUAD)
    *parents, last = [int(k) if k.isdigit() else k for k in path.split("/")]
    node = data
    for k in parents:
        node = node[k]
    node[last] = value
    return data


RAW = gzip.compress(json.dumps(TINY_SQUAD).encode())
Q1 = "data/0/paragraphs/0/qas/0"
CASES = {
    # name: (file content, words the message must hold: the record and the fix)
    "truncated gzip": (RAW[: len(RAW) // 2], ["whole file", "re-download"]),
    "not gzip": (b"plain text", ["whole file", "really gzip"]),
    "not UTF-8": (gzip.compress(b'{"data": [{"title": "\xff", "paragraphs": []}]}'),
                  ["byte", "re-encode the file as UTF-8"]),
    "invalid JSON": (gzip.compress(b'{"data": [}'), ["line 1", "re-download"]),
    "data is not a list": (_edit("data", {"x": 1}), ["top level", "SQuAD v1.1 layout"]),
    "question is not a string": (_edit(f"{Q1}/question", 5), ["'q1'", "SQuAD v1.1 layout"]),
    "answer_start is not an int": (_edit(f"{Q1}/answers/0/answer_start", "0"),
                                   ["'q1'", "answer 0", "SQuAD v1.1 layout"]),
    "answer outside the context": (_edit(f"{Q1}/answers/0/answer_start", 9999),
                                   ["'q1'", "answer 0", "set answer_start"]),
    "empty context": (_edit("data/0/paragraphs/0/context", "  "),
                      ["paragraphs[0]", "give the paragraph its text"]),
    "empty question": (_edit(f"{Q1}/question", " "), ["'q1'", "remove the question"]),
    "duplicate question id": (_edit("data/0/paragraphs/1/qas/0/id", "q1"),
                              ["duplicate id", "unique id"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_malformed_squad_file_is_a_named_error(name, tmp_path, capsys):
    content, words = CASES[name]
    data_dir = _squad(tmp_path, content)
    code = main(["data", "stats", "--dataset", "reqa_squad", "--pool", "dev", "--data-dir",
                 data_dir, "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2
    assert "dev-v1.1.json.gz" in err and "fix" in err, err
    for word in words:
        assert word in err, (word, err)


def test_lenient_reads_report_every_skipped_record(tmp_path, capsys):
    data_dir = _squad(tmp_path, _edit(f"{Q1}/answers/0/answer_start", 9999))
    assert main(["data", "stats", "--dataset", "reqa_squad", "--pool", "dev", "--data-dir",
                 data_dir, "--no-cache", "--lenient"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["questions"] == 3  # q1 left out ...
    assert "'q1'" in json.dumps(out["build_notes"])  # ... and said so, with its reason


def test_a_bad_json_line_names_its_line(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(DataFormatError, match=r"x.jsonl: line 3: invalid JSON.*repair or remove"):
        list(iter_json_lines(f))


def test_unknown_names_are_errors_that_list_the_choices(capsys):
    with pytest.raises(SystemExit):
        main(["data", "stats", "--dataset", "no_such_set"])
    assert "invalid choice" in capsys.readouterr().err
    assert main(["train", "experiment=no_such_experiment"]) == 2
    assert "available in experiment/" in capsys.readouterr().err
    assert main(["train", "experiment=dual_gru", "profile=laptop"]) == 2
    assert "profiles: ['paper', 'cpu'" in capsys.readouterr().err
    assert main(["train", "experiment=dual_gru", "trainr.max_epochs=1"]) == 2
    assert "Did you mean: 'trainer'" in capsys.readouterr().err


def test_a_broken_export_folder_says_what_is_missing(tmp_path, capsys):
    folder = tmp_path / "model"
    assert main(["evaluate", "--checkpoint", str(folder), "--quiet"]) == 2
    assert "model does not exist" in capsys.readouterr().err
    folder.mkdir()
    assert main(["evaluate", "--checkpoint", str(folder), "--quiet"]) == 2
    assert "no model.json" in capsys.readouterr().err
    (folder / "model.json").write_text("{not json")
    assert main(["evaluate", "--checkpoint", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "model.json: damaged: not JSON" in err and "export the model again" in err
    (folder / "model.json").write_text(json.dumps(
        {"_target_": "retrieval_qa.models.inference.DualEncoderInference", "towers": {},
         "similarity": "dot"}))
    assert main(["evaluate", "--checkpoint", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "towers.pt: damaged: missing" in err and "export the model again" in err
    (folder / "model.json").write_text(json.dumps({"_target_": "no_such_module.Loader"}))
    assert main(["evaluate", "--checkpoint", str(folder), "--quiet"]) == 2
    assert "PYTHONPATH" in capsys.readouterr().err
