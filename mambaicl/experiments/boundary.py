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
``kappas``          test outlier magnitudes ``kappa_a'`` (Eq. (5)); ``kappas[0]`` is the preset's
                    ``test.kappa_a_prime`` (Figure 2's ``kappa_a / L``), the others re-test the same
                    trained models (Theorem 2(b) allows ``kappa_a' >= kappa_a``)
``levels``          further error levels at which the boundary is read (the training is the same)
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
every ``p_a``, model and ``kappa_a'`` (paired comparisons: only the outlier magnitude differs between
the ``kappas``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..analysis.stats import error_mean_se, mean_se
from ..analysis.theory import alpha_limit_lt_d, alpha_limit_mamba_d, alpha_threshold_lt, alpha_threshold_mamba
from ..analysis.fits import crossing
from ..config import (ONE_LAYER_KINDS, RULES, SYNTHETIC_DATA, SYNTHETIC_TEST, ConfigError, DataConfig, TestConfig,
                      check_choice,
                      check_int, check_trains, choice, choices, instance, integer, integers, real, reals,
                      synthetic_trains, to_dict, trains)
from ..data import Patterns, all_tasks, make_patterns, test_prompts, training_tasks
from ..evaluate import predict, zero_one_error
from ..seeding import numpy_streams, substage, torch_generator
from ..train import Member, SyntheticData, train
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["BoundaryPreset", "THEOREMS", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
           "BoundaryResult", "alpha_limit_mamba_d", "alpha_limit_lt_d", "members", "trained_grid", "fine_grid", "run"]



@dataclass(frozen=True)
class BoundaryPreset(Preset):
    """A phase diagram: models, the ``p_a`` x ``l_ts`` grid, the alpha grid, the boundary level."""

    p_as: tuple = reals((0.2, 0.35, 0.5, 0.65, 0.8), 0.0, 1.0, high_open=True, distinct=True)
    l_tss: tuple = integers((10, 20, 30, 40, 60), 1, distinct=True)
    alphas: tuple = reals((0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99), 0.0, 1.0,
                          high_open=True, min_len=2, increasing=True)
    models: tuple = choices(("mamba", "mamba_merged", "linear"), ONE_LAYER_KINDS)
    level: float = real(0.25, 0.0, 1.0, low_open=True, high_open=True)
    levels: tuple = reals((0.1,), 0.0, 1.0, low_open=True, high_open=True, min_len=0, distinct=True)
    kappas: tuple = reals((SYNTHETIC_TEST.kappa_a_prime, SYNTHETIC_DATA.kappa_a), 0.0, low_open=True, distinct=True)
    rule: str = choice("A", RULES)
    n_test: int = integer(600, 1, 4000)
    data: DataConfig = instance(DataConfig, factory=lambda: SYNTHETIC_DATA)
    test: TestConfig = instance(TestConfig, factory=lambda: SYNTHETIC_TEST)
    train: dict = trains(synthetic_trains)
    pattern_seed: int = integer(0, 0)
    # issue 41: the fine alpha grid near each predicted boundary, and the cells the row breakdown judges (declared in
    # the registry before the run): Mamba's cells where Theorem 2 guarantees the most, the linear Transformer's at the
    # l_ts where Theorem 4 guarantees the most (every p_a); boundary-kappa reads alpha* at a rise of ``rise`` over the
    # same seed's alpha = 0 error as well (robustness, not the error floor)
    fine_step: float = real(0.02, 0.0, 1.0, low_open=True, high_open=True)
    fine_halfwidth: float = real(0.1, 0.0, 1.0, low_open=True, high_open=True)
    mamba_cells_l_ts: int = integer(10, 1)
    mamba_cells_p_as: tuple = reals((0.5, 0.65, 0.8), 0.0, 1.0, high_open=True, distinct=True)
    linear_cells_l_ts: int = integer(60, 1)
    rise: float = real(0.1, 0.0, 1.0, low_open=True, high_open=True)

    def _check(self) -> None:
        check_trains("train", {k: self.train.get(k) for k in self.models}, self.models)
        if self.mamba_cells_l_ts not in self.l_tss or self.linear_cells_l_ts not in self.l_tss:
            raise ConfigError(f"mamba_cells_l_ts and linear_cells_l_ts must be in l_tss = {self.l_tss!r}")
        if not set(self.mamba_cells_p_as) <= set(self.p_as):
            raise ConfigError(f"mamba_cells_p_as must be values of p_as = {self.p_as!r}; got {self.mamba_cells_p_as!r}")
        if self.kappas[0] != self.test.kappa_a_prime:
            raise ConfigError(f"kappas[0] must be test.kappa_a_prime = {self.test.kappa_a_prime!r} (the main "
                              f"results' kappa_a'); got {self.kappas[0]!r}")
        if self.level in self.levels:
            raise ConfigError(f"levels must not repeat level = {self.level!r}; got {self.levels!r}")

    @property
    def all_levels(self) -> tuple:
        """``(level, *levels)``: every error level the boundary is read at."""
        return (self.level, *self.levels)

    def ratio(self, p_a: float, l_ts: int) -> float:
        """``r = p_a l_tr / l_ts``."""
        return p_a * self.data.l_tr / l_ts

    def guaranteed(self, kind: str, p_a: float, l_ts: int) -> float:
        """The boundary the paper guarantees (conditions (c) and (d), constants 1; :func:`boundary_margins`): Mamba
        ``min(1, r, 1 - log M1 / l_ts)``, the linear Transformer ``min(1/2, Theorem 4(d)'s limit)``."""
        if kind == "linear":
            return min(alpha_threshold_lt(), alpha_limit_lt_d(int(l_ts), self.data.M1))
        return min(alpha_threshold_mamba(p_a, self.data.l_tr, l_ts), alpha_limit_mamba_d(int(l_ts), self.data.M1))

    def lattice(self, center: float) -> set:
        """The points of the ``fine_step`` lattice in ``[0, 1)`` within ``fine_halfwidth`` of ``center``."""
        n = int(round(1 / self.fine_step))
        return {round(i * self.fine_step, 10) for i in range(n)
                if abs(i * self.fine_step - center) <= self.fine_halfwidth + 1e-9}

    def breakdown_cells(self) -> list:
        """``[(kind, p_a, l_ts)]``: the cells the row ``breakdown`` judges, declared before the run."""
        return ([("mamba", p, self.mamba_cells_l_ts) for p in self.mamba_cells_p_as]
                + [("linear", p, self.linear_cells_l_ts) for p in self.p_as])

    def fine_alphas(self, kappa: float, l_ts: int) -> tuple:
        """The fine alphas tested at ``(kappa, l_ts)`` besides ``alphas``: at ``kappas[0]`` the lattice near the
        guaranteed boundary of every breakdown cell with this ``l_ts``; at ``kappa_a' = kappa_a`` the lattice near 1/2
        where a cell has ``r <= 1/2`` (boundary-kappa; at ``kappas[0]`` Mamba's alpha* lies far above 1/2)."""
        pts = set()
        if kappa == self.kappas[0]:
            for kind, p, l in self.breakdown_cells():
                if l == l_ts:
                    pts |= self.lattice(self.guaranteed(kind, p, l))
        if kappa == self.data.kappa_a and any(self.ratio(p, l_ts) <= 0.5 for p in self.p_as):
            pts |= self.lattice(0.5)
        return tuple(sorted(a for a in pts if not any(abs(a - b) < 1e-9 for b in self.alphas)))


#: "theorems": 5 training p_a x 5 test l_ts (r from 0.067 to 1.6), 13 alphas up to 0.99, the three
#: one-layer models with Figure 2's settings; boundary at error 0.25 (halfway from perfect to chance) and 0.1;
#: test outliers of magnitude kappa_a' = kappa_a / L (Figure 2's) and kappa_a' = kappa_a
THEOREMS = BoundaryPreset(name="theorems")
#: "tiny": a seconds-long smoke test (CLI tests); not a result of the book
TINY = dataclasses.replace(THEOREMS, name="tiny", p_as=(0.2, 0.8), l_tss=(10, 40), alphas=(0.0, 0.5, 0.9, 0.99),
                           models=("mamba", "linear"), n_test=200, mamba_cells_p_as=(0.8,), linear_cells_l_ts=40,
                           train=synthetic_trains(steps=40))
PRESETS = {"theorems": THEOREMS, "tiny": TINY}
DEFAULT_PRESET = "theorems"
DEFAULT_SEEDS = tuple(range(10))


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
    boundary: dict  # boundary[model][j][k]: {"per_seed", "censored", "mean", "se"} (kappas[0], level)
    kappas: list  # test outlier magnitudes kappa_a'; the fields above are at kappas[0]
    levels: list  # [level, *further levels]
    by_kappa: dict  # by_kappa[f"{kappa:g}"]: {"errors_per_seed", "errors", "boundary": {f"{level:g}": [model][j][k]}}
    config: dict
    # fine[f"{kappa:g}"][str(l_ts)]: {"alphas": the fine alphas, "errors_per_seed": {model: [j][s][i]}} (issue 41)
    fine: dict = dataclasses.field(default_factory=dict)
    models: dict = internal()
    spec: BoundaryPreset = internal()

    def curve(self, kind: str, kappa: float, j: int, k: int, s: int) -> tuple:
        """``(alphas, errors)`` of one cell and seed on the coarse grid merged with the fine alphas tested there."""
        coarse = self.by_kappa[f"{kappa:g}"]["errors_per_seed"][kind][j][k][s]
        pts = list(zip(self.alphas, coarse))
        fine = self.fine.get(f"{kappa:g}", {}).get(str(self.l_tss[k]))
        if fine:
            pts += list(zip(fine["alphas"], fine["errors_per_seed"][kind][j][s]))
        pts.sort()
        return [a for a, _ in pts], [e for _, e in pts]

    def fine_star(self, kind: str, kappa: float, j: int, k: int, *, level: float | None = None,
                  rise: float | None = None) -> list:
        """Per seed, alpha* of cell ``(j, k)`` on the merged grid (:meth:`curve`): the first alpha at which the error
        reaches ``level`` or, with ``rise``, exceeds the same seed's alpha = 0 error by ``rise`` (linear
        interpolation); censored (never reached): the largest alpha, a lower bound."""
        out = []
        for s in range(len(self.seeds)):
            a, e = self.curve(kind, kappa, j, k, s)
            if rise is not None:
                e, lvl = [x - e[0] for x in e], rise
            else:
                lvl = self.level if level is None else level
            c = crossing(a, e, lvl)
            out.append(a[-1] if math.isnan(c) else c)
        return out

    def cell_margins(self) -> list:
        """``[(kind, p_a, l_ts, guaranteed boundary, per-seed alpha* - guaranteed)]`` of the declared breakdown cells
        (alpha* at the preset's level, kappa_a' = kappas[0], on the merged grid)."""
        P = self.spec
        out = []
        for kind, p, l in P.breakdown_cells():
            j, k, thr = P.p_as.index(p), P.l_tss.index(l), P.guaranteed(kind, p, l)
            out.append((kind, p, l, thr, [a - thr for a in self.fine_star(kind, P.kappas[0], j, k)]))
        return out

    def kappa_parts(self) -> list:
        """``[(kappa_a', its name, "level" or "rise", per seed the smallest alpha* - 1/2 over the cells with
        r <= 1/2)]``: the parts of ``boundary-kappa`` in the registry's order (alpha* on the merged grid)."""
        P = self.spec
        cells = [(j, k) for j in range(len(P.p_as)) for k in range(len(P.l_tss)) if self.ratio[j][k] <= 0.5]
        out = []
        for kap, name in ((P.data.kappa_a, "κa"), (P.kappas[0], "κa/L")):
            for how in ("level", "rise"):
                kw = {"level": P.level} if how == "level" else {"rise": P.rise}
                stars = {(j, k): self.fine_star("mamba", kap, j, k, **kw) for j, k in cells}
                out.append((kap, name, how, [min(stars[c][s] - 0.5 for c in cells) for s in range(len(self.seeds))]))
        return out

    def cells(self, kind: str, kappa: float | None = None, level: float | None = None) -> list:
        """Boundary statistics ``[j][k]`` of ``kind`` at test magnitude ``kappa`` and error ``level`` (default: the
        main ones, ``kappas[0]`` and ``level``)."""
        kappa = self.kappas[0] if kappa is None else kappa
        level = self.level if level is None else level
        check_choice("kappa", kappa, tuple(self.kappas))
        check_choice("level", level, tuple(self.levels))
        return self.by_kappa[f"{kappa:g}"]["boundary"][f"{level:g}"][kind]

    def alpha_star(self, kind: str, kappa: float | None = None, level: float | None = None) -> list:
        """Per-seed measured boundaries ``[j][k][s]`` (a censored seed counts as ``max(alphas)``)."""
        return [[cell["per_seed"] for cell in row] for row in self.cells(kind, kappa, level)]

    def beyond_half(self, kind: str, kappa: float | None = None, level: float | None = None) -> list:
        """Per seed, the smallest ``alpha* - 1/2`` over the cells with ``r = p_a l_tr / l_ts <= 1/2``: there Theorem
        2(c) guarantees Mamba no more than Theorem 4(c) guarantees the linear Transformer (``alpha < 1/2``); ``> 0``
        in every such cell means Mamba is robust past 1/2 where condition (c) does not say so."""
        A = self.alpha_star(kind, kappa, level)
        cells = [(j, k) for j in range(len(self.p_as)) for k in range(len(self.l_tss)) if self.ratio[j][k] <= 0.5]
        return [min(A[j][k][s] - 0.5 for j, k in cells) for s in range(len(self.seeds))]

    def effect(self, kind: str, along: str, kappa: float | None = None, level: float | None = None) -> list:
        """Per seed: mean ``alpha*`` at the largest value of ``along`` (``"p_a"`` or ``"l_ts"``) minus the mean at
        the smallest, averaged over the other axis. Theorem 2(c) predicts ``> 0`` along ``p_a`` and ``< 0`` along
        ``l_ts`` for Mamba (while ``r < 1``); Theorem 4(c) predicts 0 for the linear Transformer."""
        check_choice("along", along, ("p_a", "l_ts"))
        A = self.alpha_star(kind, kappa, level)
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

    def margins(self) -> dict:
        """``{model: per seed, the smallest margin over the cells of alpha* above the boundary Theorem 2 (Mamba) or
        4 (linear) guarantees}`` (:func:`mambaicl.analysis.claims.boundary_margins`)."""
        from ..analysis.claims import boundary_margins

        P = self.spec
        return {k: boundary_margins(self.alpha_star(k), P.p_as, P.l_tss, P.data.l_tr, P.data.M1, k)
                for k in ("mamba", "linear")}

    def gaps(self, kappa, level) -> tuple:
        """``(|alpha* - (1 - log M1/l_ts)|, |alpha* - min(1, r)|)`` per cell (Mamba, means over seeds)."""
        cells, P = self.cells("mamba", kappa, level), self.spec
        idx = [(j, k) for j in range(len(P.p_as)) for k in range(len(P.l_tss))]
        return ([abs(cells[j][k]["mean"] - self.predicted_mamba_d[k]) for j, k in idx],
                [abs(cells[j][k]["mean"] - self.predicted_mamba[j][k]) for j, k in idx])

    def kappa_levels(self) -> list:
        """``[(kappa_a', its name, error level)]`` of the rows of ``boundary-kappa``, in the registry's order."""
        P = self.spec
        return [(kap, name, lvl) for kap, name in ((P.data.kappa_a, "κa"), (P.kappas[0], "κa/L"))
                for lvl in P.all_levels]

    def claims(self) -> dict:
        """The rows ``breakdown`` (per seed, :meth:`margins`), ``boundary`` (Mamba's alpha* at the longest minus the
        shortest l_ts) and ``boundary-kappa`` (the smallest alpha* - 1/2 over the cells with r <= 1/2, at each test
        outlier magnitude and error level) of Chapter 7 (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        from ..analysis.claims import ClaimParts
        from ..analysis.stats import compare, interval, mean_se

        P, S, margins = self.spec, len(self.seeds), self.margins()
        cells = [(j, k) for j in range(len(P.p_as)) for k in range(len(P.l_tss))]
        m_stars = [self.boundary["mamba"][j][k]["mean"] for j, k in cells]
        lt_stars = [self.boundary["linear"][j][k]["mean"] for j, k in cells]
        eff = compare(self.effect("mamba", "l_ts"), [0.0] * S)
        d_gap = self.gaps(P.kappas[0], P.level)[0]
        kp = self.kappa_parts()
        cm = self.cell_margins()

        def cell_text(kind):
            return "/".join(f"{mean_se(m)[0]:+.3f}" for kd, _, _, _, m in cm if kd == kind)

        mc = [(p, l) for kd, p, l, _, _ in cm if kd == "mamba"]
        lc = [(p, l) for kd, p, l, _, _ in cm if kd == "linear"]
        return {
            "breakdown": ClaimParts(
                "α* minus the guaranteed boundary (conditions (c) and (d), constants 1) per declared cell, α grid 0.02 "
                f"near it: Mamba at l_ts = {mc[0][1]}, p_a = {'/'.join(f'{p:g}' for p, _ in mc)}: {cell_text('mamba')}; "
                f"linear Transformer at l_ts = {lc[0][1]}, p_a = {'/'.join(f'{p:g}' for p, _ in lc)}: "
                f"{cell_text('linear')} ({S} seeds; α* = error {P.level:g}; smallest margin over all 25 cells on the "
                "coarse grid: " + "; ".join(f"{name} {mean_se(margins[k])[0]:+.2f}"
                                            for k, name in (("mamba", "Mamba"), ("linear", "linear Transformer")))
                + ")", parts=[m for *_, m in cm]),
            "boundary": ClaimParts(
                f"Mamba alpha* {min(m_stars):.2f}-{max(m_stars):.2f} over 25 (p_a, l_ts) cells, far above min(1, r) "
                f"and rising with l_ts ({eff.diff:+.2f} ± {eff.se:.2f}), within {max(d_gap):.2f} of 1 - log(M1)/l_ts; "
                f"linear Transformer {min(lt_stars):.2f}-{max(lt_stars):.2f} < 1/2 ({S} seeds)",
                per_seed=self.effect("mamba", "l_ts")),
            "boundary-kappa": ClaimParts(
                f"smallest α* − 1/2 over the cells with r ≤ 1/2 (Mamba, {S} seeds, 95 % t; α* at error {P.level:g} or at "
                f"a rise of {P.rise:g} over the seed's α = 0 error; 0.02 grid on [0.4, 0.6] at κ_a′ = κ_a): "
                + "; ".join(f"κ_a′ = {name}, {'level ' + format(P.level, 'g') if how == 'level' else 'rise ' + format(P.rise, 'g')}: "
                            f"{h.mean:+.2f} [{h.low:+.2f}, {h.high:+.2f}]"
                            for name, how, h in ((n, hw, interval(v)) for _, n, hw, v in kp)),
                parts=[v for *_, v in kp]),
        }


def _boundary_stats(per_seed: list, alpha_max: float) -> dict:
    """Mean and SE of per-seed crossings; a censored seed counts as ``alpha_max`` (so the mean is a lower bound)."""
    censored = [math.isnan(a) for a in per_seed]
    vals = [alpha_max if c else a for a, c in zip(per_seed, censored)]
    m, se = mean_se(vals)
    return {"per_seed": vals, "censored": censored, "mean": m, "se": 0.0 if math.isnan(se) else se}


def _grid_stats(err: dict, preset: BoundaryPreset) -> tuple:
    """Means, SEs (test prompts counted) and boundaries ``{level: [kind][j][k]}`` of per-seed errors ``[kind][j][k][s][i]``."""
    S, amax = len(next(iter(err.values()))[0][0]), float(preset.alphas[-1])
    errors, ses, bound = {}, {}, {lvl: {} for lvl in preset.all_levels}
    for kind, rows in err.items():
        stats = [[[error_mean_se([cell[s][i] for s in range(S)], preset.n_test) for i in range(len(preset.alphas))]
                  for cell in row] for row in rows]
        errors[kind] = [[[m for m, _ in c] for c in row] for row in stats]
        ses[kind] = [[[se for _, se in c] for c in row] for row in stats]
        for lvl in preset.all_levels:
            bound[lvl][kind] = [[_boundary_stats([crossing(preset.alphas, cell[s], lvl) for s in range(S)], amax)
                                 for cell in row] for row in rows]
    return errors, ses, bound


def fine_grid(preset: BoundaryPreset, trained: dict, pat: Patterns, seeds) -> dict:
    """The errors of the trained stacks (``{kind: stack of len(p_as) S members}``) at the fine alphas of every
    ``(kappa_a', l_ts)`` (:meth:`BoundaryPreset.fine_alphas`): ``{f"{kappa:g}": {str(l_ts): {"alphas",
    "errors_per_seed": {kind: [j][s][i]}}}}``. The test prompts are those :func:`run` would draw at these alphas (the
    streams ``(s, "test/boundary/<l_ts>/<alpha>")``, the same for every ``p_a``): drawn once per seed and repeated."""
    S, J = len(seeds), len(preset.p_as)
    tasks = all_tasks(preset.data.M1)
    member_seed = torch.arange(J * S) % S  # member j S + s reads seed s's prompts
    out = {}
    for kap in preset.kappas:
        for l_ts in preset.l_tss:
            alphas = preset.fine_alphas(kap, l_ts)
            if not alphas:
                continue
            errs = {kind: [[[0.0] * len(alphas) for _ in range(S)] for _ in range(J)] for kind in trained}
            for i, a in enumerate(alphas):
                test = dataclasses.replace(preset.test, l_ts=int(l_ts), alpha=float(a), rule=preset.rule,
                                           kappa_a_prime=float(kap))
                pr = test_prompts(pat, test, tasks, preset.n_test,
                                  numpy_streams(seeds, substage("test", "boundary", int(l_ts), float(a))))[member_seed]
                for kind, stack in trained.items():
                    F = predict(stack, pr)  # (J S, n)
                    for j in range(J):
                        for s in range(S):
                            errs[kind][j][s][i] = zero_one_error(F[j * S + s], pr.z[j * S + s])
            out.setdefault(f"{kap:g}", {})[str(l_ts)] = {"alphas": list(alphas), "errors_per_seed": errs}
    return out


def run(preset: BoundaryPreset = THEOREMS, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> BoundaryResult:
    """Train every model at every ``p_a`` (all seeds at once), test on the ``(kappa_a', l_ts, alpha)`` grid, find
    the boundaries at every level."""
    seeds = resolve_seeds(seeds)
    S, J = len(seeds), len(preset.p_as)
    pat = make_patterns(preset.data, torch_generator(preset.pattern_seed, "patterns"))
    tasks = all_tasks(preset.data.M1)
    trained = {k: trained_grid(preset, k, pat, seeds, device=device, progress=progress)[0] for k in preset.models}
    # err[kappa][kind][j][k][s][i]
    err = {kap: {kind: [[[[0.0] * len(preset.alphas) for _ in range(S)] for _ in preset.l_tss] for _ in range(J)]
                 for kind in preset.models} for kap in preset.kappas}
    for kap in preset.kappas:
        for k, l_ts in enumerate(preset.l_tss):
            for i, a in enumerate(preset.alphas):
                test = dataclasses.replace(preset.test, l_ts=int(l_ts), alpha=float(a), rule=preset.rule,
                                           kappa_a_prime=float(kap))
                gens = [g for _ in range(J) for g in numpy_streams(seeds, substage("test", "boundary", int(l_ts), float(a)))]
                pr = test_prompts(pat, test, tasks, preset.n_test, gens)  # (J S, n, ...), the same for every p_a
                for kind, stack in trained.items():
                    F = predict(stack, pr)  # (J S, n)
                    for j in range(J):
                        for s in range(S):
                            err[kap][kind][j][k][s][i] = zero_one_error(F[j * S + s], pr.z[j * S + s])
    fine = fine_grid(preset, trained, pat, seeds)
    stats = {kap: _grid_stats(err[kap], preset) for kap in preset.kappas}
    errors, ses, bound = stats[preset.kappas[0]]
    by_kappa = {f"{kap:g}": {"errors_per_seed": err[kap], "errors": stats[kap][0],
                             "boundary": {f"{lvl:g}": b for lvl, b in stats[kap][2].items()}}
                for kap in preset.kappas}
    ratio = [[preset.ratio(p, l) for l in preset.l_tss] for p in preset.p_as]
    return BoundaryResult(preset=preset.name, seeds=list(seeds), p_as=list(preset.p_as), l_tss=list(preset.l_tss),
                          alphas=list(preset.alphas), l_tr=preset.data.l_tr, level=preset.level, n_test=preset.n_test,
                          ratio=ratio,
                          predicted_mamba=[[alpha_threshold_mamba(p, preset.data.l_tr, l) for l in preset.l_tss]
                                           for p in preset.p_as],
                          predicted_linear=alpha_threshold_lt(),
                          predicted_mamba_d=[alpha_limit_mamba_d(int(l), preset.data.M1) for l in preset.l_tss],
                          predicted_linear_d=[alpha_limit_lt_d(int(l), preset.data.M1) for l in preset.l_tss],
                          errors=errors, errors_se=ses, errors_per_seed=err[preset.kappas[0]],
                          boundary=bound[preset.level], kappas=list(preset.kappas), levels=list(preset.all_levels),
                          by_kappa=by_kappa, config=to_dict(preset), fine=fine, models=trained, spec=preset)


# ------------------------------------------------------------------------------- Chapter 10's numbers
# Each function prints what the chapter's cell shows and returns the values it glues (``{glue name: text}``).

def _all_cells(P) -> list:
    return [(j, k) for j in range(len(P.p_as)) for k in range(len(P.l_tss))]


def grid_numbers(B: BoundaryResult) -> dict:
    """The grid of the phase diagram (section "Where the robustness boundary lies")."""
    P = B.spec
    ratios = sorted({r for row in B.ratio for r in row})
    out = {"ch7_level": f"{P.level:g}", "ch7_members": f"{len(P.p_as) * len(B.seeds)}",
           "ch7_pas": ", ".join(f"{p:g}" for p in P.p_as), "ch7_ltss": ", ".join(str(l) for l in P.l_tss),
           "ch7_rmin": f"{ratios[0]:.3f}", "ch7_rmax": f"{ratios[-1]:.1f}", "ch7_ntest_b": f"{P.n_test:,}",
           "ch7_amax": f"{P.alphas[-1]:g}"}
    print(f"p_a in {P.p_as}, l_ts in {P.l_tss}, r from {ratios[0]:.3f} to {ratios[-1]:.2f}; "
          f"{len(P.alphas)} alphas up to {P.alphas[-1]}, {P.n_test} test prompts per point and seed")
    for kind in P.models:
        stars = [B.boundary[kind][j][k]["mean"] for j, k in _all_cells(P)]
        print(f"{kind:>13}: measured boundary alpha* from {min(stars):.2f} to {max(stars):.2f} over the 25 cells")
    return out


def phase_numbers(B: BoundaryResult) -> dict:
    """Where each model's boundary lies against Theorems 2(c) / 4(c), and the two cells that share r = 0.4."""
    from ..analysis.stats import compare

    P, out = B.spec, {}
    cells = _all_cells(P)
    lt_stars = [B.boundary["linear"][j][k]["mean"] for j, k in cells]
    lt_margin = [m for row in B.margin_to_prediction("linear") for m in row]
    out["ch7_lt_min"], out["ch7_lt_max"] = f"{min(lt_stars):.2f}", f"{max(lt_stars):.2f}"
    assert max(lt_margin) < 0 and min(lt_stars) > 0.3  # below 1/2 in every cell, and not far below
    below = {}
    for kind in ("mamba", "mamba_merged"):
        m = B.margin_to_prediction(kind)
        small_r = [m[j][k] for j, k in cells if B.ratio[j][k] < 0.5]
        below[kind] = sum(1 for row in m for x in row if x < 0)
        out[f"ch7_{kind}_above_small"] = f"{min(small_r):.2f}"  # reported: the registry judges it below
    out["ch7_mamba_below"] = f"{below['mamba']}"
    jr, kr = min(cells, key=lambda jk: B.ratio[jk[0]][jk[1]])
    out["ch7_astar_minr"] = f"{B.boundary['mamba'][jr][kr]['mean']:.2f}"
    floor_b = [B.errors["mamba"][j][k][0] for j, k in cells]
    out["ch7_floor_b_lo"], out["ch7_floor_b_hi"] = f"{min(floor_b):.2f}", f"{max(floor_b):.2f}"
    assert min(floor_b) > 0.03 and max(floor_b) < P.level / 2  # a floor, well below the boundary level
    # the one exact pair of cells with the same r = 0.4: (p_a, l_ts) = (0.2, 10) and (0.8, 40)
    j1, k1 = P.p_as.index(0.2), P.l_tss.index(10)
    j2, k2 = P.p_as.index(0.8), P.l_tss.index(40)
    assert abs(B.ratio[j1][k1] - B.ratio[j2][k2]) < 1e-12
    same_r = compare(B.alpha_star("mamba")[j2][k2], B.alpha_star("mamba")[j1][k1])
    out["ch7_same_r_a"] = f"{B.boundary['mamba'][j1][k1]['mean']:.2f}"
    out["ch7_same_r_b"] = f"{B.boundary['mamba'][j2][k2]['mean']:.2f}"
    out["ch7_same_r_diff"] = f"{same_r.diff:+.2f} ± {same_r.se:.2f}"
    out["ch7_same_r_words"] = ("a difference the 95 % t interval resolves" if same_r.significant else
                               "a difference not distinguishable from 0 at this scale")
    print(f"linear Transformer: alpha* in [{min(lt_stars):.2f}, {max(lt_stars):.2f}] (prediction 1/2)")
    print(f"Mamba at r = 0.4: alpha* = {B.boundary['mamba'][j1][k1]['mean']:.2f} (p_a = 0.2, l_ts = 10) vs "
          f"{B.boundary['mamba'][j2][k2]['mean']:.2f} (p_a = 0.8, l_ts = 40): {same_r}")
    return out


def effect_numbers(B: BoundaryResult) -> dict:
    """What moves the boundary: alpha* along p_a and l_ts, and its distance to the (c) and (d) curves."""
    from ..analysis.stats import compare

    P, out, effects = B.spec, {}, {}
    for kind in P.models:
        for along in ("p_a", "l_ts"):
            c = compare(B.effect(kind, along), [0.0] * len(B.seeds))
            effects[(kind, along)] = c
            out[f"ch7_eff_{kind}_{along.replace('_', '')}"] = f"{c.diff:+.3f} ± {c.se:.3f}"
            print(f"{kind:>13}, alpha*(largest {along}) - alpha*(smallest {along}): {c}")
    # Theorem 2(c) predicts alpha* to fall with l_ts (while r < 1); the words say which way it goes
    for kind in P.models:
        eff = effects[(kind, "l_ts")]
        out[f"ch7_dir_{kind}_lts"] = ("rises" if eff.diff > 0 else "falls") if eff.significant else \
            "does not move distinguishably"
    d_gap, c_gap = B.gaps(P.kappas[0], P.level)  # |alpha* - (1 - log M1/l_ts)|, |alpha* - min(1, r)| per cell
    old_edge = 0.95  # the last alpha of the grid before issue 17: where the (d) curve passes it, agreement was automatic
    out["ch7_dgap"] = f"{max(d_gap):.2f}"
    out["ch7_dgap_mean"] = f"{sum(d_gap) / len(d_gap):.3f}"
    out["ch7_cgap_mean"] = f"{sum(c_gap) / len(c_gap):.2f}"
    out["ch7_dgap_n"] = f"{sum(g < 0.06 for g in d_gap)}"
    out["ch7_d_edge_n"] = f"{len(P.p_as) * sum(a >= old_edge for a in B.predicted_mamba_d)}"
    out["ch7_censored_n"] = f"{sum(sum(c['censored']) for row in B.boundary['mamba'] for c in row)}"
    print(f"Mamba: |alpha* - (1 - log M1 / l_ts)| <= {max(d_gap):.3f} (mean {sum(d_gap) / len(d_gap):.3f}, "
          f"{sum(g < 0.06 for g in d_gap)} of 25 cells within 0.06); |alpha* - min(1, r)| mean {sum(c_gap) / len(c_gap):.3f}")
    return out


def breakdown_numbers(B: BoundaryResult, j_bd) -> dict:
    """The row ``breakdown``'s verdict (``j_bd``, its :class:`~mambaicl.analysis.claims.Judgement`), its declared
    cells with their 95 % t intervals (printed; alpha* on the 0.02 grid near the guaranteed boundary) and the smallest
    margins over all 25 cells on the coarse grid."""
    from ..analysis.stats import interval, mean_se

    margins = B.margins()
    out = {"ch7_breakdown_verdict": j_bd.verdict, "ch7_breakdown_fails": "; ".join(j_bd.parts_failing()) or "none",
           "ch7_margin_mamba": f"{mean_se(margins['mamba'])[0]:+.2f}",
           "ch7_margin_linear": f"{mean_se(margins['linear'])[0]:+.2f}"}
    print(f"{'model':>6} {'(p_a, l_ts)':>12} | guaranteed | alpha* (mean) | alpha* - guaranteed (95 % t)")
    texts = {"mamba": [], "linear": []}
    for kind, p, l, thr, m in B.cell_margins():
        iv = interval(m)
        print(f"{kind:>6} {f'({p:g}, {l})':>12} | {thr:10.3f} | {thr + iv.mean:13.3f} | "
              f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]")
        texts[kind].append(f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]")
    out["ch7_bd_mamba_cells"] = ", ".join(texts["mamba"])
    out["ch7_bd_linear_cells"] = ", ".join(texts["linear"])
    return out


def kappa_numbers(B: BoundaryResult, j_kap) -> dict:
    """The table of section "Weaker test outliers and a stricter level" and the row ``boundary-kappa`` (``j_kap``)."""
    from ..analysis.stats import compare, interval

    rows, out = [], {}
    for kap, kname, lvl in B.kappa_levels():
        half = interval(B.beyond_half("mamba", kap, lvl))
        stars = [c["mean"] for row in B.cells("mamba", kap, lvl) for c in row]
        d_g = B.gaps(kap, lvl)[0]
        eff = compare(B.effect("mamba", "l_ts", kap, lvl), [0.0] * len(B.seeds))
        lt = [c["mean"] for row in B.cells("linear", kap, lvl) for c in row]
        rows.append((kname, lvl, min(stars), max(stars), half, sum(d_g) / len(d_g), eff, min(lt), max(lt)))
    print(f"{'kappa_a_prime':>13} {'level':>5} | Mamba alpha* (cells) | min alpha* - 1/2 over r <= 1/2 (95 % t) | "
          f"mean |alpha* - (1 - log M1/l_ts)| | alpha*(l_ts 60) - alpha*(l_ts 10) | linear alpha*")
    for kname, lvl, lo, hi, half, dg, eff, llo, lhi in rows:
        print(f"{kname:>13} {lvl:>5g} | {lo:.2f} to {hi:.2f}         | {half.mean:+.3f} [{half.low:+.3f}, {half.high:+.3f}]"
              f"               | {dg:.3f}                             | {eff.diff:+.3f} [{eff.low:+.3f}, {eff.high:+.3f}]"
              f"             | {llo:.2f} to {lhi:.2f}")
    print("the registry's parts (alpha* on the grid merged with the 0.02 lattice on [0.4, 0.6] at kappa_a' = kappa_a; "
          f"'rise': the error exceeds the seed's alpha = 0 error by {B.spec.rise:g}):")
    for kap, kname, how, v in B.kappa_parts():
        h = interval(v)
        tag = f"{'a' if kname == 'κa' else 'L'}_{how}"
        out[f"ch7_kp_{tag}"] = f"{h.mean:+.2f} [{h.low:+.2f}, {h.high:+.2f}]"
        print(f"{kname:>13} {how:>5} | min alpha* - 1/2 over r <= 1/2: {h.mean:+.3f} [{h.low:+.3f}, {h.high:+.3f}]")
    held = [t for t in j_kap.claim.parts if t.text in j_kap.parts_holding()]
    out["ch7_kappa_outcome"] = f"holds in {len(held)} of the {len(rows)}"  # the registry's parts, counted
    out["ch7_kappa_held"] = "; ".join(t.text.split(":")[0] for t in held) or "none"
    out["ch7_kappa_failed"] = "; ".join(t.split(":")[0] + (" (undecided)" if t.endswith("(undecided)") else "")
                                        for t in j_kap.parts_failing()) or "none"
    for (kname, lvl, lo, hi, half, dg, eff, llo, lhi) in rows:
        tag = f"{'a' if kname == 'κa' else 'L'}{int(round(lvl * 100))}"
        out[f"ch7_k_{tag}_range"] = f"{lo:.2f} to {hi:.2f}"
        out[f"ch7_k_{tag}_half"] = f"{half.mean:+.2f} [{half.low:+.2f}, {half.high:+.2f}]"
        out[f"ch7_k_{tag}_dgap"] = f"{dg:.2f}"
        out[f"ch7_k_{tag}_eff"] = f"{eff.diff:+.2f} [{eff.low:+.2f}, {eff.high:+.2f}]"
        out[f"ch7_k_{tag}_lt"] = f"{llo:.2f} to {lhi:.2f}"
    return out


def exercise2_numbers(B: BoundaryResult) -> dict:
    """Exercise 2: the boundary read at the levels ``level`` and 0.1 from the same stored errors."""
    from ..analysis.stats import mean_se

    P = B.spec
    cells = [(j, k, s) for j in range(len(P.p_as)) for k in range(len(P.l_tss)) for s in range(len(B.seeds))]
    star_at = {}
    for kind in P.models:
        for lvl in (P.level, 0.1):  # censored (never reached on the grid): the largest alpha, a lower bound
            star_at[kind, lvl] = [P.alphas[-1] if math.isnan(a) else a for a in
                                  (crossing(P.alphas, B.errors_per_seed[kind][j][k][s], lvl) for j, k, s in cells)]
        assert all(lo <= hi for lo, hi in zip(star_at[kind, 0.1], star_at[kind, P.level]))  # a lower level: never later
    shift = {kind: mean_se([hi - lo for lo, hi in zip(star_at[kind, 0.1], star_at[kind, P.level])])[0]
             for kind in P.models}
    at_first = {kind: sum(a == P.alphas[0] for a in star_at[kind, 0.1]) for kind in P.models}
    for kind in P.models:
        print(f"{kind:>13}: mean alpha* {sum(star_at[kind, P.level]) / len(cells):.3f} at level {P.level}, "
              f"{sum(star_at[kind, 0.1]) / len(cells):.3f} at 0.1 (shift {shift[kind]:.3f}); "
              f"{at_first[kind]} of {len(cells)} (cell, seed) pairs reach 0.1 at alpha = {P.alphas[0]}")
    most = max(shift, key=shift.get)
    return {"ch7_ex2_text": f"the boundary of {most} moves most (by {shift[most]:.2f} on average over the 25 cells and "
            f"{len(DEFAULT_SEEDS)} seeds); " + "; ".join(
                f"{kind} by {shift[kind]:.2f}, with {at_first[kind]} of {len(cells)} (cell, seed) pairs already at 0.1 "
                f"at α = {P.alphas[0]:g}" for kind in P.models) + "."}
