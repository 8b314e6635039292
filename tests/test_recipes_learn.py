"""mambaicl.recipes.learn: Part I's illustrative models (trained here, drawn by mambaicl.viz.learn)."""
import torch

from mambaicl.models import OneLayerMamba, gate_naive
from mambaicl.recipes import learn


from test_viz_learn import _prompt  # noqa: E402 - the same random prompt as the plotting tests


def test_gate_probe_reads_the_first_model_of_a_stack():
    P = _prompt()
    model = OneLayerMamba(5, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64)

    class Stack:  # the interface of a trained stack: seed axis first
        w = model.w.detach()[None]

        @staticmethod
        def gate(Q):
            return model.gate(Q[0])[None]

        @staticmethod
        def logits(Q):
            return model.logits(Q[0])[None]

    u = torch.zeros(6, dtype=torch.float64); u[0] = 1
    out = learn.gate_probe(P, {"w_u": u})(Stack)
    assert torch.allclose(out["gates"], gate_naive(P[None], model.w.detach())[0, :-1], atol=1e-12)
    assert torch.isclose(out["w_u"], model.w.detach()[0])
    assert torch.allclose(out["sigmas"], torch.sigmoid(P[:-1] @ model.w.detach()), atol=1e-12)


def test_illustrative_pair_is_deterministic_and_trains():
    a = learn.illustrative_pair(steps=3, record_every=[0, 3])
    b = learn.illustrative_pair(steps=3, record_every=[0, 3])
    for kind in ("mamba", "linear"):
        for (n, p), (_, q) in zip(a.models[kind].named_parameters(), b.models[kind].named_parameters()):
            assert torch.equal(p, q), (kind, n)
        assert a.histories[kind].steps == [0, 3]
