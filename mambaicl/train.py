"""Algorithm 1 on the synthetic data: the one-layer models trained by :func:`mambaicl.fit.fit`.

Glossary (code name -> paper symbol):

============  ==========================================================
``hinge``     ``l(Psi; P, z) = max{0, 1 - z F(Psi; P)}`` (Section 2)
``eta``       step size ``eta``; ``B`` the batch size; ``T`` the iterations
``history``   :class:`mambaicl.fit.TrainHistory`: loss and probes (see :mod:`mambaicl.probes`)
============  ==========================================================
"""
from __future__ import annotations

import math

import torch

from .config import DataConfig, TrainConfig
from .data import Patterns, training_prompts
from .fit import TrainHistory, fit, hinge_loss_mean
from .models import OneLayerLinearTransformer, OneLayerMamba

__all__ = ["hinge_loss", "make_model", "train"]

hinge_loss = hinge_loss_mean


def make_model(kind: str, data: DataConfig, train: TrainConfig, generator: torch.Generator):
    """A float64 one-layer ``"mamba"`` or ``"linear_transformer"`` with the Section 2 initialisation."""
    if kind == "mamba":
        model = OneLayerMamba(data.d, train.m, train.delta, generator=generator)
    elif kind == "linear_transformer":
        model = OneLayerLinearTransformer(data.d, train.m, train.delta)
    else:
        raise ValueError(f"kind must be 'mamba' or 'linear_transformer'; got {kind!r}")
    return model.double()


def train(model, pat: Patterns, data: DataConfig, cfg: TrainConfig, tasks: torch.Tensor, seed: int,
          probes: dict | None = None, record_every: int = 1, progress: bool = True,
          device=None) -> TrainHistory:
    """Algorithm 1: plain SGD on the hinge loss over fresh Definition 1 prompts (``N = B T``).

    Args:
        tasks: training tasks ``(n, 2)``, e.g. :func:`mambaicl.data.training_tasks`.
        seed: seeds the generator of the training prompts.
        probes: ``name -> probe(model) -> float``, recorded every ``record_every`` steps.
        device: where to train (default: the model's device; prompts are drawn on the CPU and moved,
            so runs are reproducible whatever the device; pass ``default_device()`` to use a GPU).

    Raises:
        FloatingPointError: the loss became NaN or infinite (the step size is too large).
    """
    def sample(batch: int, g: torch.Generator):
        pr = training_prompts(pat, data, tasks, batch, g)
        return pr.P, pr.z

    hist = fit(model, sample, steps=cfg.T, batch_size=cfg.B, lr=cfg.eta, seed=seed,
               record_every=record_every, probes=probes, progress=progress, device=device)
    if not all(math.isfinite(x) for x in hist.loss):
        raise FloatingPointError(f"the training loss diverged; the step size eta = {cfg.eta} is too large")
    return hist
