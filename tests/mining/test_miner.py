"""The miner: top-10 neighbours without known positives, kept at p >= 0.5 with weight p^2,
never a gold pair twice; shards resume after a crash with identical output; `rqa mine`."""

from __future__ import annotations

import io
import json
import shutil

import datasets
import pytest
from mining_helpers import BagOfWordsRetriever, HashScorer

from retrieval_qa.data.pair_sources import PairSource
from retrieval_qa.data.pool_index import known_positives
from retrieval_qa.errors import InputFileError, SettingsMismatchError
from retrieval_qa.mining.miner import Miner, MiningSettings

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = MiningSettings(top_k=10, threshold=0.5, shard_questions=8, chunk_pairs=40)


def mine(pool, folder, scorer=None, settings=SMALL):
    scorer = scorer or HashScorer()
    summary = Miner(pool, BagOfWordsRetriever(), scorer, folder, settings,
                    progress=False).run()
    return summary, scorer


def tables(folder):
    return (datasets.load_from_disk(str(folder / "pairs")).to_list(),
            datasets.load_from_disk(str(folder / "scored")).to_list(),
            (folder / "mined.jsonl").read_text())


def test_mined_pairs_follow_the_paper_rules(train_pool, tmp_path):
    summary, scorer = mine(train_pool, tmp_path / "out")
    pairs, scored, jsonl = tables(tmp_path / "out")
    positives = known_positives(train_pool)
    per_question: dict[int, list] = {}
    for r in scored:
        per_question.setdefault(r["question_index"], []).append(r)
        assert r["candidate_index"] not in positives[r["question_index"]]  # positives removed
    assert all(len(v) == 10 for v in per_question.values())  # top 10 of each question
    assert len(per_question) == len(train_pool.questions) == summary["questions"]
    assert all([r["retriever_rank"] for r in v] == list(range(1, 11))
               for v in per_question.values())
    gold = [r for r in pairs if r["source"] == "gold"]
    mined = [r for r in pairs if r["source"] == "mined"]
    assert len(gold) == len(train_pool.pairs) == summary["gold_pairs"]
    assert all(r["weight"] == 1.0 and r["probability"] is None for r in gold)
    assert mined and all(r["probability"] >= 0.5 for r in mined)
    assert all(r["weight"] == pytest.approx(r["probability"] ** 2) for r in mined)
    gold_pairs = {(p.question, p.answer) for p in train_pool.pairs}
    mined_pairs = [(r["question"], r["answer"]) for r in mined]
    assert not gold_pairs & set(mined_pairs)  # a mined pair never duplicates a gold pair
    assert len(set(mined_pairs)) == len(mined_pairs)  # nor another mined pair
    kept = [r for r in scored if r["status"] == "mined"]
    below = [r for r in scored if r["status"] == "below_threshold"]
    assert all(r["probability"] < 0.5 for r in below)
    assert len(kept) == len(mined) == summary["mined_pairs"]
    assert summary["scored_pairs"] == len(scored) == scorer.pairs
    assert summary["mined_over_gold_percent"] == round(100 * len(mined) / len(gold), 2)
    # the JSONL is what data.extra_pairs reads, weights included
    path = tmp_path / "out" / "mined.jsonl"
    source = PairSource.from_config({"path": str(path)})
    assert [p.question for p in source.pairs] == [r["question"] for r in mined]
    assert source.weights() == pytest.approx([r["weight"] for r in mined])
    assert len(jsonl.splitlines()) == len(mined)
    info = json.loads(datasets.load_from_disk(str(tmp_path / "out" / "pairs")).info.description)
    assert info["manifest"]["settings"]["threshold"] == 0.5  # provenance travels with the table


def test_a_repeated_question_string_does_not_mine_a_pair_twice(train_pool, tmp_path):
    class Always:  # every neighbour is an answer: what is left are the duplicates
        def __call__(self, q, a, c):
            import torch

            return torch.full((len(q),), 0.9)

        def describe(self):
            return {"scorer": "always 0.9"}

    summary, _ = mine(train_pool, tmp_path / "out", Always())
    pairs, scored, _ = tables(tmp_path / "out")
    mined = [(r["question"], r["answer"]) for r in pairs if r["source"] == "mined"]
    assert len(set(mined)) == len(mined)
    assert summary["duplicates"] > 0  # the question asked in two paragraphs, copied sentences
    assert {r["status"] for r in scored} == {"mined", "duplicate"}
    assert all(r["weight"] == pytest.approx(0.81) for r in pairs if r["source"] == "mined")


