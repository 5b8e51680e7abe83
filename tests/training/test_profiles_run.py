"""Every experiment's `paper` and `gpu` profile runs: composed as `rqa train` composes it, its
real architecture built (BERT-base, T5 1.1 and MiniLM as tiny random models of the same
classes under their own names, resolved through $RQA_PRETRAINED_DIR; the packaged MiniLM
replaced by a tiny 6-layer BertModel), trained two steps on tiny synthetic data and evaluated
on a tiny pool. Only what the tiny data cannot hold is overridden: batch sizes, the number of
training batches (2) and epochs (1), the validation sample, and the width of from-scratch
towers (768 -> 48: the paper's widths cost minutes on a CPU); every other model setting is
the profile's own. Data the tests cannot have is made by the suite's test helpers: GloVe as tiny
random vectors, MultiReQA files from synthetic SQuAD, a mined-pairs folder from the miner
with stand-in scorer and retriever, a tiny exported dense retriever.

Compile: a gpu profile's ``trainer.compile: reduce-overhead`` makes torch.compile (inductor)
compile on the CPU, 20-35 s a run. It stays on for one gpu profile per family of compiled
token encoders (class and checkpoint, :func:`_compile_family`: the first experiment of each,
today `ade`, MiniLM towers; no from-scratch tower compiles under a gpu profile); the other gpu
profiles run with ``trainer.compile=null``, everything else theirs. Compile is covered
elsewhere too: tests/training/test_interrupt.py (a compiler that fails falls back to eager,
same weights; an unknown mode refused), tests/training/test_compile.py (the fp32 attention
guard), and on a GPU the device checklist's smoke items, which run every gpu profile with its
own compile (experiments/device_check.py, checked by tests/test_device_check.py)."""

from __future__ import annotations

import functools
import io
import json

import numpy as np
import pytest
from helpers import TINY_SQUAD, make_dirs, save_tiny_bert_model, save_tiny_t5
from mining_helpers import (
    BagOfWordsRetriever,
    HashScorer,
    save_tiny_retriever,
    save_tokenizer,
    write_multireqa_dir,
)
from omegaconf import OmegaConf

from experiments.device_check import SAME_GPU_PROFILE
from retrieval_qa import pretrained
from retrieval_qa.cli import main
from retrieval_qa.config import conf_names
from retrieval_qa.training.compose import compose, load_experiment

pytestmark = [pytest.mark.usefixtures("one_thread"),
              # a module left in eval mode trains without its dropout (Lightning keeps modes)
              pytest.mark.filterwarnings(r"error:Found \d+ module\(s\) in eval mode")]

EXPERIMENTS = conf_names("experiment")
PROFILES = ("paper", "gpu")
GLOVE_WORDS = ("the a is of what where who fact place city about question paris berlin france "
               "capital which form number ? .").split() + [str(i) for i in range(60)]


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    """Tiny checkpoints under their hub names, a packaged-MiniLM stand-in, the data dirs."""
    root = tmp_path_factory.mktemp("profiles")
    tok = save_tokenizer(root / "tokenizer")
    hub = root / "hub"
    save_tiny_bert_model(hub / "bert-base-uncased", tok)
    save_tiny_t5(hub / "google" / "t5-v1_1-base", tok, d_model=24)
    save_tiny_bert_model(root / "minilm", tok, layers=6)   # contextual:minilm weighs 7 layers
    reqa, _ = make_dirs(root / "reqa", TINY_SQUAD)
    mining = write_multireqa_dir(root / "mining")
    retriever = save_tiny_retriever(root / "retriever", root / "tokenizer")
    return {"root": root, "hub": hub, "minilm": root / "minilm", "reqa": reqa / "data",
            "mining": mining, "retriever": retriever, "mined": root / "mined"}


