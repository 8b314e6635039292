"""Batch size (Theorems 1 and 3, Remark 4: B_M >= B_T): how much each model's loss suffers from a small batch, at
Figure 2's values (where the formulas give B_M = B_T) and where they give B_M about 8 B_T.

Glossary (code name -> paper symbol):

==================  ====================================================================================
``batches``         the fixed batch sizes ``B``; the last is the reference
``steps``           SGD iterations ``T`` (Figure 2's 1,000)
``settings``        ``{"fig2": kappa_a = 2 (Figure 2's), "theory": kappa_a = kappa_ratio * V beta^-4}``
``epsilon``         the loss target ``epsilon`` put into the formulas for the ``theory`` setting (0.3)
``hinge``           validation hinge loss on Definition 1 prompts (training tasks at the setting's kappa_a,
                    stream ``(seed, "validation/batch")``, the same draws for every ``B``), capped at ``cap``
                    (1: the loss of the zero output); a seed whose training loss turned non-finite scores ``cap``
``penalty``         per seed, ``hinge(B) - hinge(reference B)``
``difference``      per seed, Mamba's penalty minus the linear Transformer's (the row ``batch-size``)
``B_T``, ``B_M``    :func:`sufficient_batches`: Theorem 3 (i) and Theorem 1 (i) with their constants set to 1
==================  ====================================================================================

The models are Figure 2's (:func:`mambaicl.experiments.fig2.trained_models`) with ``batch_size`` (and for the
``theory`` setting ``data.kappa_a``) replaced; step sizes and streams are Figure 2's. The row ``batch-size`` of
:mod:`mambaicl.analysis.claims_open` was declared before the run.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..config import instance, integer, integers, real
from ..train import loss_per_model, train
from ..recipes import fig2
from ..recipes import presets
from ..recipes.presets import TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.validation import validation_prompts
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["BatchPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "sufficient_batches",
           "BatchResult", "run"]

KINDS = ("mamba", "linear")
SETTINGS = ("fig2", "theory")


def sufficient_batches(M1: int, p_a: float, V: int, beta: float, kappa_a: float, epsilon: float) -> dict:
    """Theorem 3 (i)'s ``B_T = max{eps^-2, M1 (1-p_a)^-1} log eps^-1`` and Theorem 1 (i)'s ``B_M = max{B_T,
    beta^-4 V^2 kappa_a^-2 (1-p_a)^-2 log eps^-1}``, their constants set to 1, with each term."""
    log = math.log(1 / epsilon)
    eps_term, m1_term = epsilon ** -2 * log, M1 / (1 - p_a) * log
    kappa_term = beta ** -4 * V ** 2 * kappa_a ** -2 * (1 - p_a) ** -2 * log
    B_T = max(eps_term, m1_term)
    B_M = max(B_T, kappa_term)
    return {"eps_term": eps_term, "M1_term": m1_term, "kappa_term": kappa_term, "B_T": B_T, "B_M": B_M,
            "ratio": B_M / B_T}


@dataclass(frozen=True)
class BatchPreset(Preset):
    """Figure 2's two models trained with each fixed batch size, at Figure 2's kappa_a and at kappa_ratio V beta^-4."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    batches: tuple = integers((8, 32, 128), 1)
    kappa_ratio: float = real(2.0, 0.0, low_open=True)
    epsilon: float = real(0.3, 0.0, 1.0, low_open=True, high_open=True)
    cap: float = real(1.0, 0.0, low_open=True)
    n_val: int = integer(2000, 1)

    def setting_data(self, setting: str):
        """The data config of ``setting`` (``"fig2"``: Figure 2's; ``"theory"``: kappa_a = kappa_ratio V beta^-4)."""
        d = self.fig2.data
        if setting == "fig2":
            return d
        return dataclasses.replace(d, kappa_a=round(self.kappa_ratio * d.V / d.beta ** 4, 6))

    def bounds(self, setting: str) -> dict:
        """:func:`sufficient_batches` at ``setting`` (Figure 2's: epsilon = FIG2_EPSILON; theory: ``epsilon``)."""
        from ..analysis.verdicts import FIG2_EPSILON

        d = self.setting_data(setting)
        return sufficient_batches(d.M1, d.p_a, d.V, d.beta, d.kappa_a,
                                  FIG2_EPSILON if setting == "fig2" else self.epsilon)


