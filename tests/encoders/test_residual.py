import pytest
import torch
from torch import nn

from retrieval_qa.encoders.residual import (
    FCRR,
    ConvBranch,
    ConvRR,
    FCBranch,
    FCRRConvRR,
    ResidualBlock,
)
from retrieval_qa.registry import instantiate

#: conf/model/residual.yaml's refiner settings but the filters (fewer: a fast test)
SETTINGS = {"sf": 1.0, "dropout": 0.1, "fc_hidden": None, "conv_filters": 8, "conv_window": 5,
            "conv_stride": 2}


def conv(dim: int, **settings) -> ConvBranch:
    return ConvBranch(dim, **{"filters": 1024, "window": 5, "stride": 2, "dropout": 0.1,
                              **settings})


class _Double(nn.Module):
    def forward(self, x):
        return 2 * x + 1


def test_block_is_identity_plus_sf_times_branch():
    x = torch.randn(4, 6)
    block = ResidualBlock(_Double(), sf=0.5, normalize=False)
    torch.testing.assert_close(block(x), x + 0.5 * (2 * x + 1))
    normed = ResidualBlock(_Double(), sf=0.5)(x)
    torch.testing.assert_close(normed, nn.functional.normalize(x + 0.5 * (2 * x + 1), dim=-1))
    torch.testing.assert_close(normed.norm(dim=-1), torch.ones(4))


def test_zero_branch_gives_normalised_input():
    branch = FCBranch(6, hidden=None, dropout=0.0)
    nn.init.zeros_(branch[-1].weight)
    nn.init.zeros_(branch[-1].bias)
    x = torch.randn(3, 6)
    torch.testing.assert_close(ResidualBlock(branch, sf=1.0)(x),
                               nn.functional.normalize(x, dim=-1))


@pytest.mark.parametrize("name", ["fcrr", "convrr", "fcrr_convrr"])
def test_refiners_keep_shape_normalise_and_learn(name):
    """Each short name of ``model.refiner`` builds its class from the settings it takes."""
    torch.manual_seed(0)
    net = instantiate({"refiner": name, **SETTINGS}, "model.refiner", "refiner", dim=16)
    assert type(net) is {"fcrr": FCRR, "convrr": ConvRR, "fcrr_convrr": FCRRConvRR}[name]
    x = torch.randn(5, 16)
    y = net(x)
    assert y.shape == (5, 16)
    torch.testing.assert_close(y.norm(dim=-1), torch.ones(5))
    y.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_fcrr_convrr_is_the_two_blocks_in_order():
    """The module layout of the refiners that exports saved (``0.branch...``, ``1.branch...``)."""
    keys = FCRRConvRR(16, **SETTINGS).state_dict()
    assert {k.split(".")[0] for k in keys} == {"0", "1"}
    assert "0.branch.0.weight" in keys and "1.branch.conv.weight" in keys


def test_conv_branch_paper_shape_and_errors():
    b = conv(50)   # 1024 filters, window 5, stride 2: 23 positions for 50-d GloVe
    assert b.conv.out_channels == 1024 and b.conv.kernel_size == (5,) and b.conv.stride == (2,)
    assert b(torch.randn(2, 50)).shape == (2, 50)
    with pytest.raises(ValueError, match="window"):
        conv(3)
    with pytest.raises(ValueError, match=r"model\.refiner\.refiner='mlp'"):
        instantiate({"refiner": "mlp", **SETTINGS}, "model.refiner", "refiner", dim=8)


def test_conv_branch_max_then_relu_equals_relu_then_max():
    b = conv(20, filters=16, dropout=0.0)
    x = torch.randn(3, 20)
    h = torch.relu(b.conv(x.unsqueeze(1))).amax(-1)
    torch.testing.assert_close(b(x), b.out(h))


@pytest.mark.parametrize("dim,window,stride", [(50, 5, 2), (20, 3, 1), (9, 5, 4)])
def test_max_conv_equals_conv1d_then_max_with_gradients(dim, window, stride):
    torch.manual_seed(0)
    b = conv(dim, filters=24, window=window, stride=stride, dropout=0.0).double()
    x = torch.randn(70, dim, dtype=torch.double, requires_grad=True)   # > one 32-row chunk
    g = torch.randn(70, 24, dtype=torch.double)
    slow = b.conv(x.unsqueeze(1)).amax(-1)
    fast = b.max_conv(x)
    torch.testing.assert_close(fast, slow)
    params = [x, b.conv.weight, b.conv.bias]
    for a, c in zip(torch.autograd.grad((slow * g).sum(), params),
                    torch.autograd.grad((fast * g).sum(), params), strict=True):
        torch.testing.assert_close(a, c)
