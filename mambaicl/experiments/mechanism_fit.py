"""How a deep mechanism model is fitted and checked before it is read (Chapter 5, App. Mamba-1; issue 17).

Three pieces the mechanism experiment runs before it measures Corollaries 1-2 in a deep stack:

==========================  =============================================================================
``validation_prompts``      Definition 1 prompts of the *training* tasks from the stream ``(s, "val")``:
                            the validation set of seed ``s`` (never the test prompts, never other tasks)
``search_step_size``        the step size of one variant, chosen by
                            :func:`mambaicl.analysis.stepsize.step_size_search` on seeds disjoint from the
                            reported ones, scored by the validation loss after a short budget
``train_to_plateau``        every seed trained by the engine in one call until the validation loss stops
                            improving (``patience`` checks ``every`` updates apart without a new minimum);
                            each seed keeps its parameters of its best check (early stopping)
``token_norms``             per layer, the median norm of outlier and clean context tokens as the layer's
                            gate reads them (``u = RMSNorm(x)``, or ``x`` without normalisation), and of
                            the residual stream ``x`` itself: the direct test of "RMSNorm hides the outliers"
``LEARNS_IN_CONTEXT``       the reversed-task error below which a model is said to learn in context
==========================  =============================================================================

Why reversed tasks decide. A reversed task ``(b, a)`` uses the same two patterns as the training task
``(a, b)`` with the labels swapped. A model that memorised the training tasks (pattern -> label) errs on
every reversed prompt (error near 1); a model that reads the labels from the context is right on them.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from ..analysis.stepsize import StepSizeSearch, step_size_search
from ..config import ConfigError, TrainConfig, check_int
from ..data import Patterns, Prompts, training_prompts, training_tasks
from ..seeding import torch_generator
from ..train import Member, MemberStack, loss_per_model, train

__all__ = ["LEARNS_IN_CONTEXT", "validation_prompts", "member_model", "validation_losses", "search_step_size",
           "Plateau", "train_to_plateau", "token_norms", "learns_in_context"]

#: A model "learns in context" on the reversed tasks when its reversed-task error is below 0.25: half the
#: chance level 1/2 (a coin), a quarter of the error 1 of a model that memorised the training tasks. Fixed
#: before any deep model was measured on the reversed tasks with this protocol (issue 17).
LEARNS_IN_CONTEXT = 0.25


def learns_in_context(reversed_errors) -> bool:
    """Whether the mean reversed-task error over seeds is below :data:`LEARNS_IN_CONTEXT` (the chapter's word;
    the verdict of record is the claims registry's ``deep-icl`` row, by the 95 % t interval)."""
    e = [float(v) for v in reversed_errors]
    return bool(e) and sum(e) / len(e) < LEARNS_IN_CONTEXT


def validation_prompts(pat: Patterns, data, seed: int, n: int) -> Prompts:
    """``n`` Definition 1 prompts of the training tasks from the stream ``(seed, "val")``."""
    check_int("n_val", n, 1)
    return training_prompts(pat, data, training_tasks(data.M1), n, torch_generator(seed, "val"))


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


def search_step_size(template: Member, lrs, cfg: TrainConfig, *, reported, n_seeds: int, n_val: int,
                     device=None) -> StepSizeSearch:
    """:func:`mambaicl.analysis.stepsize.step_size_search` of ``template`` over ``lrs`` on ``n_seeds`` seeds
    disjoint from ``reported``, each member scored by its loss on ``n_val`` validation prompts of its seed
    (:func:`validation_prompts`) after ``cfg.steps`` updates."""
    pat, data = template.data.pat, template.data.config
    seeds_val = {}

    def score(trained) -> list:
        vals = []
        for i, m in enumerate(trained.members):
            if m.seed not in seeds_val:
                seeds_val[m.seed] = validation_prompts(pat, data, m.seed, n_val)
            g, k = trained.locate(i)
            pr = seeds_val[m.seed]
            with torch.no_grad():
                F = member_model(g.model, k)(pr.P)  # (n_val,)
                v = float(loss_per_model(cfg.loss, F, pr.z.to(F.dtype)))
            vals.append(v if math.isfinite(v) else math.inf)
        return vals

    return step_size_search(template, lrs, cfg, score, reported=reported, n_seeds=n_seeds, device=device)


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
    from ..members import build_members

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


def token_norms(model, pr: Prompts) -> list:
    """Per layer of a deep stack: ``{"u_outlier", "u_clean", "x_outlier", "x_clean"}``, the median Euclidean norm
    over the outlier / clean context examples of ``pr`` of the token the layer's gate reads (``u = norm(x)``) and
    of the residual stream ``x`` entering the layer; ``"u_ratio"``, ``"x_ratio"`` their outlier / clean ratios.

    Without normalisation ``u = x``; with pre-norm RMSNorm ``u = x / rms(x) * weight`` has norm about
    ``sqrt(D)`` times the weight's scale for every token, whatever the outlier added to ``x``.
    """
    if not hasattr(model, "mixers"):
        raise ConfigError(f"token_norms needs a deep stack (DeepICLModel); got {type(model).__name__}")
    out_mask = pr.outlier  # (n, l)
    clean_mask = ~pr.outlier
    l = out_mask.shape[-1]
    res = []
    with torch.no_grad():
        x = pr.P.to(model.embed.dtype) @ model.embed.T  # (n, L, D)
        for norm, mixer in zip(model.norms, model.mixers):
            u = norm(x)
            nx, nu = x[:, :l].norm(dim=-1), u[:, :l].norm(dim=-1)  # (n, l)
            row = {}
            for name, t in (("u", nu), ("x", nx)):
                o = float(t[out_mask].median()) if bool(out_mask.any()) else math.nan
                c = float(t[clean_mask].median())
                row[f"{name}_outlier"], row[f"{name}_clean"], row[f"{name}_ratio"] = o, c, o / c
            res.append(row)
            x = x + mixer(u)
    return res

