"""How many context examples each model needs (§1 Contribution 2; Theorems 2(d), 4(d)): Mamba vs the linear Transformer.

Glossary (code name -> paper symbol):

==================  ====================================================================================
``l_grid``          test prompt lengths ``l_ts`` tried
``level``           the error a model must reach (declared with the row ``context-examples``)
``needed``          per seed, the smallest ``l_ts`` of the grid from which the error stays ``<= level`` at
                    every longer ``l_ts`` of the grid; :data:`CENSOR` when it never gets there
``alphas``          test outlier fractions (rule A, placement R)
``gap``             per seed, the linear Transformer's error minus Mamba's averaged over ``l_grid`` (the row
                    ``context-examples``; ``needed`` is reported, not judged)
==================  ====================================================================================

The models are Figure 2's (:func:`mambaicl.experiments.fig2.trained_models`: same members, streams and step
sizes), tested on the 18 tasks of :data:`mambaicl.experiments.fig2.CLAIM_GROUPS` (Mamba's distance-2 floor
of Chapter 4 would otherwise keep both models above any small level), prompts from
``(seed, "context/<alpha>/<l_ts>")``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import instance, integer, integers, real, reals
from ..analysis.fits import CENSOR, needed_length  # noqa: F401 (re-exported)
from ..evaluate import test_error
from ..seeding import numpy_streams, substage
from ..recipes import fig2
from ..recipes import presets
from ..recipes.presets import TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["ContextPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "CENSOR", "needed_length",
           "ContextResult", "run"]

KINDS = ("mamba", "linear")


@dataclass(frozen=True)
class ContextPreset(Preset):
    """Figure 2's two models tested at several ``alpha`` over a grid of test prompt lengths."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    alphas: tuple = reals((0.3, 0.45, 0.6), 0.0, 1.0, high_open=True)
    l_grid: tuple = integers((2, 4, 6, 8, 12, 16, 24, 32, 48, 64), 1)
    level: float = real(0.05, 0.0, 1.0)
    n_test: int = integer(1000, 1)


FIG2 = ContextPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = ContextPreset(name="tiny", fig2=FIG2_TINY, alphas=(0.3,), l_grid=(2, 8, 32), n_test=200)
PRESETS = {"fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = tuple(range(20))


@dataclass
class ContextResult(Result):
    """Errors per model, alpha, seed and l_ts; the l_ts each seed needs."""

    preset: str
    seeds: list
    alphas: list
    l_grid: list
    level: float
    n_test: int
    errors: dict  # [kind][alpha index][s][l index]
    needed: dict  # [kind][alpha index][s]
    models: dict = internal()

    def median_needed(self) -> dict:
        """``{(model, alpha): median over seeds of the l_ts needed}`` (``CENSOR``: never on the grid)."""
        import numpy as np

        return {(k, a): np.median(self.needed[k][i]) for k in ("mamba", "linear") for i, a in enumerate(self.alphas)}

    def gap(self, alpha: float) -> list:
        """Per seed, the linear Transformer's error minus Mamba's at ``alpha``, averaged over ``l_grid`` (the area
        between the two error curves on the grid's points): the row ``context-examples``' statistic."""
        i = self.alphas.index(alpha)
        return [sum(lt - m for lt, m in zip(rl, rm)) / len(rl)
                for rl, rm in zip(self.errors["linear"][i], self.errors["mamba"][i])]

    def claims(self) -> dict:
        """The row ``context-examples`` (Chapter 8): :meth:`gap` at alpha = 0.3 and 0.45, one part each
        (:class:`~mambaicl.analysis.claims.ClaimParts`); the median l_ts needed in the row's text."""
        import numpy as np

        from ..analysis.stats import sign_test

        from ..analysis.claims import ClaimParts

        need = self.median_needed()
        lt45 = need["linear", 0.45]
        gaps = [self.gap(a) for a in (0.3, 0.45)]
        g = "; ".join(f"α = {a}: {np.mean(d):+.3f}, {sign_test(d)['n_pos']} of {len(d)} seeds > 0"
                      for a, d in zip((0.3, 0.45), gaps))
        return {"context-examples": ClaimParts(
            f"linear Transformer − Mamba error, mean over l_ts = {self.l_grid[0]}…{self.l_grid[-1]}: {g} "
            f"({len(self.seeds)} seeds); l_ts needed for error ≤ {self.level:g} (median): Mamba {need['mamba', 0.3]:g}"
            f" and {need['mamba', 0.45]:g}, linear Transformer {need['linear', 0.3]:g} and "
            f"{'never (≤ 64)' if lt45 == CENSOR else format(lt45, 'g')}", parts=gaps)}


def run(preset: ContextPreset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> ContextResult:
    """Train Figure 2's Mamba and linear Transformer for every seed and test them over ``l_grid`` at each ``alpha``."""
    seeds = resolve_seeds(seeds)
    f2 = preset.fig2
    pat = patterns(f2)
    trained = fig2.trained_models(f2, pat, seeds, kinds=KINDS, device=resolve_device(device), progress=progress)
    tasks = fig2.claim_tasks(f2.data.M1)
    errors, needed = {}, {}
    for kind in KINDS:
        stack = trained[kind][0]
        errors[kind], needed[kind] = [], []
        for a in preset.alphas:
            cols = [test_error(stack, pat, dataclasses.replace(f2.test, alpha=float(a), l_ts=int(l)), tasks,
                               preset.n_test, numpy_streams(seeds, substage("context", float(a), int(l))))
                    for l in preset.l_grid]  # [l][s]
            rows = [[cols[j][s] for j in range(len(cols))] for s in range(len(seeds))]
            errors[kind].append(rows)
            needed[kind].append([needed_length(r, preset.l_grid, preset.level) for r in rows])
    return ContextResult(preset=preset.name, seeds=list(seeds), alphas=list(preset.alphas),
                         l_grid=list(preset.l_grid), level=preset.level, n_test=preset.n_test, errors=errors,
                         needed=needed, models={k: s for k, (s, _) in trained.items()})
