"""The distilled dual encoder end to end on tiny models: the teacher-scoring command, batches
that carry each question's list and the teacher's scores, a training step that is the
weighted sum of the in-batch softmax and the distillation term, `rqa train experiment=distill`
training, exporting and testing, its export as a pipeline stage and as a sentence-transformers
folder; a training run on scores of other settings is refused."""

from __future__ import annotations

import io
import json

import pytest
import torch
import torch.nn.functional as F
from distill_helpers import teacher_overrides

from retrieval_qa.cli import main
from retrieval_qa.errors import InputFileError, SettingsMismatchError
from retrieval_qa.losses.distillation import list_kl, margin_mse
from retrieval_qa.training.compose import compose
from retrieval_qa.training.run import method_class

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.filterwarnings("ignore:You are trying to .self.log")]


def _overrides(world, out, *extra) -> list[str]:
    return ["experiment=distill", "profile=cpu", f"model.towers.encoder.pretrained={world['bert']}",
            "model.towers.encoder.fallback=null", f"data.data_dir={world['data']}",
            "data.max_val_questions=null", "data.batch_size=4", "data.max_question_length=16",
            "data.max_answer_length=24", f"output_dir={out}", "trainer.enable_progress_bar=false",
            "logger.name=none", "threads=1",
            *teacher_overrides(world, out / "teacher"), *extra]


def _score(overrides) -> dict:
    """The teacher's scores through `rqa prepare` (the distillation's first step)."""
    return _rqa("prepare", *overrides, "--quiet")


def _rqa(*argv) -> dict:
    out = io.StringIO()
    assert main([str(a) for a in argv], stdout=out) == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["kl", "margin_mse"])
def test_a_step_is_the_weighted_sum_over_batches_of_lists(world, tmp_path, kind):
    overrides = _overrides(world, tmp_path, f"model.distillation.loss={kind}",
                           "model.distillation.in_batch_weight=0.5",
                           "model.distillation.weight=2.0",
                           "model.distillation.student_temperature=2.0")
    _score(overrides)
    cfg = compose(overrides)
    built = method_class(cfg).build(cfg)
    module, data = built.module, built.data
    data.setup("fit")
    assert len(data.train_pairs) == 20 and data.describe()["distill"]["list_size"] == 4
    batch = next(iter(data.train_dataloader()))
    mask, teacher = batch["list_mask"], batch["teacher"]
    assert mask.shape == teacher.shape == (4, 4)
    rows = []
    for b, i in enumerate(batch["index"].tolist()):
        record, scores = data.lists[i], data.teacher_scores[i]
        assert data.train_pairs[i].answer == record["gold"][1]
        assert mask[b].sum() == len(scores) == 1 + len(record["negatives"])
        torch.testing.assert_close(teacher[b, :len(scores)], torch.tensor(scores))
        rows += [t for _, t in record["negatives"]]
    assert batch["negatives"]["input_ids"].shape[0] == len(rows) == int(mask[:, 1:].sum())
    module.eval()  # no dropout: the step can be recomputed
    loss = module.training_step(batch, 0)
    towers = module.towers
    q = F.normalize(towers.encode_question(**batch["question"]), dim=-1)
    a = F.normalize(towers.encode_answer(**batch["answer"]), dim=-1)
    n = F.normalize(towers.encode_answer(**batch["negatives"]), dim=-1)
    in_batch = F.cross_entropy(20 * q @ a.T, torch.arange(4))
    student = torch.zeros(4, 4)
    student[:, 0] = 20 * (q * a).sum(-1)
    owner = mask[:, 1:].nonzero()[:, 0]
    student[:, 1:][mask[:, 1:]] = 20 * (q[owner] * n).sum(-1)
    fn = list_kl if kind == "kl" else margin_mse
    expected = 0.5 * in_batch + 2.0 * fn(student, teacher, mask, 2.0, 1.0)
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    module.zero_grad()
    module.in_batch_weight = 0.0  # the distillation term alone still trains both towers
    module.training_step(batch, 0).backward()
    grads = [p.grad for p in towers.parameters() if p.grad is not None]
    assert grads and sum(float(g.abs().sum()) for g in grads) > 0


