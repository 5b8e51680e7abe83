"""Pipelines composed by the experiments' composer: conf/pipeline.yaml under the file and its
`extends:` parents, strict keys that name what was meant, key=value settings, each stage
block over its kind's conf/pipeline/stages file and built by the registry (a `kind` or a
`_target_`), the ranges of conf/ranges.yaml, and `rqa evaluate --pipeline NAME --cfg`."""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path

import pytest
import torch
import yaml
from helpers import eval_conf
from omegaconf import OmegaConf

from retrieval_qa.cli import main
from retrieval_qa.config import COMMAND_LINE, conf_names, model_defaults
from retrieval_qa.config.ranges import leaves, load_rules, out_of_range, rule_for
from retrieval_qa.errors import OutOfRangeError, UnknownKeyError, UsageError
from retrieval_qa.evaluation.search import DenseScorer
from retrieval_qa.pipeline.composition import load_pipeline, parse_pipeline
from retrieval_qa.pipeline.retrievers import BM25Retriever
from retrieval_qa.pipeline.run import run_pipeline
from tests.pipeline.pools import tiny_pool

CONF = Path(__file__).resolve().parents[2] / "conf"
TWO = {"top_k": 3, "retrievers": {"bm25": {"kind": "bm25"},
                                  "ctx": {"kind": "bm25", "settings": {"with_context": True}}},
       "fusion": {"method": "convex", "weights": {"bm25": 1, "ctx": 3}}}


class WordCountRetriever:
    """A retriever of this test's own, named by ``_target_``: bag-of-words vectors."""

    def __init__(self, *, name: str, vocabulary: list[str], scale: float) -> None:
        self.name, self.vocabulary, self.scale = name, vocabulary, scale

    def _vectors(self, texts):
        return torch.tensor([[self.scale * t.lower().count(w) for w in self.vocabulary]
                             for t in texts], dtype=torch.float32)

    def scorer(self, pool, progress=False):
        return DenseScorer(self._vectors(pool.questions),
                           self._vectors([c.text for c in pool.candidates]))

    def run_settings(self, top_k):
        return {"kind": "word_count", "top_k": top_k, "vocabulary": self.vocabulary}


def _paths() -> list[str]:
    return conf_names("pipeline") + [str(p) for sub in ("seeds", "ablation")
                                     for p in sorted((CONF / "pipeline" / sub).glob("*.yaml"))]


@functools.cache
def _compositions() -> dict:
    """Every committed pipeline, and two that set what none of them sets (fusion weights,
    BM25's k1 and b)."""
    out = {name: load_pipeline(name) for name in _paths()}
    out["weights"] = parse_pipeline(TWO, "weights.yaml")
    out["bm25 k1 b"] = load_pipeline("bm25_context", ["retrievers.bm25_context.settings.k1=0.9",
                                                      "retrievers.bm25_context.settings.b=0.4"])
    return out


def pipeline_leaves() -> dict[str, list]:
    """Each dotted key of the compositions with its values (for the ranges' tests)."""
    values: dict[str, list] = {}
    for p in _compositions().values():
        for key, value in leaves(p.cfg):
            values.setdefault(key, []).append(value)
    return values


def test_every_pipeline_composes_within_its_ranges_and_each_number_has_a_rule():
    rules = load_rules()
    assert {n: out_of_range(p.cfg, rules) for n, p in _compositions().items()
            if out_of_range(p.cfg, rules)} == {}
    needs = {k for k, vs in pipeline_leaves().items()
             if any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vs)
             or all(v is None for v in vs)}
    assert {"top_k", "fusion.rrf_k", "reranker.weight", "retrievers.minilm.batch_size",
            "retrievers.bm25_context.settings.k1", "fusion.weights.ctx"} <= needs
    assert sorted(k for k in needs if rule_for(k, rules) is None) == []


def test_each_stage_block_takes_its_kinds_settings_and_is_built_by_the_registry():
    p = load_pipeline("hybrid_ft_rerank")
    assert [type(r).__name__ for r in p.retrievers] == \
        ["BM25Retriever", "BM25Retriever", "DenseRetriever", "DenseRetriever"]
    assert type(p.reranker).__name__ == "CrossEncoderStage" and p.reranker.top_k == 5
    # hybrid_ft's block gives no paragraph_weight: its kind's file does
    assert p.cfg.retrievers.minilm_ft.paragraph_weight == 0.0
    assert p.sources["retrievers.minilm_ft.paragraph_weight"] == \
        "conf/pipeline/stages/dual_encoder.yaml"
    assert p.cfg.reranker.kind == "cross_encoder"  # the kind of a block that names none
    # the class named by its _target_ takes the same settings
    named = parse_pipeline({"retrievers": {"d": {
        "_target_": "retrieval_qa.pipeline.retrievers.DenseRetriever", "checkpoint": "m"}}},
        "t.yaml")
    assert named.retrievers[0].batch_size == 128 and named.retrievers[0].name == "d"


def test_a_retriever_of_ones_own_is_named_by_its_target_and_runs(tmp_path):
    target = f"{__name__}.WordCountRetriever"
    raw = {"top_k": 4, "retrievers": {
        "words": {"_target_": target, "vocabulary": ["capital", "paris", "rome"], "scale": 1.0},
        "bm25": {"kind": "bm25"}}, "fusion": {"method": "rrf", "rrf_k": 5}}
    p = parse_pipeline(raw, "mine.yaml")
    assert isinstance(p.retrievers[0], WordCountRetriever)
    out = run_pipeline(p, tiny_pool(), tmp_path, evaluation=eval_conf())
    assert [s["stage"] for s in out["stages"]] == ["words", "bm25", "fused (rrf)"]
    recorded = json.loads((tmp_path / "tiny-dev" / "words.run.settings.json").read_text())
    assert recorded["kind"] == "word_count" and out["settings"]["retrievers"]["words"]["scale"] == 1
    raw["retrievers"]["words"]["scael"] = 2.0
    with pytest.raises(UsageError, match=r"mine\.yaml: retrievers\.words\.scael: unknown key; "
                                         r"did you mean 'scale'\?.*fix:"):
        parse_pipeline(raw, "mine.yaml")


