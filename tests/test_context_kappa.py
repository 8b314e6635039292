"""Chapter 8's context-example and kappa_a experiments: the needed length by hand, the hinge loss by hand, and
tiny end-to-end runs."""
import pytest
import torch

from mambaicl.analysis.claims import CLAIMS
from mambaicl.data import training_prompts, training_tasks
from mambaicl.experiments import context_examples as ce
from mambaicl.experiments import fig2
from mambaicl.experiments import kappa_lower_bound as kl
from mambaicl.seeding import numpy_streams, torch_generators


def test_needed_length_by_hand():
    grid = (2, 4, 8, 16)
    assert ce.needed_length([0.3, 0.04, 0.06, 0.01], grid, 0.05) == 16  # must *stay* below from there on
    assert ce.needed_length([0.01, 0.02, 0.03, 0.0], grid, 0.05) == 2
    assert ce.needed_length([0.3, 0.2, 0.1, 0.06], grid, 0.05) == ce.CENSOR
    assert ce.needed_length([0.3, 0.05, 0.05, 0.05], grid, 0.05) == 4  # "at or below"


def test_tiny_context_run():
    r = ce.run(ce.TINY, seeds=(0, 1), progress=False)
    for kind in ("mamba", "linear"):
        for i in range(len(r.alphas)):
            for s in range(2):
                assert r.needed[kind][i][s] == ce.needed_length(r.errors[kind][i][s], r.l_grid, r.level)
    assert not CLAIMS["context-examples"].beyond


def test_kappa_bound_and_hinge_by_hand():
    assert kl.lower_bound(3, 3.0) == pytest.approx(3 / 81)
    assert kl.FIG2.kappas[1] == pytest.approx(3 / 81 / 10, rel=1e-4)
    r = kl.run(kl.TINY, seeds=(0, 1), progress=False)
    pat = fig2.patterns(kl.TINY.fig2)
    for i, kappa in enumerate(r.kappas):
        data = kl.TINY.fig2.data.__class__(**{**kl.TINY.fig2.data.__dict__, "kappa_a": kappa})
        val = training_prompts(pat, data, training_tasks(6), r.n_val, numpy_streams((0, 1), "validation/kappa"))
        stack = r.models[("mamba", kappa)]
        with torch.no_grad():
            F = stack(val)  # (S, n)
        for s in range(2):
            want = torch.clamp(1 - val.z[s] * F[s], min=0).mean().item()
            assert r.hinge["mamba"][i][s] == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_tiny_batch_run_penalty_by_hand():
    from mambaicl.experiments import batch_size as bs

    r = bs.run(bs.TINY, seeds=(0, 1), progress=False)
    assert r.kappas["fig2"] == 2.0 and r.kappas["theory"] == pytest.approx(2 * 3 / 81, rel=1e-5)
    for st in ("fig2", "theory"):
        for kind in ("mamba", "linear"):
            for b in range(len(r.batches)):
                assert all(0 <= v <= r.cap for v in r.hinge[st][kind][b])
        diff = r.difference(st)
        for b in range(len(r.batches) - 1):
            for s in range(2):
                pm = r.hinge[st]["mamba"][b][s] - r.hinge[st]["mamba"][-1][s]
                pl = r.hinge[st]["linear"][b][s] - r.hinge[st]["linear"][-1][s]
                assert diff[b][s] == pytest.approx(pm - pl, abs=1e-15)
    assert len(r.claims()["batch-size"].parts) == len(CLAIMS["batch-size"].parts) == 2