def test_shared_negatives_join_the_in_batch_softmax_less_golds_and_denoised(world, tmp_path):
    overrides = _overrides(world, tmp_path, "model.distillation.shared_negatives=true")
    _score(overrides)
    cfg = compose(overrides)
    built = method_class(cfg).build(cfg)
    module, data = built.module, built.data
    data.setup("fit")
    collate = data.train_dataloader().collate_fn
    index = [0, 1, 2, 3]
    items = [(i, data.train_pairs[i]) for i in index]
    lists, scores = collate.lists, collate.scores
    saved = [(list(lists[i]["negatives"]), list(scores[i])) for i in index]
    # question 1's first negative is question 0's gold sentence; question 2's first negative
    # is scored by the teacher above its gold sentence
    lists[index[1]]["negatives"][0] = (-1, lists[index[0]]["gold"][1])
    scores[index[2]][1] = scores[index[2]][0] + 1.0
    golds = {lists[i]["gold"][1] for i in index}
    expected = [text not in golds and score <= scores[i][0] for i in index
                for (_, text), score in zip(lists[i]["negatives"], scores[i][1:], strict=True)]
    try:
        batch = collate(items)
    finally:
        for i, (negatives, values) in zip(index, saved, strict=True):
            lists[i]["negatives"][:], scores[i][:] = negatives, values
    assert batch["shared"].tolist() == expected
    first = [sum(len(lists[i]["negatives"]) for i in index[:k]) for k in (1, 2)]
    assert not expected[first[0]] and not expected[first[1]] and any(expected)
    module.eval()  # no dropout: the step can be recomputed
    towers = module.towers
    q = F.normalize(towers.encode_question(**batch["question"]), dim=-1)
    a = F.normalize(towers.encode_answer(**batch["answer"]), dim=-1)
    n = F.normalize(towers.encode_answer(**batch["negatives"]), dim=-1)
    candidates = torch.cat([a, n[batch["shared"]]])
    in_batch = F.cross_entropy(20 * q @ candidates.T, torch.arange(4))
    module.distill_weight = 0.0  # the in-batch softmax alone
    torch.testing.assert_close(module.training_step(batch, 0), in_batch, atol=1e-5, rtol=1e-5)


def test_rqa_train_distill_exports_evaluates_and_serves_as_a_pipeline_stage(world, tmp_path):
    from helpers import assert_ranks_fit_scores, eval_conf, pool_scores

    from retrieval_qa.data import load_pool
    from retrieval_qa.evaluation.per_question import beside_run_file, read_per_question
    from retrieval_qa.pipeline.composition import parse_pipeline
    from retrieval_qa.pipeline.run import run_pipeline

    overrides = _overrides(world, tmp_path)
    scored = _score(overrides)
    assert scored["questions"] == 20 and scored["list_size"] == 4
    report = _rqa("train", *overrides)
    assert report["experiment"] == "distill" and report["global_steps"] == 5  # 20 questions / 4
    assert report["data"]["distill"]["questions"] == 20
    assert report["data"]["train"]["pairs"] == 20
    assert {"mrr", "r@1", "r@5"} <= set(report["test"]["metrics"])
    assert report["checkpoint"].endswith("distill/cpu-seed42/model")
    export = tmp_path / "distill" / "cpu-seed42" / "model"
    pool, _ = load_pool("reqa_squad", "dev", world["data"])
    scores = pool_scores(export, pool)
    record = read_per_question(tmp_path / "distill" / "cpu-seed42" / "per_question.jsonl.gz")
    assert_ranks_fit_scores(record, pool, scores, atol=1e-4)
    cfg = parse_pipeline({"name": "student", "top_k": 5, "fusion": {"method": "none"},
                          "retrievers": {"student": {"kind": "dual_encoder",
                                                     "checkpoint": str(export)}}}, "s.yaml")
    out = run_pipeline(cfg, pool, tmp_path / "pipeline", evaluation=eval_conf())
    stage = out["stages"][0]
    assert stage["stage"] == "student"
    assert_ranks_fit_scores(read_per_question(beside_run_file(stage["run_file"])), pool,
                            scores, atol=1e-4)
    st = _rqa("export", "--format", "sentence-transformers", "--checkpoint", export,
              "--output", tmp_path / "st")
    assert st["similarity_fn_name"] == "cosine"
    from sentence_transformers import SentenceTransformer

    from retrieval_qa.models.artifact import load_artifact

    model = SentenceTransformer(str(tmp_path / "st"), device="cpu", local_files_only=True,
                                trust_remote_code=True)
    texts = pool.questions[:3] + [c.text for c in pool.candidates[:3]]
    ours = load_artifact(export)
    torch.testing.assert_close(model.encode_query(texts, convert_to_tensor=True),
                               ours.encode_questions(texts, progress=False), atol=1e-5, rtol=0)
    torch.testing.assert_close(model.encode_document(texts, convert_to_tensor=True),
                               ours.encode_answers(texts, progress=False), atol=1e-5, rtol=0)


def test_training_on_scores_of_other_settings_or_unfinished_is_refused(world, tmp_path):
    overrides = _overrides(world, tmp_path)
    cfg = compose(overrides)
    with pytest.raises(InputFileError, match="no teacher scores.*rqa prepare"):
        method_class(cfg).build(cfg)
    _score(overrides)
    other = compose([*overrides, "data.teacher.list_size=3"])
    with pytest.raises(SettingsMismatchError, match="list_size: 4 -> 3"):
        method_class(other).build(other)
    (tmp_path / "teacher" / "teacher.json").unlink()
    with pytest.raises(InputFileError, match="unfinished"):
        method_class(cfg).build(cfg)
    with pytest.raises(ValueError, match="max_train_pairs must be null"):
        bad = compose([*overrides, "data.max_train_pairs=10"])
        method_class(bad).build(bad)
    code = main(["train", *overrides], stdout=io.StringIO())
    assert code == 2  # unfinished scores: a clear error, no run
