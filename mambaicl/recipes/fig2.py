"""Figure 2's trained models: the one-layer models of a :class:`~mambaicl.recipes.presets.Fig2Preset` trained by
the engine (Algorithm 1, one stack per kind, seeds a batch axis) and swept over ``alpha`` and the rules.

==================  =====================================================================
``members``         one :class:`mambaicl.train.Member` of a kind per seed (the preset's step size, ``m``, ``delta``)
``trained_models``  ``{kind: (stack, history)}``: every model of the preset for all seeds
``sweep``           test error of each stack at each ``alpha`` and rule, seed ``s`` on ``(s, "<stage>/<rule>/<alpha>")``
``claim_tasks``     the tasks of :data:`~mambaicl.recipes.presets.CLAIM_GROUPS`
==================  =====================================================================

Figure 2 (:mod:`mambaicl.experiments.fig2`) and the experiments that reuse its models (batch size, context
length, ``kappa_a``, the seed tail, App. 14's gates) call these; no experiment imports another.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..analysis.stats import error_mean_se
from ..config import TestConfig, check_choice, check_int, check_reals
from ..data import Patterns, all_tasks, task_groups, training_tasks
from ..evaluate import test_error
from ..seeding import numpy_streams, substage
from ..train import Member, SyntheticData, train
from .base import resolve_device, resolve_seeds
from .presets import CLAIM_GROUPS, Fig2Preset

__all__ = ["RESULT_KEYS", "members", "trained_models", "Sweep", "claim_tasks", "sweep"]

#: key of each model kind in results.json and artifacts.pt (the file layout of the first release)
RESULT_KEYS = {"mamba": "mamba", "linear": "linear_transformer", "mamba_merged": "mamba_merged"}


def members(preset: Fig2Preset, pat: Patterns, seeds, kind: str, tasks=None) -> list:
    """One :class:`mambaicl.train.Member` of ``kind`` per seed: Definition 1 prompts of ``preset.data`` on ``pat``
    (training tasks: App. 9's cycle, or ``tasks``), the preset's step size, ``m`` and ``delta`` for that kind."""
    tr = preset.train[check_choice("kind", kind, preset.models)]
    data = SyntheticData(pat, preset.data, training_tasks(preset.data.M1) if tasks is None else tasks)
    return [Member(s, kind, data, tr.lr, m=tr.m, delta=tr.delta, dtype=pat.mu.dtype) for s in resolve_seeds(seeds)]


def trained_models(preset: Fig2Preset, pat: Patterns, seeds, *, kinds=None, device=None, progress: bool = False,
                   freeze: tuple = (), probes=None, record_every: int = 10, tasks=None) -> dict:
    """Every model of the preset (or ``kinds``) for all ``seeds``, trained by :func:`mambaicl.train.train`
    (Algorithm 1; one stack per kind).

    Returns:
        ``{kind: (stack, history)}`` with a :class:`mambaicl.models.OneLayerStack` per kind (slot ``s``: ``seeds[s]``).

    Args:
        freeze: parameter names kept at their initial value (e.g. ``("W_B",)``), a diagnostic.
        tasks: the training tasks ``(n, 2)`` (default: App. 9's cycle), e.g. a set of
            :mod:`mambaicl.data.task_sets`.
    """
    out = {}
    for kind in kinds or preset.models:
        tr = train(members(preset, pat, seeds, kind, tasks), preset.train[check_choice("kind", kind, preset.models)],
                   device=resolve_device(device), progress=progress, freeze=freeze, probes=probes,
                   record_every=record_every)
        out[kind] = (tr.models[0], tr.groups[0].history)
    return out


@dataclass
class Sweep:
    """Test errors of several models over ``alphas`` and rules, per seed, with means and standard errors.

    ``per_seed[key][rule][s][i]`` is seed ``s``'s error at ``alphas[i]``; ``mean`` and ``se`` are over seeds
    (:func:`mambaicl.analysis.stats.error_mean_se`, seeds and ``n`` test prompts counted).
    """

    alphas: list
    n: int
    per_seed: dict
    mean: dict
    se: dict


def claim_tasks(M1: int) -> torch.Tensor:
    """The tasks of :data:`CLAIM_GROUPS` (the 18 of the 30 tasks of ``M1 = 6`` on which Mamba's
    "< 0.01" holds in Chapter 4): training tasks, training tasks reversed, patterns opposite on the cycle."""
    tasks = all_tasks(M1)
    keep = torch.tensor([g in CLAIM_GROUPS for g in task_groups(tasks, M1)])
    return tasks[keep]


def sweep(stacks: dict, pat: Patterns, preset: Fig2Preset, seeds, *, tasks=None, stage: str = "test",
          n: int | None = None, alphas=None, rules=None, test: TestConfig | None = None) -> Sweep:
    """Error of every stack in ``stacks`` (``{kind: OneLayerStack}``) at each ``alpha`` and rule.

    Seed ``s`` is tested on prompts from the stream ``(s, "<stage>/<rule>/<alpha>")`` drawn from
    ``tasks`` (default: all of ``T``); every model of a seed sees the same prompts.

    Args:
        n: test prompts per (model, rule, alpha, seed); default ``preset.n_test``.
        test: the test shift (default ``preset.test``); ``rule`` and ``alpha`` are swept.
    """
    seeds = resolve_seeds(seeds)
    n = preset.n_test if n is None else check_int("n", n, 1)
    alphas = list(preset.alphas if alphas is None else check_reals("alphas", alphas, 0.0, 1.0, high_open=True))
    rules = list(preset.rules if rules is None else rules)
    tasks = all_tasks(preset.data.M1) if tasks is None else tasks
    test = preset.test if test is None else test
    per_seed, mean, se = {}, {}, {}
    for kind, stack in stacks.items():
        key = RESULT_KEYS[kind]
        per_seed[key], mean[key], se[key] = {}, {}, {}
        for rule in rules:
            rows = [test_error(stack, pat, dataclasses.replace(test, rule=rule, alpha=float(a)), tasks, n,
                               numpy_streams(seeds, substage(stage, rule, float(a)))) for a in alphas]  # [alpha][seed]
            stats = [error_mean_se(r, n) for r in rows]
            mean[key][rule] = [m for m, _ in stats]
            se[key][rule] = [s for _, s in stats]
            per_seed[key][rule] = [[rows[i][s] for i in range(len(rows))] for s in range(len(seeds))]
    return Sweep(alphas=alphas, n=n, per_seed=per_seed, mean=mean, se=se)

