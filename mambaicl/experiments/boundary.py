"""The robustness boundary of Theorems 2(c) and 4(c): test error over alpha and p_a l_tr / l_ts.

Glossary (code name -> paper symbol):

==================  ====================================================================
``p_as``            training outlier fractions ``p_a`` (Eq. (4)); one model per value and seed
``l_tss``           test prompt lengths ``l_ts`` (Definition 2); ``l_tr`` is Figure 2's
``ratio``           ``r = p_a l_tr / l_ts``; Theorem 2(c): Mamba generalises for ``alpha < min(1, r)``;
                    Theorem 4(c): the linear Transformer for ``alpha < 1/2``
``alphas``          test outlier fractions ``alpha``
``level``           the error level that defines the measured boundary: ``alpha*`` is the
                    ``alpha`` at which a seed's test error first reaches ``level`` (linear
                    interpolation between grid points; :func:`mambaicl.analysis.fits.crossing`)
``censored``        the error never reached ``level`` on the grid: ``alpha* >= max(alphas)``
``*_d``             the ``alpha`` limits implied by Theorems 2(d) / 4(d) (prompt long enough for the
                    outlier fraction), with their unspecified constants set to 1
==================  ====================================================================

**Design.** ``p_a`` is varied in training and ``l_ts`` at test time, separately, so that the ratio
``r`` takes values that several ``(p_a, l_ts)`` pairs share: an effect of ``r`` itself cannot be
confused with an effect of ``p_a`` or of ``l_ts``. Everything else is Figure 2's (the shared defaults
:data:`mambaicl.config.SYNTHETIC_DATA`, ``SYNTHETIC_TEST`` with ``kappa_a' = kappa_a / L`` and
:func:`mambaicl.config.synthetic_trains`, the step sizes per model).

**Batched over p_a.** All ``p_a`` values of one model kind train as one
:class:`mambaicl.models.OneLayerStack` of ``len(p_as) * S`` members (member ``j S + s``: ``p_a`` number
``j``, seed ``s``) by :func:`mambaicl.train.train`. Member ``(j, s)`` draws its initial values from
``(s, "init")`` and its training prompts from ``(s, "train")``; the engine's draw-replay gives each
member exactly the prompts a run of that seed and ``p_a`` alone would see (tested in ``tests/test_train.py``). Test prompts come from ``(s, "test/boundary/<l_ts>/<alpha>")`` and are the same for
every ``p_a`` and model (paired comparisons).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass


from ..analysis.stats import error_mean_se, mean_se
from ..analysis.theory import alpha_threshold_lt, alpha_threshold_mamba
from ..analysis.fits import crossing
from ..config import (ONE_LAYER_KINDS, RULES, SYNTHETIC_DATA, SYNTHETIC_TEST, DataConfig, TestConfig, check_choice,
                      check_int, check_trains, choice, choices, instance, integer, integers, real, reals,
                      synthetic_trains, to_dict, trains)
from ..data import Patterns, all_tasks, make_patterns, test_prompts, training_tasks
from ..evaluate import predict, zero_one_error
from ..seeding import torch_generator, torch_generators
from ..train import Member, SyntheticData, train
from .base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["BoundaryPreset", "THEOREMS", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
           "BoundaryResult", "alpha_limit_mamba_d", "alpha_limit_lt_d", "members", "trained_grid", "run"]



@dataclass(frozen=True)
class BoundaryPreset(Preset):
    """A phase diagram: models, the ``p_a`` x ``l_ts`` grid, the alpha grid, the boundary level."""

    p_as: tuple = reals((0.2, 0.35, 0.5, 0.65, 0.8), 0.0, 1.0, high_open=True, distinct=True)
    l_tss: tuple = integers((10, 20, 30, 40, 60), 1, distinct=True)
    alphas: tuple = reals((0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95), 0.0, 1.0, high_open=True,
                          min_len=2, increasing=True)
    models: tuple = choices(("mamba", "mamba_merged", "linear"), ONE_LAYER_KINDS)
    level: float = real(0.25, 0.0, 1.0, low_open=True, high_open=True)
    rule: str = choice("A", RULES)
    n_test: int = integer(600, 1, 4000)
    data: DataConfig = instance(DataConfig, factory=lambda: SYNTHETIC_DATA)
    test: TestConfig = instance(TestConfig, factory=lambda: SYNTHETIC_TEST)
    train: dict = trains(synthetic_trains)
    pattern_seed: int = integer(0, 0)

    def _check(self) -> None:
        check_trains("train", {k: self.train.get(k) for k in self.models}, self.models)

    def ratio(self, p_a: float, l_ts: int) -> float:
        """``r = p_a l_tr / l_ts``."""
        return p_a * self.data.l_tr / l_ts


#: "theorems": 5 training p_a x 5 test l_ts (r from 0.067 to 1.6), 11 alphas up to 0.95, the three
#: one-layer models with Figure 2's settings; boundary at error 0.25 (halfway from perfect to chance)
THEOREMS = BoundaryPreset(name="theorems")
#: "tiny": a seconds-long smoke test (CLI tests); not a result of the book
TINY = dataclasses.replace(THEOREMS, name="tiny", p_as=(0.2, 0.8), l_tss=(10, 40), alphas=(0.0, 0.5, 0.9),
                           models=("mamba", "linear"), n_test=200,
                           train=synthetic_trains(steps=40))
PRESETS = {"theorems": THEOREMS, "tiny": TINY}
DEFAULT_PRESET = "theorems"
DEFAULT_SEEDS = (0, 1, 2)


def alpha_limit_mamba_d(l_ts: int, M1: int) -> float:
    """The largest ``alpha`` allowed by Theorem 2(d)'s lower bound ``l_ts >= (1 - alpha)^{-1} log M1`` with the
    hidden constant set to 1: ``1 - log(M1) / l_ts`` (about ``log M1`` clean examples expected in the prompt)."""
    check_int("l_ts", l_ts, 1)
    check_int("M1", M1, 2)
    return max(0.0, 1.0 - math.log(M1) / l_ts)


def alpha_limit_lt_d(l_ts: int, M1: int) -> float:
    """The largest ``alpha < 1/2`` allowed by Theorem 4(d), ``l_ts >= max{(1 - alpha)^{-1}, alpha / (1/2 - alpha)^2}
    log M1``, constants set to 1 (the smaller root of ``c (1/2 - alpha)^2 = alpha`` with ``c = l_ts / log M1``)."""
    check_int("l_ts", l_ts, 1)
    check_int("M1", M1, 2)
    c = l_ts / math.log(M1)
    # c alpha^2 - (c + 1) alpha + c / 4 = 0, smaller root in [0, 1/2)
    root = ((c + 1) - math.sqrt((c + 1) ** 2 - c * c)) / (2 * c)
    return max(0.0, min(root, alpha_limit_mamba_d(l_ts, M1)))


def members(preset: BoundaryPreset, kind: str, pat: Patterns, seeds) -> list:
    """The :class:`mambaicl.train.Member` list of one model kind: member ``j S + s`` trains at ``p_as[j]`` with ``seeds[s]``."""
    seeds = resolve_seeds(seeds)
    tr = preset.train[check_choice("kind", kind, preset.models)]
    tasks = training_tasks(preset.data.M1)
    return [Member(s, kind, SyntheticData(pat, dataclasses.replace(preset.data, p_a=float(p)), tasks), tr.lr, m=tr.m,
                   delta=tr.delta, dtype=pat.mu.dtype) for p in preset.p_as for s in seeds]


def trained_grid(preset: BoundaryPreset, kind: str, pat: Patterns, seeds, *, device=None, progress: bool = False):
    """One stack of ``len(p_as) S`` models of ``kind`` (member ``j S + s``), trained; ``(stack, history)``."""
    tr = train(members(preset, kind, pat, seeds), preset.train[kind], device=resolve_device(device), progress=progress)
    return tr.models[0], tr.groups[0].history


@dataclass
class BoundaryResult(Result):
    """Errors on the (p_a, l_ts, alpha) grid and the measured boundaries, per model (mean, per seed, SE)."""

    preset: str
    seeds: list
    p_as: list
    l_tss: list
    alphas: list
    l_tr: int
    level: float
    n_test: int
    ratio: list  # ratio[j][k] = p_a[j] l_tr / l_ts[k]
    predicted_mamba: list  # [j][k]: min(1, ratio), Theorem 2(c)
    predicted_linear: float  # 1/2, Theorem 4(c)
    predicted_mamba_d: list  # [k]: 1 - log(M1) / l_ts, Theorem 2(d) with its constant set to 1
    predicted_linear_d: list  # [k]: the largest alpha of Theorem 4(d) with its constants set to 1
    errors: dict  # errors[model][j][k][i]: mean over seeds
    errors_se: dict
    errors_per_seed: dict  # [model][j][k][s][i]
    boundary: dict  # boundary[model][j][k]: {"per_seed", "censored", "mean", "se"}
    config: dict
    models: dict = internal()
    spec: BoundaryPreset = internal()

    def alpha_star(self, kind: str) -> list:
        """Per-seed measured boundaries ``[j][k][s]`` (a censored seed counts as ``max(alphas)``)."""
        return [[cell["per_seed"] for cell in row] for row in self.boundary[kind]]

    def effect(self, kind: str, along: str) -> list:
        """Per seed: mean ``alpha*`` at the largest value of ``along`` (``"p_a"`` or ``"l_ts"``) minus the mean at
        the smallest, averaged over the other axis. Theorem 2(c) predicts ``> 0`` along ``p_a`` and ``< 0`` along
        ``l_ts`` for Mamba (while ``r < 1``); Theorem 4(c) predicts 0 for the linear Transformer."""
        check_choice("along", along, ("p_a", "l_ts"))
        A = self.alpha_star(kind)
        J, K, S = len(A), len(A[0]), len(A[0][0])
        if along == "p_a":
            return [sum(A[J - 1][k][s] - A[0][k][s] for k in range(K)) / K for s in range(S)]
        return [sum(A[j][K - 1][s] - A[j][0][s] for j in range(J)) / J for s in range(S)]

    def margin_to_prediction(self, kind: str) -> list:
        """Per cell ``[j][k]``: measured mean ``alpha*`` minus the predicted boundary (Theorem 2(c) for Mamba kinds,
        Theorem 4(c) for the linear Transformer)."""
        pred = (lambda j, k: self.predicted_linear) if kind == "linear" else (lambda j, k: self.predicted_mamba[j][k])
        return [[self.boundary[kind][j][k]["mean"] - pred(j, k) for k in range(len(self.l_tss))]
                for j in range(len(self.p_as))]


def _boundary_stats(per_seed: list, alpha_max: float) -> dict:
    """Mean and SE of per-seed crossings; a censored seed counts as ``alpha_max`` (so the mean is a lower bound)."""
    censored = [math.isnan(a) for a in per_seed]
    vals = [alpha_max if c else a for a, c in zip(per_seed, censored)]
    m, se = mean_se(vals)
    return {"per_seed": vals, "censored": censored, "mean": m, "se": 0.0 if math.isnan(se) else se}


def run(preset: BoundaryPreset = THEOREMS, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> BoundaryResult:
    """Train every model at every ``p_a`` (all seeds at once), test on the ``(l_ts, alpha)`` grid, find the boundaries."""
    seeds = resolve_seeds(seeds)
    S, J = len(seeds), len(preset.p_as)
    pat = make_patterns(preset.data, torch_generator(preset.pattern_seed, "patterns"))
    tasks = all_tasks(preset.data.M1)
    trained = {k: trained_grid(preset, k, pat, seeds, device=device, progress=progress)[0] for k in preset.models}
    # err[kind][j][k][s][i]
    err = {kind: [[[[0.0] * len(preset.alphas) for _ in range(S)] for _ in preset.l_tss] for _ in range(J)]
           for kind in preset.models}
    for k, l_ts in enumerate(preset.l_tss):
        for i, a in enumerate(preset.alphas):
            test = dataclasses.replace(preset.test, l_ts=int(l_ts), alpha=float(a), rule=preset.rule)
            gens = [g for _ in range(J) for g in torch_generators(seeds, f"test/boundary/{int(l_ts)}/{float(a)}")]
            pr = test_prompts(pat, test, tasks, preset.n_test, gens)  # (J S, n, ...), the same for every p_a
            for kind, stack in trained.items():
                F = predict(stack, pr)  # (J S, n)
                for j in range(J):
                    for s in range(S):
                        err[kind][j][k][s][i] = zero_one_error(F[j * S + s], pr.z[j * S + s])
    errors, ses, bound = {}, {}, {}
    amax = float(preset.alphas[-1])
    for kind in preset.models:
        errors[kind], ses[kind], bound[kind] = [], [], []
        for j in range(J):
            row_m, row_se, row_b = [], [], []
            for k in range(len(preset.l_tss)):
                cell = err[kind][j][k]  # [s][i]
                stats = [error_mean_se([cell[s][i] for s in range(S)], preset.n_test) for i in range(len(preset.alphas))]
                row_m.append([m for m, _ in stats])
                row_se.append([se for _, se in stats])
                row_b.append(_boundary_stats([crossing(preset.alphas, cell[s], preset.level) for s in range(S)],
                                             amax))
            errors[kind].append(row_m)
            ses[kind].append(row_se)
            bound[kind].append(row_b)
    ratio = [[preset.ratio(p, l) for l in preset.l_tss] for p in preset.p_as]
    return BoundaryResult(preset=preset.name, seeds=list(seeds), p_as=list(preset.p_as), l_tss=list(preset.l_tss),
                          alphas=list(preset.alphas), l_tr=preset.data.l_tr, level=preset.level, n_test=preset.n_test,
                          ratio=ratio,
                          predicted_mamba=[[alpha_threshold_mamba(p, preset.data.l_tr, l) for l in preset.l_tss]
                                           for p in preset.p_as],
                          predicted_linear=alpha_threshold_lt(),
                          predicted_mamba_d=[alpha_limit_mamba_d(int(l), preset.data.M1) for l in preset.l_tss],
                          predicted_linear_d=[alpha_limit_lt_d(int(l), preset.data.M1) for l in preset.l_tss],
                          errors=errors, errors_se=ses, errors_per_seed=err,
                          boundary=bound, config=to_dict(preset), models=trained, spec=preset)