FIG2 = BatchPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = BatchPreset(name="tiny", fig2=FIG2_TINY, batches=(2, 8, 32), n_val=200)
PRESETS = {"fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = tuple(range(20))


@dataclass
class BatchResult(Result):
    """Validation hinge loss (capped) per setting, model, batch size and seed."""

    preset: str
    seeds: list
    batches: list
    kappas: dict  # {setting: kappa_a}
    bounds: dict  # {setting: sufficient_batches(...)}
    cap: float
    hinge: dict  # [setting][kind][batch index][s], capped at cap
    diverged: dict  # [setting][kind][batch index]: seeds whose training loss turned non-finite
    models: dict = internal()

    def penalty(self, setting: str = "theory") -> dict:
        """``{model: [per B but the reference][s]}``: the loss at ``B`` minus the same seed's at the reference B."""
        return {k: [[v - r for v, r in zip(h, self.hinge[setting][k][-1])] for h in self.hinge[setting][k][:-1]]
                for k in KINDS}

    def difference(self, setting: str = "theory") -> list:
        """``[per B but the reference][s]``: Mamba's :meth:`penalty` minus the linear Transformer's."""
        p = self.penalty(setting)
        return [[m - l for m, l in zip(pm, pl)] for pm, pl in zip(p["mamba"], p["linear"])]

    def claims(self) -> dict:
        """The row ``batch-size`` (Chapter 8, Remark 4): :meth:`difference` at the ``theory`` setting, one part per
        batch size below the reference (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        import numpy as np

        from ..analysis.claims import ClaimParts
        from ..analysis.stats import sign_test

        diff = self.difference("theory")
        b = self.bounds["theory"]
        txt = "; ".join(f"B = {B}: median {np.median(d):+.3f}, {sign_test(d)['n_pos']} of {len(d)} seeds > 0"
                        for B, d in zip(self.batches, diff))
        return {"batch-size": ClaimParts(
            f"κ_a = {self.kappas['theory']:.3g} (B_T ≈ {b['B_T']:.0f}, B_M ≈ {b['B_M']:.0f}): Mamba's batch penalty "
            f"minus the linear Transformer's (hinge at B minus at B = {self.batches[-1]}), {txt} "
            f"({len(self.seeds)} seeds)", parts=diff)}


def run(preset: BatchPreset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> BatchResult:
    """Train both models with every batch size for every seed, at both settings; validate at the setting's kappa_a."""
    seeds = resolve_seeds(seeds)
    f0 = preset.fig2
    pat = patterns(f0)
    hinge = {st: {k: [] for k in KINDS} for st in SETTINGS}
    diverged = {st: {k: [] for k in KINDS} for st in SETTINGS}
    models = {}
    for st in SETTINGS:
        data = preset.setting_data(st)
        val = validation_prompts(pat, data, seeds, preset.n_val, "validation", "batch")
        for B in preset.batches:
            f2 = dataclasses.replace(f0, data=data, train={k: dataclasses.replace(v, batch_size=int(B))
                                                           for k, v in f0.train.items()})
            for kind in KINDS:  # fig2.trained_models' call, with a diverging seed marked instead of raising
                tr = train(fig2.members(f2, pat, seeds, kind), f2.train[kind], device=resolve_device(device),
                           progress=progress, nonfinite="mark")
                stack, dead = tr.models[0], tr.groups[0].dead
                with torch.no_grad():
                    h = loss_per_model("hinge", stack(val), val.z).tolist()
                bad = [s for s, v in enumerate(h) if (dead is not None and dead[s]) or not math.isfinite(v)]
                hinge[st][kind].append([preset.cap if s in bad else min(v, preset.cap) for s, v in enumerate(h)])
                diverged[st][kind].append(bad)
                models[(st, kind, int(B))] = stack
    return BatchResult(preset=preset.name, seeds=list(seeds), batches=list(preset.batches),
                       kappas={st: preset.setting_data(st).kappa_a for st in SETTINGS},
                       bounds={st: preset.bounds(st) for st in SETTINGS}, cap=preset.cap, hinge=hinge,
                       diverged=diverged, models=models)
