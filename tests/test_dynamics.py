"""Chapter 3's experiment: settings batched into one stack equal separate runs; counts, conditions, CLI bytes."""
import dataclasses
import math

import pytest
import torch

from mambaicl.__main__ import main
from mambaicl.config import DataConfig, TrainConfig
from mambaicl.data import make_patterns, training_tasks
from mambaicl.experiments import dynamics as D
from mambaicl.models import build_model
from mambaicl.seeding import numpy_stream, torch_generator
from mambaicl.train import Member, SyntheticData, train

SMALL = dataclasses.replace(D.TINY, name="small", steps=30)


def test_sweeps_vary_one_factor_around_the_base():
    for kind in D.KINDS:
        sweeps = D.sweep_settings(D.DYNAMICS, kind)
        assert set(sweeps) == set(D.FACTORS)
        base = D.Setting(kind, D.DYNAMICS.data, D.DYNAMICS.lr[kind])
        for factor, pts in sweeps.items():
            assert base in pts and len(pts) >= 4
            for st in pts:  # everything but the swept factor stays at the base value
                others = [f for f in D.FACTORS if f != factor]
                assert [D.factor_value(st, f) for f in others] == [D.factor_value(base, f) for f in others]
    assert D.DYNAMICS.lr == {"mamba": 0.3, "linear": 0.01}  # Figure 2's step sizes
    assert D.PREDICTED["mamba"]["l_tr"] == 0 and D.PREDICTED["linear"]["l_tr"] == -1


def test_record_steps_dense_then_geometric():
    s = D.record_steps(400, 40, 1.06)
    assert s[:41] == list(range(41)) and s[-1] == 400
    assert all(b > a for a, b in zip(s, s[1:]))
    assert all(b - a <= 0.06 * a + 1 for a, b in zip(s[40:], s[41:]))  # ratio 1.06, up to rounding


def test_theorem_conditions_with_constant_one():
    st = D.Setting("mamba", DataConfig(), 0.3)
    c = D.theorem_conditions(st, 64, 0.25)
    log4 = math.log(4)
    assert c["B >~ M1 (1-p_a)^-1 log(1/eps)"] == pytest.approx(64 / (6 / 0.4 * log4))
    assert c["l_tr >~ (1-p_a)^-1 log M1"] == pytest.approx(20 / (math.log(6) / 0.4))
    assert c["kappa_a >~ V beta^-4"] == pytest.approx(2 / (3 / 81))
    lt = D.theorem_conditions(D.Setting("linear", DataConfig(), 0.01), 64, 0.25)
    assert "kappa_a >~ V beta^-4" not in lt  # Theorem 3 has no lower bound on kappa_a
    short = D.theorem_conditions(D.Setting("mamba", DataConfig(l_tr=4), 0.3), 64, 0.25)
    assert short["l_tr >~ (1-p_a)^-1 log M1"] < 1


def test_initial_margin_matches_the_untrained_linear_transformer():
    from mambaicl.data import training_prompts

    data = DataConfig()
    pat = make_patterns(data, torch_generator(0, "patterns"))
    pr = training_prompts(pat, data, training_tasks(data.M1), 20000, numpy_stream(1, "validation"))
    model = build_model("linear", data.d, delta=0.05)
    with torch.no_grad():
        margin = float((pr.z * model(pr)).mean())
    assert margin == pytest.approx(D.initial_margin(D.Setting("linear", data, 0.01), 0.05), rel=0.05)


def test_a_slot_of_a_batched_sweep_equals_its_separate_run():
    """Slot (k, s) of the sweep's stack is setting k with seed s trained alone (the engine's own test covers
    every kind; this one checks the sweep's slot layout)."""
    base = SMALL.data
    settings = [D.Setting("mamba", base, 0.3), D.Setting("mamba", base, 0.15),
                D.Setting("mamba", dataclasses.replace(base, p_a=0.4), 0.3)]
    seeds = (4, 1)
    run = D.trained_settings(settings, seeds, SMALL)
    pat = make_patterns(base, torch_generator(SMALL.pattern_seed, "patterns"))
    for k, st in enumerate(settings):
        for i, s in enumerate(seeds):
            member = Member(s, "mamba", SyntheticData(pat, st.data), st.lr, m=base.d + 1, delta=SMALL.delta)
            alone = train([member], TrainConfig(steps=SMALL.steps, batch_size=SMALL.batch_size), progress=False).models[0]
            for name, p in alone.named_parameters():
                q = getattr(run.stack, name)[run.slot(k, i)]
                assert (p[0] - q).abs().max() <= 1e-10 * p[0].abs().max(), (k, s, name)


def test_trained_settings_rejects_mixed_groups():
    with pytest.raises(ValueError, match="^settings must be a non-empty list sharing kind"):
        D.trained_settings([D.Setting("mamba", SMALL.data, 0.3),
                          D.Setting("mamba", dataclasses.replace(SMALL.data, l_tr=10), 0.3)], (0,), SMALL)


@pytest.mark.parametrize("change, message", [
    ({"lr_grid": {"mamba": (0.1, 0.2), "linear": (0.005, 0.01)}}, "must contain the base step size"),
    ({"M1_grid": (6, 20)}, "d must exceed"),
    ({"fraction": 1.0}, "fraction must be"),
    ({"l_tr_grid": (10, 40)}, "l_tr_grid must contain the base value"),
    ({"beta_grid": (3.0, "x")}, "beta_grid\\[1\\] must be a real"),
    ({"check_delta": 0.5}, "check_delta must be"),
])
def test_preset_validation(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(D.DYNAMICS, **change)


def test_run_is_byte_identical_and_the_cli_writes_it(tmp_path):
    result = D.run(D.TINY, seeds=(0, 1), progress=False)
    d = result.to_dict()
    assert set(d["exponents"]) == set(D.KINDS) and set(d["exponents"]["mamba"]) == set(D.FACTORS)
    for kind in D.KINDS:
        for factor, c in d["counts"][kind].items():
            assert len(c["T"]) == len(c["values"]) and all(len(t) == 2 for t in c["T"])
            # every Mamba run starts above its target: L(0) (about 1: the untrained output is near 0) exceeds the end
            # value. The linear Transformer is born past the margin (Chapter 3: delta^2 beta^2 l_tr (1 - p_a) / 2 > 1),
            # so over TINY's 16 steps, measured on 32 prompts, its small loss need not fall (seed 0 at M1 = 4 goes
            # from 0.110 to 0.116 on the NumPy streams); the chapter's preset checks it on its own runs.
            if kind == "mamba":
                assert all(a > b for row0, row1 in zip(c["loss_initial"], c["loss_end"]) for a, b in zip(row0, row1))
    out = tmp_path / "dyn"
    argv = ["reproduce", "dynamics", "--preset", "tiny", "--seeds", "0", "1", "--out", str(out), "--quiet"]
    assert main(argv) == 0  # the CLI in this process (a second, independent run of the preset)
    assert (out / "results.json").read_text() == result.to_json()


def test_a_diverging_slot_is_named():
    settings = [D.Setting("mamba", SMALL.data, 0.3), D.Setting("mamba", SMALL.data, 1e300)]
    with pytest.raises(FloatingPointError, match=r"member seed 0, lr 1e\+300, kind 'mamba'"):
        D.trained_settings(settings, (0,), dataclasses.replace(SMALL, steps=20, dense_until=5))
