"""Multi-class (App. 13) and regression (App. 14, Garg et al., Park et al.) data: layout, streams, the all-levels
error convention, least squares against NumPy, and clear errors."""
import math

import numpy as np
import pytest
import torch

from mambaicl.data import all_tasks, training_prompts, training_tasks
from mambaicl.data.multiclass import (all_levels_error, concat_prompts, level_errors, level_stage,
                                      multiclass_test_prompts, stacked_prompt)
from mambaicl.data.regression import least_squares_clean, regression_prompts, squared_error
from mambaicl.evaluate import zero_one_error
from mambaicl.experiments import fig2
from mambaicl.seeding import numpy_stream, numpy_streams, torch_generator, torch_generators

PAT = fig2.patterns(fig2.FIG2)
DATA = fig2.FIG2.data


# ---------------------------------------------------------------- multi-class


def test_heads_are_members_with_their_own_level_streams():
    """Head h of seed s is an engine member initialised from (s, "init[/level<h>]") and trained on
    (s, "train[/level<h>]"); level 0 is the binary model's streams."""
    from mambaicl.experiments import multiclass

    seeds, H = [0, 3], 3
    members = multiclass.heads_members(multiclass.TINY, "mamba", PAT, seeds, H=H)
    assert [(m.seed, m.init, m.stage) for m in members] == [
        (s, level_stage("init", h), level_stage("train", h)) for s in seeds for h in range(H)]
    assert level_stage("train", 0) == "train" and level_stage("train", 2) == "train/level2"


def test_stacked_prompt_is_app13_block_layout():
    pr = multiclass_test_prompts(PAT, fig2.FIG2.test, all_tasks(6), 4, [0, 1], "t", 2)
    P = stacked_prompt(pr, 1, 2)  # seed 1
    d1 = DATA.d + 1
    assert P.shape == (4, DATA.l_tr + 1, 2 * d1)
    assert torch.equal(P[..., :d1], pr[2].P) and torch.equal(P[..., d1:], pr[3].P)
    assert torch.all(P[:, -1, d1 - 1] == 0) and torch.all(P[:, -1, -1] == 0)  # query labels are 0 in every level


def test_concat_prompts_orders_members():
    a = training_prompts(PAT, DATA, training_tasks(6), 3, numpy_streams([0, 1], "a"))
    b = training_prompts(PAT, DATA, training_tasks(6), 3, numpy_streams([0, 1], "b"))
    cat, inter = concat_prompts([a, b]), concat_prompts([a, b], interleave=True)
    assert torch.equal(cat[2].P, b[0].P) and torch.equal(inter[1].P, b[0].P) and torch.equal(inter[2].P, a[1].P)
    with pytest.raises(ValueError, match=r"^parts must hold at least one Prompts batch"):
        concat_prompts([])


def _all_levels_loop(F, z):
    wrong = 0
    for n in range(F.shape[1]):
        bad = any(not math.isfinite(F[h, n]) or z[h, n] * F[h, n] <= 0 for h in range(F.shape[0]))
        wrong += bad
    return wrong / F.shape[1]


def test_all_levels_error_against_a_loop_with_ties_nan_and_inf():
    g = torch.Generator().manual_seed(0)
    F = torch.randn(3, 400, generator=g, dtype=torch.float64)
    z = torch.where(torch.rand(3, 400, generator=g) < 0.5, -1.0, 1.0).double()
    F[0, :5] = 0.0  # ties are errors
    F[1, 5:10] = float("nan")
    F[2, 10:15] = float("inf") * z[2, 10:15]  # infinite in the right direction: still an error
    F[:, 15:20] = 5 * z[:, 15:20]  # all right
    assert all_levels_error(F, z) == pytest.approx(_all_levels_loop(F.numpy(), z.numpy()), abs=1e-15)
    assert all_levels_error(F[:1], z[:1]) == zero_one_error(F[0], z[0])  # one level: the binary error
    assert level_errors(F, z) == [zero_one_error(F[h], z[h]) for h in range(3)]
    with pytest.raises(ValueError, match=r"^F and z must both have shape \(H, n\); got \(400,\)"):
        all_levels_error(F[0], z[0])


