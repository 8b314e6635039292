"""The reader bound of Figure 2: the error a model that follows Corollary 1 cannot beat.

It is not an information bound of the data (the functions keep their historical ``information_bound`` names): it
bounds a model that reads only the examples Corollary 1 and Lemma 3 let it read. A Bayes predictor, which may read
every clean example, errs only when all ``l_ts`` examples are outliers (:func:`bayes_error`, rules B and C).

Glossary (code name -> paper symbol):

=================  ====================================================================================
``alpha``          fraction of test examples with an outlier (Definition 2, Eq. (5))
``l_ts``           context examples of a test prompt; ``l_tr`` and ``p_a`` of a training prompt (Def. 1)
``group``          a test task's relation to the training set (:func:`mambaicl.data.groups_for`):
                   ``"training"``, ``"reversed"``, ``"distance k"`` or ``"never met"``
``readable``       probability that one context example is one the model may read
=================  ====================================================================================

**The argument.** A model that follows Corollary 1 (and Corollary 2) reads a context example only if
it is *clean* (an outlier example's gate is ``O(poly(M1)^-1)``, Eq. (7)) and its relevant pattern is
coupled to the query's: the same pattern (``N_1`` of Eq. (6)), or, on a task whose two patterns met in a
training task, the partner pattern, whose negative coupling (Lemma 3: the training partners' component
falls) turns its label ``-z`` into a vote for ``z``. Every example it reads votes for the right label;
the attention to every other example is at most ``Theta(epsilon / (1 - p_a))`` (Eq. (6)). So it errs
only on prompts with no readable example, and there its output can depend only on the query's pattern
and on examples it cannot read; Condition 1 maps every pattern to ``+1`` and ``-1`` equally often, so
over a task group closed under the labels' symmetry it is right on at most half of those prompts.

In a test prompt of Definition 2 the context examples are independent: each is an outlier example with
probability ``alpha`` (placement R; under FQ and CQ the count of outliers is Binomial(``l_ts``,
``alpha``) as well and the clean examples' patterns are independent of it, so the same formula holds),
and a clean example carries the query's pattern with probability 1/2 (``mu_a`` or ``mu_b``). Hence

    readable = (1 - alpha) r,   r = 1 (patterns met in training) or 1/2 (they never met),
    bound = 1/2 (1 - readable)^{l_ts}.

At Figure 2's ``alpha = 0.8``, ``l_ts = 20``: ``0.8^20 / 2 = 0.0058`` on training and reversed tasks and
``0.9^20 / 2 = 0.061`` on tasks whose patterns never met. A training prompt (Definition 1) is the same
with ``alpha = p_a`` and ``l_tr`` examples, on training tasks.

The bound is exact (no simulation); ``tests/test_information.py`` checks it against the prompts that
:func:`mambaicl.data.test_prompts` builds.
"""
from __future__ import annotations

import torch

from ..checks import ConfigError, check_int
from ..data import all_tasks, training_tasks
from ..data.task_sets import groups_for

__all__ = ["MET_GROUPS", "readable_fraction", "information_bound", "training_information_bound",
           "information_bound_by_group", "information_bound_all_tasks", "complete_meeting", "bayes_error"]

#: task groups whose two patterns met in a training task: the partner's examples are readable too
MET_GROUPS = ("training", "reversed")


def _check_alpha(name: str, alpha: float) -> float:
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"{name} must lie in [0, 1]; got {alpha}")
    return alpha


def readable_fraction(alpha: float, group: str) -> float:
    """Probability that one context example of a Definition 2 prompt is readable by a Corollary-1 model:
    ``(1 - alpha)`` on a task whose patterns met in training (``group`` in :data:`MET_GROUPS`), else
    ``(1 - alpha) / 2``."""
    alpha = _check_alpha("alpha", alpha)
    if not isinstance(group, str) or not (group in MET_GROUPS or group.startswith("distance ")
                                          or group == "never met"):
        raise ConfigError(f"group must be 'training', 'reversed', 'distance k' or 'never met'; got {group!r}")
    return (1.0 - alpha) * (1.0 if group in MET_GROUPS else 0.5)


def information_bound(alpha: float, l_ts: int, group: str) -> float:
    """The error a model that follows Corollary 1 cannot beat on a task ``group``:
    ``1/2 (1 - readable_fraction(alpha, group))^l_ts`` (half the prompts with no readable example)."""
    l_ts = check_int("l_ts", l_ts, 1)
    return 0.5 * (1.0 - readable_fraction(alpha, group)) ** l_ts


def training_information_bound(p_a: float, l_tr: int) -> float:
    """The same bound on training prompts (Definition 1: outlier fraction ``p_a``, ``l_tr`` examples, training
    tasks): ``p_a^l_tr / 2``."""
    return information_bound(_check_alpha("p_a", p_a), l_tr, "training")


def information_bound_by_group(alpha: float, l_ts: int, M1: int, train: torch.Tensor | None = None) -> dict:
    """``{group: (bound, number of tasks)}`` over all ``M1 (M1 - 1)`` test tasks, the groups named by their
    relation to the training set ``train`` (default: App. 9's cycle)."""
    M1 = check_int("M1", M1, 3)
    train = training_tasks(M1) if train is None else train
    names = groups_for(all_tasks(M1), train, M1)
    return {g: (information_bound(alpha, l_ts, g), names.count(g)) for g in sorted(set(names))}


def information_bound_all_tasks(alpha: float, l_ts: int, M1: int, train: torch.Tensor | None = None) -> float:
    """The bound on the error over all test tasks (uniform over tasks, as Definition 2 draws them)."""
    by = information_bound_by_group(alpha, l_ts, M1, train)
    return sum(b * n for b, n in by.values()) / sum(n for _, n in by.values())


def complete_meeting(train: torch.Tensor, M1: int) -> bool:
    """Whether every two patterns meet in some training task (then every test task is ``"training"`` or
    ``"reversed"`` and the all-task bound is ``alpha^l_ts / 2``)."""
    names = groups_for(all_tasks(M1), train, M1)
    return all(g in MET_GROUPS for g in names)


def bayes_error(alpha: float, l_ts: int) -> float:
    """The Bayes error of a Definition 2 test prompt under rules B and C, ``alpha^l_ts / 2``: a clean example of
    either pattern, with its label, identifies the task's labelling of the query's pattern (every test task is a
    pair of patterns), so only a prompt whose ``l_ts`` examples are all outliers leaves a coin flip."""
    l_ts = check_int("l_ts", l_ts, 1)
    return 0.5 * _check_alpha("alpha", alpha) ** l_ts
