"""Chapter 3's checks: Lemma 4's rates over the whole early horizon, and the beta sweep with the outlier norm scaled.

Glossary (code name -> paper symbol):

====================  =====================================================================
``ChecksPreset``      the :class:`~mambaicl.recipes.presets.DynamicsPreset` whose data, grids and
                      measurements it shares, Mamba's small step size ``early_lr`` (``eta``) for the early
                      phase and ``min_inside`` (the fewest steps Lemma 4's horizon must hold)
``early_settings``    Mamba at ``early_lr`` over the ``1-p_a``, ``beta``, ``M1`` and ``l_tr`` grids
``horizon``           Lemma 4's early phase ``t <~ min{...}`` (hidden constant 1)
``scaled_settings``   the ``beta`` grid with the outlier norm ``||v*_s||`` scaled with ``beta`` (the
                      ratio ``||v*|| / beta`` kept at the base setting's)
====================  =====================================================================

**Why a small step size.** At Figure 2's ``eta = 0.3`` Lemma 4's horizon is about 1.4 steps, so a
rate fitted over ``t <= 3`` is a finite difference at the initialisation: its ``eta`` exponent is +1
for any smooth dynamics. At ``early_lr`` the horizon holds at least ``min_inside`` steps at every
setting, and the rates are least-squares slopes over the whole horizon (every step recorded). The
``eta`` exponent is not measured: over a window scaled with ``1/eta`` it is +1 for any dynamics close
to gradient flow, so it tests nothing.

**Why the scaled sweep.** The training outliers' norm is ``outlier_norm`` (3.0), not ``beta``: in the
dynamics preset's beta sweep the outlier-to-pattern norm ratio changes with ``beta``. Here both move
together (Chapter 2: ``outlier_norm = beta`` at the base); the fixed-norm sweep answers "what does the
pattern norm alone do", the scaled one "what does the scale of the whole input do".
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from dataclasses import dataclass

from ..analysis.curves import exponent_fit, lemma_rates
from ..analysis.dynamics_counts import eq13_inside
from ..analysis.init_gradients import init_rates
from ..analysis.lemmas import lemma4_horizon
from ..analysis.theory import EARLY_FACTORS  # Lemma 4's factors over the whole horizon (eta left out)
from ..analysis.theory import LEMMA_PREDICTED, THEOREM_PREDICTED as PREDICTED
from ..config import ConfigError, instance, integer, real, to_dict
from ..recipes.base import Preset, Result, internal, resolve_seeds
from ..recipes.dynamics import factor_value, sweep_summary, trained_settings
from ..recipes.presets import (DYNAMICS, DYNAMICS_KINDS as KINDS, DYNAMICS_SEEDS as DEFAULT_SEEDS, DYNAMICS_TINY as DYN_TINY,
                     DynamicsPreset, Setting)

__all__ = ["DEFAULT_SEEDS", "EARLY_FACTORS", "ChecksPreset", "CHECKS", "TINY", "PRESETS", "DEFAULT_PRESET",
           "early_settings", "horizon", "scaled_settings", "init_exponents", "setting_label", "ChecksResult", "run"]


@dataclass(frozen=True)
class ChecksPreset(Preset):
    """The two checks: the shared dynamics preset, the early-phase step size and the fewest steps inside it."""

    dynamics: DynamicsPreset = instance(DynamicsPreset, factory=lambda: DYNAMICS)
    early_lr: float = real(0.015, 0.0, 1.0, low_open=True)
    min_inside: int = integer(10, 2)
    early_n_eval: int = integer(64, 1)

    def _check(self) -> None:
        short = [(st.data, round(horizon(st), 2)) for pts in early_settings(self).values() for st in pts
                 if horizon(st) < self.min_inside]
        if short:
            raise ConfigError(f"early_lr = {self.early_lr} leaves fewer than min_inside = {self.min_inside} steps "
                              f"inside Lemma 4's horizon at {short}; lower early_lr (allowed: (0, 1])")


def horizon(st: Setting) -> float:
    """Lemma 4's early phase of setting ``st`` in steps (hidden constant 1)."""
    d = st.data
    return lemma4_horizon(st.lr, d.p_a, d.beta, d.kappa_a, d.M1, d.V)


def early_settings(preset: ChecksPreset) -> dict:
    """``factor -> [Setting]``: Mamba at ``early_lr`` over the dynamics preset's grids of :data:`EARLY_FACTORS`."""
    base, lr, p = preset.dynamics.data, preset.early_lr, preset.dynamics
    rep = dataclasses.replace
    return {"one_minus_p_a": [Setting("mamba", rep(base, p_a=float(v)), lr) for v in p.p_a_grid],
            "beta": [Setting("mamba", rep(base, beta=float(v)), lr) for v in p.beta_grid],
            "M1": [Setting("mamba", rep(base, M1=int(v)), lr) for v in p.M1_grid],
            "l_tr": [Setting("mamba", rep(base, l_tr=int(v)), lr) for v in p.l_tr_grid]}


def scaled_settings(preset: ChecksPreset, kind: str) -> list:
    """The beta grid at ``kind``'s base step size with ``outlier_norm = beta * (outlier_norm / beta)`` of the base."""
    base = preset.dynamics.data
    ratio = base.outlier_norm / base.beta
    return [Setting(kind, dataclasses.replace(base, beta=float(b), outlier_norm=float(b) * ratio), preset.dynamics.lr[kind])
            for b in preset.dynamics.beta_grid]


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


