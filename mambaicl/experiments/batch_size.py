"""Batch size (Theorems 1 and 3, Remark 4: B_M >= B_T): the smallest batch with which each model trains as well as
with a large one.

Glossary (code name -> paper symbol):

==================  ====================================================================================
``batches``         the grid of batch sizes ``B``; the last is the reference
``steps``           SGD iterations ``T`` (Figure 2's 1,000)
``tolerance``       a batch is enough when the loss stays within ``tolerance`` of the reference loss
``hinge``           validation hinge loss on Definition 1 prompts (training tasks, stream
                    ``(seed, "validation/batch")``, the same draws for every ``B``)
``diverged``        a seed whose training loss turned non-finite (marked by the engine) scores ``inf``
``needed``          per seed, the smallest ``B`` from which the loss stays ``<= reference + tolerance`` at
                    every larger ``B`` of the grid (:func:`mambaicl.analysis.fits.needed_length`)
==================  ====================================================================================

The models are Figure 2's (:func:`mambaicl.experiments.fig2.trained_models`) with ``batch_size`` replaced;
step sizes and streams are Figure 2's. The row ``batch-size`` of :mod:`mambaicl.analysis.claims_open` was
declared before the run.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..analysis.fits import needed_length
from ..config import instance, integer, integers, real
from ..train import loss_per_model, train
from ..recipes import fig2
from ..recipes import presets
from ..recipes.presets import TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.validation import validation_prompts
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["BatchPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "BatchResult", "run"]

KINDS = ("mamba", "linear")


@dataclass(frozen=True)
class BatchPreset(Preset):
    """Figure 2's two models trained with each batch size of the grid."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    batches: tuple = integers((1, 2, 4, 8, 16, 32, 64), 1)
    tolerance: float = real(0.02, 0.0)
    n_val: int = integer(2000, 1)


FIG2 = BatchPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = BatchPreset(name="tiny", fig2=FIG2_TINY, batches=(2, 8, 32), n_val=200)
PRESETS = {"fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = tuple(range(20))


@dataclass
class BatchResult(Result):
    """Validation hinge loss per model, batch size and seed; the batch each seed needs."""

    preset: str
    seeds: list
    batches: list
    tolerance: float
    hinge: dict  # [kind][batch index][s]
    needed: dict  # [kind][s]
    models: dict = internal()

    def log_ratio(self) -> list:
        """Per seed, ``log2 B_M - log2 B_T``: the batch Mamba needs over the linear Transformer's, in octaves."""
        return [math.log2(m) - math.log2(t) for m, t in zip(self.needed["mamba"], self.needed["linear"])]

    def claims(self) -> dict:
        """The row ``batch-size`` (Chapter 8, Remark 4): :meth:`log_ratio` per seed
        (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        import numpy as np

        from ..analysis.claims import ClaimParts
        from ..analysis.stats import mean_se

        logdiff = self.log_ratio()
        m, se = mean_se(logdiff)
        return {"batch-size": ClaimParts(
            f"log2 B_M − log2 B_T = {m:+.2f} ± {se:.2f} (median B: Mamba {np.median(self.needed['mamba']):g}, "
            f"linear Transformer {np.median(self.needed['linear']):g}; {len(self.seeds)} seeds)", per_seed=logdiff)}


def run(preset: BatchPreset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> BatchResult:
    """Train both models with every batch size for every seed; the batch each needs to match its largest-batch loss."""
    seeds = resolve_seeds(seeds)
    f0 = preset.fig2
    pat = patterns(f0)
    val = validation_prompts(pat, f0.data, seeds, preset.n_val, "validation", "batch")
    hinge = {k: [] for k in KINDS}
    models = {}
    for B in preset.batches:
        f2 = dataclasses.replace(f0, train={k: dataclasses.replace(v, batch_size=int(B)) for k, v in f0.train.items()})
        for kind in KINDS:  # fig2.trained_models' call, with a diverging seed marked instead of raising
            tr = train(fig2.members(f2, pat, seeds, kind), f2.train[kind], device=resolve_device(device),
                       progress=progress, nonfinite="mark")
            stack, dead = tr.models[0], tr.groups[0].dead
            with torch.no_grad():
                h = loss_per_model("hinge", stack(val), val.z).tolist()
            # a seed whose training loss turned non-finite did not converge with this batch: its loss is inf
            hinge[kind].append([math.inf if (dead is not None and dead[s]) or not math.isfinite(v) else v
                                for s, v in enumerate(h)])
            models[(kind, int(B))] = stack
    needed = {}
    for kind in KINDS:
        rows = [[hinge[kind][b][s] for b in range(len(preset.batches))] for s in range(len(seeds))]
        needed[kind] = [_needed(r, preset.batches, r[-1] + preset.tolerance) for r in rows]
    return BatchResult(preset=preset.name, seeds=list(seeds), batches=list(preset.batches),
                       tolerance=preset.tolerance, hinge=hinge, needed=needed, models=models)


def _needed(losses, batches, level: float) -> int:
    """The smallest batch from which every loss is ``<= level`` (the reference batch always qualifies)."""
    b = needed_length(losses, batches, level)
    return int(batches[-1]) if b > batches[-1] else int(b)
