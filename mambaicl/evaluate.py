"""Test errors on Definition 2 prompts (the sweeps of Figure 2), scored by the book's one 0-1 error.

:func:`zero_one_error` (a tie or a non-finite output is an error) is defined in :mod:`mambaicl.metric`
and re-exported here. Every sweep item (each α, each task group) draws its prompts from its own
stream ``(seed, substage(stage, ...))`` (:mod:`mambaicl.seeding`), so its error does not depend on
the other items of the sweep.
"""
from __future__ import annotations

import dataclasses

import torch

from .config import TestConfig, check_int, check_reals
from .data import Patterns, tasks_by_group, test_prompts
from .metric import zero_one_error
from .seeding import streams_for, substage

__all__ = ["zero_one_error", "predict", "model_error", "test_error", "alpha_sweep", "errors_by_task_group"]


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
def test_error(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, n: int, stream, chunk: int = 4000):
    """0-1 error of ``model`` on ``n`` fresh Definition 2 prompts drawn from ``tasks``.

    For a seed-batched model pass one NumPy stream per seed (:func:`mambaicl.seeding.numpy_streams`): returns one error per seed.
    """
    n = check_int("n", n, 1)
    F, z = [], []
    for start in range(0, n, chunk):
        pr = test_prompts(pat, test, tasks, min(chunk, n - start), stream)
        F.append(predict(model, pr))
        z.append(pr.z)
    F, z = torch.cat(F, dim=-1), torch.cat(z, dim=-1)
    if F.dim() == 2:
        return [zero_one_error(F[s], z[s]) for s in range(F.shape[0])]
    return zero_one_error(F, z)


def alpha_sweep(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, alphas, n: int, seeds,
                stage: str = "test") -> list:
    """Test error at each ``alpha`` (everything else as in ``test``); one entry per ``alpha``.

    ``seeds``: an ``int`` for one model, a sequence for a seed-batched one (one error per seed). The
    prompts at ``alpha`` come from the streams ``(seed, f"{stage}/alpha={alpha}")``.
    """
    alphas = check_reals("alphas", alphas, 0.0, 1.0, high_open=True, distinct=True)
    return [test_error(model, pat, dataclasses.replace(test, alpha=a), tasks, n,
                       streams_for(seeds, substage(stage, alpha=a))) for a in alphas]


def errors_by_task_group(model, pat: Patterns, test: TestConfig, n: int, seeds, stage: str = "test/groups") -> dict:
    """Test error on each group of tasks of :func:`mambaicl.data.task_groups`, ``n`` prompts per group.

    ``seeds``: an ``int`` for one model, a sequence for a seed-batched one (one error per seed). The
    prompts of group ``g`` come from the streams ``(seed, f"{stage}/group={g}")``.
    """
    return {name: test_error(model, pat, test, tasks, n, streams_for(seeds, substage(stage, group=name)))
            for name, tasks in tasks_by_group(pat.mu.shape[0]).items()}


test_error.__test__ = False  # not a pytest test, though its name starts with "test"