@dataclass
class ChecksResult(Result):
    """Lemma 4's rates over the whole horizon (Mamba, small step size) and the scaled-norm beta sweep (both models)."""

    preset: str
    seeds: list
    config: dict
    early: dict  # early[name][factor]: values, windows, per-setting per-seed rates, fit (names of LEMMA_PREDICTED)
    eq13: dict  # eq13[factor]: per setting, where Eq. (13) holds inside the window (first, fraction, at_window)
    scaled: dict  # scaled[kind]: the beta sweep's counts and exponent with outlier_norm scaled with beta
    curves: dict = internal()  # {setting: (steps, curves)} of every run
    spec: ChecksPreset = internal()

    def summary(self) -> str:
        lines = [f"{'rate':>13} {'factor':>14} {'predicted':>9} {'measured':>9}  95% interval      verdict"]
        for name in ("lemma4_v", "lemma4_mu", "lemma4_ratio"):
            for f in EARLY_FACTORS:
                e = self.early[name][f]["fit"]
                lines.append(f"{name:>13} {f:>14} {e['predicted']:>+9.2f} {e['slope']:>+9.2f}  "
                             f"[{e['low']:+.2f}, {e['high']:+.2f}]  {e['verdict']}")
        for kind in KINDS:
            e = self.scaled[kind]["exponent"]
            lines.append(f"beta (outlier norm scaled) {kind:>7}: {e['slope']:+.2f} [{e['low']:+.2f}, {e['high']:+.2f}] "
                         f"predicted {e['predicted']:+.0f}: {e['verdict']}")
        return "\n".join(lines + [f"seeds {self.seeds}"])


def _groups(settings: list) -> list:
    groups = {}
    for st in settings:
        groups.setdefault(st.group, []).append(st)
    return list(groups.values())


def run(preset: ChecksPreset = None, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True,
        reuse=None) -> ChecksResult:
    """Train Mamba's early-phase sweeps (each stack for the longest horizon in it, every step recorded) and both
    models' scaled-norm beta sweeps (the dynamics preset's schedule); measure rates, Eq. (13) and counts.

    ``reuse``: a :class:`~mambaicl.experiments.dynamics.DynamicsResult` of ``preset.dynamics`` on the same
    seeds (Chapter 3 passes its own): the scaled sweep's base point, which is the dynamics preset's base
    setting, is then taken from it instead of trained again (the same run up to rounding: there it shares a
    stack with other settings)."""
    preset = preset or CHECKS
    seeds = resolve_seeds(seeds)
    S, dyn = len(seeds), preset.dynamics
    sweeps = early_settings(preset)
    curves = {}
    if progress:
        print(f"dynamics_checks: Mamba's early phase at eta = {preset.early_lr}, then the scaled beta sweeps", flush=True)
    for g in _groups(list(dict.fromkeys(st for pts in sweeps.values() for st in pts))):
        n = int(math.ceil(max(horizon(st) for st in g))) + 1
        pre = dataclasses.replace(dyn, steps=n, dense_until=n, early_min=min(dyn.early_min, n),
                                  n_eval=preset.early_n_eval)
        r = trained_settings(g, seeds, pre, device)
        curves.update({st: (r.steps, {k: v[:, i * S:(i + 1) * S] for k, v in r.curves.items()})
                       for i, st in enumerate(r.settings)})
    early, eq13 = {}, {}
    for factor, pts in sweeps.items():
        xs = [factor_value(st, factor) for st in pts]
        per = [lemma_rates(st, *curves[st], S, dyn.early_min) for st in pts]
        for name, pred in LEMMA_PREDICTED.items():
            Y = [p[name] for p in per]
            early.setdefault(name, {})[factor] = {"values": xs, "window": [p["window"] for p in per],
                                                  "per_setting": Y, "fit": exponent_fit(xs, list(zip(*Y)), pred[factor])}
        eq13[factor] = {"values": xs, "window": [horizon(st) for st in pts],
                        "per_setting": [eq13_inside(*curves[st], horizon(st)) for st in pts]}
    if reuse is not None and (reuse.spec != dyn or list(reuse.seeds) != list(seeds)):
        raise ConfigError("reuse must be a DynamicsResult of preset.dynamics on the same seeds")
    scaled = {}
    for kind in KINDS:
        pts = scaled_settings(preset, kind)
        done = [st for st in pts if reuse is not None and st in reuse.runs[kind]]
        curves.update({st: reuse.runs[kind][st] for st in done})
        for g in _groups([st for st in pts if st not in done]):
            r = trained_settings(g, seeds, dyn, device, lemmas=False)
            curves.update({st: (r.steps, {k: v[:, i * S:(i + 1) * S] for k, v in r.curves.items()})
                           for i, st in enumerate(r.settings)})
        sweep = {"beta": pts}
        counts, exps, _ = sweep_summary(kind, dyn, curves, S, PREDICTED[kind], sweeps=sweep)
        scaled[kind] = {**counts["beta"], "outlier_norm": [st.data.outlier_norm for st in pts], "exponent": exps["beta"]}
    return ChecksResult(preset=preset.name, seeds=list(seeds), config=to_dict(preset), early=early, eq13=eq13,
                        scaled=scaled, curves=curves, spec=preset)


#: the book's preset: Figure 2's data, the dynamics preset's grids, Mamba's early phase at eta = 0.015
CHECKS = ChecksPreset(name="checks")
#: a seconds-long smoke test of the pipeline (tests, CLI); not a result of the book
TINY = ChecksPreset(name="tiny", dynamics=DYN_TINY, early_lr=0.05, min_inside=2, early_n_eval=16)
PRESETS = {p.name: p for p in (CHECKS, TINY)}
DEFAULT_PRESET = "checks"
