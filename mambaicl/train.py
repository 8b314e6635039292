"""The one training loop of the book: :func:`fit` (Algorithm 1 and everything else).

Glossary (code name -> paper symbol):

================  ==========================================================
``sample_batch``  draws ``batch_size`` prompts and labels: ``(P, z)``; ``P`` a tensor
                  ``(batch, l+1, d+1)`` or a :class:`mambaicl.data.Prompts` batch, ``z`` ``(batch,)``
``hinge``         ``l(Psi; P, z) = max{0, 1 - z F(Psi; P)}`` (Section 2)
``logistic``      ``log(1 + exp(-z F))``, for the deep models of Chapters 5-6
``squared``       ``(F - z)^2 / 2``, for regression (App. 14)
``lr``            step size ``eta``; ``batch_size`` is ``B``; ``steps`` is ``T``
================  ==========================================================

``fit`` works for every model of the book, one-layer (Eq. 3) or deep, because it only needs
``model(P) -> F``. :data:`ALGORITHM_1` (plain SGD on the hinge loss over fresh prompts at every
step, ``N = B T``) is a preset of it, not a second loop.

**Seed-batched training.** With ``seed`` a sequence of ``S`` seeds, ``sample_batch`` receives
one generator per seed and returns ``(S, batch, ...)`` prompts, the model (e.g.
:class:`mambaicl.models.OneLayerStack`) returns ``F`` ``(S, batch)``, and the loss minimised is
the sum over seeds of each seed's mean loss: every seed gets exactly its own gradient.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn.functional as F_
from torch import nn
from tqdm.auto import tqdm

from .config import LOSSES, OPTIMIZERS, TrainConfig, check_choice, check_int, check_real, check_seeds
from .seeding import torch_generator

__all__ = ["LOSSES", "OPTIMIZERS", "ALGORITHM_1", "TrainHistory", "fit", "fit_kwargs", "loss_per_model",
           "hinge_loss", "logistic_loss", "squared_loss", "synthetic_sampler"]

#: Algorithm 1 of Li et al. (2025) as a preset of :func:`fit`: plain SGD on the hinge loss.
ALGORITHM_1 = {"optimizer": "sgd", "loss": "hinge"}


def hinge_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Hinge loss ``max{0, 1 - z F}`` (Section 2 of Li et al., 2025), averaged over the last axis."""
    return torch.clamp(1 - z * F, min=0).mean(-1)


def logistic_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Logistic loss ``log(1 + exp(-z F))`` (softplus, stable), averaged over the last axis."""
    return F_.softplus(-z * F).mean(-1)


def squared_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Squared loss ``(F - z)^2 / 2`` (App. 14's regression), averaged over the last axis."""
    return 0.5 * (F - z).pow(2).mean(-1)


_LOSS_FNS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "hinge": hinge_loss, "logistic": logistic_loss, "squared": squared_loss}


