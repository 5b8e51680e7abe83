"""retrieval_qa.training.compile: the fp32 guard for the memory-efficient attention backend."""

import pytest
import torch

from retrieval_qa.training.compile import avoid_fp32_efficient_attention


@pytest.fixture
def restore_backend():
    before = torch.backends.cuda.mem_efficient_sdp_enabled()
    yield
    torch.backends.cuda.enable_mem_efficient_sdp(before)


@pytest.mark.parametrize("precision", ["32", "32-true"])
def test_fp32_on_cuda_switches_the_memory_efficient_backend_off(precision, restore_backend,
                                                                 caplog):
    torch.backends.cuda.enable_mem_efficient_sdp(True)
    assert avoid_fp32_efficient_attention(precision, cuda=True) is True
    assert not torch.backends.cuda.mem_efficient_sdp_enabled()
    assert "math kernel" in caplog.text


@pytest.mark.parametrize(("precision", "cuda"), [("bf16-mixed", True), ("16-mixed", True),
                                                 ("32", False)])
def test_mixed_precision_or_no_cuda_keeps_every_backend(precision, cuda, restore_backend):
    torch.backends.cuda.enable_mem_efficient_sdp(True)
    assert avoid_fp32_efficient_attention(precision, cuda=cuda) is False
    assert torch.backends.cuda.mem_efficient_sdp_enabled()
