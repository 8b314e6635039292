"""Figure 2's seed tail: why a training seed of Mamba fails at alpha = 0.8, and Figure 2 against its information bound.

Glossary (code name -> paper symbol):

===================  ==================================================================================
``predictor``        ``kappa_a' max_s v'_s^T w``: the gate logit an outlier adds to the least-suppressed
                     test outlier ``v'_s`` (§4.1's combinations of ``v*_s``), from the trained ``w`` alone
``test_logits``      ``kappa_a' v'_s^T w`` for each ``s`` (the predictor is their maximum)
``train_proj``       ``v*_s^T w`` for each training outlier (Lemma 4 drives all of them down alike)
``claim_error``      test error on the 18 tasks of :data:`mambaicl.experiments.fig2.CLAIM_GROUPS`
``all_error``        test error over all 30 tasks (groups weighted by their number of tasks)
``bound``            :func:`mambaicl.analysis.information.information_bound_all_tasks`
===================  ==================================================================================

**Declared before the run** (with the registry rows ``fig2-seed-tail`` and ``fig2-information-bound`` of
:mod:`mambaicl.analysis.claims_open`): the predictor above, the error it should predict (rule A,
``alpha = 0.8``, the 18 claim tasks), the test (Spearman's rho over seeds with a Fisher-z interval), and a
seed *fails* when that error exceeds :data:`FAIL_LEVEL` (the AUC of the predictor for failing seeds is
reported beside rho, with Hanley and McNeil's interval). No other predictor is tried.

Streams: the seeds train exactly as in Figure 2 (:func:`mambaicl.experiments.fig2.trained_models`) and are
tested on prompts from ``(seed, "seed-tail/<rule>/group=<g>")``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import binomtest, rankdata

from ..config import RULES, ConfigError, check_choice, choices, instance, integer, real
from ..data import test_outliers
from ..evaluate import errors_by_task_group
from ..analysis.information import information_bound_all_tasks, information_bound_by_group
from ..seeding import substage
from ..recipes import fig2
from ..recipes import presets
from ..recipes.presets import CLAIM_GROUPS, TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["SeedTailPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "FAIL_LEVEL",
           "SeedTailResult", "predictor", "spearman", "auc", "run", "group_sweep", "failing_interval"]

#: a seed fails when its rule-A error at alpha = 0.8 on the 18 claim tasks exceeds this (typical seeds: about 0.01)
FAIL_LEVEL = 0.05


@dataclass(frozen=True)
class SeedTailPreset(Preset):
    """Figure 2's Mamba (``fig2``'s settings) tested at one ``alpha`` on every task group, each rule."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    alpha: float = real(0.8, 0.0, 1.0, high_open=True)
    rules: tuple = choices(RULES, RULES)
    n_test: int = integer(4000, 1)  # prompts per (seed, rule, task group)


