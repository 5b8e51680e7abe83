import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import eval_conf

from retrieval_qa.evaluation import MeanReciprocalRank, RecallAtK, ReQARankMetric
from retrieval_qa.evaluation.metrics import metrics_from_ranks
from retrieval_qa.evaluation.ranking import aggregate_min, gold_ranks

KS = tuple(eval_conf()["ks"])  # the cut-offs of conf/eval/default.yaml


def _data(seed=0, n=24, c=15):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 4, (n, c), generator=g).float()
    gold = torch.zeros(n, c, dtype=torch.bool)
    gold[torch.arange(n), torch.randint(0, c, (n,), generator=g)] = True
    qids = torch.arange(n) // 2  # every question string appears twice
    return scores, gold, qids


def _expected(scores, gold, qids):
    return metrics_from_ranks(aggregate_min(gold_ranks(scores, gold), qids), KS)


def test_metric_in_batches_equals_batch_evaluator():
    scores, gold, qids = _data()
    metric, mrr, r1 = ReQARankMetric(KS), MeanReciprocalRank(), RecallAtK(1)
    for lo in range(0, 24, 5):  # batches split repeated questions across updates
        for m in (metric, mrr, r1):
            m.update(scores[lo:lo + 5], gold[lo:lo + 5], qids[lo:lo + 5])
    expected = _expected(scores, gold, qids)
    got = metric.compute()
    assert {k: v.item() for k, v in got.items()} == pytest.approx(expected)
    assert mrr.compute().item() == pytest.approx(expected["mrr"])
    assert r1.compute().item() == pytest.approx(expected["r@1"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    scores, gold, qids = _data()
    metric = ReQARankMetric(KS)
    metric.update(scores[rank::2], gold[rank::2], qids[rank::2])
    result = metric.compute()
    if rank == 0:
        out.update({k: v.item() for k, v in result.items()})
    dist.destroy_process_group()


def test_metric_rejects_a_non_finite_score_naming_the_question():
    scores, gold, qids = _data()
    scores[3, 7] = float("nan")
    with pytest.raises(ValueError, match="non-finite score nan for question 1 at candidate 7"):
        ReQARankMetric(KS).update(scores, gold, qids)


def test_metric_synchronises_across_two_processes():
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_worker, args=(_free_port(), out), nprocs=2, join=True)
        got = dict(out)
    assert got == pytest.approx(_expected(*_data()))
