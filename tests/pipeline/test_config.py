from pathlib import Path

import pytest
from omegaconf import OmegaConf

from retrieval_qa.config import conf_names
from retrieval_qa.errors import UsageError
from retrieval_qa.pipeline.composition import load_pipeline, parse_pipeline

BASE = {"name": "t", "top_k": 10,
        "retrievers": {"a": {"kind": "bm25"}, "b": {"kind": "bm25",
                                                     "settings": {"with_context": True}}},
        "fusion": {"method": "rrf", "rrf_k": 60}}


@pytest.mark.parametrize("name", conf_names("pipeline"))
def test_every_committed_pipeline_loads(name):
    cfg = load_pipeline(name)
    assert cfg.name == name and cfg.retrievers and cfg.top_k >= 1


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[2].joinpath(
    "conf", "pipeline", "ablation").glob("*.yaml")))
def test_ablation_pipelines_load_from_their_paths(path):
    cfg = load_pipeline(str(path))
    assert cfg.name == path.stem and len(cfg.retrievers) == 2 and cfg.needs_tuning


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[2].joinpath(
    "conf", "pipeline", "seeds").glob("*.yaml")))
def test_seed_pipelines_extend_their_parent_from_a_path(path):
    """<parent>[_<variant>]_seed<S>.yaml: seed S's trained stages (fine-tuned, distilled),
    the reranker runs/reranker/listwise[-<variant>]-seed<S>, everything else the parent's."""
    cfg = load_pipeline(str(path))
    parent = load_pipeline(OmegaConf.load(path).extends)
    assert path.stem.startswith(parent.name)
    variant, seed = path.stem.removeprefix(parent.name).rsplit("_seed", 1)
    assert cfg.name == path.stem and cfg.fusion == parent.fusion
    assert [r.name for r in cfg.retrievers] == [r.name for r in parent.retrievers]
    stages = {r.name: r for r in cfg.retrievers}
    ft = stages["minilm_ft"]
    assert ft.checkpoint == f"runs/ft/dual_bert/cpu-seed{seed}/model" and ft.batch_size == 128
    if "minilm_distill" in stages:
        assert stages["minilm_distill"].checkpoint == f"runs/distill/cpu-seed{seed}/model"
    if parent.reranker is not None:
        assert cfg.reranker.checkpoint == \
            f"runs/reranker/listwise{variant.replace('_', '-')}-seed{seed}"
        assert cfg.reranker.top_k == parent.reranker.top_k


