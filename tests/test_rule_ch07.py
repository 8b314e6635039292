"""Issue 41 for Chapter 10's boundary rows: the fine alpha grid near each predicted boundary, the declared cells of
``breakdown`` and the rise reading of ``boundary-kappa``, with counterfactual cases (holds, fails, undecided)."""
from __future__ import annotations

import dataclasses

import pytest

from mambaicl.analysis.claims import CLAIMS
from mambaicl.experiments import boundary


def _result(curves: dict, fine: dict | None = None, seeds=(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)):
    """A BoundaryResult of THEOREMS' grid whose every cell and seed has the coarse curve ``curves[kappa]``."""
    P = boundary.THEOREMS
    r = object.__new__(boundary.BoundaryResult)
    r.spec, r.seeds, r.alphas, r.l_tss, r.p_as, r.level = P, list(seeds), list(P.alphas), list(P.l_tss), list(P.p_as), P.level
    r.ratio = [[P.ratio(p, l) for l in P.l_tss] for p in P.p_as]
    r.by_kappa = {f"{kap:g}": {"errors_per_seed": {kind: [[[list(c(s)) for s in range(len(seeds))] for _ in P.l_tss]
                                                         for _ in P.p_as] for kind in P.models}}
                  for kap, c in curves.items()}
    r.fine = fine or {}
    return r


def test_the_declared_cells_and_the_fine_lattice():
    P = boundary.THEOREMS
    cells = P.breakdown_cells()
    assert [(k, p, l) for k, p, l in cells][:3] == [("mamba", 0.5, 10), ("mamba", 0.65, 10), ("mamba", 0.8, 10)]
    assert len(CLAIMS["breakdown"].criterion.parts) == len(cells)  # one registry part per declared cell
    for (kind, p, l), part in zip(cells, CLAIMS["breakdown"].criterion.parts):
        assert f"({p:g}, {l})" in part.text and f"{P.guaranteed(kind, p, l):.3f}" in part.text
    f10 = P.fine_alphas(P.kappas[0], 10)  # around 1 - log 6 / 10 = 0.821, the coarse 0.8 and 0.9 left out
    assert f10 == (0.74, 0.76, 0.78, 0.82, 0.84, 0.86, 0.88, 0.92)
    assert P.fine_alphas(P.kappas[0], 60) == (0.32, 0.34, 0.36, 0.38, 0.42, 0.44, 0.46, 0.48)  # around 0.392
    assert P.fine_alphas(P.kappas[0], 30) == ()
    assert P.fine_alphas(P.data.kappa_a, 30) == (0.42, 0.44, 0.46, 0.48, 0.52, 0.54, 0.56, 0.58)


def test_fine_grid_draws_the_prompts_of_the_coarse_grid():
    """At a coarse alpha the fine grid's errors (prompts drawn once per seed and repeated over p_a) equal run's."""
    pre = dataclasses.replace(boundary.TINY, train=boundary.synthetic_trains(steps=10))
    r = boundary.run(pre, seeds=(0, 1), progress=False)
    probe = dataclasses.replace(pre, fine_halfwidth=0.01, fine_step=0.5)  # the lattice {0, 0.5}: 0.5 is coarse
    coarse = {(kap, l): probe.alphas for kap in pre.kappas for l in pre.l_tss}
    orig = boundary.BoundaryPreset.fine_alphas
    try:
        boundary.BoundaryPreset.fine_alphas = lambda self, kap, l: coarse[(kap, l)]
        fine = boundary.fine_grid(probe, r.models, boundary.make_patterns(pre.data, boundary.torch_generator(
            pre.pattern_seed, "patterns")), (0, 1))
    finally:
        boundary.BoundaryPreset.fine_alphas = orig
    for kap in pre.kappas:
        for k, l in enumerate(pre.l_tss):
            got = fine[f"{kap:g}"][str(l)]["errors_per_seed"]
            for kind in pre.models:
                for j in range(len(pre.p_as)):
                    for s in range(2):
                        assert got[kind][j][s] == r.by_kappa[f"{kap:g}"]["errors_per_seed"][kind][j][k][s]


def test_fine_star_reads_the_merged_grid_and_the_rise():
    P = boundary.THEOREMS

    def floored(s):  # an error floor of 0.26, then a jump at 0.9: level 0.25 is "reached" at alpha = 0, a rise at 0.8+
        return [0.26 + (0.03 if a >= 0.3 else 0.0) + (0.5 if a >= 0.9 else 0.0) for a in P.alphas]

    r = _result({P.kappas[0]: floored, P.data.kappa_a: floored})
    assert r.fine_star("mamba", P.kappas[0], 0, 0) == [0.0] * 10  # the level reading measures the floor
    assert r.fine_star("mamba", P.kappas[0], 0, 0, rise=0.1)[0] == pytest.approx(0.8 + 0.1 * (0.1 - 0.03) / 0.5)

    def clean(s):  # no floor: 0.23 up to 0.8, 0.73 from 0.9
        return [0.2 + (0.03 if a >= 0.3 else 0.0) + (0.5 if a >= 0.9 else 0.0) for a in P.alphas]

    r = _result({P.kappas[0]: clean, P.data.kappa_a: clean})
    assert r.fine_star("mamba", P.kappas[0], 0, 0)[0] == pytest.approx(0.8 + 0.1 * (0.25 - 0.23) / 0.5)
    # a fine point at 0.82 with error 0.5 moves the crossing to between 0.8 and 0.82
    k = P.l_tss.index(10)
    fine = {f"{P.kappas[0]:g}": {"10": {"alphas": [0.82], "errors_per_seed": {
        kind: [[[0.5] for _ in range(10)] for _ in P.p_as] for kind in P.models}}}}
    r2 = _result({P.kappas[0]: clean, P.data.kappa_a: clean}, fine)
    assert r2.fine_star("mamba", P.kappas[0], 0, k)[0] == pytest.approx(0.8 + 0.02 * (0.25 - 0.23) / (0.5 - 0.23))
    # never reached: censored at the largest alpha
    assert r.fine_star("mamba", P.kappas[0], 0, 0, level=0.9) == [0.99] * 10


def _parts(values: list) -> list:
    return [list(v) for v in values]


def test_breakdown_counterfactual_holds_fails_undecided():
    row, n = CLAIMS["breakdown"], len(CLAIMS["breakdown"].criterion.parts)
    good = [0.05 + 0.002 * s for s in range(10)]
    assert row.judge(parts=_parts([good] * n)).verdict == "reproduced"
    bad = [-0.05 - 0.002 * s for s in range(10)]  # one cell broken down inside the guarantee, decisively (Holm too)
    assert row.judge(parts=_parts([bad] + [good] * (n - 1))).verdict == "partly reproduced"
    near = [0.01 * (-1) ** s + 0.001 for s in range(10)]  # one cell at the boundary: no decision
    assert row.judge(parts=_parts([near] + [good] * (n - 1))).verdict == "undecided"


def test_boundary_kappa_counterfactual_holds_fails_undecided():
    row = CLAIMS["boundary-kappa"]
    good = [0.1 + 0.01 * s for s in range(10)]
    assert row.judge(parts=_parts([good] * 4)).outcome == "reproduced"
    bad = [-0.4 - 0.01 * s for s in range(10)]
    assert row.judge(parts=_parts([bad] * 4)).outcome == "contradicted"
    near = [0.02 * (-1) ** s for s in range(10)]
    assert row.judge(parts=_parts([near] + [good] * 3)).outcome == "undecided"
