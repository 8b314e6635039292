"""App. 14's gates (experiments.app14_gates): the same Mamba as the regression experiment's App. 14 part, and gate
medians against a plain loop over Eq. (3)'s gate G_i = sigma(w^T p_i) prod_{j > i} (1 - sigma(w^T p_j))."""
import dataclasses

import torch

from mambaicl.analysis.claims import CLAIMS
from mambaicl.data import all_tasks, test_prompts
from mambaicl.experiments import app14_gates as ag
from mambaicl.experiments import fig2, regression
from mambaicl.seeding import numpy_streams, torch_generators


def test_same_models_as_the_regression_experiment_and_gates_by_a_loop():
    seeds = (0, 1)
    res = ag.run(ag.TINY, seeds=seeds, progress=False)
    _, stacks = regression._app14(ag.TINY.app14, seeds, None, False)
    assert torch.equal(res.stack.w, stacks["mamba"].w) and torch.equal(res.stack.W_C, stacks["mamba"].W_C)
    f2 = ag.fig2_preset(ag.TINY)
    pat = fig2.patterns(f2)
    pr = test_prompts(pat, dataclasses.replace(f2.test, alpha=0.3), all_tasks(6), 50, numpy_streams(seeds, "x"))
    med = ag.gate_medians(res.stack, pr)
    P = pr.P  # (S, B, L, D)
    for s in range(2):
        sig = torch.sigmoid(P[s] @ res.stack.w[s].detach())  # (B, L)
        L = P.shape[2]
        G = torch.stack([sig[:, i] * torch.prod(1 - sig[:, i + 1:], dim=1) for i in range(L)], dim=1)
        ctx = G[:, :-1]
        assert abs(med[s][0] - float(ctx[pr.outlier[s]].median())) < 1e-9
        assert abs(med[s][1] - float(ctx[~pr.outlier[s]].median())) < 1e-9
    assert CLAIMS["app14-gates"].beyond and "Random labels" in CLAIMS["app14-gates"].quote
