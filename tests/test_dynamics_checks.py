"""Chapter 3's checks: absolute-epsilon counts, Eq. (13) inside the window, the early and scaled sweeps."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from mambaicl.analysis.dynamics_counts import censored, epsilon_count, eq13_inside
from mambaicl.analysis.lemmas import lemma4_horizon
from mambaicl.config import ConfigError
from mambaicl.experiments import dynamics as D
from mambaicl.experiments import dynamics_checks as X


def test_epsilon_count_interpolates_and_marks_runs_that_never_get_there():
    steps = [0, 1, 2, 4]
    loss = torch.tensor([[1.0, 1.0, 0.0], [0.5, 0.9, 0.0], [0.2, 0.8, 0.0], [0.0, 0.7, 0.0]], dtype=torch.float64)
    T = epsilon_count(steps, loss, 0.1)
    assert T[0] == pytest.approx(2 + (0.1 - 0.2) / (0.0 - 0.2) * 2)  # between steps 2 and 4
    assert math.isnan(T[1]) and T[2] == 0.0
    assert censored(T, 400) == [T[0], 400, 0.0]


def test_eq13_inside_the_window():
    steps = [0, 1, 2, 3, 10]
    clean = torch.tensor([[0.1, -1.0], [-0.1, -1.0], [-0.1, -1.0], [-0.2, 1.0], [-0.5, -1.0]])
    out = torch.tensor([[0.0, -2.0], [-0.5, 0.0], [-0.4, -2.0], [-0.6, -2.0], [-1.0, -2.0]])
    r = eq13_inside(steps, {"wp_clean": clean, "wp_outlier": out}, 3.0)
    # seed 0: fails at 0 (clean > 0), holds from 1; seed 1: holds at 0, fails at 1 and 3
    assert r["first"] == [1.0, 0.0]
    assert r["fraction"] == [pytest.approx(3 / 4), pytest.approx(2 / 4)]
    assert r["at_window"] == [True, False]


def test_early_settings_hold_enough_steps_and_scaled_settings_keep_the_ratio():
    P = X.CHECKS
    for factor, pts in X.early_settings(P).items():
        assert all(st.kind == "mamba" and st.lr == P.early_lr for st in pts)
        assert all(X.horizon(st) >= P.min_inside for st in pts)
        d = pts[0].data
        assert X.horizon(pts[0]) == lemma4_horizon(P.early_lr, d.p_a, d.beta, d.kappa_a, d.M1, d.V)
    base = P.dynamics.data
    for kind in D.KINDS:
        pts = X.scaled_settings(P, kind)
        assert [st.data.beta for st in pts] == list(P.dynamics.beta_grid)
        assert all(st.data.outlier_norm / st.data.beta == base.outlier_norm / base.beta for st in pts)
        assert D.Setting(kind, base, P.dynamics.lr[kind]) in pts  # the base point is the dynamics preset's


def test_preset_rejects_a_step_size_with_too_short_a_horizon():
    with pytest.raises(ConfigError, match=r"^early_lr = 0.3 leaves fewer than min_inside = 10 steps inside Lemma 4\'s horizon"):
        dataclasses.replace(X.CHECKS, early_lr=0.3)


@pytest.mark.slow
def test_tiny_run_is_reproducible_and_reuses_the_dynamics_base():
    """Three tiny runs and one dynamics run (about 15 s CPU)."""
    a = X.run(X.TINY, seeds=(0, 1), progress=False)
    b = X.run(X.TINY, seeds=(0, 1), progress=False)
    assert a.to_json() == b.to_json()
    assert set(a.early) == set(D.LEMMA_PREDICTED) and set(a.early["lemma4_v"]) == set(X.EARLY_FACTORS)
    dyn = D.run(X.TINY.dynamics, seeds=(0, 1), progress=False)
    c = X.run(X.TINY, seeds=(0, 1), progress=False, reuse=dyn)
    for kind in D.KINDS:  # the reused base point is the same run (up to rounding: another stack)
        flat = lambda T: [t for row in T for t in row]  # noqa: E731
        assert flat(c.scaled[kind]["T"]) == pytest.approx(flat(a.scaled[kind]["T"]), rel=1e-6, abs=1e-9, nan_ok=True)
    with pytest.raises(ConfigError, match=r"^reuse must be a DynamicsResult of preset.dynamics on the same seeds"):
        X.run(X.TINY, seeds=(0,), progress=False, reuse=dyn)


def test_init_exponents_are_the_powers_of_the_derivation():
    P = X.CHECKS
    sweeps = D.sweep_settings(P.dynamics, "mamba")
    got = X.init_exponents({f: sweeps[f] for f in ("lr", "beta", "M1")}, 0.2)
    # the rates at t = 0: lemma3 ~ eta beta^4 / M1, v ~ eta beta^2 (fixed outlier norm), mu ~ eta beta^4 / M1
    expected = {"lemma3": {"lr": 1, "beta": 4, "M1": -1}, "lemma4_v": {"lr": 1, "beta": 2, "M1": 0},
                "lemma4_mu": {"lr": 1, "beta": 4, "M1": -1}, "lemma4_ratio": {"lr": 0, "beta": 2, "M1": -1}}
    for name, by_f in expected.items():
        for f, e in by_f.items():
            assert got[name][f] == pytest.approx(e, abs=1e-9), (name, f)
    # 1 - p_a: the outlier rate carries p_a (1 - p_a); its slope over the grid is that of x (1 - x)
    pa = X.init_exponents({"one_minus_p_a": sweeps["one_minus_p_a"]}, 0.2)
    x = [1 - v for v in P.dynamics.p_a_grid]
    assert pa["lemma4_v"]["one_minus_p_a"] == pytest.approx(
        float(np.polyfit(np.log(x), np.log([u * (1 - u) for u in x]), 1)[0]), rel=1e-9)


def test_setting_label_names_the_moved_factor():
    P = X.CHECKS.dynamics
    st = D.sweep_settings(P, "linear")["beta"][0]
    assert X.setting_label(st, P, D.FACTOR_LABELS) == f"{D.FACTOR_LABELS['beta']} = {P.beta_grid[0]:g}"
    assert X.setting_label(D.Setting("linear", P.data, P.lr["linear"]), P, D.FACTOR_LABELS) == "the base setting"
