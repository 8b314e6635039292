"""Training until the validation loss stops improving (early stopping), through the one engine.

Glossary:

==================  ====================================================================
``every``           steps between two validation checks
``patience``        a member has *converged* once ``patience`` checks in a row bring no new lowest
                    validation loss; training stops when every member has converged (or at the
                    configuration's ``steps``, whichever comes first)
``best step``       the step of a member's lowest validation loss; the member is reported with the
                    parameters it had then (its own snapshot)
==================  ====================================================================

The engine (:func:`mambaicl.train.train`) runs the loop; :func:`train_until_converged` watches it through the
engine's ``callback`` and ends it early by raising :class:`_Converged` once every member has converged. The
validation prompts are the caller's (drawn from streams disjoint from training and test), so the stopping
rule never sees a test prompt. Deterministic: the same members and configuration stop at the same steps.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from .config import ConfigError, TrainConfig, check_instance, check_int
from .train import MemberStack, train

__all__ = ["Convergence", "train_until_converged"]


class _Converged(Exception):
    """Raised from the engine's callback once every member has converged."""


@dataclass
class Convergence:
    """Per member: the step of its lowest validation loss, the step at which it converged (or the last step),
    whether it converged before the step limit, and its validation losses at every check."""

    best_step: list
    stopped: list
    converged: list
    checks: list  # the steps at which validation ran
    val_loss: list  # val_loss[k][c]: member k at checks[c]


def train_until_converged(members: list, cfg: TrainConfig, validate, *, every: int, patience: int,
                          stage: str = "train", device=None, progress: bool = False) -> tuple:
    """Train ``members`` (one group of deep members, a :class:`mambaicl.train.MemberStack`) for at most
    ``cfg.steps`` steps, checking ``validate(model_k, k) -> float`` (member ``k``'s validation loss) every
    ``every`` steps, and return ``(models, Convergence)``: each member's model at its lowest validation loss.

    A member converges once ``patience`` checks in a row bring no new lowest loss; training ends when all have
    (raising inside the engine's callback), so a rerun stops at the same steps."""
    check_instance("cfg", cfg, TrainConfig)
    every, patience = check_int("every", every, 1), check_int("patience", patience, 1)
    n = len(members)
    best = [float("inf")] * n
    best_step, stale = [0] * n, [0] * n
    stopped, checks, losses = [None] * n, [], [[] for _ in range(n)]
    snaps: list = [None] * n
    held: dict = {}

    def check(step: int, model) -> None:
        if not isinstance(model, MemberStack) or len(model.members) != n:
            raise ConfigError("train_until_converged needs one group of deep members (a MemberStack)")
        held["model"] = model
        checks.append(step)
        with torch.no_grad():
            for k, mod in enumerate(model.members):
                v = float(validate(mod, k))
                losses[k].append(v)
                if stopped[k] is not None:
                    continue
                if v < best[k]:
                    best[k], best_step[k], stale[k] = v, step, 0
                    snaps[k] = copy.deepcopy(mod.state_dict())
                else:
                    stale[k] += 1
                    if stale[k] >= patience:
                        stopped[k] = step
        if all(s is not None for s in stopped):
            raise _Converged

    def callback(step: int, model) -> None:  # after update number step + 1
        if (step + 1) % every == 0:
            check(step + 1, model)

    try:
        model = train(members, cfg, stage=stage, device=device, progress=progress, callback=callback).model(0)
        if not checks or checks[-1] != cfg.steps:
            check(cfg.steps, model)
    except _Converged:
        model = held["model"]
    for k, mod in enumerate(model.members):
        if snaps[k] is not None:
            mod.load_state_dict(snaps[k])
    conv = [s is not None for s in stopped]
    return list(model.members), Convergence(best_step=best_step, stopped=[s if s is not None else cfg.steps
                                                                          for s in stopped],
                                            converged=conv, checks=checks, val_loss=losses)
