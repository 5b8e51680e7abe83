"""DenseScorer computes in full float32 whatever the process-wide matmul precision, and leaves
that setting as it found it: after every call, after an error, and with scorers in several
threads (issue 76, item 7)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from retrieval_qa.evaluation.search import DenseScorer, full_float32_matmul


@pytest.fixture
def restore_precision():
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
def test_the_setting_is_unchanged_after_a_call_and_the_scores_are_full_float32(
        restore_precision, precision):
    g = torch.Generator().manual_seed(0)
    q, c = torch.randn(6, 16, generator=g), torch.randn(9, 16, generator=g)
    torch.set_float32_matmul_precision("highest")
    expected = q[2:5] @ c.T  # the same product, same shapes, in full float32
    torch.set_float32_matmul_precision(precision)
    got = DenseScorer(q, c, device="cpu").score(range(2, 5))
    assert torch.get_float32_matmul_precision() == precision
    assert torch.equal(got, expected)


def test_the_setting_is_restored_after_an_error(restore_precision):
    torch.set_float32_matmul_precision("medium")
    with pytest.raises(RuntimeError, match="inside"), full_float32_matmul():
        assert torch.get_float32_matmul_precision() == "highest"
        raise RuntimeError("inside")
    assert torch.get_float32_matmul_precision() == "medium"


def test_scorers_in_threads_each_compute_in_full_float32_and_leave_the_setting(
        restore_precision):
    """Without the lock, one thread's restore ("high") could land while another computes,
    and a scorer that read "highest" mid-switch would skip its own switch."""
    torch.set_float32_matmul_precision("high")
    seen, errors = [], []
    q, c = torch.randn(4, 8), torch.randn(5, 8)
    scorer = DenseScorer(q, c, device="cpu")

    def work():
        try:
            for _ in range(50):
                with full_float32_matmul():
                    time.sleep(0.0005)  # another thread's switch or restore may come here
                    seen.append(torch.get_float32_matmul_precision())
                scorer.score(range(0, 4))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(seen) == 200 and set(seen) == {"highest"}
    assert torch.get_float32_matmul_precision() == "high"
