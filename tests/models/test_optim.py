import pytest
import torch

from retrieval_qa.models.optim import build_optimizer, build_schedule


def _cfg(**kw):
    return {"name": "adamw", "lr": 1.0, "weight_decay": 0.0, "schedule": "linear",
            "warmup_steps": 0, "warmup_ratio": 0.0, **kw}


def _lrs(cfg, total=10):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = build_optimizer([p], cfg)
    sched = build_schedule(opt, cfg, total)
    out = []
    for _ in range(total):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_linear_decay_constant_and_warmup():
    assert _lrs(_cfg()) == pytest.approx([1.0 - i / 10 for i in range(10)])
    assert _lrs(_cfg(schedule="constant")) == [1.0] * 10
    lrs = _lrs(_cfg(warmup_steps=2))
    assert lrs[:3] == pytest.approx([0.5, 1.0, 1.0]) and lrs[-1] == pytest.approx(1 / 8)


@pytest.mark.parametrize("name", ["adamw", "adam", "adafactor", "sgd"])
def test_every_optimizer_builds_and_skips_frozen(name):
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2), requires_grad=False)
    opt = build_optimizer([a, b], _cfg(name=name))
    assert [p for g in opt.param_groups for p in g["params"]] == [a]


def test_unknown_names_are_errors():
    with pytest.raises(ValueError, match="model.optimizer.name='lion'"):
        build_optimizer([torch.nn.Parameter(torch.ones(1))], _cfg(name="lion"))
    opt = build_optimizer([torch.nn.Parameter(torch.ones(1))], _cfg())
    with pytest.raises(ValueError, match="schedule='cosine'"):
        build_schedule(opt, _cfg(schedule="cosine"), 5)
