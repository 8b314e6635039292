"""Deep models: fast forms vs plain twins, probes consistent with the forward pass, errors."""
import pytest
import torch

import numpy as np

from mambaicl.config import ConfigError
from mambaicl.models import build_model, gate_naive, gate_values, mamba_output
from mambaicl.models.deep import KINDS, attend, attention_heads
from mambaicl.models.scan import paper_scan_terms, selective_scan_heads
from reference_kernels import attention_heads_seq, decay_gate_loop, selective_scan_heads_seq


def deep(kind, d, n_layers=3, **kw):
    """A deep stack through the book's one factory."""
    return build_model(kind, d, n_layers=n_layers, **kw)


def random_prompt(batch, L, d, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(batch, L, d + 1, generator=g, dtype=dtype)
    P[:, :, -1] = torch.where(torch.rand(batch, L, generator=g) < 0.5, -1.0, 1.0).to(dtype)
    P[:, -1, -1] = 0
    return P


def heads_params(H=2, m=3, D=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(H, m, D, generator=g, dtype=torch.float64),
            torch.randn(H, m, D, generator=g, dtype=torch.float64),
            torch.randn(H, D, D, generator=g, dtype=torch.float64)]


@pytest.mark.parametrize("L", [1, 4, 21])
def test_quadratic_scan_matches_the_literal_recurrence(L):
    u = torch.randn(3, L, 5, generator=torch.Generator().manual_seed(L), dtype=torch.float64)
    W_B, W_C, W = heads_params()
    assert (selective_scan_heads(u, W_B, W_C, W) - selective_scan_heads_seq(u, W_B, W_C, W)).abs().max() < 1e-10


def test_gate_query_row_is_eq3_gate_of_each_channel():
    u = torch.randn(4, 9, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    W_B, W_C, W = heads_params()
    scores, G = paper_scan_terms(u, W_B, W_C, W)
    for h in range(2):
        for c in range(5):
            assert (G[:, h, -1, :, c] - gate_values(u, W[h][:, c])).abs().max() < 1e-12
            assert (G[:, h, -1, :, c] - gate_naive(u, W[h][:, c])).abs().max() < 1e-12
        ref = torch.einsum("bsd,md,me,be->bs", u, W_B[h], W_C[h], u[:, -1])  # u_s^T W_B^T W_C u_query
        assert (scores[:, h, -1] - ref).abs().max() < 1e-12


@pytest.mark.parametrize("softmax", [False, True])
def test_attention_matches_its_loop(softmax):
    u = torch.randn(3, 8, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    W_B, W_C, _ = heads_params()
    fast = attend(u, attention_heads(u, W_B, W_C, softmax))
    assert (fast - attention_heads_seq(u, W_B, W_C, softmax)).abs().max() < 1e-10


def test_one_layer_deep_mamba_is_eq3_on_the_normalised_prompt():
    """An independent computation: one layer, one head, d_model = d+1 reduces to Eq. (3)."""
    d = 6
    model = build_model("mamba", d, n_layers=1, d_model=d + 1, generator=torch.Generator().manual_seed(0)).double()
    P = random_prompt(5, 11, d, seed=3, dtype=torch.float64)
    mixer = model.mixers[0]
    u = model.norms[0](P)  # embedding is the identity when d_model = d+1
    F_ref = mamba_output(u, mixer.W_B[0], mixer.W_C[0], mixer.W[0][:, d])
    assert (model(P) - F_ref).abs().max() < 1e-12
    rec = model.probe(P)[0]
    assert (rec["gate"][:, 0, :, d] - gate_values(u, mixer.W[0][:, d])).abs().max() < 1e-12
    assert model.label_channel == d


@pytest.mark.parametrize("kind", KINDS)
def test_probe_is_the_forward_pass(kind):
    model = build_model(kind, 6, n_layers=3, n_heads=1 if kind == "mamba1" else 2, d_model=16,
                        generator=torch.Generator().manual_seed(0)).double()
    P = random_prompt(4, 10, 6, seed=1, dtype=torch.float64)
    recs = model.probe(P)
    assert len(recs) == 3
    H = 1 if kind == "mamba1" else 2
    for rec in recs:
        assert (rec["F"] - model(P)).abs().max() < 1e-10
        assert rec["attention"].shape == (4, H, 10, 10)
        assert torch.triu(rec["attention"], diagonal=1).abs().max() == 0  # causal
        if kind in ("mamba", "mamba1"):
            assert rec["gate"].shape[:3] == (4, H, 10)
    if kind == "softmax":
        assert (recs[0]["attention"].sum(-1) - 1).abs().max() < 1e-12


def _probe_by_loops(kind, u, mixer):
    """Attention (query row) and gates of one layer, recomputed from its parameters with plain loops (NumPy)."""
    u = u.detach().numpy()[0]  # (L, D)
    L = u.shape[0]
    WB, WC = mixer.W_B.detach().numpy(), mixer.W_C.detach().numpy()  # (H, m, D)
    H, m = WB.shape[:2]
    att = np.zeros((H, L))
    gate = np.zeros((H, L, u.shape[1]))
    for h in range(H):
        t = L - 1
        scores = np.array([u[s] @ WB[h].T @ WC[h] @ u[t] for s in range(L)])
        if kind == "softmax":
            e = np.exp(scores / np.sqrt(m) - (scores / np.sqrt(m)).max())
            att[h] = e / e.sum()
        else:
            att[h] = scores
        if kind == "mamba":
            W = mixer.W.detach().numpy()[h]  # (D, D), column c is w_c
            sig = 1 / (1 + np.exp(-(u @ W)))  # (L, D)
            for s in range(L):
                gate[h, s] = sig[s] * np.prod(1 - sig[s + 1 :], axis=0)
    return att, gate


@pytest.mark.parametrize("kind", ["mamba", "linear", "softmax"])
def test_probe_matches_an_independent_recomputation(kind):
    """The probe's attention and gates of the query row equal plain loops over the layer's own parameters."""
    model = deep(kind, 4, n_layers=1, n_heads=2, d_model=8, generator=torch.Generator().manual_seed(0)).double()
    P = random_prompt(1, 7, 4, seed=2, dtype=torch.float64)
    rec = model.probe(P)[0]
    u = model.norms[0](P @ model.embed.T)  # the layer's input
    att, gate = _probe_by_loops(kind, u, model.mixers[0])
    np.testing.assert_allclose(rec["attention"][0, :, -1].numpy(), att, atol=1e-12)
    if kind == "mamba":
        np.testing.assert_allclose(rec["gate"][0].numpy(), gate, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_models_train_one_step_and_are_deterministic(kind):
    a = deep(kind, 5, generator=torch.Generator().manual_seed(7))
    b = deep(kind, 5, generator=torch.Generator().manual_seed(7))
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    P = random_prompt(8, 6, 5, seed=0)
    z = torch.where(torch.arange(8) % 2 == 0, 1.0, -1.0)
    opt = torch.optim.SGD(a.parameters(), lr=1e-3)  # a small step: first order decrease
    before = torch.clamp(1 - z * a(P), min=0).mean()
    opt.zero_grad()
    before.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in a.parameters())
    opt.step()
    after = torch.clamp(1 - z * a(P), min=0).mean()
    assert after.item() < before.item()  # one SGD step on this batch lowers its loss
    assert any(not torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("kwargs,message", [
    ({"kind": "gru"}, "^kind must be one of"),
    ({"n_layers": 0}, "^n_layers must be an integer"),
    ({"n_heads": -1}, "^n_heads must be an integer"),
    ({"d_model": 2.5}, "^d_model must be an integer"),
    ({"d": 0}, "^d must be an integer"),
    ({"d_state": 0}, "^d_state must be an integer"),
    ({"delta": 0.0}, "^delta must be a real number"),
    ({"scan": "parallel"}, "^scan must be one of"),
    ({"scan": "sequential"}, "^scan must be one of"),  # the literal recurrence is a test reference only
    ({"kind": "mamba1", "n_heads": 2}, "^n_heads must be an integer in \\[1, 1\\]"),
    ({"kind": "linear", "scan": "factored"}, "^scan does not apply to kind 'linear'"),
    ({"colour": "red"}, "^colour does not apply to kind 'mamba'"),
])
def test_bad_arguments_raise_config_error_naming_the_parameter(kwargs, message):
    args = {"kind": "mamba", "d": 4, **kwargs}
    kind, d = args.pop("kind"), args.pop("d")
    with pytest.raises(ConfigError, match=message):
        deep(kind, d, **args)


def test_bad_prompt_raises():
    model = deep("mamba", 4)
    with pytest.raises(ConfigError, match="^P's last dimension must be d\\+1"):
        model(torch.zeros(2, 5, 7))


def test_small_d_model_uses_a_learned_embedding():
    model = deep("linear", 10, d_model=8, generator=torch.Generator().manual_seed(0))
    assert model.label_channel is None
    assert model(random_prompt(2, 5, 10, seed=0)).shape == (2,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
@pytest.mark.parametrize("kind", KINDS)
def test_runs_on_gpu(kind):
    model = deep(kind, 4, device="cuda", generator=torch.Generator().manual_seed(0))
    P = random_prompt(2, 5, 4, seed=0).cuda()
    assert model(P).device.type == "cuda"


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_factored_scan_matches_the_recurrence_and_falls_back_when_unsafe(scale):
    """scale 30 makes some -cum exceed FACTORED_LOG_LIMIT, exercising the fallback."""
    from mambaicl.models.scan import FACTORED_LOG_LIMIT, selective_scan_heads_factored

    u = torch.randn(3, 21, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    W_B, W_C, W = heads_params()
    W = W * scale
    ref = selective_scan_heads_seq(u, W_B, W_C, W)
    cum = torch.cumsum(torch.nn.functional.logsigmoid(-torch.einsum("bld,hdc->bhlc", u, W)), dim=2)
    assert (float(-cum.min()) > FACTORED_LOG_LIMIT) == (scale > 1)
    assert (selective_scan_heads_factored(u, W_B, W_C, W) - ref).abs().max() < 1e-9 * max(1.0, ref.abs().max())


def test_factored_gradients_match_quadratic():
    u = torch.randn(2, 9, 5, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    params = [p.requires_grad_() for p in heads_params()]
    w = torch.randn(2, 2, 9, 5, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    from mambaicl.models.scan import selective_scan_heads_factored

    g1 = torch.autograd.grad((selective_scan_heads_factored(u, *params) * w).sum(), params)
    g2 = torch.autograd.grad((selective_scan_heads(u, *params) * w).sum(), params)
    for a, b in zip(g1, g2):
        assert (a - b).abs().max() < 1e-9


# ---------------------------------------------------------------- App. 12 gate families


def _decay_recurrence(P, log_gamma):
    """h_t = gamma_t h_{t-1} + v_t k_t^T with v = k = p, read at the last token: sum_i G_i p_i p_i^T."""
    batch, L, d0 = P.shape
    h = P.new_zeros(batch, d0, d0)
    for t in range(L):
        h = torch.exp(log_gamma[:, t])[:, None, None] * h + P[:, t, :, None] * P[:, t, None, :]
    return h


@pytest.mark.parametrize("family", ["mamba2", "retention", "retnet"])
def test_gate_families_unroll_their_recurrence(family):
    from mambaicl.models import gates

    g = torch.Generator().manual_seed(11)
    P = torch.randn(3, 9, 4, generator=g, dtype=torch.float64)
    x = P @ torch.randn(4, generator=g, dtype=torch.float64)  # (batch, L): w^T p_j
    if family == "mamba2":
        log_gamma, G = gates.mamba2_log_decay(x, 0.3), gates.mamba2_gate(x, 0.3)
    elif family == "retention":
        log_gamma, G = gates.gated_retention_log_decay(x, 2.0), gates.gated_retention_gate(x, 2.0)
    else:
        log_gamma = torch.full((3, 9), torch.log(torch.tensor(0.8, dtype=torch.float64)).item(), dtype=torch.float64)
        G = gates.retnet_gate((3, 9), 0.8)
    assert (G - decay_gate_loop(torch.exp(log_gamma))).abs().max() < 1e-12
    unrolled = torch.einsum("bi,bid,bie->bde", G, P, P)
    assert (unrolled - _decay_recurrence(P, log_gamma)).abs().max() < 1e-10
    assert torch.allclose(G[:, -1], torch.ones(3, dtype=torch.float64))


def test_gate_family_arguments_are_checked():
    from mambaicl.models import gates

    with pytest.raises(ConfigError, match="^gamma must be a real number in \\(0.0, 1.0\\]"):
        gates.retnet_gate((1, 3), 1.5)
    with pytest.raises(ConfigError, match="^tau must be a real number"):
        gates.gated_retention_gate(torch.zeros(1, 3), 0.0)


def test_row_softmax_is_softmax_with_its_gradient_and_masked_entries_weigh_nothing():
    """The attention's softmax (running sums only, so the bits do not depend on the CPU's vector width) against
    torch's own softmax (an independent implementation) and gradcheck, in float64, with causal -inf entries."""
    import math

    from mambaicl.models.kernels import row_softmax

    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 2, 9, 9, generator=g, dtype=torch.float64) * 3).masked_fill(
        ~torch.ones(9, 9, dtype=torch.bool).tril(), -math.inf)
    y = row_softmax(x)
    assert torch.allclose(y, torch.softmax(x, -1), rtol=0, atol=1e-15)
    assert bool((y.triu(1) == 0).all()) and torch.allclose(y.sum(-1), torch.ones(4, 2, 9, dtype=torch.float64))
    xs = torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(row_softmax, (xs,))
    w = torch.randn(3, 5, generator=g, dtype=torch.float64)
    (row_softmax(xs) * w).sum().backward()
    ref = xs.detach().clone().requires_grad_(True)
    (torch.softmax(ref, -1) * w).sum().backward()
    assert torch.allclose(xs.grad, ref.grad, rtol=0, atol=1e-14)
