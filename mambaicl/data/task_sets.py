"""Other training-task sets that satisfy Condition 1 (App. 9), and the task groups of any of them.

Condition 1 asks only that every relevant pattern ``mu_j`` be mapped to ``+1`` by ``|T_tr| / M1`` training
tasks and to ``-1`` by as many; App. 9's cycle is one construction. Chapter 4 retrains Figure 2 on others
to ask whether the distance-2 error floor belongs to the cycle. A test task ``(a, b)`` is related to a
training set through its *meeting graph*: patterns ``i`` and ``j`` are adjacent when some training task
holds both (they meet in a training prompt).

==================  ===================================================================================
``"cycle"``         App. 9: ``(j, j+1 mod M1)``
``"cycle+reversed"`` the cycle and every task of it reversed, ``(j, j+1)`` and ``(j+1, j)``
``"reversal pairs"`` disjoint pairs, each task with its reversal: ``(0, 1), (1, 0), (2, 3), (3, 2), ...``
``"two 3-cycles"``  two disjoint cycles of three: ``(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)``
==================  ===================================================================================
"""
from __future__ import annotations

import torch

from ..checks import ConfigError, check_choice, check_int
from .tasks import all_tasks, check_condition_1, training_tasks

__all__ = ["TASK_SETS", "COMPLETE_SETS", "complete_set", "T18_TASKS", "task_set", "meeting_distance", "groups_for", "tasks_by_group_for"]

TASK_SETS = ("cycle", "cycle+reversed", "reversal pairs", "two 3-cycles")
#: Condition-1 training sets whose meeting graph is complete (every two patterns meet in some training task), for
#: M1 = 6: ``"T18"`` (Chapter 10's 18 tasks: an orientation of the 15 pairs with out-degrees 3, 3, 3, 2, 2, 2, plus
#: three reversed tasks that balance the labels) and ``"all 30 tasks"`` (the whole of 𝒯)
COMPLETE_SETS = ("T18", "all 30 tasks")
T18_TASKS = ((1, 0), (2, 0), (3, 0), (0, 4), (0, 5), (2, 1), (3, 1), (4, 1), (1, 5), (3, 2), (4, 2), (5, 2),
             (4, 3), (5, 3), (5, 4), (0, 3), (1, 4), (2, 5))


def complete_set(name: str, M1: int = 6) -> torch.Tensor:
    """The training tasks ``(n, 2)`` of the complete set ``name`` (:data:`COMPLETE_SETS`); checked: Condition 1
    holds and every two patterns meet (a :class:`~mambaicl.checks.ConfigError` otherwise)."""
    check_choice("complete set", name, COMPLETE_SETS)
    M1 = check_int("M1", M1, 3)
    if name == "T18":
        if M1 != 6:
            raise ConfigError(f"complete set 'T18' needs M1 = 6; got {M1}")
        tasks = torch.tensor(T18_TASKS, dtype=torch.long)
    else:
        tasks = all_tasks(M1)
    dist = meeting_distance(tasks, M1)
    if not check_condition_1(tasks, M1) or not bool((dist[~torch.eye(M1, dtype=torch.bool)] == 1).all()):
        raise ConfigError(f"complete set {name!r} must satisfy Condition 1 and meet every pair for M1 = {M1}")
    return tasks


def task_set(name: str, M1: int) -> torch.Tensor:
    """The training tasks ``(n, 2)`` of the construction ``name`` (:data:`TASK_SETS`) on ``M1`` patterns;
    a :class:`~mambaicl.checks.ConfigError` if it does not exist for ``M1`` or breaks Condition 1."""
    check_choice("task set", name, TASK_SETS)
    M1 = check_int("M1", M1, 3)
    if name == "cycle":
        tasks = training_tasks(M1)
    elif name == "cycle+reversed":
        cyc = training_tasks(M1)
        tasks = torch.cat([cyc, cyc.flip(1)])
    elif name == "reversal pairs":
        if M1 % 2:
            raise ConfigError(f"task set 'reversal pairs' needs an even M1; got {M1}")
        tasks = torch.tensor([t for j in range(0, M1, 2) for t in ((j, j + 1), (j + 1, j))], dtype=torch.long)
    else:  # two 3-cycles
        if M1 != 6:
            raise ConfigError(f"task set 'two 3-cycles' needs M1 = 6; got {M1}")
        tasks = torch.tensor([(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)], dtype=torch.long)
    if not check_condition_1(tasks, M1):
        raise ConfigError(f"task set {name!r} does not satisfy Condition 1 for M1 = {M1}")
    return tasks


def meeting_distance(train: torch.Tensor, M1: int) -> torch.Tensor:
    """Shortest-path length between patterns in the meeting graph of ``train`` (an edge for every training
    task), ``(M1, M1)`` float; ``inf`` where two patterns are never connected (breadth-first search)."""
    adj = [set() for _ in range(M1)]
    for a, b in train.tolist():
        adj[a].add(b)
        adj[b].add(a)
    dist = torch.full((M1, M1), float("inf"))
    for s in range(M1):
        dist[s, s], frontier, k = 0.0, [s], 0
        while frontier:
            k += 1
            nxt = [j for i in frontier for j in adj[i] if dist[s, j] == float("inf")]
            for j in nxt:
                dist[s, j] = float(k)
            frontier = sorted(set(nxt))
    return dist


def groups_for(tasks: torch.Tensor, train: torch.Tensor, M1: int) -> list:
    """Name each test task ``(a, b)`` by its relation to the training set ``train``: ``"training"`` if it is
    a training task, ``"reversed"`` if its reversal is, else ``"distance k"`` (``k`` steps apart in the
    meeting graph) or ``"never met"`` (not connected). For App. 9's cycle these are
    :func:`mambaicl.data.task_groups`'s names."""
    seen = {tuple(t) for t in train.tolist()}
    dist = meeting_distance(train, M1)
    names = []
    for a, b in tasks.tolist():
        if (a, b) in seen:
            names.append("training")
        elif (b, a) in seen:
            names.append("reversed")
        elif dist[a, b] == float("inf"):
            names.append("never met")
        else:
            names.append(f"distance {int(dist[a, b])}")
    return names


def tasks_by_group_for(train: torch.Tensor, M1: int) -> dict:
    """``{group name: row indices into all_tasks(M1)}`` for the groups of :func:`groups_for`, sorted by name."""
    names = groups_for(all_tasks(M1), train, M1)
    return {g: [i for i, n in enumerate(names) if n == g] for g in sorted(set(names))}
