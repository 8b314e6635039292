"""A generic training loop for any model that maps prompts to a score (Algorithm 1 and beyond).

Glossary (code name -> paper symbol):

================  ==========================================================
``sample_batch``  draws ``B`` prompts and labels: ``(P, z)``, ``P`` ``(B, l+1, d+1)``, ``z`` ``(B,)``
``hinge``         ``l(Psi; P, z) = max{0, 1 - z F(Psi; P)}`` (Section 2)
``logistic``      ``log(1 + exp(-z F))``, for the deep models of Chapters 5-6
``lr``            step size ``eta``; ``batch_size`` is ``B``; ``steps`` is ``T``
================  ==========================================================

``fit`` works for every model of the book, one-layer (Eq. 3) or deep, because it only needs
``model(P) -> F`` of shape ``(batch,)``. With ``optimizer="sgd"`` and ``loss="hinge"`` it is
Algorithm 1 of the paper: plain SGD on fresh prompts at every step (``N = B T``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F_
from torch import nn
from tqdm.auto import tqdm

__all__ = ["LOSSES", "OPTIMIZERS", "TrainHistory", "fit", "hinge_loss_mean", "logistic_loss_mean"]


def hinge_loss_mean(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Mean hinge loss ``max{0, 1 - z F}`` (Section 2 of Li et al., 2025)."""
    return torch.clamp(1 - z * F, min=0).mean()


def logistic_loss_mean(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss ``log(1 + exp(-z F))``, computed stably with softplus."""
    return F_.softplus(-z * F).mean()


LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "hinge": hinge_loss_mean,
    "logistic": logistic_loss_mean,
}
OPTIMIZERS = ("sgd", "adam")


@dataclass
class TrainHistory:
    """Loss and probe values recorded every ``record_every`` steps (step 0 included)."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    probes: dict[str, list[float]] = field(default_factory=dict)


def _check_fit_args(steps, batch_size, lr, optimizer, loss, record_every) -> None:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0; got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}; got {optimizer!r}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {tuple(LOSSES)}; got {loss!r}")
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1; got {record_every!r}")


def _record(history: TrainHistory, step: int, loss_value: float, model: nn.Module, probes) -> None:
    history.steps.append(step)
    history.loss.append(loss_value)
    for name, probe in (probes or {}).items():
        history.probes.setdefault(name, []).append(float(probe(model)))


def fit(model: nn.Module, sample_batch: Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]], *,
        steps: int, batch_size: int, lr: float, optimizer: str = "sgd", loss: str = "hinge", seed: int = 0,
        device=None, record_every: int = 10, probes: dict[str, Callable[[nn.Module], float]] | None = None,
        progress: bool = True, callback: Callable[[int, nn.Module], None] | None = None) -> TrainHistory:
    """Train ``model`` in place on fresh batches from ``sample_batch``; Algorithm 1 with the defaults.

    Args:
        model: maps ``P`` ``(batch, l+1, d+1)`` to ``F`` ``(batch,)``.
        sample_batch: ``(batch_size, generator) -> (P, z)`` on the CPU.
        steps, batch_size, lr: ``T``, ``B`` and ``eta``.
        optimizer: ``"sgd"`` (plain, as in Algorithm 1) or ``"adam"``.
        loss: ``"hinge"`` (Section 2) or ``"logistic"``.
        seed: seeds the ``torch.Generator`` passed to ``sample_batch``; runs are deterministic on CPU.
        device: where the model and batches live (default: the model's device).
        record_every: record the batch loss and every probe every this many steps, and at the end.
        probes: ``name -> probe(model) -> float``, evaluated without gradients.
        callback: ``callback(step, model)`` after each update.

    Returns:
        The :class:`TrainHistory`; ``history.loss[k]`` is the loss of the batch drawn at ``history.steps[k]``
        before that step's update.
    """
    _check_fit_args(steps, batch_size, lr, optimizer, loss, record_every)
    if device is None:
        device = next(model.parameters()).device
    model.to(device)
    loss_fn = LOSSES[loss]
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    history = TrainHistory()
    for step in tqdm(range(steps + 1), desc=f"{optimizer}/{loss}", disable=not progress, mininterval=1.0):
        P, z = sample_batch(batch_size, generator)
        P, z = P.to(device), z.to(device)
        value = loss_fn(model(P), z)
        if step % record_every == 0 or step == steps:
            with torch.no_grad():
                _record(history, step, float(value.detach()), model, probes)
        if step == steps:
            break
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        if callback is not None:
            callback(step, model)
    return history
