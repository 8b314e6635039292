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

The seeds of a run are members of one engine call (:func:`mambaicl.train.train`); a member that stops
is replaced in the stack by a member with no parameters (its update is then skipped), and the call ends
when every member has stopped. Each member's trajectory is its own (its own draws, gradient and Adam
state), so a seed trained in a batch ends exactly where it ends alone. The curriculum of App. 8.1 trains
on placement R for ``switch`` steps, then on CQ; its validation prompts use CQ and the stopping rule
starts at the switch.
"""
from __future__ import annotations

import copy
import math
from typing import List, Tuple

import torch
from torch import nn

from ..data.poisoning import SST2Source, sst2_prompts
from ..evaluate import predict
from ..seeding import torch_generator
from ..train import Member, loss_per_model, members, train
from ..config import TrainConfig
from .base import resolve_device, resolve_seeds

__all__ = ["validation_prompts", "run_members", "budget", "EarlyStop", "trained_models"]


def validation_prompts(run, feat, cfg):
    """The fixed validation prompts of ``run`` (``run.n_val`` of them; the same for every seed): built like its
    training prompts, from ``feat.val`` (placement CQ for the curriculum's second phase)."""
    if feat.val is None:
        raise ValueError("training until the validation loss stops needs the validation pool: "
                         "prepare_features(cfg, with_val=True)")
    placement = "CQ" if run.curriculum else "R"
    return sst2_prompts(feat.val, run.n_val, l=cfg.l, alpha=run.p_a, placement=placement, rule="C",
                        generator=torch_generator(cfg.seed, f"sst2/validation/{run.p_a}/{placement}"))


def run_members(run, feat, cfg, seeds, lrs=None) -> List[Member]:
    """Engine members of ``run``: one per (step size, seed), member ``k S + s`` is ``(lrs[k], seeds[s])``;
    initial values from ``(seed, "init")``, training prompts (:class:`SST2Source`) from ``(seed, "train")``."""
    data = SST2Source(feat.train, l=cfg.l, p_a=run.p_a, switch=run.switch if run.curriculum else None)
    return members(seeds, run.kind, data, (run.lr,) if lrs is None else lrs, n_layers=run.n_layers,
                   options={"n_heads": run.n_heads, "d_model": run.d_model})


def budget(run, steps=None) -> TrainConfig:
    """The loop's budget for ``run`` (its ``lr`` is the members'; ``steps`` the cap)."""
    return TrainConfig(lr=run.lr, batch_size=run.batch_size, steps=run.steps if steps is None else steps,
                       optimizer=run.optimizer, loss=run.loss)


class _AllStopped(Exception):
    """Every member of the group has stopped: ends the engine's loop."""


class _Stopped(nn.Module):
    """A member that has stopped: a constant prediction 0 and no parameters (the loop's update skips it)."""

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        return P.new_zeros(P.shape[0])  # (batch,)


class EarlyStop:
    """The engine's ``callback``: every ``every`` steps, each running member's hinge loss on the validation
    prompts; a member whose loss has not reached a new lowest value for ``patience`` readings (counted from
    step ``start``) stops, keeping a copy of its model at its lowest reading.

    ``records[k]``: member ``k``'s ``{"steps", "loss", "best_step", "best_loss", "stopped_at", "capped"}``.
    """

    def __init__(self, val, loss: str, n: int, *, every: int, patience: int, cap: int, start: int = 0,
                 device=None) -> None:
        self.P, self.z = val.P.to(resolve_device(device)), val.z
        self.loss, self.every, self.patience, self.cap, self.start = loss, every, patience, cap, start
        self.models: list = [None] * n
        self.records = [{"steps": [], "loss": [], "best_step": None, "best_loss": math.inf, "stopped_at": None,
                         "capped": False} for _ in range(n)]
        self.waited = [0] * n

    def __call__(self, step: int, stack) -> None:
        t = step + 1  # updates taken
        if t % self.every and t != self.cap:
            return
        for k, rec in enumerate(self.records):
            if rec["stopped_at"] is not None:
                continue
            m = stack.members[k]
            with torch.no_grad():
                v = float(loss_per_model(self.loss, predict(m, self.P).cpu(), self.z))
            rec["steps"].append(t)
            rec["loss"].append(v)
            if t < self.start:
                continue
            if v < rec["best_loss"]:
                rec["best_loss"], rec["best_step"], self.waited[k] = v, t, 0
                self.models[k] = copy.deepcopy(m).eval()
            else:
                self.waited[k] += 1
            if self.waited[k] >= self.patience:
                rec["stopped_at"] = t
                stack.members[k] = _Stopped()
            elif t == self.cap:
                rec["stopped_at"], rec["capped"] = t, True
        if all(r["stopped_at"] is not None for r in self.records):
            raise _AllStopped


def trained_models(run, feat, cfg, seeds=(0,), device=None, progress: bool = False) -> Tuple[list, list]:
    """Train ``run`` for every seed as one batch of members until each member's validation loss stops
    improving (:class:`EarlyStop`); returns ``(models, records)``, one per seed: the model at its lowest
    validation loss and its record (``best_step`` is the length reported), each exactly what a run of
    that seed alone gives."""
    seeds = resolve_seeds(seeds)
    dev = resolve_device(device)
    stop = EarlyStop(validation_prompts(run, feat, cfg), run.loss, len(seeds), every=run.every,
                     patience=run.patience, cap=run.steps, start=run.switch if run.curriculum else 0, device=dev)
    try:
        train(run_members(run, feat, cfg, seeds), budget(run), device=dev, progress=progress,
              record_every=[0], callback=stop)
    except _AllStopped:
        pass
    return stop.models, stop.records
