"""The task set of §3.2 and a training set satisfying Condition 1 (App. 9).

A task is an ordered pair ``(a, b)`` of distinct relevant patterns (0-based indices):
queries with ``mu_a`` get label ``+1``, queries with ``mu_b`` label ``-1``.
"""
from __future__ import annotations

import torch

from ..checks import ConfigError

__all__ = ["all_tasks", "training_tasks", "unseen_tasks", "check_condition_1", "cyclic_distance", "task_groups",
           "tasks_by_group"]


def all_tasks(M1: int) -> torch.Tensor:
    """Every ordered pair ``(a, b)``, ``a != b``: the task set ``T``, ``(M1 (M1 - 1), 2)``."""
    if M1 < 2:
        raise ConfigError(f"M1 must be >= 2 to form a task; got {M1}")
    pairs = [(a, b) for a in range(M1) for b in range(M1) if a != b]
    return torch.tensor(pairs, dtype=torch.long)


def training_tasks(M1: int) -> torch.Tensor:
    """The cyclic construction of App. 9: task ``i`` maps ``mu_i -> +1`` and ``mu_{i+1} -> -1``.

    The last task maps ``mu_{M1} -> +1`` and ``mu_1 -> -1``; ``(M1, 2)``.
    """
    if M1 < 3:
        raise ConfigError(f"M1 must be >= 3 for the cyclic construction of Condition 1; got {M1}")
    a = torch.arange(M1)
    return torch.stack([a, (a + 1) % M1], dim=1)


def unseen_tasks(M1: int) -> torch.Tensor:
    """Tasks of ``T`` that are not in the cyclic training set, ``(M1 (M1 - 2), 2)``."""
    seen = {tuple(t) for t in training_tasks(M1).tolist()}
    return torch.tensor([t for t in all_tasks(M1).tolist() if tuple(t) not in seen], dtype=torch.long)


def check_condition_1(tasks: torch.Tensor, M1: int) -> bool:
    """Condition 1: every ``mu_j`` is mapped to ``+1`` by ``|T_tr| / M1`` tasks and to ``-1`` by as many."""
    n = tasks.shape[0]
    if n % M1:
        return False
    plus = torch.bincount(tasks[:, 0], minlength=M1)
    minus = torch.bincount(tasks[:, 1], minlength=M1)
    return bool(torch.all(plus == n // M1) and torch.all(minus == n // M1))


def cyclic_distance(M1: int) -> torch.Tensor:
    """``min(|i - j|, M1 - |i - j|)``: how far apart two patterns are on the training cycle, ``(M1, M1)``."""
    i = torch.arange(M1)
    diff = (i[:, None] - i[None, :]).abs()
    return torch.minimum(diff, M1 - diff)


def task_groups(tasks: torch.Tensor, M1: int) -> list:
    """Name each task ``(a, b)`` by its relation to the cyclic training set: ``"training"`` if
    ``b = a + 1``, ``"reversed"`` if ``a = b + 1`` (mod ``M1``), else ``"distance k"``."""
    names = []
    for a, b in tasks.tolist():
        if b == (a + 1) % M1:
            names.append("training")
        elif a == (b + 1) % M1:
            names.append("reversed")
        else:
            names.append(f"distance {min(abs(a - b), M1 - abs(a - b))}")
    return names


def tasks_by_group(M1: int) -> dict:
    """``{group name: tasks of that group (n, 2)}`` for every group of :func:`task_groups`, sorted by name."""
    tasks = all_tasks(M1)
    names = task_groups(tasks, M1)
    return {name: tasks[torch.tensor([nm == name for nm in names])] for name in sorted(set(names))}
