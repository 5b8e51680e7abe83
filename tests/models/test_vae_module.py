"""VAEModule (Dual-VAEs / Cross-VAEs): which latent feeds which decoder, the terms of eq. 7
and their logs, the export (encoders only), and a tiny Lightning fit with validation."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from helpers import TINY_SQUAD, WORDS, from_conf, synthetic_squad, write_json_gz
from omegaconf import OmegaConf
from transformers import BertTokenizerFast

from retrieval_qa.models.artifact import load_artifact
from retrieval_qa.models.inference import DualEncoderInference
from retrieval_qa.models.vae import VAEModule
from retrieval_qa.training.compose import compose

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_WORDS = SPECIALS + WORDS + [str(i) for i in range(10)]
VOCAB, LATENT = len(VOCAB_WORDS), 6


def make(mode: str = "cross", *overrides: str) -> VAEModule:
    """The experiment's model config from conf/, shrunk; passed as keyword arguments the way
    a ``_target_`` instantiation does (``_target_`` removed)."""
    cfg = compose([f"experiment={mode}_vae", "profile=cpu", "model.decoder.type=gru",
                   f"model.towers.encoder.vocab_size={VOCAB}",
                   "model.towers.encoder.embedding_dim=8", "model.towers.encoder.hidden_size=12",
                   "model.towers.encoder.dropout=0.0", "model.towers.pooler.hops=2",
                   "model.towers.pooler.attention_dim=5", f"model.towers.latent_dim={LATENT}",
                   "model.decoder.hidden_size=10", "model.decoder.dropout=0.0", *overrides])
    kwargs = OmegaConf.to_container(cfg.model, resolve=True)
    assert kwargs.pop("_target_") == "retrieval_qa.models.vae.VAEModule"
    torch.manual_seed(0)
    return VAEModule(**kwargs, evaluation=OmegaConf.to_container(cfg.eval))


def batch(size: int = 4) -> dict:
    gen = torch.Generator().manual_seed(1)

    def side(length: int) -> dict:
        ids = torch.randint(5, VOCAB, (size, length), generator=gen)
        mask = torch.ones_like(ids)
        mask[0, -2:] = 0
        return {"input_ids": ids * mask, "attention_mask": mask}

    return {"question": side(5), "answer": side(7)}


def touched(module: torch.nn.Module) -> bool:
    return any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())


def test_paper_defaults_of_the_model_config():
    cfg = compose(["experiment=cross_vae"])
    m = cfg.model
    assert (m._target_, m.mode, m.towers.latent_dim, m.towers.encoder.hidden_size) == (
        "retrieval_qa.models.vae.VAEModule", "cross", 512, 768)
    assert (m.optimizer._target_, m.optimizer.lr, cfg.trainer.max_epochs) == (
        "torch.optim.Adam", 1e-5, 100)
    assert m.towers.encoder._target_.endswith("RecurrentTokenEncoder") and \
        m.towers.encoder.kind == "gru"
    assert m.towers.pooler._target_.endswith("MultiHopSelfAttentionPooler")
    assert m.decoder._target_.endswith("GRUDecoder") and m.decoder.num_layers == 1
    assert m.loss.kl.rate_factor == 2.0 and m.loss.kl.max_beta == 1.0
    assert compose(["experiment=dual_vae"]).model.mode == "dual"
    cpu = compose(["experiment=dual_vae", "profile=cpu"])
    assert "REDUCED" in cpu.description and cpu.data.max_train_pairs == 20000
    assert cpu.model.towers.encoder.hidden_size == 256 and cpu.model.decoder._target_.endswith("MLPDecoder")


@pytest.mark.parametrize("experiment", ["dual_vae", "cross_vae"])
def test_cpu_profile_reconstruction_is_a_per_token_mean_and_says_so(experiment):
    """The paper profile keeps the summed NLL (the ELBO); the CPU profile averages it per
    token (the summed NLL kept short runs at chance) and its description says so."""
    assert compose([f"experiment={experiment}"]).model.loss.reconstruction == "sequence"
    cpu = compose([f"experiment={experiment}", "profile=cpu"])
    assert cpu.model.loss.reconstruction == "token"
    assert (cpu.model.loss.alpha, cpu.model.loss.gamma) == (1.0, 1.0)
    assert "CHANGED" in cpu.description and "loss.reconstruction=token" in cpu.description


@pytest.mark.parametrize("mode", ["dual", "cross"])
def test_which_latent_reaches_which_decoder(mode):
    module = make(mode)
    zq = torch.randn(4, LATENT, requires_grad=True)
    za = torch.randn(4, LATENT, requires_grad=True)
    recon_q, recon_a = module.reconstruction_terms(zq, za, batch())
    dq_zq, dq_za = torch.autograd.grad(recon_q, (zq, za), allow_unused=True, retain_graph=True)
    da_zq, da_za = torch.autograd.grad(recon_a, (zq, za), allow_unused=True)
    if mode == "cross":  # eq. 4: z_q generates the answer, z_a the question
        assert da_zq is not None and da_zq.abs().sum() > 0 and da_za is None
        assert dq_za is not None and dq_za.abs().sum() > 0 and dq_zq is None
    else:  # each latent reconstructs its own text
        assert dq_zq is not None and dq_zq.abs().sum() > 0 and dq_za is None
        assert da_za is not None and da_za.abs().sum() > 0 and da_zq is None


@pytest.mark.parametrize("mode", ["dual", "cross"])
def test_the_answer_reconstruction_trains_the_encoder_of_the_mode(mode):
    module = make(mode)
    (zq, *_), (za, *_) = module.towers.latents(*(batch()[k] for k in ("question", "answer")))
    _, recon_a = module.reconstruction_terms(zq, za, batch())
    recon_a.backward()
    question_head = touched(module.towers.question_tower.head)
    answer_head = touched(module.towers.answer_tower.head)
    assert (question_head, answer_head) == ((True, False) if mode == "cross" else (False, True))
    assert touched(module.answer_decoder.rnn) and not touched(module.question_decoder.rnn)


def test_objective_terms_and_logs():
    module = make("cross", "model.loss.alpha=2.0", "model.loss.gamma=0.5")
    loss, logs = module.losses(batch(), beta=0.3)
    assert {"train/recon", "train/kl", "train/match", "train/beta", "train/loss"} <= set(logs)
    assert logs["train/beta"] == 0.3
    expected = 2.0 * logs["train/recon"] + 0.3 * logs["train/kl"] + 0.5 * logs["train/match"]
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert logs["train/recon"].item() == pytest.approx(
        (logs["train/recon_question"] + logs["train/recon_answer"]).item())
    loss.backward()
    assert touched(module.match_loss) and touched(module.towers)


@pytest.mark.parametrize("match_on", ["mean", "sample"])
def test_the_matching_term_reads_the_means_by_default(match_on):
    module = make("cross", f"model.loss.match_on={match_on}").train()
    b = batch()
    torch.manual_seed(3)
    _, logs = module.losses(b, beta=1.0)
    mean_q, _ = module.towers.question_tower.posterior(**b["question"])
    mean_a, _ = module.towers.answer_tower.posterior(**b["answer"])
    on_means = module.match_loss(mean_q, mean_a).item()
    assert (logs["train/match"].item() == pytest.approx(on_means)) == (match_on == "mean")


def test_mlp_decoder_switch():
    module = make("dual", "model.decoder.type=mlp")
    assert type(module.question_decoder).__name__ == "MLPDecoder"
    loss, _ = module.losses(batch(), beta=1.0)
    assert torch.isfinite(loss)


def test_the_export_holds_the_encoders_only(tmp_path):
    module = make("cross").eval()
    state = module.towers.state_dict()
    assert state and all(k.startswith(("question_tower.", "answer_tower.")) for k in state)
    assert not any("decoder" in k or "match" in k for k in state)
    exported = {t.data_ptr() for t in state.values()}
    shared = {module.towers.question_tower.token_embedder.embedding.weight.data_ptr(),
              module.towers.answer_tower.token_embedder.embedding.weight.data_ptr()}
    for decoder in (module.question_decoder, module.answer_decoder):
        own = {p.data_ptr() for p in decoder.parameters()} - shared  # tied token tables aside
        assert own and not own & exported
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB_WORDS)})
    module.tokenizer = tokenizer
    module.inference_meta = {"max_question_length": 16, "max_answer_length": 24}
    folder = module.export(tmp_path / "model")
    saved = torch.load(folder / "towers.pt")
    assert saved.keys() == state.keys()
    loaded = load_artifact(folder)  # the one loader: model.json names the towers' builder
    meta = {**module.inference_meta, "similarity": module.similarity}
    texts = ["what is the city", "where is fact 3"]
    original = DualEncoderInference(module.towers, tokenizer, meta)
    assert loaded.towers.output_dim == LATENT
    assert torch.allclose(loaded.encode_questions(texts, progress=False),
                          original.encode_questions(texts, progress=False))


@pytest.mark.usefixtures("one_thread")  # restored after the test
def test_a_tiny_fit_with_validation(tmp_path):
    write_json_gz(tmp_path / "data" / "squad" / "train-v1.1.json.gz", synthetic_squad())
    write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB_WORDS)})
    data = from_conf("data", "reqa_squad", tokenizer=tokenizer, data_dir=tmp_path / "data",
                     batch_size=8, eval_batch_size=32, max_question_length=16,
                     max_answer_length=24)
    module = make("cross", "model.decoder.output_vocab=train", "model.optimizer.lr=1e-2")
    before = {k: v.clone() for k, v in module.towers.state_dict().items()}
    trainer = pl.Trainer(max_steps=3, val_check_interval=3, num_sanity_val_steps=0,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu", devices=1,
                         use_distributed_sampler=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=data)
    assert trainer.global_step == 3
    metrics = trainer.callback_metrics
    assert {"val/mrr", "val/r@1", "train/recon", "train/kl", "train/match",
            "train/loss"} <= set(metrics)
    assert 0 < float(metrics["train/beta"]) <= 1
    kept = module.question_decoder.output.kept
    assert kept is not None and 0 < kept.numel() < VOCAB
    assert VOCAB_WORDS.index("[CLS]") not in kept.tolist()
    after = module.towers.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.usefixtures("one_thread")
def test_rqa_evaluate_of_a_vae_prints_the_sse_of_the_one_to_many_subset(tmp_path, capsys):
    """`rqa evaluate --checkpoint <VAE export> --min-questions-per-answer N`: the JSON holds the
    SSE of Cross-VAEs Table 3 over the subset's questions (the latent means, l2-normalised);
    without the flag there is no subset and no SSE."""
    import copy
    import json

    from retrieval_qa.cli import main

    module = make("cross").eval()
    module.tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB_WORDS)})
    module.inference_meta = {"max_question_length": 16, "max_answer_length": 24}
    folder = module.export(tmp_path / "model")
    dev = copy.deepcopy(TINY_SQUAD)  # a second question on "Berlin is in Germany."
    dev["data"][0]["paragraphs"][0]["qas"].append(
        {"id": "q6", "question": "Which country is Berlin in?",
         "answers": [{"answer_start": 70, "text": "Germany"}]})
    write_json_gz(tmp_path / "data" / "squad" / "dev-v1.1.json.gz", dev)
    common = ["evaluate", "--checkpoint", str(folder), "--dataset", "reqa_squad", "--pool",
              "dev", "--data-dir", str(tmp_path / "data"), "--quiet", "--no-cache"]
    assert main([*common, "--min-questions-per-answer", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out["questions"], out["sse_pairs"], out["sse_answers"]) == (2, 1, 1)
    q = load_artifact(folder).encode_questions(["Where is Berlin?", "Which country is Berlin in?"],
                                               progress=False)
    assert q.shape[1] == LATENT  # the latent means
    q = torch.nn.functional.normalize(q, dim=-1)
    assert out["sse"] == pytest.approx(float(((q[0] - q[1]) ** 2).sum()), abs=1e-4)
    assert 0 < out["sse"] <= 4 and "sse_definition" in out
    assert main(common) == 0
    full = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert full["questions"] == 5 and "sse" not in full  # "Where is Berlin?" asked twice