def loss_per_model(name: str, F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The loss ``name`` of every model: a scalar for ``F`` ``(batch,)``, ``(S,)`` for ``F`` ``(S, batch)``."""
    check_choice("loss", name, LOSSES)
    return _LOSS_FNS[name](F, z)


@dataclass
class TrainHistory:
    """Loss and probe values recorded every ``record_every`` steps (step 0 and the last step included).

    ``loss[k]`` is the loss of the batch drawn at ``steps[k]``, before that step's update: a float,
    or a list of one float per seed for a seed-batched model.
    """

    steps: list[int] = field(default_factory=list)
    loss: list = field(default_factory=list)
    probes: dict[str, list] = field(default_factory=dict)

    def loss_of(self, s: int) -> list[float]:
        """The recorded losses of seed ``s`` (of the only model when unbatched)."""
        return [v[s] if isinstance(v, list) else v for v in self.loss]


def fit_kwargs(cfg: TrainConfig) -> dict:
    """``steps``, ``batch_size``, ``lr``, ``optimizer``, ``loss`` of a :class:`TrainConfig`, for :func:`fit`."""
    return {"steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "optimizer": cfg.optimizer,
            "loss": cfg.loss}


def _generators(seed, stage: str):
    if isinstance(seed, (list, tuple)):
        return [torch_generator(s, stage) for s in check_seeds("seed", seed)]
    return torch_generator(check_int("seed", seed, 0), stage)


def _which(per_model: torch.Tensor, seed) -> str:
    """``", seed s"`` (or ``", stacked model k"``) for the first stacked model whose loss is not finite."""
    if per_model.dim() == 0:
        return ""
    k = int((~torch.isfinite(per_model)).flatten().nonzero()[0])
    seeds = list(seed) if isinstance(seed, (list, tuple)) else []
    return f", seed {seeds[k]}" if per_model.dim() == 1 and k < len(seeds) == per_model.numel() else \
        f", stacked model {k}"


def _record(history: TrainHistory, step: int, per_model: torch.Tensor, model: nn.Module, probes) -> None:
    history.steps.append(step)
    history.loss.append(per_model.detach().tolist())
    for name, probe in (probes or {}).items():
        value = probe(model)
        history.probes.setdefault(name, []).append(value.tolist() if isinstance(value, torch.Tensor) else float(value))


def fit(model: nn.Module, sample_batch: Callable, *, steps: int, batch_size: int, lr: float,
        optimizer: str = "sgd", loss: str = "hinge", seed: int | Sequence[int] = 0, stage: str = "train",
        device=None, record_every: int = 10, probes: dict[str, Callable[[nn.Module], float]] | None = None,
        progress: bool = True, callback: Callable[[int, nn.Module], None] | None = None) -> TrainHistory:
    """Train ``model`` in place on fresh batches from ``sample_batch``; :data:`ALGORITHM_1` with the defaults.

    Args:
        model: maps ``P`` to ``F`` ``(batch,)`` (or ``(S, batch)`` for a seed-batched model).
        sample_batch: ``(batch_size, generator) -> (P, z)`` on the CPU; for a seed-batched run the
            generator argument is a list with one generator per seed.
        steps, batch_size, lr: ``T``, ``B`` and ``eta``.
        optimizer: ``"sgd"`` (plain, as in Algorithm 1) or ``"adam"``.
        loss: ``"hinge"`` (Section 2), ``"logistic"`` or ``"squared"``.
        seed: an integer, or one integer per stacked model; the prompts of seed ``s`` come from the
            stream ``(s, stage)`` of :mod:`mambaicl.seeding`. Runs are deterministic on the CPU.
        stage: the stream name of the training prompts (default ``"train"``).
        device: where the model and batches live (default: the model's device).
        record_every: record the batch loss and every probe every this many steps, and at the end.
        probes: ``name -> probe(model) -> float`` (or a tensor), evaluated without gradients.
        callback: ``callback(step, model)`` after each update.

    Returns:
        The :class:`TrainHistory`.

    Raises:
        FloatingPointError: at the first step whose loss is NaN or infinite, naming the step, the
            learning rate and (seed-batched) the seed.
        ValueError: an invalid argument (named).
    """
    check_int("steps", steps, 0)
    check_int("batch_size", batch_size, 1)
    check_real("lr", lr, 0.0, low_open=True)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("loss", loss, LOSSES)
    check_int("record_every", record_every, 1)
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(params, lr=lr)
    generator = _generators(seed, stage)
    history = TrainHistory()
    for step in tqdm(range(steps + 1), desc=f"{optimizer}/{loss}", disable=not progress, mininterval=1.0):
        P, z = sample_batch(batch_size, generator)
        P, z = P.to(device), z.to(device)
        per_model = loss_per_model(loss, model(P), z)  # () or (S,)
        if not bool(torch.isfinite(per_model).all()):
            raise FloatingPointError(f"non-finite training loss at step {step} (lr = {lr}{_which(per_model, seed)}); "
                                     "the step size is too large for this model")
        if step % record_every == 0 or step == steps:
            with torch.no_grad():
                _record(history, step, per_model, model, probes)
        if step == steps:
            break
        opt.zero_grad(set_to_none=True)
        per_model.sum().backward()
        opt.step()
        if callback is not None:
            callback(step, model)
    return history


def synthetic_sampler(pat, data, tasks) -> Callable:
    """``sample_batch`` of Definition 1 training prompts (:func:`mambaicl.data.training_prompts`) for :func:`fit`."""
    from .data import training_prompts

    def sample(batch: int, generator):
        pr = training_prompts(pat, data, tasks, batch, generator)
        return pr, pr.z

    return sample
