"""Training prompts (Definition 1, Eq. (4)) and test prompts (Definition 2, Eq. (5)).

Glossary (code name -> paper symbol):

=============  ============================================================
``P``          prompt, token-major ``(batch, l+1, d+1)``; last token is the query
``z``          query label ``z = f(x_query)``, ``(batch,)``
``outlier``    whether context example ``i`` carries an additive outlier, ``(batch, l)``
``relevant``   index ``j`` of the relevant pattern ``mu_j`` of each token, ``(batch, l+1)``
``task``       row of the task tensor the prompt was drawn from, ``(batch,)``
``kappa``      ``kappa ~ U(-K, K)`` (train) or ``kappa' ~ U(-K', K')`` (test)
=============  ============================================================

Both generators share one builder, :func:`_assemble`, which writes Eq. (2): ``x_i`` in the
first ``d`` rows and ``y_i`` in the last (0 for the query).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import DataConfig, TestConfig
from .patterns import Patterns, test_outliers

__all__ = ["Prompts", "training_prompts", "test_prompts"]


@dataclass(frozen=True)
class Prompts:
    """A batch of prompts with the bookkeeping the probes need."""

    P: torch.Tensor  # (batch, l+1, d+1)
    z: torch.Tensor  # (batch,)
    outlier: torch.Tensor  # (batch, l) bool
    relevant: torch.Tensor  # (batch, l+1) long
    task: torch.Tensor  # (batch,) long


def _check_tasks(tasks: torch.Tensor, M1: int) -> None:
    if tasks.dim() != 2 or tasks.shape[1] != 2 or tasks.shape[0] < 1:
        raise ValueError(f"tasks must have shape (n_tasks, 2); got {tuple(tasks.shape)}")
    if tasks.min() < 0 or tasks.max() >= M1 or torch.any(tasks[:, 0] == tasks[:, 1]):
        raise ValueError(f"tasks must be pairs (a, b) of distinct indices in [0, {M1}); got {tasks.tolist()}")


def _clean_examples(pat: Patterns, tasks, batch, l, K, generator):
    """The clean part ``mu_j + kappa nu_k`` of Eq. (4)/(5) for ``l`` examples and the query."""
    M2 = pat.nu.shape[0]
    task = torch.randint(tasks.shape[0], (batch,), generator=generator)  # (batch,)
    second = torch.rand(batch, l + 1, generator=generator) < 0.5  # (batch, l+1): mu_b instead of mu_a
    a, b = tasks[task, 0:1], tasks[task, 1:2]  # (batch, 1)
    relevant = torch.where(second, b, a)  # (batch, l+1)
    labels = torch.where(second, -1.0, 1.0).to(pat.mu.dtype)  # (batch, l+1): f(x)
    k = torch.randint(M2, (batch, l + 1), generator=generator)  # (batch, l+1)
    kappa = (2 * torch.rand(batch, l + 1, generator=generator, dtype=pat.mu.dtype) - 1) * K  # U(-K, K)
    x = pat.mu[relevant] + kappa.unsqueeze(-1) * pat.nu[k]  # (batch, l+1, d)
    return task, relevant, labels, x


def _assemble(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Eq. (2): stack ``x_i`` over ``y_i`` with the query label set to 0, ``(batch, l+1, d+1)``."""
    y = y.clone()
    y[:, -1] = 0
    return torch.cat([x, y.unsqueeze(-1)], dim=-1)


def training_prompts(pat: Patterns, cfg: DataConfig, tasks: torch.Tensor, batch: int,
                     generator: torch.Generator) -> Prompts:
    """Definition 1: ``l_tr`` examples following Eq. (4), outlier labels uniform in {+1, -1}.

    Each context example carries ``kappa_a v*_s`` with probability ``p_a`` (``s`` uniform in
    ``[V]``); the query never does.
    """
    _check_tasks(tasks, pat.mu.shape[0])
    l = cfg.l_tr
    task, relevant, labels, x = _clean_examples(pat, tasks, batch, l, cfg.K, generator)
    outlier = torch.rand(batch, l, generator=generator) < cfg.p_a  # (batch, l)
    s = torch.randint(pat.v.shape[0], (batch, l), generator=generator)  # (batch, l)
    x[:, :l] += cfg.kappa_a * outlier.unsqueeze(-1) * pat.v[s]  # (batch, l, d)
    coin = torch.where(torch.rand(batch, l, generator=generator) < 0.5, -1.0, 1.0).to(x.dtype)
    y = labels.clone()
    y[:, :l] = torch.where(outlier, coin, labels[:, :l])  # random labels on outlier examples
    return Prompts(P=_assemble(x, y), z=labels[:, -1].clone(), outlier=outlier, relevant=relevant, task=task)


def outlier_mask(batch: int, l: int, alpha: float, placement: str, generator: torch.Generator) -> torch.Tensor:
    """Which test examples carry an outlier, ``(batch, l)`` bool.

    ``random``: each example independently with probability ``alpha`` (Eq. (5)). ``far`` /
    ``close``: a Binomial(l, alpha) number of outliers, put on the examples farthest from /
    closest to the query (§4.2's FQ / CQ placements).
    """
    u = torch.rand(batch, l, generator=generator) < alpha  # (batch, l)
    if placement == "random":
        return u
    count = u.sum(dim=1, keepdim=True)  # (batch, 1): Binomial(l, alpha)
    pos = torch.arange(l).unsqueeze(0)  # (1, l): 0 is the farthest from the query
    if placement == "far":
        return pos < count
    if placement == "close":
        return pos >= l - count
    raise ValueError(f"placement must be one of ('random', 'far', 'close'); got {placement!r}")


def outlier_labels(labels: torch.Tensor, rule: str, target: int, generator: torch.Generator) -> torch.Tensor:
    """Labels of outlier examples under §4.1's rules: A flipped, B ``target``, C random."""
    if rule == "A":
        return -labels
    if rule == "B":
        return torch.full_like(labels, float(target))
    if rule == "C":
        return torch.where(torch.rand(labels.shape, generator=generator) < 0.5, -1.0, 1.0).to(labels.dtype)
    raise ValueError(f"rule must be one of ('A', 'B', 'C'); got {rule!r}")


def test_prompts(pat: Patterns, test: TestConfig, tasks: torch.Tensor, batch: int,
                 generator: torch.Generator) -> Prompts:
    """Definition 2: ``l_ts`` examples following Eq. (5); outlier labels by ``test.rule``.

    Outlier examples carry ``kappa_a' v*_s'`` with ``v*_s'`` uniform over the rows of
    :func:`test_outliers`; irrelevant patterns are scaled by ``kappa' ~ U(-K', K')``.
    """
    _check_tasks(tasks, pat.mu.shape[0])
    l = test.l_ts
    v_test = test_outliers(pat.v, test.v_coeffs)  # (S, d)
    task, relevant, labels, x = _clean_examples(pat, tasks, batch, l, test.K_prime, generator)
    outlier = outlier_mask(batch, l, test.alpha, test.placement, generator)  # (batch, l)
    s = torch.randint(v_test.shape[0], (batch, l), generator=generator)  # (batch, l)
    x[:, :l] += test.kappa_a_prime * outlier.unsqueeze(-1) * v_test[s]  # (batch, l, d)
    y = labels.clone()
    bad = outlier_labels(labels[:, :l], test.rule, test.target_label, generator)  # (batch, l)
    y[:, :l] = torch.where(outlier, bad, labels[:, :l])
    return Prompts(P=_assemble(x, y), z=labels[:, -1].clone(), outlier=outlier, relevant=relevant, task=task)
