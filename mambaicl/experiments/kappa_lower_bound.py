"""Theorem 1's lower bound on kappa_a (V beta^-4 <~ kappa_a), which Theorem 3 does not need: both models at small kappa_a.

Glossary (code name -> paper symbol):

==================  ====================================================================================
``kappas``          training outlier magnitudes ``kappa_a`` (Eq. (4)): Figure 2's first, then ``ratios`` times
                    Theorem 1's lower bound ``V beta^-4`` (constant 1); the second (``V beta^-4 / 10``) is judged
``hinge``           validation hinge loss on Definition 1 prompts (training tasks, stream
                    ``(seed, "validation/kappa")``, the same draws for every ``kappa_a``)
``error``           validation 0-1 error on the same prompts
==================  ====================================================================================

The models are Figure 2's (:func:`mambaicl.experiments.fig2.trained_models`) with ``data.kappa_a`` replaced;
everything else (patterns, step sizes, streams) is Figure 2's. The row ``kappa-lower-bound`` of
:mod:`mambaicl.analysis.claims_open` was declared before the run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..config import instance, integer, reals
from ..evaluate import model_error
from ..train import loss_per_model
from ..recipes import fig2
from ..recipes import presets
from ..recipes.presets import TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.validation import validation_prompts
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds
from ..analysis.stats import mean_se

__all__ = ["KappaPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "lower_bound",
           "RATIOS", "KappaResult", "run"]

KINDS = ("mamba", "linear")


def lower_bound(V: int, beta: float) -> float:
    """Theorem 1 (ii)'s lower bound ``V beta^-4`` on ``kappa_a`` (its hidden constant set to 1)."""
    return V / beta ** 4


_BOUND = lower_bound(presets.FIG2.data.V, presets.FIG2.data.beta)
#: kappa_a / (V beta^-4) of the sweep; the first is the row's judged kappa_a
RATIOS = (0.1, 0.3, 1.0, 3.0, 10.0)
_SWEEP = tuple(round(r * _BOUND, 6) for r in RATIOS)


@dataclass(frozen=True)
class KappaPreset(Preset):
    """Figure 2's two models trained at each ``kappa_a`` and validated on the training distribution."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    kappas: tuple = reals((2.0,) + _SWEEP, 0.0, low_open=True, min_len=2)
    n_val: int = integer(4000, 1)


FIG2 = KappaPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = KappaPreset(name="tiny", fig2=FIG2_TINY, kappas=(2.0, _SWEEP[0], _SWEEP[2]), n_val=300)
PRESETS = {"fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = tuple(range(20))


@dataclass
class KappaResult(Result):
    """Validation hinge loss and 0-1 error per model, kappa_a and seed."""

    preset: str
    seeds: list
    kappas: list
    n_val: int
    V: int
    beta: float
    hinge: dict  # [kind][kappa index][s]
    error: dict  # [kind][kappa index][s]
    models: dict = internal()

    def rise(self, i: int = 1) -> dict:
        """``{model: per seed, validation hinge at the i-th kappa_a minus at the first (Figure 2's)}``."""
        return {kind: [b - a for a, b in zip(self.hinge[kind][0], self.hinge[kind][i])] for kind in ("mamba", "linear")}

    def excess(self, i: int = 1) -> list:
        """Per seed, Mamba's :meth:`rise` at the i-th kappa_a minus the linear Transformer's."""
        r = self.rise(i)
        return [m - l for m, l in zip(r["mamba"], r["linear"])]

    def sweep(self) -> list:
        """Per kappa_a after Figure 2's: ``{"kappa", "ratio" (kappa_a / V beta^-4), "excess" (per seed), "n_pos",
        "n_neg", "p_above"}`` (:func:`mambaicl.analysis.stats.sign_test` of the excess rise against 0)."""
        from ..analysis.stats import sign_test

        bound = lower_bound(self.V, self.beta)
        out = []
        for i, k in enumerate(self.kappas[1:], start=1):
            ex = self.excess(i)
            st = sign_test(ex)
            out.append({"kappa": k, "ratio": k / bound, "excess": ex, "n_pos": st["n_pos"], "n_neg": st["n_neg"],
                        "p_above": st["p_above"]})
        return out

    def vanishes(self) -> tuple:
        """``(largest, smallest)``: the largest ``kappa_a / V beta^-4`` of the sweep at which Mamba's excess rise is
        > 0 by the sign test at 2.5 % and the smallest at which it is not (``None`` where there is none)."""
        sw = self.sweep()
        held = [r["ratio"] for r in sw if r["p_above"] < 0.025]
        not_held = [r["ratio"] for r in sw if r["p_above"] >= 0.025]
        return (max(held) if held else None), (min(not_held) if not_held else None)

    def claims(self) -> dict:
        """The row ``kappa-lower-bound`` (Chapter 8): per seed, Mamba's hinge rise minus the linear Transformer's
        at ``V beta^-4 / 10`` (:class:`~mambaicl.analysis.claims.ClaimParts`); the sweep in the row's text."""
        import numpy as np

        from ..analysis.claims import ClaimParts

        rise = self.rise(1)
        sw = "; ".join(f"{r['ratio']:.2g}: {r['n_pos']} of {len(self.seeds)}" for r in sorted(self.sweep(), key=lambda r: r['ratio']))
        return {"kappa-lower-bound": ClaimParts(
            f"validation hinge rise from κ_a = {self.kappas[0]:g} to {self.kappas[1]:.2g}: Mamba "
            f"{np.mean(rise['mamba']):+.3f} ± {mean_se(rise['mamba'])[1]:.3f}, linear Transformer "
            f"{np.mean(rise['linear']):+.3f} ± {mean_se(rise['linear'])[1]:.3f} ({len(self.seeds)} seeds); seeds whose "
            f"Mamba rise exceeds the linear Transformer's, by κ_a / Vβ^-4: {sw}", per_seed=self.excess(1))}


def run(preset: KappaPreset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> KappaResult:
    """Train both models at every ``kappa_a`` for every seed; validate on Definition 1 prompts at that ``kappa_a``."""
    seeds = resolve_seeds(seeds)
    pat = patterns(preset.fig2)
    hinge = {k: [] for k in KINDS}
    error = {k: [] for k in KINDS}
    models = {}
    for kappa in preset.kappas:
        f2 = dataclasses.replace(preset.fig2, data=dataclasses.replace(preset.fig2.data, kappa_a=float(kappa)))
        trained = fig2.trained_models(f2, pat, seeds, kinds=KINDS, device=resolve_device(device), progress=progress)
        val = validation_prompts(pat, f2.data, seeds, preset.n_val, "validation", "kappa")
        for kind in KINDS:
            stack = trained[kind][0]
            with torch.no_grad():
                hinge[kind].append(loss_per_model("hinge", stack(val), val.z).tolist())
            error[kind].append(model_error(stack, val, val.z))
            models[(kind, float(kappa))] = stack
    return KappaResult(preset=preset.name, seeds=list(seeds), kappas=[float(k) for k in preset.kappas],
                       n_val=preset.n_val, V=preset.fig2.data.V, beta=preset.fig2.data.beta, hinge=hinge, error=error, models=models)
