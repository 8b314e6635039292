"""The book's one 0-1 error, and test errors on Definition 2 prompts (the sweeps of Figure 2).

**The convention.** :func:`zero_one_error` counts a prompt as an error when ``z F <= 0`` or
when ``F`` is not finite. The paper writes ``E[1[z F(Psi; P') < 0]]`` (Section 2), which would
score a model that outputs 0 everywhere (or NaN) as perfect; a tie is no prediction, so we
count it as wrong (Chapter 2, "Deviations from the paper"). Every error and accuracy in the
package and the book goes through :func:`zero_one_error`.
"""
from __future__ import annotations

import dataclasses

import torch

from .config import TestConfig
from .data import Patterns, tasks_by_group, test_prompts

__all__ = ["zero_one_error", "predict", "model_error", "test_error", "alpha_sweep", "errors_by_task_group"]


def zero_one_error(F: torch.Tensor, z: torch.Tensor) -> float:
    """Fraction of prompts with ``z * F <= 0`` or a non-finite ``F`` (ties and NaN/inf are errors).

    Args:
        F: model outputs, any shape; z: labels in {+1, -1} of the same shape.
    """
    F, z = torch.as_tensor(F), torch.as_tensor(z)
    if F.shape != z.shape or F.numel() == 0:
        raise ValueError(f"F and z must have the same non-empty shape; got {tuple(F.shape)} and {tuple(z.shape)}")
    wrong = ~(z.to(F.dtype) * F > 0) | ~torch.isfinite(F)
    return float(wrong.double().mean())


@torch.no_grad()
def predict(model, P, chunk: int = 4096) -> torch.Tensor:
    """``F = model(P)`` without gradients, in chunks of ``chunk`` prompts along the batch axis, on the CPU.

    ``P`` is a tensor ``(batch, ...)`` or a :class:`mambaicl.data.Prompts`; for a seed-batched model
    the batch axis is the second one and ``F`` is ``(S, batch)``.
    """
    device = next(model.parameters()).device
    stacked = (P.dim() == 4) if isinstance(P, torch.Tensor) else (P.z.dim() == 2)
    n = (P.shape[1] if stacked else P.shape[0]) if isinstance(P, torch.Tensor) else P.z.shape[-1]
    outs = []
    for start in range(0, n, chunk):
        part = P[:, start : start + chunk] if stacked else P[start : start + chunk]
        outs.append(model(part.to(device)).cpu())
    return torch.cat(outs, dim=-1)


def model_error(model, P, z: torch.Tensor, chunk: int = 4096):
    """0-1 error of ``model`` on prompts ``P`` with labels ``z``: a float, or one per seed for a stacked model."""
    F = predict(model, P, chunk)
    if F.dim() == 2:
        return [zero_one_error(F[s], z[s]) for s in range(F.shape[0])]
    return zero_one_error(F, z)


@torch.no_grad()
def test_error(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, n: int, generator, chunk: int = 4000):
    """0-1 error of ``model`` on ``n`` fresh Definition 2 prompts drawn from ``tasks``.

    For a seed-batched model pass one generator per seed: returns one error per seed.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive number of test prompts; got {n!r}")
    F, z = [], []
    for start in range(0, n, chunk):
        pr = test_prompts(pat, test, tasks, min(chunk, n - start), generator)
        F.append(predict(model, pr))
        z.append(pr.z)
    F, z = torch.cat(F, dim=-1), torch.cat(z, dim=-1)
    if F.dim() == 2:
        return [zero_one_error(F[s], z[s]) for s in range(F.shape[0])]
    return zero_one_error(F, z)


def alpha_sweep(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, alphas, n: int, generator) -> list:
    """Test error at each ``alpha`` (everything else as in ``test``); one entry per ``alpha``."""
    return [test_error(model, pat, dataclasses.replace(test, alpha=float(a)), tasks, n, generator) for a in alphas]


def errors_by_task_group(model, pat: Patterns, test: TestConfig, n: int, generator) -> dict:
    """Test error on each group of tasks of :func:`mambaicl.data.task_groups`, ``n`` prompts per group."""
    return {name: test_error(model, pat, test, tasks, n, generator)
            for name, tasks in tasks_by_group(pat.mu.shape[0]).items()}


test_error.__test__ = False  # not a pytest test, though its name starts with "test"
