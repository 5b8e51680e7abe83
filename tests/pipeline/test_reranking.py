"""Reranking the fused lists (retrieval_qa/pipeline/reranking.py): placing the head, and the
depth, head weight and selection rule tuned on validation lists."""

from tests.pipeline.pools import tiny_pool
from tests.pipeline.test_run import _cfg


def test_place_mixes_the_head_and_keeps_it_above_the_rest():
    import numpy as np

    from retrieval_qa.pipeline.fused_ranks import ordered
    from retrieval_qa.pipeline.reranking import place

    fused = [(np.array([4, 7, 9, 2]), np.array([0.9, 0.8, 0.5, 0.1]))]
    heads = [(np.array([0, 1, 2]), np.array([-1.0, 3.0, 1.0]))]  # reranker: 7, 9, 4
    order = {}
    for w in (1.0, 0.0, 0.5):
        ids, scores, tiers = place(fused, heads, w)[0]
        order[w] = ids[ordered(ids, scores, tiers)].tolist()
        assert tiers.tolist() == [1, 1, 1, 0]
    assert order[1.0] == [7, 9, 4, 2]     # the reranker's order, raw logits
    assert order[0.0] == [4, 7, 9, 2]     # the fused order
    # 0.5: 4 -> 0.5*0 + 0.5*1 = 0.5, 7 -> 0.5*1 + 0.5*0.75 = 0.875, 9 -> 0.5*0.5 + 0 = 0.25
    assert order[0.5] == [7, 4, 9, 2]
    assert place(fused, heads, 1.0)[0][1][:3].tolist() == [-1.0, 3.0, 1.0]


def test_the_rerank_weight_is_tuned_on_the_validation_lists():
    from retrieval_qa.pipeline.reranking import tune_rerank
    from retrieval_qa.pipeline.run import fuse
    from retrieval_qa.pipeline.stages import run_retriever

    pool = tiny_pool()
    cfg = _cfg("convex", 4, weights={"bm25": 0.5, "ctx": 0.5})
    runs = [run_retriever(spec, pool, 4, ks=(1,), doc_level=False, memory_mb=1)
            for spec in cfg.retrievers]
    fused = fuse(cfg, runs, {"bm25": 0.5, "ctx": 0.5})
    gold_text = {(q, pool.candidates[c].text) for q, g in zip(pool.questions, pool.gold,
                                                               strict=True) for c in g}

    def oracle(questions, sentences):  # a perfect reranker: the question's gold first
        return [float(pair in gold_text) for pair in zip(questions, sentences, strict=True)]

    wrong = [(ids, -scores) for ids, scores in fused]  # a fused order upside down
    found = tune_rerank(pool, wrong, oracle, [4], "tune", 0.25, memory_mb=1)
    by_weight = found["val_mrr_by_depth_and_weight"][4]
    assert set(by_weight) == {0.0, 0.25, 0.5, 0.75, 1.0} and found["val_pairs_scored"] > 0
    assert found["weight"] >= 0.5 and found["val_mrr"] > by_weight[0.0] + 20

    def adversary(questions, sentences):  # gold last: the fused order (weight 0) wins
        return [-x for x in oracle(questions, sentences)]

    worst = tune_rerank(pool, fused, adversary, [4], "tune", 0.25, memory_mb=1)
    by_weight = worst["val_mrr_by_depth_and_weight"][4]
    assert worst["weight"] == 0.0 and worst["val_mrr"] > by_weight[1.0]


def test_the_rerank_depth_is_tuned_on_the_validation_lists_from_one_scoring():
    from retrieval_qa.evaluation.metrics import metrics_from_ranks
    from retrieval_qa.pipeline.fused_ranks import rank_lists
    from retrieval_qa.pipeline.reranking import rerank, tune_rerank
    from retrieval_qa.pipeline.run import fuse

    pool = tiny_pool()
    cfg = _cfg("convex", 4, weights={"bm25": 0.5, "ctx": 0.5})
    from retrieval_qa.pipeline.stages import run_retriever

    runs = [run_retriever(spec, pool, 4, ks=(1,), doc_level=False, memory_mb=1)
            for spec in cfg.retrievers]
    wrong = [(ids, -scores) for ids, scores in fuse(cfg, runs, {"bm25": 0.5, "ctx": 0.5})]
    gold_text = {(q, pool.candidates[c].text) for q, g in zip(pool.questions, pool.gold,
                                                               strict=True) for c in g}
    pairs = []

    def oracle(questions, sentences):  # the gold first; counts the pairs it scores
        pairs.extend(zip(questions, sentences, strict=True))
        return [float(pair in gold_text) for pair in zip(questions, sentences, strict=True)]

    found = tune_rerank(pool, wrong, oracle, [1, 2, 4], 1.0, 0.25, memory_mb=1)
    assert len(pairs) == found["val_pairs_scored"]  # scored once, at the deepest
    by_depth = {k: v[1.0] for k, v in found["val_mrr_by_depth_and_weight"].items()}
    assert set(by_depth) == {1, 2, 4} and found["weight"] == 1.0
    assert found["val_mrr"] == max(by_depth.values())
    assert found["top_k"] == min(k for k, m in by_depth.items() if m == found["val_mrr"])
    for k, mrr in by_depth.items():  # each depth's MRR is that of reranking at that depth
        ranks, _ = rank_lists(pool, rerank(pool, wrong, oracle, k, 1.0)[0], doc_level=False,
                              memory_mb=1)
        assert mrr == round(float(metrics_from_ranks(ranks, (1,))["mrr"]), 4)
    assert by_depth[4] > by_depth[1]  # the upside-down list hides gold below the top 1


def test_reranking_shows_a_bar_over_the_questions_and_the_same_lists(capsys):
    from retrieval_qa.pipeline.reranking import rerank
    from retrieval_qa.pipeline.run import fuse
    from retrieval_qa.pipeline.stages import run_retriever

    pool = tiny_pool()
    cfg = _cfg("convex", 4, weights={"bm25": 0.5, "ctx": 0.5})
    runs = [run_retriever(spec, pool, 4, ks=(1,), doc_level=False, memory_mb=1)
            for spec in cfg.retrievers]
    fused = fuse(cfg, runs, {"bm25": 0.5, "ctx": 0.5})

    def by_length(questions, sentences):
        return [float(len(s)) for s in sentences]

    quiet, _ = rerank(pool, fused, by_length, 2, 0.5)
    assert "rerank top-2" not in capsys.readouterr().err
    shown, _ = rerank(pool, fused, by_length, 2, 0.5, progress=True)
    assert f"rerank top-2 ({pool.pool})" in capsys.readouterr().err
    for (ids_a, scores_a, tiers_a), (ids_b, scores_b, tiers_b) in zip(quiet, shown,
                                                                        strict=True):
        assert list(ids_a) == list(ids_b) and list(tiers_a) == list(tiers_b)
        assert list(scores_a) == list(scores_b)  # the same arithmetic, bar or not