def test_unknown_keys_name_the_file_that_holds_them_and_what_was_meant(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("extends: hybrid_ft\nfusion: {methd: rrf}\n")
    with pytest.raises(UnknownKeyError, match=r"mine\.yaml: fusion\.methd: .*Did you mean: "
                                              r"'method'\?"):
        load_pipeline(str(path))
    path.write_text("extends: hybrid_ft\nretrievers:\n  minilm_ft: {chekpoint: x}\n")
    with pytest.raises(UsageError, match=r"mine\.yaml: retrievers\.minilm_ft\.chekpoint: "
                                         r"unknown key; did you mean 'checkpoint'\?"):
        load_pipeline(str(path))
    with pytest.raises(UsageError, match=r"command line: reranker\.topk: unknown key; did you "
                                         r"mean 'top_k'\?"):
        load_pipeline("hybrid_ft_rerank", ["reranker.topk=3"])
    with pytest.raises(UsageError, match="tuning.max_question.*(Did|did) you mean"):
        load_pipeline("hybrid_ft", ["tuning.max_question=3"])
    with pytest.raises(UsageError, match=r"retrievers\.bm25\.kind: 'bm52' is not a retriever "
                                         r"kind; did you mean 'bm25'\?"):
        load_pipeline("hybrid_convex", ["retrievers.bm25.kind=bm52"])


def test_settings_from_the_command_line_are_typed_and_ranged():
    p = load_pipeline("hybrid_ft_rerank", ["reranker.top_k=10", "reranker=null",
                                           "retrievers.minilm_ft.paragraph_weight=1"])
    assert p.reranker is None and p.retrievers[3].paragraph_weight == 1.0
    assert p.sources["retrievers.minilm_ft.paragraph_weight"] == COMMAND_LINE
    with pytest.raises(OutOfRangeError, match=r"reranker\.top_k=0 \(set on the command line\).*"
                                              r"e\.g\. reranker\.top_k=5"):
        load_pipeline("hybrid_ft_rerank", ["reranker.top_k=0"])
    with pytest.raises(UsageError, match="takes an integer"):
        load_pipeline("hybrid_convex", ["top_k=many"])


def test_settings_that_are_tuned_take_tune_on_the_command_line_too():
    p = load_pipeline("hybrid_ft_rerank10", ["reranker.top_k=tune", "reranker.weight=0.5"])
    assert p.reranker.top_k == "tune" and p.reranker.depths == [5, 10, 20]
    assert p.reranker.weight == 0.5
    rrf = load_pipeline("hybrid_convex", ["fusion.method=rrf", "fusion.weights=null",
                                          "fusion.rrf_k=tune"])  # over rrf_k: 60
    assert rrf.fusion.rrf_k == "tune"
    with pytest.raises(UsageError, match=r"reranker\.top_k takes an integer or tune .*'ten'"):
        load_pipeline("hybrid_ft_rerank10", ["reranker.top_k=ten"])


def test_rqa_evaluate_pipeline_cfg_prints_the_composed_pipeline_and_runs_nothing(tmp_path):
    out = io.StringIO()
    assert main(["evaluate", "--pipeline", "hybrid_ft_rerank10", "--cfg",
                 "--pipeline-dir", str(tmp_path / "run"), "reranker.batch_size=8"],
                stdout=out) == 0
    text = out.getvalue()
    assert not (tmp_path / "run").exists()
    assert "  batch_size: 8  # command line\n" in text
    assert "  top_k: 10  # conf/pipeline/hybrid_ft_rerank10.yaml\n" in text
    assert "    kind: bm25  # conf/pipeline/hybrid_convex.yaml (extended by " \
           "conf/pipeline/hybrid_ft_rerank10.yaml)\n" in text
    p = load_pipeline("hybrid_ft_rerank10", ["reranker.batch_size=8"])
    assert yaml.safe_load(text) == OmegaConf.to_container(p.cfg) and text == p.annotated()


def test_the_reranker_training_settings_are_strict_and_ranged():
    from retrieval_qa.classifiers.train_reranker import main as train_main

    with pytest.raises(OutOfRangeError, match=r"epochs=0 \(set on the command line\)"):
        train_main(["epochs=0"])  # before any data is read
    with pytest.raises(OutOfRangeError, match=r"model\.optimizer\.lr=-1"):
        train_main(["model.optimizer.lr=-1"])
    with pytest.raises(UnknownKeyError, match="(Did|did) you mean"):
        train_main(["hard_negative=3"])


def test_the_bm25_stage_is_given_conf_model_bm25_under_its_settings():
    """The stage reads no config: the composition gives it conf/model/bm25.yaml's settings."""
    file = OmegaConf.to_container(OmegaConf.load(CONF / "model" / "bm25.yaml"))
    stage = BM25Retriever(name="b", settings={"k1": 0.9}, defaults=model_defaults("bm25"))
    assert stage.run_settings(7) == {"kind": "bm25", "top_k": 7, "bm25": {**file, "k1": 0.9}}
    composed = load_pipeline("bm25_context").retrievers[0]
    assert composed.defaults == file
    assert composed.bm25_settings() == {**file, "with_context": True}
