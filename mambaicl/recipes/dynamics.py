"""Chapter 3's seed stacks: every (setting, seed) slot of a :class:`~mambaicl.recipes.presets.DynamicsPreset` group
trained as one stack by the engine (:func:`trained_settings`), and the counts and exponents read from their curves
(:func:`sweep_summary`). The dynamics experiment and its checks (``dynamics_checks``) call these.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..analysis.curves import count, exponent_fit
from ..analysis.dynamics_counts import theorem_conditions
from ..analysis.init_gradients import init_rates
from ..analysis.lemmas import stack_probes
from ..analysis.stats import mean_se
from ..config import ConfigError, TrainConfig
from ..data import Patterns, Prompts, make_patterns, training_tasks
from ..evaluate import zero_one_error
from ..seeding import STAGES, torch_generator
from ..train import Draws, Member, SyntheticData, loss_per_model, train
from .base import resolve_device, resolve_seeds
from .presets import DynamicsPreset, Setting, sweep_settings

__all__ = ["factor_value", "record_steps", "SlotRun", "trained_settings", "sweep_summary", "Report", "init_exponents",
           "setting_label", "FACTOR_NAMES", "RATE_NAMES", "LEMMA4_RATES"]

#: the factors and the rates as the chapter's tables name them
FACTOR_NAMES = {"lr": "eta", "one_minus_p_a": "1 - p_a", "beta": "beta", "M1": "M1", "l_tr": "l_tr"}
RATE_NAMES = {"lemma3": "Lemma 3: mu^T W_B mu grows", "lemma4_v": "Lemma 4: v*^T w falls",
              "lemma4_mu": "Lemma 4: (mu_j,0) w falls", "lemma4_ratio": "Lemma 4: ratio mu / v"}
#: Lemma 4's three rates (the 15 exponents of row ch3-lemma45)
LEMMA4_RATES = ("lemma4_v", "lemma4_mu", "lemma4_ratio")


class Report:
    """What one of Chapter 3's cells shows, computed by the package: printed text and glued values, in the order the
    cell shows them (``items``: a ``str`` is printed, a ``(name, value)`` pair glued), and the checks the chapter's
    prose relies on (``checks``: name -> bool; the chapter asserts them all)."""

    def __init__(self) -> None:
        self.items: list = []
        self.checks: dict = {}

    def print(self, *args, sep: str = " ", end: str = "\n") -> None:
        self.items.append(sep.join(str(a) for a in args) + end)

    def glue(self, name: str, value) -> None:
        self.items.append((name, value))

    def check(self, name: str, ok) -> None:
        self.checks[name] = bool(ok)

    @property
    def text(self) -> str:
        """Everything printed, as one string."""
        return "".join(i for i in self.items if isinstance(i, str))

    @property
    def values(self) -> dict:
        """Every glued value, ``{name: value}``."""
        return dict(i for i in self.items if not isinstance(i, str))

    @property
    def failed(self) -> list:
        """The names of the checks that do not hold."""
        return [k for k, ok in self.checks.items() if not ok]

    def show(self, glue) -> None:
        """Print and glue (``glue(name, value)``, the notebook's) in order; an ``AssertionError`` names the checks
        that fail (the prose around the cell would then be wrong)."""
        for item in self.items:
            if isinstance(item, str):
                print(item, end="")
            else:
                glue(*item)
        assert not self.failed, f"the prose's checks fail: {self.failed}"


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


def init_exponents(sweeps: dict, delta: float) -> dict:
    """``{rate: {factor: exponent}}``: the log-log slope over each sweep (``factor -> [Setting]``) of the rates at
    ``t = 0`` (:func:`mambaicl.analysis.init_gradients.init_rates`), the derivation's prediction for a rate
    measured as a finite difference at initialisation."""
    out = {}
    for factor, pts in sweeps.items():
        xs = np.log([factor_value(st, factor) for st in pts])
        vals = [init_rates(st.data, st.lr, delta) for st in pts]
        for name in vals[0]:
            out.setdefault(name, {})[factor] = float(np.polyfit(xs, np.log([v[name] for v in vals]), 1)[0])
    return out


def setting_label(st: Setting, preset: DynamicsPreset, labels: dict) -> str:
    """``"<label> = <value>"`` for the factor that moves ``st`` away from ``preset``'s base (``labels``: factor ->
    label), or ``"the base setting"``."""
    base = Setting(st.kind, preset.data, preset.lr[st.kind])
    for factor in labels:
        if factor_value(st, factor) != factor_value(base, factor):
            return f"{labels[factor]} = {factor_value(st, factor):g}"
    return "the base setting"
