"""Chapter 3: the training dynamics of Algorithm 1 (Lemmas 3-6) and Theorems 1 and 3 as scaling laws.

Glossary (code name -> paper symbol):

====================  =====================================================================
``DynamicsPreset``    the data (Figure 2's, §4.1), each model's base step size ``eta`` (Figure
                      2's), the sweep grids and the measurement settings
``Setting``           one point of a sweep: a model kind, a :class:`DataConfig` and ``eta``
``FACTORS``           the swept factors of ``T_M = Theta(eta^-1 (1-p_a)^-1 beta^-2 M1)`` and of
                      ``T_T = T_M / Theta(l_tr)``: ``lr`` (``eta``), ``one_minus_p_a``
                      (``1 - p_a``), ``beta``, ``M1``, ``l_tr``
``PREDICTED``         the exponent of each factor in ``T_M`` (Theorem 1, Eq. (2)) and ``T_T``
                      (Theorem 3(iv))
``T``                 the iteration count: the half-life of the excess population hinge loss,
                      :func:`mambaicl.analysis.fits.relaxation_time` (see below)
``slot``              one (setting, seed) member of a seed stack
====================  =====================================================================

**The iteration count.** Theorems 1 and 3 bound the iterations after which the expected hinge
loss is at most ``epsilon``. A fixed ``epsilon`` cannot be used for both models: the linear
Transformer's initial attention ``delta^2 I`` already sums ``l_tr`` example votes, so at
``l_tr >= 20`` its initial loss is below any level Mamba needs hundreds of steps to reach, and
its loss stops at a plateau set by the outliers' random labels (about 0.09 at Figure 2's
settings, 0.44 at ``p_a = 0.8``). We therefore count, for every run, the first step at which the
*excess* population hinge loss ``L(t) - L(T_end)`` has fallen to ``fraction`` (1/2) of its
initial value ``L(0) - L(T_end)``: a relaxation time. Every run starts above this target and
reaches it by construction, whatever its initial level; for Mamba, whose loss goes to 0, it is
the step at which the loss halves. ``L(t)`` is the mean hinge loss on ``n_eval`` fixed fresh
Definition 1 prompts of the training tasks (the population training loss, measured on the
same prompts at every record, so the curve is smooth), recorded after every step up to
``dense_until`` and then on a geometric grid, and the crossing is interpolated linearly.
Beside it, ``DynamicsResult.epsilon`` holds the theorems' own count: the first step at which
``L(t) <= absolute_epsilon`` (``nan`` for a run that never gets there, e.g. the linear Transformer's).

**Batching.** Settings that share the patterns and the prompt shapes (``eta``, ``p_a``) train
as one :class:`mambaicl.models.OneLayerStack` with one slot per (setting, seed): slot ``(k, s)``
initialises from ``(s, "init")``, draws its training prompts from ``(s, "train")`` and is
measured on prompts from ``(s, "validation")``, exactly as a separate run of setting ``k`` with
seed ``s`` would (all settings of one seed see the same uniforms: common random numbers, which
make the per-seed log-log slopes precise); :func:`mambaicl.train.train` does the batching, the draw-replay
and each slot's step size. ``beta``, ``M1`` and ``l_tr`` change the patterns
or the shapes: one stack per value.

The preset class, :class:`Setting`, :func:`sweep_settings` and the named presets live in
:mod:`mambaicl.recipes.presets` (``dynamics_checks`` reads them too) and are re-exported here.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..analysis.curves import eq13_from, exponent_fit, interval, lemma_rates
from ..analysis.dynamics_counts import epsilon_count, initial_margin, theorem_conditions
from ..analysis.theory import FACTORS, LEMMA_PREDICTED, THEOREM_PREDICTED  # the paper's exponents (beside the theorems)
from ..config import to_dict
from ..recipes.base import Result, internal, resolve_seeds
from ..recipes.dynamics import (SlotRun, factor_value, record_steps, sweep_summary,  # noqa: F401 (re-exported)
                               trained_settings)
from ..recipes.presets import (DYNAMICS, DYNAMICS_KINDS, DYNAMICS_SEEDS, DYNAMICS_TINY, DynamicsPreset, Setting,  # noqa: F401
                     sweep_settings)

__all__ = ["DEFAULT_SEEDS", "KINDS", "FACTORS", "PREDICTED", "FACTOR_LABELS", "DynamicsPreset",
           "DYNAMICS", "TINY", "PRESETS", "DEFAULT_PRESET", "Setting", "sweep_settings", "record_steps",
           "factor_value", "theorem_conditions", "initial_margin", "log_corrected", "LEMMA_PREDICTED", "SlotRun",
           "trained_settings", "sweep_summary", "DynamicsResult", "run"]

DEFAULT_SEEDS = DYNAMICS_SEEDS
KINDS = DYNAMICS_KINDS
PREDICTED = THEOREM_PREDICTED
FACTOR_LABELS = {"lr": r"$\eta$", "one_minus_p_a": r"$1-p_a$", "beta": r"$\beta$", "M1": r"$M_1$",
                 "l_tr": r"$l_{tr}$"}


# ---------------------------------------------------------------- seed stacks of several settings


# ---------------------------------------------------------------- from curves to counts, exponents and rates

def _by_setting(runs: list) -> dict:
    """``setting -> (steps, {name: (n_records, S)})`` over every slot run."""
    out = {}
    for r in runs:
        S = len(r.seeds)
        for k, st in enumerate(r.settings):
            out[st] = (r.steps, {n: v[:, k * S:(k + 1) * S] for n, v in r.curves.items()})
    return out


@dataclass
class DynamicsResult(Result):
    """Chapter 3's measurements: iteration counts and their exponents, Lemma 3-6 rates and base-setting values."""

    preset: str
    seeds: list
    config: dict
    counts: dict  # counts[kind][factor]: values, T per value per seed, mean, SE, initial / end loss, conditions
    epsilon: dict  # epsilon[kind][factor]: values, steps to the absolute epsilon per value per seed (nan: never), fit
    exponents: dict  # exponents[kind][factor]: predicted, slope, se, low, high, per_seed, verdict
    exponents_error: dict  # the same with T counted on the 0-1 error
    ratio_exponent: dict  # l_tr exponent of T_M / T_T (Mamba minus linear, per seed), predicted 1
    small_init: dict  # the linear Transformer's sweeps at a smaller initialisation delta
    lemma_rates: dict  # lemma_rates[name][factor]: values, per-seed rates, fit (Mamba)
    lemma5: dict  # lemma5[factor]: mean gate logits of clean / outlier examples at the end, per seed, and -log M1
    base: dict  # base-setting values per kind (Lemma 3 attention, Lemma 5 logits, Eq. (13), Lemma 6)
    curves: dict = internal()  # {kind: (steps, {name: (n_records, S)})} at the base setting
    runs: dict = internal()  # {kind: {setting: (steps, curves)}}
    spec: DynamicsPreset = internal()

    def table(self) -> list:
        """One row per (factor, model): predicted and measured exponent, interval, verdict, conditions."""
        rows = []
        for factor in FACTORS:
            for kind in KINDS:
                e = self.exponents[kind][factor]
                rows.append({"factor": factor, "kind": kind, **{k: e[k] for k in ("predicted", "slope", "low", "high",
                                                                                     "verdict")},
                             "inside_conditions": all(self.counts[kind][factor]["inside_conditions"])})
        return rows

    def summary(self) -> str:
        """The exponent table as text (what the CLI prints)."""
        lines = [f"{'factor':>14} {'model':>7} {'predicted':>9} {'measured':>9}  95% interval      verdict"]
        for r in self.table():
            lines.append(f"{r['factor']:>14} {r['kind']:>7} {r['predicted']:>+9.2f} {r['slope']:>+9.2f}  "
                         f"[{r['low']:+.2f}, {r['high']:+.2f}]  {r['verdict']}")
        return "\n".join(lines + [f"seeds {self.seeds}"])


