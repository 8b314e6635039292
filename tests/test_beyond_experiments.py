"""The four "beyond the paper" experiments (boundary, gates, multiclass, regression): validated presets, exact
equivalences behind their batching, byte-identical results with per-seed values, means and standard errors, and
the CLI listing and writing them."""
import dataclasses
import os
import subprocess
import sys

import pytest
import torch

from mambaicl.config import SYNTHETIC_LR, synthetic_trains
from mambaicl.data import training_tasks
from mambaicl.experiments import boundary, fig2, gates, multiclass, regression
from mambaicl.models import build_model
from mambaicl.seeding import numpy_streams, torch_generators
from mambaicl.recipes.stepsize import step_size_search
from mambaicl.config import ConfigError
from mambaicl.train import train
from reference_kernels import algorithm_1

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = {"boundary": boundary, "gates": gates, "multiclass": multiclass, "regression": regression}
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def tiny_results():
    torch.set_num_threads(1)
    return {name: (mod.run(mod.TINY, seeds=SEEDS, progress=False), mod.run(mod.TINY, seeds=SEEDS, progress=False))
            for name, mod in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_rerun_is_byte_identical(tiny_results, name):
    a, b = tiny_results[name]
    assert a.to_json() == b.to_json()


def test_results_hold_per_seed_values_means_and_standard_errors(tiny_results):
    r = tiny_results["boundary"][0].to_dict()
    cell = r["boundary"]["mamba"][0][1]
    assert len(cell["per_seed"]) == 3 and {"mean", "se", "censored"} <= set(cell)
    per_seed = r["errors_per_seed"]["linear"][1][0]  # p_a index 1, l_ts index 0: [seed][alpha]
    assert len(per_seed) == 3
    assert r["errors"]["linear"][1][0][2] == pytest.approx(sum(s[2] for s in per_seed) / 3, abs=1e-15)
    assert r["errors_se"]["linear"][1][0][2] >= 0

    g = tiny_results["gates"][0].to_dict()
    assert set(g["errors"]) == {"mamba", "retnet", "none"}
    assert len(g["errors_per_seed"]["retnet"]) == 3 and len(g["errors_se"]["retnet"]) == 2
    assert len(g["gate_outlier"]["mamba"]["per_seed"]) == 3 and "se" in g["gate_outlier"]["mamba"]

    m = tiny_results["multiclass"][0].to_dict()
    assert m["classes"] == [2, 4] and len(m["errors_all_per_seed"]["mamba"]["4"]) == 3
    assert len(m["errors_all_se"]["linear"]["2"]) == 2

    q = tiny_results["regression"][0].to_dict()
    for key in ("one_layer/mamba", "one_layer/linear", "deep/mamba", "least_squares"):
        pt = q["linreg_vs_alpha"][key][0]
        assert len(pt["per_seed"]) == 3 and {"mean", "se"} <= set(pt)
    assert len(q["app14"]["zero_one"]["mamba"][1]["per_seed"]) == 3


def test_multiclass_two_classes_is_figure2_level_and_all_levels_error_bounds():
    r = multiclass.run(multiclass.TINY, seeds=(0, 1), progress=False)
    for kind in ("mamba", "linear"):
        for i in range(len(r.alphas)):
            e2, e4 = r.errors_all[kind]["2"][i], r.errors_all[kind]["4"][i]
            lv = [r.errors_level[kind][h][i] for h in range(2)]
            assert e2 == pytest.approx(lv[0], abs=1e-15)  # C = 2 is level 1 alone
            assert max(lv) - 1e-15 <= e4 <= sum(lv) + 1e-15  # union bound, and at least the worse level


def test_first_heads_of_a_deeper_model_are_the_shallower_model():
    """Training H = 3 and reading its first two heads gives the H = 2 model (the loss is a sum over levels)."""
    pre = dataclasses.replace(multiclass.TINY, classes=(2, 4, 8), train=synthetic_trains(steps=12))
    pat = fig2.patterns(fig2.FIG2)
    three = train(multiclass.heads_members(pre, "mamba", pat, (0, 1), H=3), pre.train["mamba"], progress=False).models[0]
    two = train(multiclass.heads_members(pre, "mamba", pat, (0, 1), H=2), pre.train["mamba"], progress=False).models[0]
    for name in ("W_B", "W_C", "w"):
        p3, p2 = getattr(three, name).detach(), getattr(two, name).detach()
        for s in range(2):
            assert torch.allclose(p3[3 * s : 3 * s + 2], p2[2 * s : 2 * s + 2], rtol=0, atol=1e-12)
    # head 0 is Figure 2's binary model, trained by the engine
    one = train(fig2.members(dataclasses.replace(fig2.FIG2, train=pre.train), pat, (0, 1), "mamba"), pre.train["mamba"],
                progress=False).models[0]
    assert torch.allclose(three.w.detach()[0], one.w.detach()[0], atol=1e-12)


def test_boundary_grid_members_equal_separate_runs():
    """Member j S + s of boundary's stack is p_a number j with seed s trained alone (the engine's draw-replay)."""
    pre = dataclasses.replace(boundary.TINY, train=synthetic_trains(steps=10))
    pat = fig2.patterns(fig2.FIG2)
    seeds = (0, 2)
    stack, _ = boundary.trained_grid(pre, "mamba", pat, seeds)
    single = build_model("mamba", 30, m=31, generators=torch_generators(seeds, "init"))
    algorithm_1(single, pat, dataclasses.replace(pre.data, p_a=pre.p_as[1]), training_tasks(6),
                numpy_streams(seeds, "train"), steps=10, batch_size=64, lr=fig2.FIG2.train["mamba"].lr)
    assert torch.allclose(stack.w.detach()[2:4], single.w.detach(), rtol=0, atol=1e-12)


def test_gates_mamba_and_none_take_figure2_step_sizes():
    assert gates.APP12.train["mamba"].lr == fig2.FIG2.train["mamba"].lr == SYNTHETIC_LR["mamba"]
    assert gates.APP12.train["none"].lr == fig2.FIG2.train["linear"].lr == SYNTHETIC_LR["linear"]
    assert {g.family for g in gates.APP12.gates} >= {"mamba", "mamba2", "gated_retention", "retnet", "none"}


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "mambaicl", "reproduce", *map(str, args)], env=env, cwd=ROOT,
                          capture_output=True, text=True)


