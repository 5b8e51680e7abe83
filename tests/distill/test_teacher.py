"""The teacher-score folder on a tiny world: written once with the teacher's own scores of
each list, resumed after a crash between shards without scoring a finished shard again, a
damaged shard or lists file rebuilt, another teacher, first stage or setting refused; and the
questions the teacher trained on left out, exactly."""

from __future__ import annotations

import gzip
import json
import logging

import pytest
import torch

from retrieval_qa.classifiers.reranker import CrossEncoderReranker
from retrieval_qa.distill import teacher as T
from retrieval_qa.distill.cache import SHARDS, cache_key, digest, read_scores
from retrieval_qa.errors import InputFileError, SettingsMismatchError

pytestmark = pytest.mark.usefixtures("one_thread")


class Counting:
    """The teacher, counting the pairs it scores."""

    def __init__(self, folder):
        self.model, self.pairs = CrossEncoderReranker.load(folder), 0

    def score_pairs(self, questions, sentences, batch_size=None):
        self.pairs += len(questions)
        return self.model.score_pairs(questions, sentences, batch_size)


def _score(settings, **kw):
    teacher, data, evaluation = settings
    return T.score_teacher(teacher, data, evaluation, progress=False, **kw)


def test_scores_are_the_teachers_over_each_list_of_first_stage_negatives(world, settings):
    teacher, data, _ = settings
    summary = _score(settings)
    key = cache_key(teacher, data)
    records, scores, read = read_scores(teacher["output"], key)
    assert read == summary and summary["questions"] == len(records) == 20
    assert summary["shards"] == 4
    assert sorted(p.name for p in (T.Path(teacher["output"]) / SHARDS).iterdir()) == [
        "00000.json.gz", "00001.json.gz", "00002.json.gz", "00003.json.gz"]
    model = CrossEncoderReranker.load(world["reranker"])
    for r, s in zip(records, scores, strict=True):
        texts = [r["gold"][1], *(t for _, t in r["negatives"])]
        assert len(texts) == len(set(texts)) <= 4 and r["gold"][1] not in texts[1:]
        expected = model.score_pairs([r["question"]] * len(texts), texts)
        torch.testing.assert_close(torch.tensor(s), expected, atol=1e-5, rtol=1e-5)
    counts = summary["counts"]
    assert counts["teacher_questions_left_out"] == 10 and counts["questions"] == 20
    assert counts["negatives"] == sum(len(r["negatives"]) for r in records)
    fusion = summary["first_stage"]["fusion"]
    assert fusion["method"] == "convex" and set(fusion["weights"]) == {"bm25", "ctx", "dense"}
    left_out = {n for n, w in fusion["weights"].items() if w == 0}
    assert set(summary["first_stage"]["left_out"]) == left_out
    assert set(summary["first_stage"]["stages"]) == {"bm25", "ctx", "dense"} - left_out


def test_the_lists_follow_the_fused_order_and_the_negative_rules(world, settings):
    from retrieval_qa.data import load_pool
    from retrieval_qa.data.pool_index import known_positives
    from retrieval_qa.distill.lists import first_stage, question_lists
    from retrieval_qa.distill.questions import distill_pool, reranker_draw, reranker_questions
    from retrieval_qa.pipeline.composition import load_pipeline
    from retrieval_qa.pipeline.fused_ranks import ordered

    teacher, data, evaluation = settings
    full, _ = load_pool("reqa_squad", "train", world["data"])
    excluded = reranker_questions(full, reranker_draw(world["reranker"]))
    pool, _ = distill_pool(full, 0.1, 0, excluded, 20, 0)
    fused, _ = first_stage(load_pipeline(teacher["pipeline"]), pool,
                           T.Path(teacher["output"]) / "first_stage", data_dir=world["data"],
                           evaluation=evaluation, progress=False)
    records, counts = question_lists(pool, fused, 4, seed=0)
    positives = known_positives(pool)
    index = {c.id: i for i, c in enumerate(pool.candidates)}
    for q, r in enumerate(records):
        assert index[r["gold"][0]] in pool.gold[q]
        ids, scores = fused[q]
        order = [int(c) for c in ids[ordered(ids, scores)] if int(c) not in positives[q]]
        negatives = [index[c] for c, _ in r["negatives"]]
        assert negatives == order[:len(negatives)]  # the fused order's best non-answers
        assert len(negatives) == 3 or len(negatives) == len(order)
    assert counts["short_lists"] == sum(len(r["negatives"]) < 3 for r in records)