def _epsilon_summary(kind: str, preset: DynamicsPreset, curves: dict, predicted: dict) -> dict:
    """Per factor: the steps to the absolute ``epsilon`` (Theorems 1 and 3's quantity) per setting and seed,
    ``nan`` where a run never gets there, and their exponent (``not measurable`` if any run never does)."""
    out = {}
    for factor, pts in sweep_settings(preset, kind).items():
        xs = [factor_value(st, factor) for st in pts]
        T = [epsilon_count(curves[st][0], curves[st][1]["loss"], preset.absolute_epsilon) for st in pts]
        out[factor] = {"values": xs, "T": T, "exponent": exponent_fit(xs, list(zip(*T)), predicted[factor])}
    return out


def _base_values(kind: str, preset: DynamicsPreset, steps, C: dict, S: int) -> dict:
    out = {f"{name}{k}": {"initial": C[f"{name}{k}"][0].tolist(), "final": C[f"{name}{k}"][-1].tolist()}
           for name in ("attn_dist", "WB_dist") for k in range(4) if f"{name}{k}" in C}
    out["loss_initial"], out["loss_end"] = C["loss"][0].tolist(), C["loss"][-1].tolist()
    out["error_end"] = C["error"][-1].tolist()
    if kind == "mamba":
        out["wp_clean_end"], out["wp_outlier_end"] = C["wp_clean"][-1].tolist(), C["wp_outlier"][-1].tolist()
        out["eq13_from"] = eq13_from(steps, C, S)
        out["gate_sum_max"] = C["gate_sum"].max(0).values.tolist()
        out["lemma6_max"] = C["lemma6"].max(0).values.tolist()
    return out


