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

Two entries share this rule: :func:`train_until_converged` (a caller's ``validate`` function; regression's
three-layer models) and :func:`train_to_plateau` (validation prompts per member, the step-0 check, a member whose
loss turns non-finite marked and frozen; the mechanism's deep stacks). The engine (:func:`mambaicl.train.train`)
runs the loop; :func:`train_until_converged` watches it through the
engine's ``callback`` and ends it early by raising :class:`_Converged` once every member has converged. The
validation prompts are the caller's (drawn from streams disjoint from training and test), so the stopping
rule never sees a test prompt. Deterministic: the same members and configuration stop at the same steps.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from .config import ConfigError, TrainConfig, check_instance, check_int
from .train import MemberStack, loss_per_model, train

__all__ = ["Convergence", "train_until_converged", "Plateau", "train_to_plateau", "member_model", "validation_losses"]


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


def member_model(model, i: int) -> torch.nn.Module:
    """Member ``i`` of the engine's stacked model (a deep :class:`MemberStack` holds one model per member)."""
    return model.members[i] if isinstance(model, MemberStack) else model.member(i)


def validation_losses(model, val: list, loss: str) -> list:
    """Per member ``i``: the mean ``loss`` of member ``i`` on its validation prompts ``val[i]``."""
    out = []
    with torch.no_grad():
        for i, pr in enumerate(val):
            F = member_model(model, i)(pr.P)  # (n,)
            out.append(float(loss_per_model(loss, F, pr.z.to(F.dtype))))
    return out


class _Stop(Exception):
    """Raised by the plateau callback when every member has stopped improving."""


@dataclass
class Plateau:
    """What :func:`train_to_plateau` returns: the stacked model (each member at its best check), the update
    count each member kept (``best_step``), its validation loss there, the updates run (``stopped``) and the
    validation curves (``checks``: update counts, ``curves[i]``: member ``i``'s losses)."""

    model: object = field(repr=False)
    diverged: list  # per member: its loss turned non-finite (it stopped moving; it keeps its best check before)
    best_step: list
    best_loss: list
    stopped: int
    checks: list
    curves: list


def train_to_plateau(members: list, cfg: TrainConfig, val: list, *, every: int, patience: int, device=None,
                     callback=None, progress: bool = False) -> Plateau:
    """Train ``members`` in one engine call for at most ``cfg.steps`` updates; every ``every`` updates take each
    member's loss on its validation prompts ``val[i]``; stop when every member has gone ``patience`` checks
    without a new minimum, and give each member back its parameters of its best check (step 0 included).

    ``callback(step, model)`` (e.g. Corollary 1's recorder) runs after every update, before the check. A member
    whose loss turns non-finite stops moving (``nonfinite="mark"``), counts as not improving, keeps its best check
    before that and is listed in ``Plateau.diverged``.
    All members must form one group of the engine (one model kind and setting)."""
    check_int("every", every, 1)
    check_int("patience", patience, 1)
    if len(val) != len(members):
        raise ConfigError(f"val must hold one Prompts per member ({len(members)}); got {len(val)}")
    if len({m.model_key() for m in members}) != 1:
        raise ConfigError("train_to_plateau needs members of one engine group (same model_key)")
    n = len(members)
    state = {"best": [math.inf] * n, "step": [0] * n, "bad": [0] * n, "params": [None] * n, "model": None,
             "checks": [], "curves": [[] for _ in range(n)], "stopped": cfg.steps, "diverged": [False] * n}

    def check(step: int, model) -> None:
        losses = validation_losses(model, val, cfg.loss)
        state["checks"].append(step)
        for i, v in enumerate(losses):
            state["curves"][i].append(v)
            if not math.isfinite(v):
                state["diverged"][i] = True
            if v < state["best"][i]:
                state["best"][i], state["step"][i], state["bad"][i] = v, step, 0
                state["params"][i] = copy.deepcopy(member_model(model, i).state_dict())
            else:
                state["bad"][i] += 1

    def cb(step: int, model) -> None:
        if state["model"] is None:
            state["model"] = model
        if callback is not None:
            callback(step, model)
        if (step + 1) % every == 0:
            check(step + 1, model)
            if min(state["bad"]) >= patience:
                state["stopped"] = step + 1
                raise _Stop

    # step 0: the initial models, as the engine builds them
    from .members import build_members

    check(0, build_members(list(members), torch.device(device if device is not None else "cpu")))
    try:
        trained = train(members, cfg, device=device, progress=progress, record_every=max(cfg.steps, 1),
                        callback=cb, nonfinite="mark")
        state["model"] = trained.groups[0].model
        state["diverged"] = [a or b for a, b in zip(state["diverged"], trained.groups[0].dead)]
    except _Stop:
        pass
    model = state["model"]
    if model is None:  # cfg.steps == 0
        raise ConfigError("train_to_plateau needs cfg.steps >= 1")
    for i in range(n):
        member_model(model, i).load_state_dict(state["params"][i])
    return Plateau(model=model, diverged=list(state["diverged"]), best_step=list(state["step"]), best_loss=list(state["best"]),
                   stopped=state["stopped"], checks=state["checks"], curves=state["curves"])