def test_cli_lists_and_writes_the_four_experiments(tmp_path, tiny_results):
    listing = _cli("--list")
    assert listing.returncode == 0
    for name in MODULES:
        assert f"\n{name} " in "\n" + listing.stdout
    for name in ("multiclass", "gates"):
        out = tmp_path / name
        done = _cli(name, "--preset", "tiny", "--out", out, "--seeds", *SEEDS, "--quiet")
        assert done.returncode == 0, done.stderr
        assert (out / "results.json").read_text() == tiny_results[name][0].to_json()
    bad = _cli("multiclass", "--preset", "nope", "--out", tmp_path / "x")
    assert bad.returncode == 2 and "preset" in bad.stderr


def test_condition_d_limits_invert_the_theory_bounds():
    from mambaicl.analysis.theory import l_ts_lower_lt, l_ts_lower_mamba

    for l_ts in (10, 20, 37, 60):
        a_m, a_t = boundary.alpha_limit_mamba_d(l_ts, 6), boundary.alpha_limit_lt_d(l_ts, 6)
        assert l_ts_lower_mamba(a_m, 6) == pytest.approx(l_ts)  # the bound holds with equality at the limit
        assert l_ts_lower_lt(a_t, 6) == pytest.approx(l_ts)
        assert l_ts_lower_lt(a_t + 1e-6, 6) > l_ts and 0 < a_t < 0.5 and a_t < a_m < 1