# ---------------------------------------------------------------- regression


def test_regression_prompts_follow_the_task_and_park_outliers():
    pr = regression_prompts(200, 30, 4, 0.6, numpy_stream(0, "r"), kind="dummy")
    x, y = pr.P[..., :-1], pr.P[..., -1]
    clean = ~pr.outlier
    pred = (x[:, :-1] @ pr.w.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(y[:, :-1][clean], pred[clean])
    assert torch.all(x[:, :-1][pr.outlier] == 1) and torch.all(y[:, :-1][pr.outlier] == 1)  # (1_d, 1)
    assert torch.allclose(pr.z, (x[:, -1] * pr.w).sum(-1)) and torch.all(y[:, -1] == 0)
    assert abs(pr.outlier.double().mean().item() - 0.6) < 0.03
    rnd = regression_prompts(200, 30, 4, 0.6, numpy_stream(0, "r"), kind="random", bias=True)
    assert rnd.P.shape == (200, 31, 6) and torch.all(rnd.P[..., 4] == 1)  # the constant feature
    dummy = regression_prompts(200, 30, 4, 0.6, numpy_stream(0, "r"), kind="dummy", bias=True)
    assert torch.equal(rnd.outlier, dummy.outlier)  # the same draws up to the replacement
    keep = ~rnd.outlier
    assert torch.equal(rnd.P[:, :-1][keep], dummy.P[:, :-1][keep])
    x_out = rnd.P[:, :-1, :4][rnd.outlier]  # "random" keeps the inputs of outlier examples, replaces the output
    assert not torch.all(x_out == 1) and abs(float(x_out.var()) - 1) < 0.15  # x ~ N(0, I) kept
    fake = rnd.P[:, :-1, -1][rnd.outlier]
    assert abs(float(fake.var()) / 4 - 1) < 0.15  # y ~ N(0, d)
    st = regression_prompts(7, 5, 3, 0.3, numpy_streams([0, 1], "r"))
    assert st.P.shape == (2, 7, 6, 4)
    assert torch.equal(st.P[1], regression_prompts(7, 5, 3, 0.3, numpy_stream(1, "r")).P)


def test_least_squares_on_clean_examples_matches_numpy_min_norm():
    for l, p in ((12, 0.5), (3, 0.2)):  # determined and under-determined (min-norm) systems
        pr = regression_prompts(20, l, 4, p, numpy_stream(1, f"ls{l}"), kind="random", bias=True)
        F = least_squares_clean(pr.P, pr.outlier, d=4)
        for b in range(20):
            keep = ~pr.outlier[b].numpy()
            X = pr.P[b, :l, :4].numpy()[keep]
            y = pr.P[b, :l, -1].numpy()[keep]
            w_hat = np.linalg.lstsq(X, y, rcond=None)[0] if keep.any() else np.zeros(4)
            assert abs(float(F[b]) - float(pr.P[b, -1, :4].numpy() @ w_hat)) < 1e-8
    pr = regression_prompts(50, 16, 4, 0.3, numpy_stream(2, "ls"))
    assert squared_error(least_squares_clean(pr.P, pr.outlier), pr.z, 4) < 1e-12  # noiseless, enough clean examples


def test_squared_error_and_bad_inputs():
    assert squared_error(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 0.0]), d=5) == pytest.approx(1.0)
    assert squared_error(torch.tensor([float("nan"), 0.0]), torch.zeros(2)) == float("inf")
    with pytest.raises(ValueError, match=r"^p must be a real number in \[0.0, 1.0\); got 1.0$"):
        regression_prompts(3, 4, 2, 1.0, numpy_stream(0, "r"))
    with pytest.raises(ValueError, match="^kind must be one of"):
        regression_prompts(3, 4, 2, 0.1, numpy_stream(0, "r"), kind="huber")
    with pytest.raises(ValueError, match=r"^l must be an integer in \[1, inf\]; got 0$"):
        regression_prompts(3, 0, 2, 0.1, numpy_stream(0, "r"))