def test_a_path_config_extending_an_unknown_parent_names_it(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("extends: no_such_parent\nname: mine\n")
    with pytest.raises(UsageError, match=r"mine\.yaml.*extends.*no_such_parent.*fix:"):
        load_pipeline(str(path))


def test_extends_merges_the_parent():
    cfg = load_pipeline("hybrid_rrf")
    assert cfg.fusion.method == "rrf" and cfg.fusion.rrf_k == "tune" and cfg.needs_tuning
    assert [r.name for r in cfg.retrievers] == ["bm25", "bm25_context", "minilm"]
    rerank = load_pipeline("hybrid_convex_rerank")
    assert rerank.reranker is not None and rerank.reranker.top_k == 20


def test_a_valid_mapping_parses():
    cfg = parse_pipeline(BASE, "x.yaml")
    assert cfg.retrievers[1].settings == {"with_context": True}
    assert cfg.retrievers[1].bm25_settings()["k1"] == 1.2  # conf/model/bm25.yaml's
    assert cfg.fusion.rrf_k == 60 and not cfg.needs_tuning


def _bad(change: dict, where: str):
    raw = {**BASE, **change}
    with pytest.raises(UsageError) as e:
        parse_pipeline(raw, "conf/pipeline/x.yaml")
    message = str(e.value)
    assert "conf/pipeline/x.yaml" in message and where in message and "fix:" in message
    return message


def test_bad_configs_name_the_key_and_the_fix():
    _bad({"topk": 3}, "topk")
    _bad({"top_k": 0}, "top_k")
    _bad({"retrievers": {"a": {"kind": "splade"}}}, "retrievers.a.kind")
    assert "settings.stemer: unknown key; did you mean 'stemmer'?" in _bad(
        {"retrievers": {"a": {"kind": "bm25", "settings": {"stemer": None}}}}, "retrievers.a (")
    _bad({"retrievers": {"a": {"kind": "bm25", "batch_size": 8}}}, "retrievers.a.batch_size")
    _bad({"retrievers": {"a": {"kind": "dual_encoder"}}}, "retrievers.a.checkpoint")
    _bad({"fusion": {"method": "sum"}}, "fusion.method")
    _bad({"fusion": {"method": "none"}}, "fusion.method")  # two retrievers, no fusion
    _bad({"fusion": {"method": "convex"}}, "fusion.weights")
    _bad({"fusion": {"method": "convex", "weights": {"a": 1}}}, "fusion.weights.b")
    _bad({"fusion": {"method": "convex", "weights": {"a": 1, "b": -1}}}, "fusion.weights.b")
    _bad({"fusion": {"method": "rrf", "rrf_k": "big"}}, "fusion.rrf_k")
    assert "never a test pool" in _bad({"tuning": {"pool": "dev"}}, "tuning.pool")
    _bad({"reranker": {"top_k": 5}}, "reranker.checkpoint")


def test_unknown_pipeline_lists_the_known_ones():
    with pytest.raises(UsageError, match="hybrid_convex"):
        load_pipeline("no_such_pipeline")


@pytest.mark.parametrize("weight", [1.5, -0.1, "half", True])
def test_a_paragraph_weight_outside_0_1_names_the_key(weight):
    raw = {"top_k": 5, "retrievers": {"dense": {"kind": "dual_encoder", "checkpoint": "m",
                                                "paragraph_weight": weight}}}
    with pytest.raises(UsageError, match=r"retrievers\.dense\.paragraph_weight.*"
                                         r"takes a number in \[0, 1\]"):
        parse_pipeline(raw, "p.yaml")


def test_a_reranker_weight_is_a_number_in_0_1_or_tune():
    base = {"top_k": 5, "retrievers": {"bm25": {"kind": "bm25"}}}
    tuned = parse_pipeline({**base, "reranker": {"checkpoint": "m", "weight": "tune"}}, "p.yaml")
    assert tuned.reranker.weight == "tune" and tuned.needs_tuning
    assert parse_pipeline({**base, "reranker": {"checkpoint": "m"}}, "p.yaml").reranker.weight == 1
    with pytest.raises(UsageError, match=r"reranker\.weight.*takes tune or a number in "
                                         r"\[0, 1\]"):
        parse_pipeline({**base, "reranker": {"checkpoint": "m", "weight": 2}}, "p.yaml")



def test_a_reranker_gate_is_none_a_confidence_or_tune_over_its_quantiles():
    base = {"top_k": 5, "retrievers": {"bm25": {"kind": "bm25"}}}
    assert parse_pipeline({**base, "reranker": {"checkpoint": "m"}}, "p.yaml").reranker.gate \
        is None
    tuned = parse_pipeline({**base, "reranker": {"checkpoint": "m", "weight": 0.5,
                                                 "gate": "tune"}}, "p.yaml")
    assert tuned.reranker.gate == "tune" and tuned.needs_tuning
    assert tuned.reranker.gate_quantiles == [0.05, 0.1, 0.2, 0.3, 0.5]
    fixed = parse_pipeline({**base, "reranker": {"checkpoint": "m", "gate": 0.4}}, "p.yaml")
    assert fixed.reranker.gate == 0.4 and not fixed.needs_tuning
    for bad in ({"gate": 1.5}, {"gate": "yes"}, {"gate": "tune", "gate_quantiles": [0, 0.5]},
                {"gate": "tune", "gate_quantiles": []}):
        with pytest.raises(UsageError, match=r"reranker\.gate|gate_quantiles"):
            parse_pipeline({**base, "reranker": {"checkpoint": "m", **bad}}, "p.yaml")


def test_a_reranker_selects_the_best_or_the_least_reliant_setting_within_its_se():
    base = {"top_k": 5, "retrievers": {"bm25": {"kind": "bm25"}}}
    default = parse_pipeline({**base, "reranker": {"checkpoint": "m"}}, "p.yaml").reranker
    assert (default.select, default.select_se) == ("best", 1.0)
    chosen = parse_pipeline({**base, "reranker": {"checkpoint": "m", "weight": "tune",
                                                  "select": "least_reliance",
                                                  "select_se": 2}}, "p.yaml").reranker
    assert (chosen.select, chosen.select_se) == ("least_reliance", 2.0)
    for bad in ({"select": "safest"}, {"select_se": -1}):
        with pytest.raises(UsageError, match=r"select(_se)?[= ]"):
            parse_pipeline({**base, "reranker": {"checkpoint": "m", **bad}}, "p.yaml")


def test_a_reranker_depth_is_a_whole_number_or_tune_over_its_depths():
    base = {"top_k": 5, "retrievers": {"bm25": {"kind": "bm25"}}}
    tuned = parse_pipeline({**base, "reranker": {"checkpoint": "m", "top_k": "tune",
                                                 "depths": [20, 5]}}, "p.yaml")
    assert tuned.reranker.depths == [5, 20] and tuned.needs_tuning
    fixed = parse_pipeline({**base, "reranker": {"checkpoint": "m", "top_k": 7}}, "p.yaml")
    assert fixed.reranker.depths == [7] and not fixed.needs_tuning
    with pytest.raises(UsageError, match=r"reranker\.depths"):
        parse_pipeline({**base, "reranker": {"checkpoint": "m", "top_k": "tune",
                                             "depths": [0, 5]}}, "p.yaml")
