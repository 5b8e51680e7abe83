"""Table 6: the BERTQA classifier vs dual encoders on a deterministic sample, with timings."""

from __future__ import annotations

import json

from retrieval_qa.analysis.bertqa import sample_test_pool
from retrieval_qa.classifiers.pair_data import ClassifierPairSampler
from retrieval_qa.data import load_pool


def test_sample_is_deterministic_and_closed(env):
    pool, _ = load_pool("reqa_squad", "dev", env.data)
    a = sample_test_pool(pool, passages=3, pairs=8, seed=1)
    b = sample_test_pool(pool, passages=3, pairs=8, seed=1)
    assert a.questions == b.questions and a.candidates == b.candidates
    docs = {c.doc_id for c in a.candidates}
    assert len(docs) == 3 and pool.candidates[0].doc_id in docs  # the busiest paragraph
    assert len(a.pairs) == 8 and len(a.candidates) == 9
    assert all(g for g in a.gold)
    for q, g in zip(a.questions, a.gold, strict=True):
        answers = {p.answer for p in pool.pairs if p.question == q}
        assert {a.candidates[i].text for i in g} <= answers
    r = sample_test_pool(pool, passages=2, pairs=100, seed=0, choice="random")
    assert len({c.doc_id for c in r.candidates}) == 2


def test_negatives_are_never_gold(env):
    pool, _ = load_pool("reqa_squad", "train", env.data)
    sampler = ClassifierPairSampler(pool, seed=0, same_paragraph=0.5)
    q, s, y = sampler.batch(64)
    assert y.tolist() == [1.0] * 32 + [0.0] * 32
    for question, sentence in zip(q[32:], s[32:], strict=True):
        assert sentence not in sampler.gold[question]


def test_bertqa_end_to_end(env, tmp_path, rqa):
    out = rqa("analyze", "bertqa", "--model", f"Dual-GRUs={env.dual['checkpoint']}",
              "--model", f"ENDX-GRUs={env.endx['checkpoint']}", "--pretrained", env.bert,
              "--steps", "3", "--batch-size", "4", "--passages", "3", "--pairs", "10",
              "--max-length", "48", "--data-dir", env.data, "--output-dir", tmp_path)
    assert set(out["rows"]) == {"Dual-GRUs", "ENDX-GRUs", "BERTQA"}
    assert out["sample"]["qa_pairs"] == 10 and out["sample"]["passages"] == 3
    data = json.loads((tmp_path / "table6.json").read_text())
    assert "candidate" in data["timed"] and data["bertqa_training"]["steps"] == 3
    for run in data["runs"]:
        assert run["ms_per_question"] > 0 and run["question_ms_mean"] > 0
        assert run["total_seconds"] > 0 and 0 < run["mrr"] <= 100
        if run["name"] == "BERTQA":
            assert run["pairs_scored"] == 10 * 9 and run["candidate_encoding_ms_total"] == 0
        else:
            assert run["candidate_encoding_ms_total"] > 0
            assert run["ms_per_question"] >= run["question_ms_mean"]
    md = (tmp_path / "table6.md").read_text()
    assert "| BERTQA |" in md and "| Dual-GRUs |" in md and "average ms" in md


def test_flags_given_override_the_classifier_conf_and_the_rest_come_from_it():
    from retrieval_qa.classifiers.pair_classifier import CrossAttentionClassifier
    from retrieval_qa.cli import build_parser
    from retrieval_qa.cli.analyze import classifier_overrides

    args = build_parser().parse_args(["analyze", "bertqa", "--model", "A=x", "--steps", "7",
                                      "--lr", "0.001"])
    assert classifier_overrides(args) == {"training": {"steps": 7}, "optimizer": {"lr": 0.001}}
    settings = CrossAttentionClassifier.settings(classifier_overrides(args))
    assert settings["training"]["steps"] == 7 and settings["training"]["batch_size"] == 16
    assert settings["optimizer"]["lr"] == 0.001 and settings["pretrained"] == "minilm"
    args = build_parser().parse_args(["analyze", "bertqa", "--model", "A=x"])
    assert classifier_overrides(args) == {} and args.passages is None
