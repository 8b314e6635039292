"""Part I's ("Learn") illustrative models: a one-layer Mamba and a linear Transformer trained by the engine
(Algorithm 1) on §4.1's data, small enough to train in seconds on a CPU (float64).

=====================  ========================================================================================
``illustrative_pair``  the two trained models, their patterns and training histories (:class:`LearnPair`)
``gate_probe``         a probe for :func:`mambaicl.train.train`: the gates of one prompt and ``w . u`` in training
``LEARN_STEPS``        SGD steps of the illustrative models
``LEARN_LR``           their step sizes
=====================  ========================================================================================

The Learn chapters train here and draw with :mod:`mambaicl.viz.learn`, which trains nothing; Part II trains and
audits the paper's runs (:mod:`mambaicl.recipes.fig2` and the experiments).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import LEARN_SEED, SYNTHETIC_DATA, TrainConfig
from ..data import make_patterns, training_tasks
from ..seeding import torch_generator
from ..train import Member, SyntheticData, train

__all__ = ["LearnPair", "illustrative_pair", "gate_probe", "LEARN_SEED", "LEARN_STEPS", "LEARN_LR"]

#: SGD steps of the illustrative models: enough for the gate to close on outliers
LEARN_STEPS = 400
#: step sizes of the illustrative models (the values Part II's search selects for Figure 2)
LEARN_LR = {"mamba": 1.0, "linear": 0.01}


@dataclass
class LearnPair:
    """The Learn part's illustrative models: ``models[kind]`` (single models), their patterns and histories."""

    models: dict
    patterns: object
    data: object
    histories: dict


def illustrative_pair(*, seed: int = LEARN_SEED, steps: int = LEARN_STEPS, kinds=("mamba", "linear"),
                      record_every=10, probes: dict | None = None) -> LearnPair:
    """Train a one-layer Mamba and a linear Transformer with Algorithm 1 on Definition 1 prompts (§4.1's data).

    The patterns come from the stream ``(seed, "learn/patterns")`` and the training prompts from
    ``(seed, "learn/train")``; step sizes :data:`LEARN_LR`, batch 64, float64. Takes a few seconds on a CPU.

    Args:
        probes: passed to :func:`mambaicl.train.train` (recorded every ``record_every`` steps).
    """
    data = SYNTHETIC_DATA
    pat = make_patterns(data, torch_generator(seed, "learn/patterns"))
    source = SyntheticData(pat, data, training_tasks(data.M1))
    models, histories = {}, {}
    for kind in kinds:
        member = Member(seed, kind, source, LEARN_LR[kind], m=data.d + 1, delta=0.2, dtype=torch.float64)
        tr = train([member], TrainConfig(steps=steps, batch_size=64), stage="learn/train", progress=False,
                   record_every=record_every, probes=probes)
        models[kind], histories[kind] = tr.models[0].member(0), tr.groups[0].history
    return LearnPair(models=models, patterns=pat, data=data, histories=histories)


def gate_probe(P: torch.Tensor, directions: dict):
    """A probe for :func:`mambaicl.train.train`: the gates ``G_{i,l+1}`` of the context examples of one
    prompt ``P`` ``(l+1, d+1)`` (key ``"gates"``), their own gate values ``sigma(w^T p_i)`` (``"sigmas"``) and
    ``w . u`` for every ``{name: u}`` of ``directions``, of the first model of a trained stack."""
    def probe(stack) -> dict:
        out = {"gates": stack.gate(P[None, None])[0, 0, :-1],
               "sigmas": torch.sigmoid(stack.logits(P[None, None])[0, 0, :-1])}
        out.update({name: stack.w[0] @ u for name, u in directions.items()})
        return out

    return probe