def test_a_crash_resumes_without_rescoring_and_gives_identical_output(train_pool, tmp_path):
    clean, _ = mine(train_pool, tmp_path / "clean")
    crashing = HashScorer(fail_after=5)  # 5 chunks of 40 pairs: 2 shards of 80 written
    with pytest.raises(RuntimeError, match="simulated crash"):
        mine(train_pool, tmp_path / "crashed", crashing)
    shards = sorted(p.name for p in (tmp_path / "crashed" / "shards").iterdir())
    assert shards == ["shard-00000.jsonl", "shard-00001.jsonl"]  # whole shards only
    assert not (tmp_path / "crashed" / "pairs").exists()
    resumed, scorer = mine(train_pool, tmp_path / "crashed")
    finished = sum(1 for s in shards for _ in open(tmp_path / "crashed" / "shards" / s)) - 2
    # (less each shard's last line, its count of records)
    assert scorer.pairs == clean["scored_pairs"] - finished  # finished shards not rescored
    assert resumed["shards_resumed"] == 2 and resumed["resumed"] is True
    assert tables(tmp_path / "crashed") == tables(tmp_path / "clean")
    keys = ("mined_pairs", "gold_pairs", "scored_pairs", "below_threshold", "duplicates")
    assert {k: resumed[k] for k in keys} == {k: clean[k] for k in keys}
    again, scorer = mine(train_pool, tmp_path / "crashed")  # finished: nothing scored
    assert scorer.calls == 0 and again["shards_scored"] == 0
    assert tables(tmp_path / "crashed") == tables(tmp_path / "clean")


def test_another_job_in_the_same_folder_is_an_error(train_pool, tmp_path):
    mine(train_pool, tmp_path / "out", settings=SMALL)
    other = MiningSettings(top_k=10, threshold=0.6, shard_questions=8, chunk_pairs=40)
    with pytest.raises(ValueError, match=r"another mining job.*settings"):
        mine(train_pool, tmp_path / "out", settings=other)


def test_shards_of_another_or_an_unknown_job_are_never_mixed_in(train_pool, tmp_path):
    crashing = HashScorer(fail_after=5)  # 2 shards written, then a crash
    with pytest.raises(RuntimeError, match="simulated crash"):
        mine(train_pool, tmp_path / "out", crashing)
    other = MiningSettings(top_k=10, threshold=0.6, shard_questions=8, chunk_pairs=40)
    with pytest.raises(SettingsMismatchError, match=r"settings.threshold: 0.5 -> 0.6") as e:
        mine(train_pool, tmp_path / "out", settings=other)
    assert "--output" in str(e.value)
    manifest = tmp_path / "out" / "manifest.json"
    manifest.write_text("{half a manif")
    with pytest.raises(InputFileError, match="manifest.json: damaged: not JSON"):
        mine(train_pool, tmp_path / "out")
    manifest.unlink()  # shards whose job cannot be checked any more
    with pytest.raises(InputFileError, match=r"2 scored shard\(s\) but no manifest.json"):
        mine(train_pool, tmp_path / "out")
    assert not manifest.exists()


