"""Chapter 7's issue-17 additions: the boundary at several test outlier magnitudes and error levels, the
predict-zero reference of the regression curves, and training until the validation loss stops improving."""
import dataclasses
import math

import pytest
import torch

from mambaicl.config import SYNTHETIC_DATA, SYNTHETIC_TEST, ConfigError
from mambaicl.data import all_tasks, make_patterns, test_prompts
from mambaicl.experiments import boundary, regression
from mambaicl.seeding import numpy_streams, torch_generator, torch_generators


@pytest.fixture(scope="module")
def tiny_boundary():
    torch.set_num_threads(1)
    return boundary.run(boundary.TINY, seeds=(0, 1), progress=False)


def _first_crossing(alphas, errs, level):
    """alpha at which errs first reaches level, by linear interpolation (nan if never): written out again here."""
    for i, e in enumerate(errs):
        if e >= level:
            if i == 0:
                return alphas[0]
            a0, a1, e0 = alphas[i - 1], alphas[i], errs[i - 1]
            return a0 + (a1 - a0) * (level - e0) / (e - e0)
    return math.nan


def test_boundary_reads_every_kappa_and_level(tiny_boundary):
    r = tiny_boundary
    assert r.kappas == [SYNTHETIC_TEST.kappa_a_prime, SYNTHETIC_DATA.kappa_a] and r.levels == [0.25, 0.1]
    assert r.by_kappa[f"{r.kappas[0]:g}"]["errors_per_seed"] == r.errors_per_seed  # the main fields: kappas[0]
    for kap in r.kappas:
        err = r.by_kappa[f"{kap:g}"]["errors_per_seed"]
        for lvl in r.levels:
            A = r.alpha_star("mamba", kap, lvl)
            for j in range(2):
                for k in range(2):
                    for s in range(2):
                        a = _first_crossing(r.alphas, err["mamba"][j][k][s], lvl)
                        assert A[j][k][s] == pytest.approx(r.alphas[-1] if math.isnan(a) else a, abs=1e-12)
            # beyond_half: smallest alpha* - 1/2 over the cells with r <= 1/2 (tiny: (0.2, 10) r = 0.4, (0.2, 40) 0.1,
            # (0.8, 40) r = 0.4; (0.8, 10) r = 1.6 is left out)
            cells = [(0, 0), (0, 1), (1, 1)]
            assert r.beyond_half("mamba", kap, lvl) == pytest.approx(
                [min(A[j][k][s] for j, k in cells) - 0.5 for s in range(2)], abs=1e-12)
    with pytest.raises(ValueError, match="^kappa must be one of"):
        r.alpha_star("mamba", 3.0)


def test_kappas_change_only_the_outlier_rows():
    """The kappas re-test on paired prompts: one stream, only the outlier examples' magnitude differs."""
    pat = make_patterns(SYNTHETIC_DATA, torch_generator(0, "patterns"))
    prs = [test_prompts(pat, dataclasses.replace(SYNTHETIC_TEST, alpha=0.5, kappa_a_prime=kap), all_tasks(6), 50,
                        numpy_streams((0,), "test/boundary/20/0.5")) for kap in (2.0, 6.67)]
    assert torch.equal(prs[0].outlier, prs[1].outlier) and torch.equal(prs[0].z, prs[1].z)
    o = prs[0].outlier[0]  # (n, l)
    x0, x1 = prs[0].P[0][..., :-1, :-1], prs[1].P[0][..., :-1, :-1]  # context inputs (n, l, d)
    assert torch.equal(x0[~o], x1[~o])
    assert (x0[o] - x1[o]).abs().max() > 0  # outlier rows move with kappa_a'


def test_boundary_preset_checks_kappas_and_levels():
    with pytest.raises(ConfigError, match=r"^kappas\[0\] must be test.kappa_a_prime = 6.67"):
        dataclasses.replace(boundary.THEOREMS, kappas=(2.0, 6.67))
    with pytest.raises(ConfigError, match=r"^levels must not repeat level = 0.25"):
        dataclasses.replace(boundary.THEOREMS, levels=(0.25,))
    assert boundary.THEOREMS.alphas[-1] == 0.99 and boundary.THEOREMS.all_levels == (0.25, 0.1)


def test_predict_zero_reference_is_the_mean_squared_target():
    pre = dataclasses.replace(regression.TINY, app14=None, deep={}, alphas=(0.0,), lengths=(4,),
                              one_layer={k: dataclasses.replace(t, steps=2) for k, t in regression.TINY.one_layer.items()})
    r = regression.run(pre, seeds=(0, 1), progress=False)
    from mambaicl.data.regression import regression_prompts

    for s in range(2):
        pr = regression_prompts(pre.n_test, pre.l_alphas, pre.task.d, 0.0, numpy_streams((0, 1), f"test/linreg/"
                                f"{pre.l_alphas}/0.0"), kind=pre.task.kind, bias=pre.task.bias)
        want = float((pr.z[s].double() ** 2).mean()) / pre.task.d
        assert r.linreg_vs_alpha["predict_zero"][0]["per_seed"][s] == pytest.approx(want, rel=1e-12)
