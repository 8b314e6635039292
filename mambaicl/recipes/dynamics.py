"""Chapter 3's seed stacks: every (setting, seed) slot of a :class:`~mambaicl.recipes.presets.DynamicsPreset` group
trained as one stack by the engine (:func:`trained_settings`), and the counts and exponents read from their curves
(:func:`sweep_summary`). The dynamics experiment and its checks (``dynamics_checks``) call these.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..analysis.curves import count, exponent_fit
from ..analysis.dynamics_counts import theorem_conditions
from ..analysis.lemmas import stack_probes
from ..analysis.stats import mean_se
from ..config import ConfigError, TrainConfig
from ..data import Patterns, Prompts, make_patterns, training_tasks
from ..evaluate import zero_one_error
from ..seeding import STAGES, torch_generator
from ..train import Draws, Member, SyntheticData, loss_per_model, train
from .base import resolve_device, resolve_seeds
from .presets import DynamicsPreset, Setting, sweep_settings

__all__ = ["factor_value", "record_steps", "SlotRun", "trained_settings", "sweep_summary"]


def factor_value(setting: Setting, factor: str) -> float:
    """The value of ``factor`` at ``setting`` (``1 - p_a`` for ``one_minus_p_a``)."""
    d = setting.data
    return {"lr": setting.lr, "one_minus_p_a": 1 - d.p_a, "beta": d.beta, "M1": d.M1, "l_tr": d.l_tr}[factor]


def record_steps(steps: int, dense_until: int, ratio: float) -> list:
    """Every step up to ``dense_until``, then a geometric grid of ratio ``ratio`` up to ``steps`` (included)."""
    out, t = list(range(dense_until + 1)), float(dense_until)
    while t < steps:
        t *= ratio
        nxt = min(steps, int(round(t)))
        if nxt > out[-1]:
            out.append(nxt)
    if out[-1] != steps:
        out.append(steps)
    return out


@dataclass
class SlotRun:
    """The recorded curves of one stack: ``curves[name]`` is ``(len(steps), n_slots)``; slots setting-major."""

    settings: list
    seeds: tuple
    steps: list
    curves: dict
    stack: nn.Module

    def slot(self, k: int, s: int) -> int:
        return k * len(self.seeds) + s


@torch.no_grad()
def _measure(stack, pat: Patterns, pr: Prompts, lemmas: bool = True) -> dict:
    F = stack(pr)  # (n_slots, n_eval)
    out = {"loss": loss_per_model("hinge", F, pr.z),
           "error": torch.tensor([zero_one_error(F[s], pr.z[s]) for s in range(F.shape[0])], dtype=F.dtype)}
    if lemmas:
        out.update(stack_probes(stack, pat, pr))
    return out


def trained_settings(settings: list, seeds, preset: DynamicsPreset, device=None, lemmas: bool = True) -> SlotRun:
    """Every (setting, seed) slot of one group (same patterns and shapes) trained as one seed stack by
    :func:`mambaicl.train.train` (slot ``k S + s``: ``settings[k]``, ``seeds[s]``, its own step size).

    Records the population hinge loss, the 0-1 error and the Lemma 3-6 probes
    (:func:`mambaicl.analysis.lemmas.stack_probes`) on fixed Definition 1 prompts (stream
    ``(s, "validation")``, drawn by each slot's own data) at :func:`record_steps`; ``lemmas=False``
    records the loss and the error only.
    """
    seeds = resolve_seeds(seeds)
    if not settings or len({st.group for st in settings}) != 1:
        raise ConfigError("settings must be a non-empty list sharing kind, patterns and shapes (Setting.group)")
    device = resolve_device(device)
    d0 = settings[0].data
    pat = make_patterns(d0, torch_generator(preset.pattern_seed, "patterns"))
    tasks = training_tasks(d0.M1)
    data = {st.data: SyntheticData(pat, st.data, tasks) for st in settings}
    ms = [Member(s, st.kind, data[st.data], st.lr, m=d0.d + 1, delta=preset.delta) for st in settings for s in seeds]
    val, _ = Draws(ms, STAGES["validation"], device)(preset.n_eval)
    grid = record_steps(preset.steps, preset.dense_until, preset.grid_ratio)
    pat_d = pat.to(device=device)
    tr = train(ms, TrainConfig(steps=preset.steps, batch_size=preset.batch_size), device=device, progress=False,
               record_every=grid, probes={"measure": lambda stack: _measure(stack, pat_d, val, lemmas)})
    curves = {name: torch.tensor(v, dtype=torch.float64) for name, v in tr.groups[0].history.probes.items()}
    return SlotRun(settings=list(settings), seeds=seeds, steps=grid, curves=curves, stack=tr.models[0])


def sweep_summary(kind: str, preset: DynamicsPreset, curves: dict, S: int, predicted: dict, sweeps=None) -> tuple:
    """Counts per setting and seed, their exponents (hinge-loss count) and the 0-1-error counts' exponents
    (over ``sweeps``, ``factor -> [Setting]``; default :func:`sweep_settings`)."""
    counts, exps, exps_err = {}, {}, {}
    for factor, pts in (sweeps or sweep_settings(preset, kind)).items():
        xs = [factor_value(st, factor) for st in pts]
        T, Te, L0, Lend, cond = [], [], [], [], []
        for st in pts:
            steps, C = curves[st]
            T.append([count(steps, C["loss"][:, s].tolist(), preset.fraction) for s in range(S)])
            Te.append([count(steps, C["error"][:, s].tolist(), preset.fraction) for s in range(S)])
            L0.append(C["loss"][0].tolist())
            Lend.append(C["loss"][-1].tolist())
            cond.append(theorem_conditions(st, preset.batch_size, preset.epsilon))
        ms = [mean_se(t) for t in T]
        counts[factor] = {"values": xs, "T": T, "T_mean": [m for m, _ in ms], "T_se": [e for _, e in ms],
                          "T_error": Te, "loss_initial": L0, "loss_end": Lend, "conditions": cond,
                          "inside_conditions": [all(v >= 1 for v in c.values()) for c in cond]}
        exps[factor] = exponent_fit(xs, list(zip(*T)), predicted[factor])
        exps_err[factor] = exponent_fit(xs, list(zip(*Te)), predicted[factor])
    return counts, exps, exps_err