def test_rqa_mine_command(mining_dirs, tmp_path):
    from retrieval_qa.cli import main
    from retrieval_qa.mining.classifier import MiningClassifier

    classifier = MiningClassifier(
        pretrained=str(mining_dirs["bert"]), fallback=None, dropout=0.1, max_length=48,
        max_question_length=12, with_context=True, context_segment=2, score_batch_size=16,
        optimizer={"name": "adamw", "lr": 1e-3, "weight_decay": 0.0, "schedule": "constant"},
        pretrained_label=None)
    export = classifier.export(tmp_path / "classifier")
    argv = ["mine", "--classifier", str(export), "--retriever", str(mining_dirs["retriever"]),
            "--output", str(tmp_path / "mined"), "--data-dir", str(mining_dirs["data"]),
            "--shard-questions", "16", "--threshold", "0.0", "--quiet"]
    out = io.StringIO()
    assert main(argv, stdout=out) == 0
    first = json.loads(out.getvalue().strip().splitlines()[-1])
    assert first["command"] == "mine" and first["dataset"] == "multireqa_squad"
    assert first["rebuilt"] and first["mined_pairs"] > 0 and first["threshold"] == 0.0
    assert (tmp_path / "mined" / "encodings").is_dir()  # resumable encodings
    assert first["scorer"]["pretrained"].startswith("local directory")
    manifest = (tmp_path / "mined" / "manifest.json").read_text()
    assert str(tmp_path) not in manifest  # contents, not paths: resumes from anywhere
    assert first["paths"]["classifier"] == str(export)
    shutil.rmtree(tmp_path / "mined" / "pairs")
    (tmp_path / "mined" / "shards" / "shard-00001.jsonl").unlink()  # as if it crashed there
    out = io.StringIO()
    assert main(argv, stdout=out) == 0
    second = json.loads(out.getvalue().strip().splitlines()[-1])
    assert second["shards_scored"] == 1 and second["shards_resumed"] == first["shards"] - 1
    # exact: the shard is scored again in the same batches by the same model
    assert second["mined_pairs"] == first["mined_pairs"]


def _damage(path, how):
    if how == "truncated":  # cut at a line boundary: only the count on the last line tells
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:3]))
    elif how == "cut_mid_line":
        path.write_bytes(path.read_bytes()[:-25])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes(range(256)) * 4)
    elif how == "older_format":  # as written before shards counted their records
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))


@pytest.mark.parametrize("how", ["truncated", "cut_mid_line", "empty", "garbage",
                                 "older_format"])
def test_a_damaged_shard_is_scored_again_with_a_warning(train_pool, tmp_path, how, caplog):
    clean, _ = mine(train_pool, tmp_path / "out")
    before = tables(tmp_path / "out")
    shard = tmp_path / "out" / "shards" / "shard-00001.jsonl"
    records = len(shard.read_text().splitlines()) - 1
    _damage(shard, how)
    with caplog.at_level("WARNING"):
        again, scorer = mine(train_pool, tmp_path / "out")
    warning = [r.message for r in caplog.records if "damaged cache" in r.message]
    assert len(warning) == 1 and str(shard) in warning[0] and "rebuilding" in warning[0]
    assert scorer.pairs == records and again["shards_scored"] == 1  # that shard alone
    assert tables(tmp_path / "out") == before  # the same output as before the damage
    keys = ("mined_pairs", "gold_pairs", "scored_pairs", "below_threshold", "duplicates")
    assert {k: again[k] for k in keys} == {k: clean[k] for k in keys}


@pytest.mark.parametrize("content", [b"", b'{"version": 1, "sett', b"\x00\xff" * 9, b"[1, 2]"])
def test_a_damaged_manifest_is_refused_naming_it(train_pool, tmp_path, content):
    from retrieval_qa.errors import InputFileError

    mine(train_pool, tmp_path / "out")
    manifest = tmp_path / "out" / "manifest.json"
    manifest.write_bytes(content)
    with pytest.raises(InputFileError) as e:
        mine(train_pool, tmp_path / "out")
    message = str(e.value)
    assert str(manifest) in message and "damaged" in message
    assert f"delete {tmp_path / 'out'}" in message and "another --output" in message
    assert manifest.read_bytes() == content  # nothing else touched


@pytest.mark.parametrize("name", ["head.pt", "model.json"])
def test_a_damaged_classifier_export_is_refused_naming_it(mining_dirs, tmp_path, name):
    from retrieval_qa.errors import InputFileError
    from retrieval_qa.mining.classifier import MiningClassifier, load_classifier

    classifier = MiningClassifier(
        pretrained=str(mining_dirs["bert"]), fallback=None, dropout=0.1, max_length=48,
        max_question_length=12, with_context=True, context_segment=2, score_batch_size=16,
        optimizer={"name": "adamw", "lr": 1e-3, "weight_decay": 0.0, "schedule": "constant"},
        pretrained_label=None)
    export = classifier.export(tmp_path / "classifier")
    data = (export / name).read_bytes()
    (export / name).write_bytes(data[:len(data) // 2])
    with pytest.raises(InputFileError) as e:
        load_classifier(export)
    assert str(e.value).startswith(f"exported model file {export / name}: damaged: ")
    assert "export the model again" in str(e.value)
