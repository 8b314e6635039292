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

from dataclasses import dataclass

from ..analysis.curves import exponent_fit, lemma_rates
from ..analysis.dynamics_counts import eq13_inside
from ..analysis.lemmas import lemma4_horizon
from ..analysis.stats import compare
from ..analysis.theory import EARLY_FACTORS  # Lemma 4's factors over the whole horizon (eta left out)
from ..analysis.theory import LEMMA_PREDICTED, THEOREM_PREDICTED as PREDICTED
from ..config import ConfigError, instance, integer, real, to_dict
from ..recipes.base import Preset, Result, internal, resolve_seeds
from ..recipes.dynamics import (FACTOR_NAMES, LEMMA4_RATES, RATE_NAMES, Report, factor_value,  # noqa: F401
                               init_exponents, setting_label, sweep_summary, trained_settings)
from ..recipes.presets import (DYNAMICS, DYNAMICS_KINDS as KINDS, DYNAMICS_SEEDS as DEFAULT_SEEDS, DYNAMICS_TINY as DYN_TINY,
                     DynamicsPreset, Setting)
from ..models import LABELS  # the models' names in the chapter's tables

__all__ = ["DEFAULT_SEEDS", "EARLY_FACTORS", "ChecksPreset", "CHECKS", "TINY", "PRESETS", "DEFAULT_PRESET",
           "early_settings", "horizon", "scaled_settings", "init_exponents", "setting_label", "ChecksResult", "run",
           "beta_scaled_claims", "beta_report"]


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

    # ------------------------------------------------------------ what Chapter 3 shows and judges (derived once)

    def sizes_report(self) -> Report:
        """How many settings the checks train: Mamba's early-phase settings and the scaled sweep's new ones."""
        r = Report()
        r.glue("ch3_n_early", len({st for pts in early_settings(self.spec).values() for st in pts}))
        r.glue("ch3_n_scaled", sum(len(scaled_settings(self.spec, k)) - 1 for k in KINDS))
        return r

    def early_base(self) -> tuple:
        """``(setting, horizon)``: Mamba at the base data and the checks' step size, and Lemma 4's horizon there."""
        st = Setting("mamba", self.spec.dynamics.data, self.spec.early_lr)
        return st, horizon(st)

    def eq13_runs(self) -> dict:
        """``{setting: Eq. (13) inside its window}`` of every distinct early-phase setting (each once)."""
        uniq, sweeps = {}, early_settings(self.spec)
        for factor in EARLY_FACTORS:
            for st, r in zip(sweeps[factor], self.eq13[factor]["per_setting"]):
                uniq.setdefault(st, r)
        return uniq

    def early_parts(self) -> list:
        """Lemma 4's 12 exponents over the whole horizon (row lemma4-early), rate by rate, factor by factor."""
        return [self.early[n][f]["fit"] for n in LEMMA4_RATES for f in EARLY_FACTORS]

    def _early_numbers(self) -> dict:
        wins = [w for f in EARLY_FACTORS for w in self.early["lemma4_v"][f]["window"]]
        uniq = self.eq13_runs()
        return {"wins": wins, "n_e": sum(p["verdict"] == "holds" for p in self.early_parts()),
                "n_at": sum(sum(r["at_window"]) for r in uniq.values()),
                "n_all": sum(len(r["at_window"]) for r in uniq.values())}

    def early_report(self) -> Report:
        """The rates over Lemma 4's whole horizon against the lemma and the derivation at t = 0, and Eq. (13)."""
        PC, early, r = self.spec, self.early, Report()
        E_F = EARLY_FACTORS
        derived_e = {(n, f): v for n, by_f in init_exponents(early_settings(PC), PC.dynamics.delta).items()
                     for f, v in by_f.items()}
        N = self._early_numbers()
        wins = N["wins"]
        r.print(f"Mamba at eta = {PC.early_lr}: Lemma 4's horizon {min(wins):.1f} to {max(wins):.1f} steps over the "
                f"settings")
        r.print(f"{'rate':<28}{'factor':<9}{'lemma':>7}{'t = 0':>8}{'measured':>10}   95% interval     verdict")
        for name in ("lemma3", *LEMMA4_RATES):
            for factor in E_F:
                f = early[name][factor]["fit"]
                r.print(f"{RATE_NAMES[name]:<28}{FACTOR_NAMES[factor]:<9}{f['predicted']:>+7.0f}"
                        f"{derived_e[name, factor]:>+8.2f}{f['slope']:>+10.2f}   [{f['low']:+.2f}, {f['high']:+.2f}]   "
                        f"{f['verdict']}")
        held_e = [f"{RATE_NAMES[n].split(': ')[1]} in {FACTOR_NAMES[f]}" for n in LEMMA4_RATES
                  for f in E_F if early[n][f]["fit"]["verdict"] == "holds"]
        fail_e = [f"{RATE_NAMES[n].split(': ')[1]} in {FACTOR_NAMES[f]} ({early[n][f]['fit']['slope']:+.2f} "
                  f"[{early[n][f]['fit']['low']:+.2f}, {early[n][f]['fit']['high']:+.2f}], predicted "
                  f"{early[n][f]['fit']['predicted']:+.0f})" for n in LEMMA4_RATES
                  for f in E_F if early[n][f]["fit"]["verdict"] != "holds"]
        n_der_e = sum(early[n][f]["fit"]["verdict"] != "not measurable"
                      and early[n][f]["fit"]["low"] <= derived_e[n, f] <= early[n][f]["fit"]["high"]
                      for n in LEMMA4_RATES for f in E_F)
        # Eq. (13) inside the window, at every early setting (each setting once)
        uniq = self.eq13_runs()
        st_e, h_e = self.early_base()
        r13 = uniq[st_e]
        n_at, n_all = N["n_at"], N["n_all"]
        frac13 = [v for x in uniq.values() for v in x["fraction"]]
        first13 = ", ".join("never" if math.isnan(t) else f"{t:g}" for t in r13["first"])
        r.print(f"Eq. (13) at the base data, eta = {PC.early_lr} (horizon {h_e:.1f} steps): first holds at step "
                f"{first13}; share of the window's records where it holds "
                f"{', '.join(f'{v:.2f}' for v in r13['fraction'])} (per seed)")
        r.print(f"holds at the end of the window in {n_at} of {n_all} runs (settings x seeds); share of the window "
                f"{min(frac13):.2f} to {max(frac13):.2f}")
        r.glue("ch3_early_lr", f"{PC.early_lr}")
        r.glue("ch3_early_h_lo", f"{min(wins):.0f}")
        r.glue("ch3_early_h_hi", f"{max(wins):.0f}")
        r.glue("ch3_early_base_h", f"{h_e:.0f}")
        r.glue("ch3_early_n", N["n_e"])
        r.glue("ch3_early_total", len(self.early_parts()))
        r.glue("ch3_early_der", n_der_e)
        r.glue("ch3_early_holds", "; ".join(held_e) or "none")
        r.glue("ch3_early_fails", "; ".join(fail_e) or "none")
        r.glue("ch3_e13_first", first13)
        r.glue("ch3_e13_frac", f"{min(r13['fraction']):.2f} to {max(r13['fraction']):.2f}")
        r.glue("ch3_e13_at", f"{n_at}")
        r.glue("ch3_e13_all", f"{n_all}")
        r.glue("ch3_e13_frac_all", f"{min(frac13):.2f} to {max(frac13):.2f}")
        r.glue("ch3_e13_words", "the order holds through the whole window in every run, as the lemma states"
               if min(frac13) == 1 else "the order is reached inside the window, not held from its start, so it is "
               "an end-of-window property here rather than an invariant of the window" if n_at == n_all else
               "the order is not reached inside the window in every run")
        return r

    def claims(self) -> dict:
        """The row lemma4-early (``{key: ClaimParts}``): Lemma 4's 12 exponents over the whole horizon."""
        from ..analysis.claims import ClaimParts

        N, parts = self._early_numbers(), self.early_parts()
        return {"lemma4-early": ClaimParts(
            f"{N['n_e']} of {len(parts)} exponents hold over the whole horizon at eta = {self.spec.early_lr} "
            f"({min(N['wins']):.0f}-{max(N['wins']):.0f} steps); Eq. (13) holds at the window's end in {N['n_at']} "
            f"of {N['n_all']} runs ({len(self.seeds)} seeds)", parts=parts)}


