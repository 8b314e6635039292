"""deep_gate_training: the records of a short run against an independent recomputation from the trained models,
and the rates around the step the validation hinge reaches zero against hand-computed values."""
import dataclasses
import math

import pytest
import torch

from mambaicl.analysis.claims import CLAIMS
from mambaicl.config import ConfigError
from mambaicl.experiments import deep_gate_training as D
from mambaicl.experiments import mechanism


def test_rates_around_zero_by_hand():
    steps = [0, 25, 50, 100]
    lr = [[0.0], [-0.5], [-1.0], [-1.1]]  # layer 1's log ratio per record
    before, after = D.rates_around_zero(steps, lr, 50)
    assert before == pytest.approx(100 * 1.0 / 50)  # |-1.0 - 0.0| over 50 updates, per 100
    assert after == pytest.approx(100 * 0.1 / 50)  # |-1.1 - (-1.0)| over 50 updates, per 100
    assert all(math.isnan(v) for v in D.rates_around_zero(steps, lr, -1))  # never reaches zero
    assert math.isnan(D.rates_around_zero(steps, lr, 0)[0])  # zero already before training: no "before"
    assert math.isnan(D.rates_around_zero(steps, lr, 100)[1])  # zero only at the last record: no "after"


def test_tiny_run_records_what_the_models_give():
    r = D.run(D.TINY, seeds=(0, 1), progress=False)
    assert r.steps == [0, 5, 10, 15, 20]
    # the record before training, recomputed from the untrained models (built as the engine builds them)
    data, test = mechanism.setting(D.TINY.base)
    from mambaicl.recipes.mechanism import validation_prompts

    for i, s in enumerate(r.seeds):
        model = mechanism.build(D.TINY.base, s)
        val = validation_prompts(model_pat(), data, s, D.TINY.base.n_val, "mechanism validation")
        with torch.no_grad():
            margin = val.z.to(torch.get_default_dtype()) * model(val.P)
        assert r.val_hinge[i][0] == pytest.approx(float(torch.clamp(1 - margin, min=0).mean()), rel=1e-6)
        assert r.active[i][0] == pytest.approx(float((margin < 1).double().mean()))
        assert len(r.log_ratio[i][0]) == 3  # one per layer
    for i, z in enumerate(r.zero_step):
        first = next((t for t, h in zip(r.steps, r.val_hinge[i]) if h <= D.TINY.zero), -1)
        assert z == first


def model_pat():
    return mechanism.seed_members(D.TINY.base, (0,))[0].data.pat


def test_preset_fields_are_checked_and_the_row_is_declared():
    with pytest.raises(ConfigError, match=r"^every must be an integer in \[1, 400\]; got 500"):
        dataclasses.replace(D.FIG3, every=500)
    assert CLAIMS["deep-gate-after-zero"].beyond
    part = CLAIMS["deep-gate-after-zero"].criterion.parts[0]  # issue 41: rate after - 1/2 rate before < 0
    assert (part.kind, part.threshold, part.test) == ("below", 0.0, "sign")
