"""Chapter 6's training: every run trained until its validation loss stops improving (§4.2, App. 8.1).

Glossary (code name -> paper symbol):

===================  ========================================================================
``validation``       fixed prompts built like the training prompts (Definition 1: each context example an
                     outlier with probability ``p_a``, placement R, random labels) from the regime's
                     validation sentences, carved from ``train.tsv`` (never dev or test sentences)
``every``            steps between two readings of the validation hinge loss
``patience``         readings without a new lowest validation loss after which a member stops
``steps``            the cap: a member that has not stopped by then ends there (``capped``)
``best_step``        the reading with the lowest validation loss: the member's reported model and length
===================  ========================================================================

The seeds of a run are members of one engine call (:func:`mambaicl.train.train`) with early stopping
(:mod:`mambaicl.convergence`): a member that stops rests (it is no longer run or moved), and the call ends
when every member has stopped. Each member's trajectory is its own (its own draws, gradient and Adam
state), so a seed trained in a batch ends exactly where it ends alone. The curriculum of App. 8.1 trains
on placement R for ``switch`` steps, then on CQ; its validation prompts use CQ and the stopping rule
starts at the switch.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

import torch

from ..data.poisoning import SST2Source, sst2_prompts
from .stepsize import search_seeds, step_size_search
from ..evaluate import predict, zero_one_error
from ..seeding import STAGES, numpy_stream
from ..train import EarlyStopping, Member, loss_per_model, member_model, members, train
from ..config import ConfigError, TrainConfig
from .base import resolve_device, resolve_seeds
from .validation import sst2_validation_prompts

__all__ = ["run_members", "budget", "trained_models", "validation_curve"]


def run_members(run, feat, cfg, seeds, lrs=None) -> List[Member]:
    """Engine members of ``run``: one per (step size, seed), member ``k S + s`` is ``(lrs[k], seeds[s])``;
    initial values from ``(seed, "init")``, training prompts (:class:`SST2Source`) from ``(seed, "train")``."""
    data = SST2Source(feat.train, l=cfg.l, p_a=run.p_a, switch=run.switch if run.curriculum else None)
    return members(seeds, run.kind, data, (run.lr,) if lrs is None else lrs, n_layers=run.n_layers,
                   options={"n_heads": run.n_heads, "d_model": run.d_model})


def budget(run, steps=None) -> TrainConfig:
    """The loop's budget for ``run`` (the step size is the members'; ``steps`` the cap)."""
    return TrainConfig(batch_size=run.batch_size, steps=run.steps if steps is None else steps,
                       optimizer=run.optimizer, loss=run.loss)


def trained_models(run, feat, cfg, seeds=(0,), device=None, progress: bool = False) -> Tuple[list, list]:
    """Train ``run`` for every seed as one batch of members until each member's validation hinge loss stops
    improving (the engine's early stopping, each member on its own); returns ``(models, records)``, one per seed:
    the model at its lowest validation loss and its record (``{"steps", "loss", "best_step", "best_loss",
    "stopped_at", "capped"}``; ``best_step`` is the length reported), each exactly what a run of that seed alone
    gives."""
    seeds = resolve_seeds(seeds)
    dev = resolve_device(device)
    val = sst2_validation_prompts(run, feat, cfg)
    P, z = val.P.to(dev), val.z

    def validate(model, i: int) -> float:
        return float(loss_per_model(run.loss, predict(model, P).cpu(), z))

    stop = EarlyStopping(every=run.every, patience=run.patience, start=run.switch if run.curriculum else 0)
    trained = train(run_members(run, feat, cfg, seeds), budget(run), device=dev, progress=progress,
                    record_every=[0], stop=stop, validate=validate)
    records = [trained.stopping(i) for i in range(len(seeds))]
    return ([trained.member_model(i).eval() if r.best_step is not None else None for i, r in enumerate(records)],
            [{k: v for k, v in dataclasses.asdict(r).items() if k != "diverged"} for r in records])


def validation_curve(run, feat, cfg, reported, *, lrs=(1e-3, 3e-3, 1e-2), steps: int = 800, every: int = 100,
                     seeds=None, n_prompts: int = 2000, alpha: Optional[float] = None, device=None) -> Dict[float, dict]:
    """Step size and length of training chosen on the *validation* sentences (never the test ones).

    For each length ``every, 2 every, ..., steps``, :func:`mambaicl.recipes.stepsize.step_size_search` trains
    ``run`` with every step size of ``lrs`` on the search seeds (default: two seeds disjoint from the ``reported``
    ones) and scores each member by its hinge loss on fixed validation prompts built like
    the training prompts (``alpha`` defaults to the run's ``p_a``; placement R). Returns ``{lr: {"steps",
    "loss", "acc", "best_step", "best_loss"}}`` (loss and accuracy in % are means over the search seeds);
    the chosen setting is the ``lr`` with the lowest ``best_loss``, trained for its ``best_step`` steps.
    """
    if feat.val is None:
        raise ConfigError("validation_curve needs the validation pool: prepare_features(cfg, with_val=True)")
    seeds = search_seeds(reported, 2) if seeds is None else seeds
    a = run.p_a if alpha is None else alpha
    val = sst2_prompts(feat.val, n_prompts, l=cfg.l, alpha=a, placement="R", rule="C",
                       stream=numpy_stream(0, STAGES["validation"]))
    dev = resolve_device(device)
    out = {float(lr): {"steps": [], "loss": [], "acc": []} for lr in lrs}
    for length in range(every, steps + 1, every):
        acc = {}

        def score(trained, acc=acc) -> list:
            losses = []
            for i in range(len(trained.members)):
                g, k = trained.locate(i)
                with torch.no_grad():
                    F = predict(member_model(g.model, k), val.P.to(dev)).cpu()
                losses.append(float(loss_per_model(run.loss, F, val.z)))
                acc[i] = 100 * (1 - zero_one_error(F, val.z))
            return losses

        template = run_members(run, feat, cfg, (0,))[0]
        found = step_size_search(template, lrs, budget(run, length), score, seeds=seeds, reported=reported,
                                 device=dev)
        for k, lr in enumerate(found.lrs):
            out[lr]["steps"].append(length)
            out[lr]["loss"].append(found.mean[k])
            out[lr]["acc"].append(sum(acc[found.member(k, s)] for s in range(len(found.seeds))) / len(found.seeds))
    for rec in out.values():
        best = min(range(len(rec["loss"])), key=rec["loss"].__getitem__)
        rec.update(best_step=rec["steps"][best], best_loss=rec["loss"][best])
    return out