def test_a_crash_between_shards_resumes_without_scoring_finished_shards(world, settings,
                                                                        monkeypatch):
    teacher, data, _ = settings
    real, shards = T.score_lists, []

    def crash_in_the_second_shard(*args):
        if shards:
            raise KeyboardInterrupt("simulated crash")
        shards.append(1)
        return real(*args)

    monkeypatch.setattr(T, "score_lists", crash_in_the_second_shard)
    with pytest.raises(KeyboardInterrupt):
        _score(settings)
    monkeypatch.setattr(T, "score_lists", real)
    folder = T.Path(teacher["output"])
    assert [p.name for p in (folder / SHARDS).iterdir()] == ["00000.json.gz"]
    assert not (folder / "teacher.json").exists()
    with pytest.raises(InputFileError, match="unfinished"):
        read_scores(folder, cache_key(teacher, data))
    lists_file = (folder / "lists.json.gz").stat().st_mtime_ns
    monkeypatch.setattr(T, "build_lists", lambda *a, **k: pytest.fail("lists built again"))
    resumed = Counting(world["reranker"])
    _score(settings, reranker=resumed)
    records, scores, summary = read_scores(folder, cache_key(teacher, data))
    first = sum(1 + len(r["negatives"]) for r in records[:6])
    assert resumed.pairs == summary["pairs"] - first  # shard 0 was not scored again
    assert (folder / "lists.json.gz").stat().st_mtime_ns == lists_file
    again = Counting(world["reranker"])
    _score(settings, reranker=again)                  # a finished folder: nothing to score
    assert again.pairs == 0


