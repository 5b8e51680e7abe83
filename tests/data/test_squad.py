import copy
import gzip

import pytest
from helpers import TINY_SQUAD, write_json_gz

from retrieval_qa.data.squad import parse_squad, read_squad, squad_from_hub_rows
from retrieval_qa.errors import DataFormatError


def test_reads_plain_and_gzip(tmp_path, tiny_squad_file):
    paragraphs, report = read_squad(tiny_squad_file)
    assert [len(p.qas) for p in paragraphs] == [3, 2]
    assert paragraphs[0].qas[1].answers[1].text == "Eiffel"
    assert report.skipped_count == 0
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(tiny_squad_file.read_bytes()))
    assert read_squad(plain)[0] == paragraphs


def _broken(mutate):
    data = copy.deepcopy(TINY_SQUAD)
    mutate(data)
    return data


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.pop("data"), "missing key 'data'"),
    (lambda d: d["data"][0]["paragraphs"][0].pop("context"), "missing key 'context'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("question"), "missing key 'question'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=3),
     "answer_start 3 does not point at the answer text 'Paris'"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start="0"),
     "'answer_start' should be int"),
    (lambda d: d["data"][0]["paragraphs"][1]["qas"][0].update(id="q1"), "duplicate id"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(answers=[]), "no answers"),
])
def test_malformed_records_name_file_record_and_fix(tmp_path, mutate, needle):
    path = write_json_gz(tmp_path / "bad.json.gz", _broken(mutate))
    with pytest.raises(DataFormatError) as err:
        read_squad(path)
    msg = str(err.value)
    assert needle in msg
    assert str(path) in msg and "fix:" in msg


def test_error_names_the_question_record(tmp_path):
    data = _broken(lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(
        answer_start=3))
    with pytest.raises(DataFormatError) as err:
        parse_squad(data, "x.json")
    assert err.value.record.startswith("question id 'q1' at data[0].paragraphs[0].qas[0] (title 'Alpha')")


def test_invalid_json_names_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"title": "x",\n')
    with pytest.raises(DataFormatError, match=r"bad.json: line \d+ column \d+: invalid JSON"):
        read_squad(path)


def test_not_gzip_is_reported(tmp_path):
    path = tmp_path / "fake.json.gz"
    path.write_text("{}")
    with pytest.raises(DataFormatError, match="cannot be read"):
        read_squad(path)


def test_lenient_mode_skips_and_reports_each_bad_record():
    def mutate(d):
        d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
        d["data"][0]["paragraphs"][1]["qas"][1]["id"] = "q2"  # duplicate of q2
    paragraphs, report = parse_squad(_broken(mutate), "x.json", strict=False)
    assert report.skipped_count == 2
    assert [q.id for p in paragraphs for q in p.qas] == ["q2", "q3", "q4"]
    summary = report.summary()
    assert summary["skipped"] == 2 and "answer_start 3" in summary["examples"][0]
    assert "duplicate id" in summary["examples"][1]


def test_hub_rows_regroup_into_squad_layout():
    rows = [{"id": "a", "title": "T", "context": "C one.", "question": "Q?",
             "answers": {"text": ["C"], "answer_start": [0]}},
            {"id": "b", "title": "T", "context": "C one.", "question": "R?",
             "answers": {"text": ["one"], "answer_start": [2]}}]
    paragraphs, _ = parse_squad(squad_from_hub_rows(rows))
    assert len(paragraphs) == 1 and [q.id for q in paragraphs[0].qas] == ["a", "b"]
