"""The rmsnorm-causal experiment: the after_first stack normalises every layer but the first, and the suppression
indicator is the gate ratio below 1/M1 (checked against the mechanism reports it comes from)."""
import torch

from mambaicl.analysis.claims import CLAIMS
from mambaicl.experiments import mechanism
from mambaicl.experiments import rmsnorm_causal as rc


def test_after_first_drops_only_the_first_norm():
    model = mechanism.build(rc.AFTER_FIRST, 0)
    kinds = [type(n).__name__ for n in model.norms]
    assert kinds[0] != "RMSNorm" and all(k == "RMSNorm" for k in kinds[1:])
    ref = mechanism.build(mechanism.FIG3, 0)
    assert all(type(n).__name__ == "RMSNorm" for n in ref.norms)


def test_tiny_run(monkeypatch):
    monkeypatch.setenv("MAMBAICL_RESULT_STORE", "off")
    r = rc.run(rc.TINY, seeds=(0, 1), progress=False)
    for k, res in r.results.items():
        for layer, rep in enumerate(zip(*res.reports)):  # per layer: the seeds' LayerReports
            ratios = [x.gate_outlier / x.gate_clean for x in rep]
            assert r.gate_ratio[k][layer] == ratios
            assert r.suppress[k][layer] == [float(v < 1 / 6) for v in ratios]
        assert r.reversed_error[k] == res.errors_by_group[res.preset]["reversed"]
    assert CLAIMS["rmsnorm-causal"].criterion.parts[1].threshold == 0.25
