"""Classification error on test prompts (Definition 2) and the alpha sweeps of Figure 2.

``error = E[1[z F(Psi; P') < 0]]`` over tasks in ``T`` and ``P' ~ D'`` (Section 2).
"""
from __future__ import annotations

import dataclasses

import torch

from .config import TestConfig
from .data import Patterns, test_prompts

__all__ = ["zero_one_error", "classification_error", "test_error", "alpha_sweep", "errors_by_task_group",
           "breakdown_alpha"]


def zero_one_error(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Per-prompt 0-1 error ``1[z F < 0]`` (Section 2), ``(batch,)`` float; a NaN output counts as an error."""
    return (~(z * F >= 0)).to(F.dtype)


@torch.no_grad()
def test_error(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, n: int,
               generator: torch.Generator, chunk: int = 4000) -> float:
    """0-1 error of ``model`` on ``n`` fresh Definition 2 prompts drawn from ``tasks``."""
    if n < 1:
        raise ValueError(f"n must be a positive number of test prompts; got {n}")
    wrong = 0.0
    device = next(model.parameters()).device  # prompts are drawn on the CPU, then moved
    for start in range(0, n, chunk):
        pr = test_prompts(pat, test, tasks, min(chunk, n - start), generator)
        wrong += float(zero_one_error(model(pr.P.to(device)), pr.z.to(device)).sum())
    return wrong / n


def alpha_sweep(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, alphas, n: int,
                generator: torch.Generator) -> list:
    """Test error at each ``alpha`` (everything else as in ``test``)."""
    return [test_error(model, pat, dataclasses.replace(test, alpha=float(a)), tasks, n, generator) for a in alphas]


def errors_by_task_group(model, pat: Patterns, test: TestConfig, n: int, generator: torch.Generator) -> dict:
    """Test error on each group of tasks of :func:`mambaicl.probes.task_groups`, ``n`` prompts per group."""
    from .data import all_tasks
    from .probes import task_groups

    M1 = pat.mu.shape[0]
    tasks = all_tasks(M1)
    names = task_groups(tasks, M1)
    out = {}
    for name in sorted(set(names)):
        keep = torch.tensor([nm == name for nm in names])
        out[name] = test_error(model, pat, test, tasks[keep], n, generator)
    return out


def breakdown_alpha(alphas, errors, jump: float = 0.1) -> float:
    """The first ``alpha`` whose error exceeds the error at the first ``alpha`` by more than ``jump``;
    ``nan`` if none does (the model never breaks down on the grid)."""
    if len(alphas) != len(errors) or not alphas:
        raise ValueError(f"alphas and errors must be non-empty and aligned; got {len(alphas)} and {len(errors)}")
    for a, e in zip(alphas, errors):
        if e > errors[0] + jump:
            return float(a)
    return float("nan")


@torch.no_grad()
def classification_error(model, P: torch.Tensor, z: torch.Tensor, chunk: int = 4096) -> float:
    """Fraction of prompts with ``z F(P) <= 0`` (a NaN output counts as an error); batched, no gradients.

    The cross-chapter contract used by the deep-model and SST-2 chapters; ``F = 0`` counts as an
    error here, while :func:`zero_one_error` follows Section 2's ``1[z F < 0]`` literally.
    """
    if P.shape[0] != z.shape[0] or P.shape[0] == 0:
        raise ValueError(f"P and z must hold the same positive number of prompts; got {P.shape[0]} and {z.shape[0]}")
    wrong = 0
    for start in range(0, P.shape[0], chunk):
        F = model(P[start : start + chunk])
        wrong += int((~(z[start : start + chunk].to(F.dtype) * F > 0)).sum())
    return wrong / P.shape[0]
