"""App. 14's gates measured: the one-layer Mamba trained with the squared loss, its gates on outlier and clean examples.

Glossary (code name -> paper symbol):

==================  ====================================================================================
``App14GatesPreset`` App. 14's setting (:class:`mambaicl.recipes.presets.App14Spec`: Figure 2's data,
                    squared loss, random outlier outputs at test time = rule C) and the test ``alphas``
``gate_ratio``      median gate ``G_{i,l+1}(w)`` of outlier examples / median gate of clean examples
                    (Corollary 2(i)'s measure, as the row ``cor2i``)
``errors_alpha0``   0-1 error without outliers by task group (:func:`mambaicl.data.task_groups`)
==================  ====================================================================================

The Mamba seeds are exactly those of the regression experiment's App. 14 part (the same members, streams
``(s, "init")`` and ``(s, "train")``); test prompts come from ``(s, "app14-gates/<alpha>")`` and
``(s, "app14-gates/alpha0/group=<g>")``. The row ``app14-gates`` of
:mod:`mambaicl.analysis.claims_open` was declared before the run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..analysis.corollaries import split_gates
from ..config import instance, integer, reals
from ..data import all_tasks, test_prompts
from ..evaluate import errors_by_task_group
from ..seeding import numpy_streams, substage
from ..recipes import fig2
from ..recipes.presets import App14Spec, Fig2Preset, patterns
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["App14GatesPreset", "APP14", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "App14GatesResult",
           "fig2_preset", "gate_medians", "run", "report"]


@dataclass(frozen=True)
class App14GatesPreset(Preset):
    """App. 14's Mamba and the outlier fractions at which its gates are read."""

    app14: App14Spec = instance(App14Spec, factory=App14Spec)
    alphas: tuple = reals((0.3, 0.8), 0.0, 1.0, high_open=True)
    n_test: int = integer(1000, 1)  # prompts per (seed, alpha), and per (seed, task group) at alpha = 0


APP14 = App14GatesPreset(name="app14")
#: a seconds-long smoke test (tests); not a result of the book
TINY = App14GatesPreset(name="tiny", app14=dataclasses.replace(
    App14Spec(), train={k: dataclasses.replace(v, steps=40) for k, v in App14Spec().train.items()}), n_test=200)
PRESETS = {"app14": APP14, "tiny": TINY}
DEFAULT_PRESET = "app14"
DEFAULT_SEEDS = tuple(range(10))


def fig2_preset(preset: App14GatesPreset) -> Fig2Preset:
    """App. 14 as a Figure 2 preset with the squared-loss Mamba only (the same members as the regression experiment)."""
    spec = preset.app14
    return Fig2Preset(name=f"app14-{preset.name}", data=spec.data, test=spec.test,
                           train={"mamba": spec.train["mamba"]}, alphas=tuple(spec.alphas), rules=("C",),
                           n_test=spec.n_test)


@torch.no_grad()
def gate_medians(stack, pr) -> list:
    """Per seed ``(median outlier gate, median clean gate)`` of a stack on stacked prompts ``pr`` ``(S, batch, ...)``."""
    G = stack.gate(pr)  # (S, B, L)
    out = []
    for s in range(G.shape[0]):
        g_out, g_clean = split_gates(G[s], pr.outlier[s])
        out.append((float(g_out.median()) if g_out.numel() else float("nan"), float(g_clean.median())))
    return out