def test_boundary_effects_and_margins(tiny_results):
    r = tiny_results["boundary"][0]
    A = r.alpha_star("mamba")  # [j][k][s]
    eff = r.effect("mamba", "l_ts")
    assert eff[1] == pytest.approx(sum(A[j][-1][1] - A[j][0][1] for j in range(2)) / 2)
    assert r.effect("linear", "p_a")[0] == pytest.approx(sum(r.alpha_star("linear")[-1][k][0]
                                                             - r.alpha_star("linear")[0][k][0] for k in range(2)) / 2)
    m = r.margin_to_prediction("linear")
    assert m[0][1] == pytest.approx(r.boundary["linear"][0][1]["mean"] - 0.5)
    assert r.predicted_mamba[1][0] == min(1.0, 0.8 * 20 / 10)
    with pytest.raises(ValueError, match=r"^along must be one of \('p_a', 'l_ts'\); got 'alpha'"):
        r.effect("mamba", "alpha")


def test_gate_search_seeds_are_disjoint_from_the_reported_ones():
    pre = dataclasses.replace(gates.TINY, train={f: dataclasses.replace(t, steps=5) for f, t in gates.TINY.train.items()})
    r = step_size_search(lrs=(0.01, 0.1), **gates.search_setup(pre, "retnet", n_val=50))
    assert len(r.seeds) == 3 and not set(r.seeds) & set(gates.DEFAULT_SEEDS)
    assert r.best in (0.01, 0.1) and len(r.per_seed) == 2
    with pytest.raises(ConfigError, match="^family must be one of"):
        gates.search_setup(pre, "gla", n_val=50)
    with pytest.raises(ConfigError, match="^seeds must be disjoint from the reported seeds; both hold"):
        step_size_search(lrs=(0.01,), **gates.search_setup(pre, "retnet", seeds=(2, 3), n_val=50))


def test_the_mamba_family_is_the_trained_eq3_stack_and_reads_its_gates():
    from mambaicl.models import OneLayerStack
    from mambaicl.models.gla import GateConfig, build_gla

    pre = dataclasses.replace(gates.TINY, train={f: dataclasses.replace(t, steps=8) for f, t in gates.TINY.train.items()})
    pat = gates.patterns(pre)
    stack = train(gates.family_members(pre, "mamba", pat, (0, 1)), pre.train["mamba"], progress=False).models[0]
    ref = build_gla(GateConfig(family="mamba"), 30, m=31, generators=torch_generators((0, 1), "init"))
    assert type(stack) is type(ref) is OneLayerStack and stack.family == ref.family == "mamba"
    algorithm_1(ref, pat, pre.data, training_tasks(6), numpy_streams((0, 1), "train"), steps=8, batch_size=64,
                lr=pre.train["mamba"].lr)
    for name, p in ref.named_parameters():
        assert torch.allclose(getattr(stack, name), p, rtol=0, atol=1e-12), name


@pytest.mark.slow  # the six searched families' searches (~2 CPU-minutes)
@pytest.mark.parametrize("family", sorted(gates.SEARCHED_LR))
def test_the_recorded_gate_step_sizes_are_what_the_search_chooses(family):
    """Chapter 7 trains the gate families with :data:`gates.SEARCHED_LR` instead of searching again: the search
    on the record's seeds (disjoint from the reported ones) must still choose exactly the recorded step size."""
    rec = gates.SEARCHED_LR[family]
    found = step_size_search(lrs=rec.lrs, **gates.search_setup(gates.APP12, family, seeds=rec.seeds))
    assert found.best == rec.lr, (found.lrs, found.mean)


def test_gates_warns_when_its_reported_seeds_chose_its_recorded_step_sizes():
    import warnings

    pre = dataclasses.replace(gates.TINY, train={f: dataclasses.replace(t, steps=2) for f, t in gates.TINY.train.items()},
                              n_test=20, n_gate=8)
    assert pre.train["retnet"].lr == gates.SEARCHED_LR["retnet"].lr  # TINY keeps the recorded step size
    with pytest.warns(UserWarning, match=r"^gates.run: seeds \[20\] are reported and also chose"):
        gates.run(pre, seeds=(0, 20), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        gates.run(pre, seeds=(0,), progress=False)
