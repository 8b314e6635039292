"""How a deep mechanism model is fitted and checked before it is read (Chapter 5, App. Mamba-1; issue 17).

Three pieces the mechanism experiment runs before it measures Corollaries 1-2 in a deep stack:

==========================  =============================================================================
``validation_prompts``      Definition 1 prompts of the *training* tasks from the stream ``(s, "val")``:
                            the validation set of seed ``s`` (never the test prompts, never other tasks)
``search_step_size``        the step size of one variant, chosen by
                            :func:`mambaicl.analysis.stepsize.step_size_search` on seeds disjoint from the
                            reported ones, scored by the validation loss after a short budget
``validation_loss``         the score of the engine's early stopping (:mod:`mambaicl.convergence`): member
                            ``i``'s loss on its own validation prompts
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

import math

import torch

from ..analysis.stepsize import StepSizeSearch, step_size_search
from ..config import ConfigError, TrainConfig, check_int
from ..data import Patterns, Prompts, training_prompts, training_tasks
from ..seeding import STAGES, numpy_stream
from ..train import Member, loss_per_model

__all__ = ["LEARNS_IN_CONTEXT", "validation_prompts", "validation_loss", "search_step_size", "token_norms",
           "learns_in_context"]

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
    """``n`` Definition 1 prompts of the training tasks from the stream ``(seed, "val")``
    (``STAGES["mechanism validation"]`` of :mod:`mambaicl.seeding`)."""
    check_int("n_val", n, 1)
    return training_prompts(pat, data, training_tasks(data.M1), n, numpy_stream(seed, STAGES["mechanism validation"]))


def validation_loss(val: list, loss: str):
    """``validate(model, i)``: the mean ``loss`` of ``model`` (member ``i``) on its validation prompts ``val[i]``."""

    def validate(model, i: int) -> float:
        with torch.no_grad():
            F = model(val[i].P)  # (n_val,)
            return float(loss_per_model(loss, F, val[i].z.to(F.dtype)))

    return validate


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
            pr = seeds_val[m.seed]
            with torch.no_grad():
                F = trained.member_model(i)(pr.P)  # (n_val,)
                v = float(loss_per_model(cfg.loss, F, pr.z.to(F.dtype)))
            vals.append(v if math.isfinite(v) else math.inf)
        return vals

    return step_size_search(template, lrs, cfg, score, reported=reported, n_seeds=n_seeds, device=device)


def token_norms(model, pr: Prompts) -> list:
    """Per layer of a deep stack: ``{"u_outlier", "u_clean", "x_outlier", "x_clean"}``, the median Euclidean norm
    over the outlier / clean context examples of ``pr`` of the token the layer's gate reads (``u = norm(x)``) and
    of the residual stream ``x`` entering the layer; ``"u_ratio"``, ``"x_ratio"`` their outlier / clean ratios.

    Without normalisation ``u = x``; with pre-norm RMSNorm ``u = x / rms(x) * weight`` has norm about
    ``sqrt(D)`` times the weight's scale for every token, whatever the outlier added to ``x``.
    """
    if not hasattr(model, "mixers"):
        raise ConfigError(f"model must be a deep stack (DeepICLModel) for token_norms; got {type(model).__name__}")
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