def log_corrected(preset: DynamicsPreset, delta: float) -> dict:
    """Theorem 3's exponents corrected for a growth from a small initial margin ``m0`` (our reading, not the
    paper's): ``W_B^T W_C`` is a product, so the margin grows geometrically and ``T ~ log(1/m0) / rate`` with
    ``rate ~ eta (1-p_a) beta^2 l_tr / M1``; ``m0 ~ beta^2 l_tr (1-p_a)`` adds ``-k / log(1/m0)`` to a factor
    entering ``m0`` with power ``k``. Evaluated at the base setting; ``nan`` when ``m0 >= 1`` (no growth phase)."""
    m0 = initial_margin(Setting("linear", preset.data, preset.lr["linear"]), delta)
    if m0 >= 1:
        return {f: math.nan for f in FACTORS}
    c = 1 / math.log(1 / m0)
    k = {"lr": 0, "one_minus_p_a": 1, "beta": 2, "M1": 0, "l_tr": 1}
    return {f: PREDICTED["linear"][f] - k[f] * c for f in FACTORS}


def _train_all(settings: list, seeds, preset: DynamicsPreset, device) -> dict:
    groups = {}
    for st in settings:
        groups.setdefault(st.group, []).append(st)
    return _by_setting([trained_settings(g, seeds, preset, device) for g in groups.values()])


def _unique(kind: str, preset: DynamicsPreset) -> list:
    return list(dict.fromkeys(st for pts in sweep_settings(preset, kind).values() for st in pts))