@dataclass
class App14GatesResult(Result):
    """Per seed and alpha: median outlier and clean gates and their ratio; errors by task group at alpha = 0."""

    preset: str
    seeds: list
    alphas: list
    n_test: int
    gate_outlier: list  # [alpha][s]
    gate_clean: list  # [alpha][s]
    gate_ratio: list  # [alpha][s]
    errors_alpha0: dict  # {group: [s]}
    final_train_loss: float
    stack: object = internal()

    def claims(self) -> dict:
        """The row ``app14-gates`` (Chapter 8, App. 14): per alpha, each seed's median outlier/clean gate ratio
        (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        import numpy as np

        from ..analysis.claims import OUTCOME, ClaimParts

        return {"app14-gates": ClaimParts(
            "median outlier/clean gate " + ", ".join(f"{np.median(r):.1e} at α = {a}"
                                                     for a, r in zip(self.alphas, self.gate_ratio))
            + f" ({len(self.seeds)} seeds); outcome: {OUTCOME}", parts=self.gate_ratio)}


def run(preset: App14GatesPreset = APP14, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> App14GatesResult:
    """Train App. 14's Mamba for every seed (one batched run) and read its gates at each ``alpha`` (rule C)."""
    seeds = resolve_seeds(seeds)
    f2 = fig2_preset(preset)
    pat = patterns(f2)
    stack, hist = fig2.trained_models(f2, pat, seeds, device=resolve_device(device), progress=progress)["mamba"]
    tasks = all_tasks(f2.data.M1)
    g_out, g_clean = [], []
    for a in preset.alphas:
        pr = test_prompts(pat, dataclasses.replace(f2.test, alpha=float(a)), tasks, preset.n_test,
                          numpy_streams(seeds, substage("app14-gates", float(a))))
        med = gate_medians(stack, pr)
        g_out.append([m[0] for m in med])
        g_clean.append([m[1] for m in med])
    ratio = [[o / c for o, c in zip(go, gc)] for go, gc in zip(g_out, g_clean)]
    groups = errors_by_task_group(stack, pat, dataclasses.replace(f2.test, alpha=0.0), preset.n_test, seeds,
                                  "app14-gates/alpha0")
    return App14GatesResult(preset=preset.name, seeds=list(seeds), alphas=list(preset.alphas), n_test=preset.n_test,
                            gate_outlier=g_out, gate_clean=g_clean, gate_ratio=ratio, errors_alpha0=groups,
                            final_train_loss=sum(hist.loss[-1]) / len(hist.loss[-1]), stack=stack)


def report(res: App14GatesResult, judged) -> tuple:
    """``(text, glued)`` for Chapter 12: per alpha the median gates and each seed's ratio, the errors by task group
    at alpha = 0 (all tasks weighted by the groups' numbers of tasks), and the checks the prose states."""
    import numpy as np

    from ..analysis.information import information_bound_by_group
    from ..analysis.stats import error_mean_se

    lines = [f"alpha = {a}: median outlier gate {np.median(go):.1e}, clean {np.median(gc):.1e}, "
             f"ratio per seed " + " ".join(f"{v:.1e}" for v in gr)
             for a, go, gc, gr in zip(res.alphas, res.gate_outlier, res.gate_clean, res.gate_ratio)]
    assert judged.outcome == "reproduced"  # the prose reads the gate as suppressing
    n_by = {g: n for g, (_, n) in information_bound_by_group(0.8, 20, 6).items()}  # tasks per group (App. 9's cycle)
    e0 = {g: error_mean_se(v, res.n_test) for g, v in res.errors_alpha0.items()}
    e0_all = sum(np.mean(res.errors_alpha0[g]) * n for g, n in n_by.items()) / sum(n_by.values())
    lines.append("alpha = 0, errors by task group: " + "; ".join(f"{g} {m:.3f} ± {se:.3f}" for g, (m, se) in e0.items())
                 + f"; all tasks {e0_all:.3f}")
    assert e0["distance 2"][0] > 10 * max(e0["training"][0], e0["reversed"][0], e0["distance 3"][0])
    return "\n".join(lines), {
        "ch8_g14_ratio": ", ".join(f"{np.median(r):.0e} at α = {a}" for a, r in zip(res.alphas, res.gate_ratio)),
        "ch8_g14_d2": f"{e0['distance 2'][0]:.3f} ± {e0['distance 2'][1]:.3f}",
        "ch8_g14_all": f"{e0_all:.2f}", "ch8_g14_n": f"{res.n_test:,}",
        "ch8_g14_others": f"{max(e0[g][0] for g in ('training', 'reversed', 'distance 3')):.3f}"}
