"""Theorem 1's lower bound on kappa_a (V beta^-4 <~ kappa_a), which Theorem 3 does not need: both models at small kappa_a.

Glossary (code name -> paper symbol):

==================  ====================================================================================
``kappas``          training outlier magnitudes ``kappa_a`` (Eq. (4)): Figure 2's and one below Theorem 1's
                    lower bound ``V beta^-4`` (constant 1)
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

__all__ = ["KappaPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "lower_bound",
           "KappaResult", "run"]

KINDS = ("mamba", "linear")


def lower_bound(V: int, beta: float) -> float:
    """Theorem 1 (ii)'s lower bound ``V beta^-4`` on ``kappa_a`` (its hidden constant set to 1)."""
    return V / beta ** 4


_SMALL = round(lower_bound(presets.FIG2.data.V, presets.FIG2.data.beta) / 10, 6)


@dataclass(frozen=True)
class KappaPreset(Preset):
    """Figure 2's two models trained at each ``kappa_a`` and validated on the training distribution."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    kappas: tuple = reals((2.0, _SMALL), 0.0, low_open=True)
    n_val: int = integer(4000, 1)


FIG2 = KappaPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = KappaPreset(name="tiny", fig2=FIG2_TINY, n_val=300)
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
    hinge: dict  # [kind][kappa index][s]
    error: dict  # [kind][kappa index][s]
    models: dict = internal()

    def rise(self) -> dict:
        """``{model: per seed, validation hinge at the second kappa_a minus at the first}``."""
        return {kind: [b - a for a, b in zip(self.hinge[kind][0], self.hinge[kind][1])] for kind in ("mamba", "linear")}

    def claims(self) -> dict:
        """The row ``kappa-lower-bound`` (Chapter 8): per seed, Mamba's hinge rise minus the linear Transformer's
        (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        import numpy as np

        from ..analysis.claims import ClaimParts
        from ..analysis.stats import mean_se

        rise = self.rise()
        return {"kappa-lower-bound": ClaimParts(
            f"validation hinge rise from κ_a = {self.kappas[0]:g} to {self.kappas[1]:.2g}: Mamba "
            f"{np.mean(rise['mamba']):+.3f} ± {mean_se(rise['mamba'])[1]:.3f}, linear Transformer "
            f"{np.mean(rise['linear']):+.3f} ± {mean_se(rise['linear'])[1]:.3f} ({len(self.seeds)} seeds)",
            per_seed=[m - l for m, l in zip(rise["mamba"], rise["linear"])])}


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
                       n_val=preset.n_val, hinge=hinge, error=error, models=models)