@pytest.fixture
def offline_tiny(tiny_world, monkeypatch, tmp_path):
    """Resolution of every named checkpoint to the tiny models; GloVe as tiny vectors."""
    from retrieval_qa.embeddings import base
    from retrieval_qa.embeddings.static import read_vectors

    monkeypatch.setenv(pretrained.PRETRAINED_DIR_ENV, str(tiny_world["hub"]))
    monkeypatch.setenv("RQA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pretrained, "packaged_minilm_path", lambda: tiny_world["minilm"])
    monkeypatch.setattr(pretrained, "_in_hub_cache", lambda name: False)
    monkeypatch.setattr(pretrained, "network_allowed", lambda allow=None: False)
    words = GLOVE_WORDS
    rng = np.random.default_rng(0)
    np.save(tmp_path / "m.npy", rng.standard_normal((len(words), 16)).astype(np.float32))
    (tmp_path / "vocab.txt").write_text("\n".join(words))
    vectors = read_vectors("tiny", tmp_path / "m.npy", tmp_path / "vocab.txt")
    monkeypatch.setattr(base, "load_static", lambda name: vectors)
    return tiny_world


def _mined(world) -> str:
    """A finished `rqa mine` folder over the tiny MultiReQA training pool (made once)."""
    folder = world["mined"]
    if not (folder / "summary.json").is_file():
        from retrieval_qa.data import load_pool
        from retrieval_qa.mining.miner import Miner, MiningSettings

        pool, _ = load_pool("multireqa_squad", "train", world["mining"], use_cache=False)
        Miner(pool, BagOfWordsRetriever(), HashScorer(), folder,
              MiningSettings(shard_questions=64), progress=False).run()
    return str(folder)


def _teacher_scores(world, overrides: list[str]) -> list[str]:
    """The distillation teacher's scores for ``overrides`` (a tiny reranker, dense retriever
    and pipeline over the tiny ReQA data, made once; tests/distill_helpers.py), written by
    the suite's command; returns the overrides that point at them."""
    from distill_helpers import make_teacher_world
    from transformers import BertTokenizerFast

    if "distill" not in world:
        world["distill"] = make_teacher_world(
            world["root"] / "distill", world["reqa"],
            BertTokenizerFast.from_pretrained(world["root"] / "tokenizer"))
    out = next(o for o in overrides if o.startswith("output_dir=")).split("=", 1)[1]
    overrides = [*overrides, f"data.teacher.pipeline={world['distill']['pipeline']}",
                 f"data.teacher.output={out}/teacher"]
    assert main(["prepare", *overrides, "--quiet"], stdout=io.StringIO()) == 0
    return overrides


def _overrides(experiment: str, profile: str, world, out) -> list[str]:
    """The test's data for a run, chosen by what its composed data config asks for (its
    data module, its datasets, a mined folder it requires), never by the experiment's name:
    a new method on one of these data modules needs no edit here."""
    common = [f"experiment={experiment}", f"profile={profile}", f"output_dir={out}",
              "logger.name=none", "trainer.enable_progress_bar=false", "threads=1",
              "trainer.max_epochs=1", "trainer.max_steps=-1", "trainer.limit_train_batches=2"]
    data = compose(common[:2]).data
    module = data._target_.rsplit(".", 1)[-1]
    if module == "DistillDataModule":  # the profile's own lists, of every question it can have
        return _teacher_scores(world, [*common, f"data.data_dir={world['reqa']}",
                                       "data.batch_size=4", "data.max_val_questions=10"])
    if module == "MiningClassifierData":
        return [*common, f"data.data_dir={world['mining']}", "data.batch_size=4",
                f"data.dense_retriever={world['retriever']}"]
    if module == "paragraph_vector_data":
        return [*common, f"data.data_dir={world['reqa']}", "data.batch_size=16",
                "data.val_questions=20"]
    if str(data.get("train_dataset", "")).startswith("multireqa"):
        mined = [f"data.mined={_mined(world)}"] if data.get("mined") == "required" else []
        return [*common, f"data.data_dir={world['mining']}", "data.batch_size=4",
                "data.max_val_questions=10", *mined]
    return [*common, f"data.data_dir={world['reqa']}", "data.batch_size=4",
            "data.max_val_questions=10"]


def _narrower(cfg) -> list[str]:
    """Test-only widths for the from-scratch towers (768 -> 48, still 12 heads' multiple;
    VAE latent 512 -> 32): the paper's widths cost minutes here, and the width is the one
    thing the tiny data cannot tell apart."""
    towers = cfg.model.get("towers")
    if towers is None or towers.encoder._target_.endswith(".PretrainedTokenEncoder"):
        return []
    narrow = ["model.towers.encoder.hidden_size=48"]
    if "decoder" in cfg.model:
        narrow += ["model.decoder.hidden_size=48", "model.towers.latent_dim=32"]
    return narrow


def _compile_family(cfg) -> tuple | None:
    """What a run's ``trainer.compile`` compiles: its token encoders (towers and cross
    encoder) as sorted (class, checkpoint) pairs, "from scratch" for a random one, or the
    method's class when it has neither; None when it compiles nothing."""
    if not cfg.trainer.get("compile"):
        return None
    encoders = set()
    for block in ("towers", "cross"):
        node = cfg.model.get(block)
        if node is not None and node.get("encoder") is not None:
            target = node.encoder._target_
            encoders.add((target.rsplit(".", 1)[-1],
                          node.encoder.get("pretrained") if target.endswith(
                              ".PretrainedTokenEncoder") else "from scratch"))
    return tuple(sorted(encoders)) or (cfg.model._target_,)


@functools.cache
def _compiled_case() -> dict[tuple, str]:
    """Each family of :func:`_compile_family` -> the experiment whose gpu profile keeps its
    compile here (the first of :data:`EXPERIMENTS` in that family)."""
    first: dict[tuple, str] = {}
    for experiment in EXPERIMENTS:
        family = _compile_family(compose([f"experiment={experiment}", "profile=gpu"]))
        if family is not None and experiment not in SAME_GPU_PROFILE:
            first.setdefault(family, experiment)
    return first


def _named_checkpoints(cfg) -> set[str]:
    model = cfg.model
    names = {model.get("pretrained")}
    towers = model.get("towers")
    if towers is not None:
        names.add(towers.encoder.get("pretrained"))
    return {n for n in names if n}


def test_every_experiment_has_a_gpu_profile():
    missing = [e for e in EXPERIMENTS if "gpu" not in load_experiment(e).get("profiles", {})]
    assert not missing, f"experiments without a gpu profile: {missing}"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("variant, base", SAME_GPU_PROFILE.items())
def test_cpu_recipe_variants_keep_their_bases_paper_and_gpu_profiles(variant, base, profile):
    """distill_hour's paper and gpu profiles are distill's: the run below and the device
    checklist cover them under distill's name."""
    def composed(name):
        cfg = OmegaConf.to_container(compose([f"experiment={name}", f"profile={profile}"]))
        return {k: v for k, v in cfg.items() if k != "experiment"}

    assert composed(variant) == composed(base)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("experiment", [e for e in EXPERIMENTS if e not in SAME_GPU_PROFILE])
def test_profile_trains_two_steps_and_evaluates(experiment, profile, offline_tiny, tmp_path):
    overrides = _overrides(experiment, profile, offline_tiny, tmp_path / "runs")
    cfg = compose(overrides)
    overrides += _narrower(cfg)
    family = _compile_family(cfg)
    compiled = family is not None and _compiled_case()[family] == experiment
    if family is not None and not compiled:  # see the module docstring
        overrides.append("trainer.compile=null")
    out = io.StringIO()
    assert main(["train", *overrides], stdout=out) == 0
    report = json.loads(out.getvalue().strip().splitlines()[-1])
    assert report["experiment"] == experiment and report["profile"] == profile
    assert report["global_steps"] == 2
    assert report["trainer"]["compile"] == (cfg.trainer.compile if compiled else None)
    assert report["test"], "no test metrics"
    text = json.dumps(report)
    assert "standing in" not in text              # the named architecture, not a fallback
    for name in _named_checkpoints(cfg) - {"minilm"}:
        assert f"{name} (copy in $RQA_PRETRAINED_DIR" in text, name
