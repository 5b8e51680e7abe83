"""`rqa train` end to end on tiny random towers and a synthetic SQuAD-format data dir:
last-line JSON, export, evaluate --checkpoint, resume, non-finite loss, ENDX export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import (  # setup_dirs: tests/training/conftest.py
    assert_ranks_fit_scores,
    load_experiment,
    pool_scores,
    tiny,
)

from retrieval_qa.cli import main
from retrieval_qa.data import load_pool
from retrieval_qa.evaluation import ledger
from retrieval_qa.evaluation.per_question import RUN_DIR_NAME, beside_run_file, read_per_question
from retrieval_qa.losses import InBatchSoftmaxLoss
from retrieval_qa.models.base import NonFiniteLossError
from retrieval_qa.training.resumable_checkpoints import ResumableCheckpoints
from retrieval_qa.training.run import export_untrained, train


def test_train_reports_exports_and_evaluates(setup_dirs, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ledger.ENV, str(tmp_path / "ledger.jsonl"))
    report = train(tiny(setup_dirs, tmp_path))
    assert report["experiment"] == "dual_gru" and report["profile"] == "cpu"
    assert report["pretrained"] and report["seconds"] > 0 and report["epochs"] == 2
    assert report["machine"]["torch_threads"] == report["threads"]
    assert report["machine"]["device"].startswith("cpu: ")  # every run file names its device
    assert report["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert set(report["test"]["metrics"]) >= {"mrr", "r@1", "r@5", "r@10", "p@1", "mrr@100"}
    assert report["test"]["questions"] == 4 and report["test"]["pool"] == "dev"
    assert "val/r@1" in report["last_val"] and report["best_val_score"] is not None
    record = read_per_question(Path(report["checkpoint"]).parent / report["test"]["per_question"])
    # exact: the record keeps the test's own ranks
    assert {k: round(v, 4) for k, v in record.metrics().items()} == report["test"]["metrics"]
    assert record.header["questions"] == 4 and record.header["pool"] == "dev"
    code = main(["evaluate", "--checkpoint", report["checkpoint"], "--dataset", "reqa_squad",
                 "--pool", "dev", "--data-dir", str(setup_dirs[0] / "data"), "--quiet",
                 "--run-file", str(tmp_path / "dev.jsonl")])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["questions"] == 4
    # rqa evaluate encodes in other batches (longest first, each distinct text once) than
    # the training's test: both rank as the exported model's scores do, up to near-ties
    evaluated = read_per_question(beside_run_file(tmp_path / "dev.jsonl"))
    assert evaluated.header["pool_fingerprint"] == record.header["pool_fingerprint"]
    assert evaluated.ids == record.ids
    # both looks at the test pool are on the ledger: the training's test and the evaluation
    tested, looked = ledger.read(tmp_path / "ledger.jsonl")
    assert (tested["kind"], tested["name"], tested["seed"]) == ("train", "dual_gru", 42)
    assert tested["ranks"] == ledger.ranks_digest(record.ranks)
    assert looked["kind"] == "evaluate" and looked["ranks"] == ledger.ranks_digest(evaluated.ranks)
    pool, _ = load_pool("reqa_squad", "dev", setup_dirs[0] / "data", use_cache=False)
    scores = pool_scores(report["checkpoint"], pool)
    for ranked in (record, evaluated):
        assert_ranks_fit_scores(ranked, pool, scores, atol=1e-4)
    texts = tmp_path / "q.txt"
    texts.write_text("what is fact 1 of place 2?\nwhere is the city?\n")
    code = main(["encode", "--checkpoint", report["checkpoint"], "--input", str(texts),
                 "--output", str(tmp_path / "q.pt"), "--quiet"])
    enc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and enc["texts"] == 2 and torch.load(tmp_path / "q.pt").shape == (2, enc["dim"])


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(setup_dirs, tmp_path,
                                                               monkeypatch):
    straight = train(tiny(setup_dirs, tmp_path / "a", "test_after_fit=false"))
    original = ResumableCheckpoints.on_train_batch_start

    def crash_in_epoch_2(self, trainer, *args):
        if trainer.current_epoch == 1:  # after the first epoch's checkpoint
            raise RuntimeError("crash")
        return original(self, trainer, *args)

    monkeypatch.setattr(ResumableCheckpoints, "on_train_batch_start", crash_in_epoch_2)
    with pytest.raises(RuntimeError, match="crash"):
        train(tiny(setup_dirs, tmp_path / "b", "test_after_fit=false"))
    monkeypatch.undo()
    resumed = train(tiny(setup_dirs, tmp_path / "b", "test_after_fit=false"))
    assert resumed["resumed_from"].endswith("last.ckpt")
    a = torch.load(f"{straight['checkpoint']}/towers.pt")
    b = torch.load(f"{resumed['checkpoint']}/towers.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)
    # exact: restart parity, the same computation (shapes, batches, threads) in one process
    assert resumed["best_val_score"] == straight["best_val_score"]


def test_one_last_checkpoint_when_step_and_validation_checkpoints_meet(setup_dirs, tmp_path):
    report = train(tiny(setup_dirs, tmp_path, "test_after_fit=false",
                        "trainer.checkpoint_every_n_steps=1"))
    names = sorted(p.name for p in (Path(report["checkpoint"]).parent / "checkpoints").iterdir())
    assert names[-1] == "last.ckpt" and len(names) == 2 and names[0].startswith("best-"), names


def test_non_finite_loss_fails_fast_naming_the_step(setup_dirs, tmp_path, monkeypatch):
    monkeypatch.setattr(InBatchSoftmaxLoss, "compute_loss_from_embeddings",
                        lambda self, q, a, w=None: (q.sum() + a.sum()) * float("nan"))
    with pytest.raises(NonFiniteLossError, match="at global step 0 .*batch 0"):
        train(tiny(setup_dirs, tmp_path, "test_after_fit=false"))


def test_endx_trains_and_exports_the_towers_only(setup_dirs, tmp_path):
    cfg = tiny(setup_dirs, tmp_path, "model=endx", "model.cross.cross_attention.num_heads=2",
               "trainer.max_epochs=1", "test_after_fit=false")
    cfg.experiment = "endx_gru"
    report = train(cfg)
    state = torch.load(f"{report['checkpoint']}/towers.pt")
    assert state and not any("cross" in k for k in state)
    ckpt = torch.load(report["best_training_checkpoint"], weights_only=False)["state_dict"]
    assert any(k.startswith("cross_branch.") for k in ckpt)


def test_export_untrained_baseline(setup_dirs, tmp_path, capsys):
    cfg = tiny(setup_dirs, tmp_path)
    report = export_untrained(cfg, tmp_path / "untrained")
    assert report["trained"] is False
    code = main(["evaluate", "--checkpoint", report["checkpoint"], "--dataset", "reqa_squad",
                 "--pool", "dev", "--data-dir", str(setup_dirs[0] / "data"), "--quiet"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and out["questions"] == 4


def test_endx_loss_trace_prints_every_term(setup_dirs, tmp_path, capsys):

    trace = load_experiment("endx_loss_trace")
    cfg = tiny(setup_dirs, tmp_path)
    overrides = ["experiment=endx_gru", "profile=cpu", "model.cross.cross_attention.num_heads=2",
                 *(f"{k}={v}" for k, v in (
                     ("model.towers.encoder.pretrained", cfg.model.towers.encoder.pretrained),
                     ("model.towers.encoder.embedding_dim", 16),
                     ("model.towers.encoder.hidden_size", 16), ("model.towers.pooler.hops", 2),
                     ("model.towers.pooler.attention_dim", 8), ("data.data_dir", cfg.data.data_dir),
                     ("data.max_train_pairs", "null"), ("data.max_val_questions", "null"),
                     ("data.batch_size", 8)))]
    assert trace.main(["--steps", "3", "--every", "1", *overrides]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [r["step"] for r in lines[:-1]] == [0, 1, 2] and lines[-1]["steps"] == 3
    first = lines[0]
    assert {"dual_loss", "cross_loss", "gam_loss", "kl_qq", "kl_aa", "kl_aq", "kl_qa", "w_qq",
            "dual_q_norm", "cross_q_norm", "loss"} <= set(first)
    assert first["w_qq"] == 0.0 and lines[2]["w_qq"] > 0  # the ramp starts at 0


def test_bf16_mixed_training_runs_end_to_end_on_cpu(setup_dirs, tmp_path):
    # ENDX: both losses (in-batch softmax on each side, GAM) under autocast
    cfg = tiny(setup_dirs, tmp_path, "model=endx", "model.cross.cross_attention.num_heads=2",
               "trainer.precision=bf16-mixed", "trainer.max_epochs=1", "test_after_fit=false")
    cfg.experiment = "endx_gru"
    report = train(cfg)
    assert report["trainer"]["precision"] == "bf16-mixed"
    assert report["epochs"] == 1 and report["global_steps"] > 0
    assert report["last_val"] and all(
        torch.isfinite(torch.tensor(v)) for v in report["last_val"].values())


def test_training_with_the_cache_ends_with_the_plain_weights(setup_dirs, tmp_path):
    """Gradient caching (model.gradient_cache.mini_batch_size) is the same training."""

    def run(out, *extra):
        return train(tiny(setup_dirs, out, "trainer.max_epochs=1", "test_after_fit=false",
                          *extra))

    plain = run(tmp_path / "plain")
    cached = run(tmp_path / "cached", "model.gradient_cache.mini_batch_size=3")
    assert cached["global_steps"] == plain["global_steps"] > 0
    a = torch.load(f"{plain['checkpoint']}/towers.pt")
    b = torch.load(f"{cached['checkpoint']}/towers.pt")
    for k in a:  # mini-batches sum the gradients in another order (test_grad_cache.py)
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=k)


def test_a_long_encoding_resumes_without_redoing_finished_shards(setup_dirs, tmp_path,
                                                                    monkeypatch):
    from retrieval_qa.models import inference
    from retrieval_qa.models.artifact import load_artifact

    report = train(tiny(setup_dirs, tmp_path, "trainer.max_epochs=1", "test_after_fit=false"))
    texts = [f"what is fact {i} of place {i % 7}?" for i in range(23)]
    expected = load_artifact(report["checkpoint"]).encode_questions(texts, batch_size=4,
                                                                    progress=False)
    monkeypatch.setattr(inference, "SHARD_BATCHES", 1)  # shards of 4 texts: 6 shards
    model = load_artifact(report["checkpoint"])
    model.work_dir = tmp_path / "work"
    calls = []
    original = model.towers.encode_question

    def crashing(**inputs):
        calls.append(inputs["input_ids"].shape[0])
        if len(calls) == 4:
            raise RuntimeError("simulated crash")
        return original(**inputs)

    monkeypatch.setattr(model.towers, "encode_question", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        model.encode_questions(texts, batch_size=4, progress=False)
    assert len(list((tmp_path / "work").glob("question-*.pt"))) == 3  # finished shards kept
    calls.clear()
    monkeypatch.setattr(model.towers, "encode_question", lambda **i: calls.append(1) or original(**i))
    resumed = model.encode_questions(texts, batch_size=4, progress=False)
    assert len(calls) == 3  # only the 3 unfinished shards are encoded again
    torch.testing.assert_close(resumed, expected)
    calls.clear()  # other texts (a subset) are another job: their own shards, encoded anew
    subset = model.encode_questions(texts[:5], batch_size=4, progress=False)
    assert len(calls) == 2 and len(list((tmp_path / "work").glob("question-*.pt"))) == 8
    torch.testing.assert_close(subset, expected[:5])
    calls.clear()  # a model of the same settings but other weights (retrained): its own shards
    other = load_artifact(report["checkpoint"])
    other.work_dir = tmp_path / "work"
    with torch.no_grad():
        next(other.towers.parameters()).add_(1.0)
    monkeypatch.setattr(other.towers, "encode_question", lambda **i: calls.append(1) or
                        type(other.towers).encode_question(other.towers, **i))
    other.encode_questions(texts, batch_size=4, progress=False)
    assert len(calls) == 6 and len(list((tmp_path / "work").glob("question-*.pt"))) == 14


def test_the_gpu_input_path_trains_to_the_same_result_on_cpu(setup_dirs, tmp_path, monkeypatch):
    """conf/profile/gpu.yaml's input path (loader workers, lengths padded to multiples of 16)
    computes what the plain path does. Exact: the batches (ids, masks, order; the padding
    masked), the step count, the test pool. Within a tolerance: the floats, since a wider
    input changes the order of float32 reductions. Weights after this epoch differed by
    1.5e-7 on one CPU and 6.0e-7 on another, while training moves each weight tensor by about
    2e-2: 1e-5 is well above the one and far below the other. The ranks of this tiny random
    model are not compared: candidates of the same tokens ([UNK] for unknown words) score
    within 1e-6 of each other and swap; each run's ranks fit the scores."""
    from retrieval_qa.models.base import RetrievalModule

    batches = []

    def record(self, batch, batch_idx):  # what the step gets, padding cut at the longest row
        width = {s: int(batch[s]["attention_mask"].sum(1).max()) for s in ("question", "answer")}
        batches[-1].append((batch["index"].tolist(), {
            s: {k: v[:, :width[s]].tolist() for k, v in batch[s].items()} for s in width},
            {s: batch[s]["input_ids"].shape[1] for s in width}))

    monkeypatch.setattr(RetrievalModule, "on_train_batch_start", record)
    runs = []
    for out, extra in (("a", ()), ("b", ("data.num_workers=2", "data.pad_to_multiple_of=16"))):
        batches.append([])
        runs.append(train(tiny(setup_dirs, tmp_path / out, "trainer.max_epochs=1", *extra)))
    plain, gpu_path = runs
    assert gpu_path["data"]["pad_to_multiple_of"] == 16 and gpu_path["data"]["num_workers"] == 2
    assert gpu_path["global_steps"] == plain["global_steps"] == len(batches[0]) > 0
    assert [b[:2] for b in batches[1]] == [b[:2] for b in batches[0]]
    assert all(w % 16 == 0 for b in batches[1] for w in b[2].values())
    a = torch.load(f"{plain['checkpoint']}/towers.pt")
    b = torch.load(f"{gpu_path['checkpoint']}/towers.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-5, msg=k)
    pool, _ = load_pool("reqa_squad", "dev", setup_dirs[0] / "data", use_cache=False)
    scores = [pool_scores(r["checkpoint"], pool) for r in runs]  # about 1.9; 1e-6 apart here
    torch.testing.assert_close(scores[1], scores[0], rtol=1e-4, atol=1e-4)
    records = [read_per_question(Path(r["checkpoint"]).parent / RUN_DIR_NAME) for r in runs]
    assert records[1].header["pool_fingerprint"] == records[0].header["pool_fingerprint"]
    assert records[1].ids == records[0].ids
    for ranked in records:
        assert_ranks_fit_scores(ranked, pool, scores[0], atol=1e-4)
