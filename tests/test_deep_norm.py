"""norm="after_first": RMSNorm in every layer of a deep stack but the first."""
import pytest
import torch

from mambaicl.config import DeepConfig
from mambaicl.models import build_model
from mambaicl.models.deep import RMSNorm


def test_after_first_normalises_every_layer_but_the_first():
    model = build_model("mamba", 4, n_layers=3, d_model=8, norm="after_first", generator=torch.Generator().manual_seed(0))
    assert isinstance(model.norms[0], torch.nn.Identity)
    assert all(isinstance(n, RMSNorm) for n in model.norms[1:])
    # the first layer sees the raw stream: scaling a prompt scales the first layer's input exactly
    P = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(1))
    P[:, -1, -1] = 0
    x0 = P @ model.embed.T
    assert torch.equal(model.norms[0](x0), x0)
    assert not torch.allclose(model.norms[1](3 * x0), 3 * model.norms[1](x0))  # RMSNorm is scale-invariant


def test_norm_choices_are_validated():
    assert DeepConfig(norm="after_first").model_kwargs()["norm"] == "after_first"
    with pytest.raises(ValueError, match="^norm must be one of"):
        DeepConfig(norm="layer")
    with pytest.raises(ValueError, match="^norm must be one of"):
        build_model("mamba", 4, n_layers=2, d_model=8, norm="post")