def beta_scaled_claims(dyn, checks: ChecksResult) -> dict:
    """The rows beta-scaled and beta-scaled-theta (``{key: ClaimParts}``): the scaled sweep's two β exponents, read
    beside the fixed-norm ones of ``dyn`` (the :class:`~mambaicl.experiments.dynamics.DynamicsResult` of the same
    seeds, whose base point the scaled sweep shares)."""
    from ..analysis.claims import ClaimParts

    sc, ex = checks.scaled, dyn.exponents
    parts = [sc["mamba"]["exponent"], sc["linear"]["exponent"]]
    return {"beta-scaled": ClaimParts("; ".join(
                f"{LABELS[k]} {sc[k]['exponent']['slope']:+.2f} [{sc[k]['exponent']['low']:+.2f}, "
                f"{sc[k]['exponent']['high']:+.2f}] (fixed norm {ex[k]['beta']['slope']:+.2f})" for k in KINDS)
                + f" ({len(checks.seeds)} seeds)", parts=parts),
            "beta-scaled-theta": ClaimParts(f"Θ reading: Mamba {sc['mamba']['exponent']['slope']:+.2f}, linear "
                                            f"{sc['linear']['exponent']['slope']:+.2f}", parts=list(parts))}


def beta_report(dyn, checks: ChecksResult) -> Report:
    """The β exponents with the outlier norm fixed (``dyn``) and scaled with β (``checks``), and their paired
    difference per seed."""
    sc, ex, r = checks.scaled, dyn.exponents, Report()
    r.print(f"{'model':<20}{'predicted':>10}{'fixed norm':>22}{'norm = beta':>24}   difference (paired)")
    for kind in KINDS:
        a, b = ex[kind]["beta"], sc[kind]["exponent"]
        d = compare(b["per_seed"], a["per_seed"])
        words = f"{d.diff:+.2f} ± {d.se:.2f}" + (" (distinguishable)" if d.significant else "")
        r.print(f"{LABELS[kind]:<20}{-2:>+10.0f}   {a['slope']:+.2f} [{a['low']:+.2f}, {a['high']:+.2f}]"
                f"   {b['slope']:+.2f} [{b['low']:+.2f}, {b['high']:+.2f}]   {words}")
        r.glue(f"ch3_bs_{kind}", f"{b['slope']:+.2f} [{b['low']:+.2f}, {b['high']:+.2f}]")
        r.glue(f"ch3_bs_diff_{kind}", words)
        r.glue(f"ch3_bs_verdict_{kind}", "contains" if b["verdict"] == "holds" else "excludes")
    return r


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