def run(preset: DynamicsPreset = None, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> DynamicsResult:
    """Train every sweep setting of both models for every seed, and measure counts, exponents and Lemma rates.

    ``progress`` prints one line per model (the stacks are short); pass ``False`` in chapters.
    """
    preset = preset or DYNAMICS
    seeds = resolve_seeds(seeds)
    S = len(seeds)
    runs, counts, exps, exps_err, base, curves, eps = {}, {}, {}, {}, {}, {}, {}
    for kind in KINDS:
        if progress:
            print(f"dynamics: training the {kind} sweeps ({len(_unique(kind, preset))} settings x {S} seeds)",
                  flush=True)
        runs[kind] = _train_all(_unique(kind, preset), seeds, preset, device)
        counts[kind], exps[kind], exps_err[kind] = sweep_summary(kind, preset, runs[kind], S, PREDICTED[kind])
        eps[kind] = _epsilon_summary(kind, preset, runs[kind], PREDICTED[kind])
        b = Setting(kind, preset.data, preset.lr[kind])
        curves[kind] = runs[kind][b]
        base[kind] = _base_values(kind, preset, *runs[kind][b], S)
    diffs = [m - l for m, l in zip(exps["mamba"]["l_tr"]["per_seed"], exps["linear"]["l_tr"]["per_seed"])]
    ratio = interval(diffs, 1.0)
    small = {}
    if preset.check_delta is not None:
        if progress:
            print(f"dynamics: the linear Transformer's sweeps at delta = {preset.check_delta}", flush=True)
        pre = dataclasses.replace(preset, delta=preset.check_delta)
        c_runs = _train_all(_unique("linear", pre), seeds, pre, device)
        c_counts, c_exps, _ = sweep_summary("linear", pre, c_runs, S, PREDICTED["linear"])
        small = {"delta": preset.check_delta, "exponents": c_exps,
                 "initial_margin": initial_margin(Setting("linear", preset.data, preset.lr["linear"]),
                                                  preset.check_delta),
                 "log_corrected": log_corrected(preset, preset.check_delta),
                 "loss_initial": {f: c["loss_initial"] for f, c in c_counts.items()},
                 "loss_end": {f: c["loss_end"] for f, c in c_counts.items()},
                 "T_mean": {f: c["T_mean"] for f, c in c_counts.items()}}
    rates, lemma5 = {}, {}
    for factor, pts in sweep_settings(preset, "mamba").items():
        xs = [factor_value(st, factor) for st in pts]
        per = [lemma_rates(st, *runs["mamba"][st], S, preset.early_min) for st in pts]
        for name, pred in LEMMA_PREDICTED.items():
            Y = [p[name] for p in per]
            rates.setdefault(name, {})[factor] = {"values": xs, "per_setting": Y, "window": [p["window"] for p in per],
                                                  "fit": exponent_fit(xs, list(zip(*Y)), pred[factor])}
        Y6 = [p["lemma6"] for p in per]
        fit6 = exponent_fit(xs, list(zip(*Y6)), 0.0)
        if fit6["verdict"] != "not measurable":
            # Lemma 6 says Theta(1); the natural alternative is a sum growing like l_tr (flat gates, exponent 1)
            fit6["verdict"] = ("bounded" if fit6["high"] < 1.0 else "grows with l_tr") if factor == "l_tr" else "n/a"
        rates.setdefault("lemma6", {})[factor] = {"values": xs, "per_setting": Y6, "fit": fit6}
        ends = [runs["mamba"][st][1] for st in pts]
        lemma5[factor] = {"values": xs, "minus_log_M1": [-math.log(st.data.M1) for st in pts],
                          "clean_end": [C["wp_clean"][-1].tolist() for C in ends],
                          "outlier_end": [C["wp_outlier"][-1].tolist() for C in ends]}
    return DynamicsResult(preset=preset.name, seeds=list(seeds), config=to_dict(preset), counts=counts, epsilon=eps,
                          exponents=exps, exponents_error=exps_err, ratio_exponent=ratio, small_init=small,
                          lemma_rates=rates, lemma5=lemma5, base=base, curves=curves, runs=runs, spec=preset)


TINY = DYNAMICS_TINY
PRESETS = {p.name: p for p in (DYNAMICS, TINY)}
DEFAULT_PRESET = "dynamics"
