"""Validation prompts: the one place where the book builds the prompts a step size or a stopping rule is chosen on.

Validation prompts are built like the training prompts (Definition 1, the *training* tasks, never the test
prompts or other tasks) from streams of their own (:data:`mambaicl.seeding.STAGES`):

=============================  =========================================================================
``validation_prompts``         synthetic: ``n`` prompts per seed from ``(seed, STAGES[stage]/parts...)``; ``stage``
                               ``"validation"`` (step-size searches; ``"validation/batch"``, ``"validation/kappa"``)
                               or ``"mechanism validation"`` (the deep stacks' early stopping and search, ``"val"``)
``validation_hinge``           the synthetic step-size searches' score: each member's hinge loss on them
``sst2_validation_prompts``    SST-2: prompts from the validation sentences (carved from ``train.tsv``)
=============================  =========================================================================
"""
from __future__ import annotations

from typing import Callable

import torch

from ..config import ConfigError, check_int
from ..data import Prompts, training_prompts, training_tasks
from ..seeding import STAGES, numpy_stream, streams_for, substage

__all__ = ["validation_prompts", "validation_hinge", "sst2_validation_prompts"]


def validation_prompts(pat, data, seeds, n: int, stage: str, *parts) -> Prompts:
    """``n`` Definition 1 prompts of the training tasks of ``data`` on ``pat``: for one seed (an ``int``) from the
    stream ``(seed, substage(STAGES[stage], *parts))``, for a sequence of seeds ``n`` per seed, stacked in seed order.
    ``parts`` name one experiment's own validation set (e.g. ``"validation", "batch"``: ``"validation/batch"``)."""
    return training_prompts(pat, data, training_tasks(data.M1), check_int("n_val", n, 1),
                            streams_for(seeds, substage(STAGES[stage], *parts)))


def validation_hinge(pat, data, seeds, n_val: int) -> Callable[[object], list]:
    """The synthetic experiments' score for :func:`step_size_search` on the search seeds ``seeds`` (one-layer
    stacks, member ``k S + s`` = step size ``k``, seed ``s``): each member's mean hinge loss on ``n_val``
    Definition 1 prompts of the training tasks from its seed's stream ``(seed, "validation")`` (the same prompts
    for every step size). ``score.prompts(n)`` gives those prompts for ``n`` members, in member order."""
    from ..evaluate import predict
    from ..train import loss_per_model

    val = validation_prompts(pat, data, seeds, n_val, "validation")

    def prompts(n: int):
        return val[torch.arange(len(seeds)).repeat(n // len(seeds))]  # member k S + s reads seed s's prompts

    def score(trained) -> list:
        vals = prompts(len(trained.members))
        with torch.no_grad():
            return loss_per_model("hinge", predict(trained.models[0], vals), vals.z).tolist()

    score.prompts = prompts
    return score


def sst2_validation_prompts(run, feat, cfg):
    """The fixed validation prompts of the SST-2 ``run`` (``run.n_val`` of them; the same for every seed): built like
    its training prompts, from ``feat.val`` (placement CQ for the curriculum's second phase), stream
    ``(cfg.seed, "sst2/validation/<p_a>/<placement>")``."""
    from ..data.poisoning import sst2_prompts

    if feat.val is None:
        raise ConfigError("feat.val must hold the validation pool to train until the validation loss stops: "
                         "prepare_features(cfg, with_val=True)")
    placement = "CQ" if run.curriculum else "R"
    return sst2_prompts(feat.val, run.n_val, l=cfg.l, alpha=run.p_a, placement=placement, rule="C",
                        stream=numpy_stream(cfg.seed, substage("sst2", STAGES["validation"], run.p_a, placement)))