FIG2 = SeedTailPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = SeedTailPreset(name="tiny", fig2=FIG2_TINY, n_test=300)
PRESETS = {"fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = tuple(range(60))


def predictor(w: torch.Tensor, v: torch.Tensor, test) -> tuple:
    """The declared predictor and its parts, from the gate vectors ``w`` ``(S, d+1)`` alone.

    Returns:
        ``(predictor (S,), test_logits (S, V'), train_proj (S, V))``: ``kappa_a' max_s v'_s^T w``,
        ``kappa_a' v'_s^T w`` and ``v*_s^T w``.
    """
    d = v.shape[1]
    wx = w[:, :d].detach().to(v.dtype)  # (S, d)
    v_test = test_outliers(v, test.v_coeffs)  # (V', d)
    logits = test.kappa_a_prime * wx @ v_test.T  # (S, V')
    return logits.max(dim=1).values, logits, wx @ v.T


def spearman(x, y) -> dict:
    """Spearman's rho of ``x`` and ``y`` (average ranks for ties) and its 95 % interval by Fisher's z with
    standard error ``sqrt(1.06 / (n - 3))`` (Fieller, Hartley & Pearson 1957)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.size < 4:
        raise ConfigError(f"x and y must be two aligned samples of at least 4 values (spearman); got shapes {x.shape}, {y.shape}")
    rho = float(np.corrcoef(rankdata(x), rankdata(y))[0, 1])
    z, half = math.atanh(max(min(rho, 1 - 1e-12), -1 + 1e-12)), 1.959963984540054 * math.sqrt(1.06 / (x.size - 3))
    return {"rho": rho, "low": math.tanh(z - half), "high": math.tanh(z + half), "n": int(x.size)}


def auc(score, positive) -> dict:
    """Area under the ROC curve of ``score`` for the ``positive`` cases (the Mann-Whitney form, ties count
    1/2) with Hanley and McNeil's (1982) standard error and a normal 95 % interval clipped to [0, 1];
    ``nan`` when either class is empty."""
    s, pos = np.asarray(score, float), np.asarray(positive, bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return {"auc": math.nan, "low": math.nan, "high": math.nan, "n_pos": n1, "n_neg": n0}
    a = float(np.mean((s[pos][:, None] > s[~pos][None, :]) + 0.5 * (s[pos][:, None] == s[~pos][None, :])))
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    se = math.sqrt(max(a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a), 0.0) / (n1 * n0))
    return {"auc": a, "low": max(0.0, a - 1.959963984540054 * se), "high": min(1.0, a + 1.959963984540054 * se),
            "n_pos": n1, "n_neg": n0}


@dataclass
class SeedTailResult(Result):
    """Per-seed errors by rule and task group at ``alpha``, the predictor and its parts, rho and the AUC."""

    preset: str
    seeds: list
    alpha: float
    n_test: int
    group_errors: dict  # [rule][group][s]
    all_error: dict  # [rule][s]
    claim_error: dict  # [rule][s]
    predictor: list  # [s]
    test_logits: list  # [s][s']
    train_proj: list  # [s][s']
    bound_all: float
    bound_by_group: dict  # group -> (bound, number of tasks)
    fail_level: float
    failing: list  # seeds whose rule-A claim-task error exceeds fail_level
    spearman: dict
    auc: dict
    stack: object = internal()
    spec: SeedTailPreset = internal()

    def claims(self) -> dict:
        """The rows this result measures (:class:`~mambaicl.analysis.claims.ClaimParts`), Chapter 8:
        ``fig2-information-bound`` (per rule, each seed's all-task error at ``alpha`` minus the information bound;
        ``4 n_test`` prompts behind each) and ``fig2-seed-tail`` (Spearman's rho of the declared predictor and the
        claim-task error, with its Fisher-z interval, handed over as one Measured)."""
        from ..analysis.claims import OUTCOME, ClaimParts, Measured
        from ..analysis.stats import error_mean_se

        S, n_all, rho = len(self.seeds), 4 * self.n_test, self.spearman
        m_a, se_a = error_mean_se(self.all_error["A"], n_all)
        return {
            "fig2-information-bound": ClaimParts(
                f"all-task error at α = 0.8 {m_a:.3f} ± {se_a:.3f} (rule A, {S} seeds) against the bound "
                f"{self.bound_all:.3f}; outcome: {OUTCOME}",
                parts=[[e - self.bound_all for e in self.all_error[rule]] for rule in self.spec.rules], n_prompts=n_all),
            "fig2-seed-tail": ClaimParts(
                f"ρ = {rho['rho']:.2f} [{rho['low']:.2f}, {rho['high']:.2f}] over {S} seeds; "
                f"{len(self.failing)} failing seed(s); outcome: {OUTCOME}",
                per_seed=Measured(rho["rho"], rho["low"], rho["high"], S, tuple(self.predictor))),
        }


def run(preset: SeedTailPreset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> SeedTailResult:
    """Train Figure 2's Mamba for every seed (one batched run), test it at ``preset.alpha`` on every task group
    and rule, and compute the declared predictor, Spearman's rho and the AUC (rule A, 18 claim tasks)."""
    seeds = resolve_seeds(seeds)
    f2 = preset.fig2
    check_choice("rules", "A", preset.rules)  # the declared test reads rule A
    pat = patterns(f2)
    stack, _ = fig2.trained_models(f2, pat, seeds, kinds=("mamba",), device=resolve_device(device),
                                   progress=progress)["mamba"]
    by_group = information_bound_by_group(preset.alpha, f2.test.l_ts, f2.data.M1)
    n_tasks = sum(n for _, n in by_group.values())
    groups, all_err, claim_err = {}, {}, {}
    for rule in preset.rules:
        test = dataclasses.replace(f2.test, rule=rule, alpha=preset.alpha)
        g = errors_by_task_group(stack, pat, test, preset.n_test, seeds, substage("seed-tail", rule))
        groups[rule] = g
        all_err[rule] = [sum(g[k][s] * by_group[k][1] for k in g) / n_tasks for s in range(len(seeds))]
        claim = [k for k in g if k in CLAIM_GROUPS]  # equal numbers of tasks (M1 each)
        claim_err[rule] = [sum(g[k][s] for k in claim) / len(claim) for s in range(len(seeds))]
    pred, logits, proj = predictor(stack.w, pat.v, f2.test)
    fail = [e > FAIL_LEVEL for e in claim_err["A"]]
    return SeedTailResult(preset=preset.name, seeds=list(seeds), alpha=preset.alpha, n_test=preset.n_test,
                          group_errors=groups, all_error=all_err, claim_error=claim_err, predictor=pred.tolist(),
                          test_logits=logits.tolist(), train_proj=proj.tolist(),
                          bound_all=information_bound_all_tasks(preset.alpha, f2.test.l_ts, f2.data.M1),
                          bound_by_group={k: list(v) for k, v in by_group.items()}, fail_level=FAIL_LEVEL,
                          failing=[s for s, f in zip(seeds, fail) if f],
                          spearman=spearman(pred.tolist(), claim_err["A"]), auc=auc(pred.tolist(), fail),
                          stack=stack, spec=preset)


def group_sweep(res: SeedTailResult, alphas, *, n: int = 1000, rule: str = "A") -> dict:
    """The trained seeds of ``res`` on every task group at each ``alpha`` (rule ``rule``, ``n`` prompts per
    seed and group, streams ``(seed, "seed-tail/sweep/<rule>/<alpha>/group=<g>")``).

    Returns:
        ``{group: [[error of seed s at alphas[i]] for s]}`` and ``"all"`` (groups weighted by their tasks).
    """
    f2 = res.spec.fig2
    pat = patterns(f2)
    n_by = {k: v[1] for k, v in res.bound_by_group.items()}
    out = {}
    for a in alphas:
        test = dataclasses.replace(f2.test, rule=rule, alpha=float(a))
        g = errors_by_task_group(res.stack, pat, test, n, res.seeds, substage("seed-tail", "sweep", rule, float(a)))
        g["all"] = [sum(g[k][s] * n_by[k] for k in n_by) / sum(n_by.values()) for s in range(len(res.seeds))]
        for k, v in g.items():
            out.setdefault(k, []).append(v)
    return {k: [list(col) for col in zip(*rows)] for k, rows in out.items()}  # [group][seed][alpha]


def failing_interval(k: int, n: int) -> tuple:
    """Clopper-Pearson (exact) 95 % interval of a failure rate of ``k`` failing seeds out of ``n``."""
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)
