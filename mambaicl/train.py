"""Algorithm 1: SGD on the hinge loss, with the Lemma 3-6 probes recorded along the way.

Glossary (code name -> paper symbol):

============  ==========================================================
``hinge``     ``l(Psi; P, z) = max{0, 1 - z F(Psi; P)}`` (Section 2)
``eta``       step size ``eta``; ``B`` the batch size; ``T`` the iterations
``history``   probe values every ``record_every`` steps (see :mod:`mambaicl.probes`)
============  ==========================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .config import DataConfig, TrainConfig
from .data import Patterns, training_prompts
from .models import OneLayerLinearTransformer, OneLayerMamba

__all__ = ["hinge_loss", "make_model", "TrainResult", "train", "sgd_step"]


def hinge_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Mean hinge loss ``max{0, 1 - z F}`` over the batch (Section 2)."""
    return torch.clamp(1 - z * F, min=0).mean()


def make_model(kind: str, data: DataConfig, train: TrainConfig, generator: torch.Generator):
    """A float64 one-layer ``"mamba"`` or ``"linear_transformer"`` with the Section 2 initialisation."""
    if kind == "mamba":
        model = OneLayerMamba(data.d, train.m, train.delta, generator=generator)
    elif kind == "linear_transformer":
        model = OneLayerLinearTransformer(data.d, train.m, train.delta)
    else:
        raise ValueError(f"kind must be 'mamba' or 'linear_transformer'; got {kind!r}")
    return model.double()


@dataclass
class TrainResult:
    """The trained model, its per-step training loss and the probe history."""

    model: torch.nn.Module
    loss: list = field(default_factory=list)
    history: list = field(default_factory=list)


def sgd_step(model, P: torch.Tensor, z: torch.Tensor, eta: float) -> float:
    """One step of Algorithm 1: ``Psi <- Psi - eta * grad of the mean hinge loss``; returns the loss."""
    loss = hinge_loss(model(P), z)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"the training loss became {float(loss)}; the step size eta = {eta} is too large")
    model.zero_grad(set_to_none=True)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= eta * p.grad
    return float(loss.detach())


def train(model, pat: Patterns, data: DataConfig, cfg: TrainConfig, tasks: torch.Tensor,
          generator: torch.Generator, probe=None, record_every: int = 0, progress: bool = True,
          desc: str = "SGD") -> TrainResult:
    """Train ``model`` by Algorithm 1 on fresh Definition 1 prompts from ``tasks`` (``N = B T``).

    Args:
        probe: optional ``probe(model, t) -> dict`` called at ``t = 0`` and every ``record_every`` steps.
        progress: show a ``tqdm`` bar.
    """
    result = TrainResult(model=model)
    for t in tqdm(range(cfg.T + 1), desc=desc, disable=not progress, mininterval=1.0):
        if probe is not None and record_every and t % record_every == 0:
            result.history.append(probe(model, t))
        if t == cfg.T:
            break
        batch = training_prompts(pat, data, tasks, cfg.B, generator)
        result.loss.append(sgd_step(model, batch.P, batch.z, cfg.eta))
    return result


# --- The generic trainer of the cross-developer contract (added by the lead) ---------------
# Deep models and SST-2 experiments: use `fit(model, sample_batch, *, steps, batch_size, lr,
# optimizer="sgd", loss="hinge", seed=0, device=None, record_every=10, probes=None,
# progress=True, callback=None) -> TrainHistory` (the contract's generic `train`), from
# mambaicl/fit.py. `train` above is the synthetic-data trainer of Chapters 2-4.
from .fit import TrainHistory, fit  # noqa: E402

__all__ += ["TrainHistory", "fit"]