@pytest.mark.parametrize("how", ["truncated", "garbage", "other lists"])
def test_a_damaged_shard_is_refused_for_training_and_rebuilt_by_the_command(world, settings,
                                                                           how, caplog):
    teacher, data, _ = settings
    _score(settings)
    folder = T.Path(teacher["output"])
    path = folder / SHARDS / "00002.json.gz"
    good = read_scores(folder, cache_key(teacher, data))[1]
    raw = path.read_bytes()
    if how == "other lists":  # a well-formed shard of other lists (e.g. another version's)
        shard = json.loads(gzip.decompress(raw))
        shard["lists"] = "0" * 64
        path.write_bytes(gzip.compress(json.dumps(shard).encode()))
    else:
        path.write_bytes(raw[:len(raw) // 2] if how == "truncated" else bytes(range(256)))
    with pytest.raises(InputFileError, match=r"00002\.json\.gz: damaged.*rqa prepare"):
        read_scores(folder, cache_key(teacher, data))
    counting = Counting(world["reranker"])
    with caplog.at_level(logging.WARNING):
        _score(settings, reranker=counting)
    assert "00002.json.gz" in caplog.text and "rebuilding" in caplog.text
    records, scores, _ = read_scores(folder, cache_key(teacher, data))
    assert counting.pairs == sum(1 + len(r["negatives"]) for r in records[12:18])
    torch.testing.assert_close(torch.tensor(sum(scores, [])), torch.tensor(sum(good, [])))


def test_a_damaged_lists_file_is_rebuilt(world, settings, caplog):
    teacher, data, _ = settings
    _score(settings)
    folder = T.Path(teacher["output"])
    before = read_scores(folder, cache_key(teacher, data))
    (folder / "lists.json.gz").write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        _score(settings)
    assert "lists.json.gz" in caplog.text
    after = read_scores(folder, cache_key(teacher, data))
    assert after[:2] == before[:2]  # the same lists: the shards of the first run still serve


@pytest.mark.parametrize("change", ["list_size", "questions", "teacher", "first stage"])
def test_a_folder_of_other_settings_is_refused_and_rebuild_starts_it_over(world, settings,
                                                                          change, tmp_path):
    import shutil

    teacher, data, evaluation = settings
    _score(settings)
    other = dict(teacher)
    if change == "list_size":
        other["list_size"], where = 3, "list_size: 4 -> 3"
    elif change == "questions":
        other["questions"], where = 15, "questions.count: 20 -> 15"
    elif change == "teacher":  # the same reranker retrained: other weights, same draw
        copy = tmp_path / "reranker2"
        shutil.copytree(world["reranker"], copy)
        model = CrossEncoderReranker.load(copy)
        with torch.no_grad():
            model.network.classifier.weight.add_(1.0)
        model.export(copy)
        other["reranker"], where = str(copy), "teacher.model"
    else:
        text = world["pipeline"].read_text().replace("{with_context: true}",
                                                     "{with_context: true, k1: 2.0}")
        (tmp_path / "p.yaml").write_text(text)
        other["pipeline"], where = str(tmp_path / "p.yaml"), "first_stage.stages.ctx.bm25.k1"
    with pytest.raises(SettingsMismatchError, match=where.replace(".", r"\.")) as e:
        T.score_teacher(other, data, evaluation, progress=False)
    assert "--rebuild" in str(e.value)
    with pytest.raises(SettingsMismatchError):
        read_scores(teacher["output"], cache_key(other, data))
    summary = T.score_teacher(other, data, evaluation, progress=False, rebuild=True)
    assert summary["key"] == digest(cache_key(other, data)) != digest(cache_key(teacher, data))
    read_scores(other["output"], cache_key(other, data))


def test_the_questions_the_teacher_trained_on_are_left_out_exactly(world, monkeypatch):
    """The draw made again from the teacher's training.json is the one its training made."""
    from retrieval_qa.classifiers import reranker_data
    from retrieval_qa.classifiers.reranker_data import training_side
    from retrieval_qa.classifiers.train_reranker import train_reranker
    from retrieval_qa.data import load_pool
    from retrieval_qa.distill.questions import distill_pool, reranker_draw, reranker_questions

    seen = {}

    class Stop(Exception):
        pass

    def capture(pool, *args, **kwargs):
        seen["questions"] = list(pool.questions)
        raise Stop

    monkeypatch.setattr(reranker_data, "rerank_examples", capture)
    record = json.loads((world["reranker"] / "training.json").read_text())["settings"]
    with pytest.raises(Stop):
        train_reranker(record, world["data"], progress=False)
    full, _ = load_pool("reqa_squad", "train", world["data"])
    draw = reranker_draw(world["reranker"])
    excluded = reranker_questions(full, draw)
    assert excluded == set(seen["questions"]) and len(excluded) == 10
    pool, counts = distill_pool(full, 0.1, 0, excluded, None, 0)
    side, val = training_side(full, 0.1, 0)
    assert not set(pool.questions) & excluded
    assert set(pool.questions) | excluded == set(side.questions)
    assert not set(pool.questions) & set(val.questions)
    val_answers = {p.answer for p in val.pairs}
    assert not {c.text for c in pool.candidates} & val_answers
    assert counts["validation_answers_left_out"] == sum(c.text in val_answers
                                                        for c in side.candidates)
    assert reranker_questions(full, {**draw, "seed": 1}) != excluded


def test_a_teacher_without_its_training_record_or_of_another_split_is_refused(world, settings,
                                                                              tmp_path):
    import shutil

    from retrieval_qa.errors import UsageError

    teacher, data, _ = settings
    copy = tmp_path / "reranker"
    shutil.copytree(world["reranker"], copy)
    (copy / "training.json").unlink()
    with pytest.raises(InputFileError, match="training.json: missing"):
        cache_key(dict(teacher, reranker=str(copy)), data)
    with pytest.raises(UsageError, match="split_seed 0 \\(teacher\\) vs 1 \\(data\\)"):
        cache_key(teacher, dict(data, split_seed=1))
