"""Gated linear attention with the App. 12 gate families (mambaicl.models.gla): every gate against a plain loop over
its definition, the output against the literal recurrence, and clear errors for bad gate settings."""
import math

import numpy as np
import pytest
import torch

from mambaicl.config import ConfigError
from mambaicl.models import OneLayerStack, gates
from mambaicl.models.gla import GATE_FAMILIES, OWN_TOKEN_GATE, GateConfig, GLAStack, build_gla
from mambaicl.seeding import numpy_streams, torch_generators

S, B, L, D = 2, 3, 7, 5  # seeds, prompts, tokens (query last), d + 1


def _prompts(seed=0):
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(S, B, L, D, generator=g, dtype=torch.float64)
    P[..., -1, -1] = 0.0  # the query has label 0 (Eq. 2)
    return P


def _stack(family, **kw):
    st = build_gla(family, D - 1, m=6, generators=torch_generators(range(S), "init"), **kw)
    with torch.no_grad():  # move off the symmetric initialisation so that every term matters
        g = torch.Generator().manual_seed(5)
        for p in st.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return st


def _sig(x):
    return 1.0 / (1.0 + math.exp(-x))


def _softplus(x):
    return math.log1p(math.exp(x))


def _gate_loop(st, P):
    """G[s, b, i] (channel-mean for GLA) from the App. 12 definitions, with Python loops over i and j > i."""
    fam, cfg = st.family, getattr(st, "gate_config", None)  # Eq. (3)'s families are OneLayerStacks: no settings
    Pn = P.numpy()
    out = np.zeros(P.shape[:3] + ((st.m,) if fam in ("gla", "gla_app12") else ()))
    for s in range(P.shape[0]):
        for b in range(P.shape[1]):
            p = Pn[s, b]
            if fam in ("gla", "gla_app12"):
                Wa = st.W_alpha[s].detach().numpy()
                alpha = 1 / (1 + np.exp(-(p @ Wa.T))) ** (1 / cfg.tau)  # (L, m)
            else:
                x = p @ st.w[s].detach().numpy() if fam not in ("retnet", "none") else None
            for i in range(L):
                if fam == "none":
                    g = 1.0
                elif fam == "retnet":
                    g = cfg.gamma ** (L - 1 - i)
                elif fam == "mamba":
                    g = _sig(x[i]) * np.prod([1 - _sig(x[j]) for j in range(i + 1, L)])
                elif fam in ("mamba2", "mamba2_app12"):
                    ea = math.exp(float(st.a[s].detach()))
                    g = np.prod([math.exp(-_softplus(x[j]) * ea) for j in range(i + 1, L)])
                    if fam == "mamba2":
                        g *= _softplus(x[i])
                elif fam == "gated_retention":
                    g = np.prod([_sig(x[j]) ** (1 / cfg.tau) for j in range(i + 1, L)])
                elif fam == "gla":
                    g = np.prod([alpha[j] for j in range(i + 1, L)], axis=0) if i < L - 1 else np.ones(st.m)
                else:  # gla_app12: own key gate
                    g = alpha[i]
                out[s, b, i] = g
    return out


@pytest.mark.parametrize("family", GATE_FAMILIES)
def test_gate_equals_a_loop_over_its_definition(family):
    st = _stack(family, tau=1.7) if family in ("gated_retention", "gla", "gla_app12") else _stack(family)
    P = _prompts()
    with torch.no_grad():
        G = st.gate(P, channels=True).numpy() if family in ("gla", "gla_app12") else st.gate(P).numpy()
    np.testing.assert_allclose(G, _gate_loop(st, P), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("family", GATE_FAMILIES)
def test_output_equals_a_loop_over_examples_and_channels(family):
    st = _stack(family)
    P = _prompts(1)
    with torch.no_grad():
        F = st(P).numpy()
    G = _gate_loop(st, P)
    Pn = P.numpy()
    for s in range(S):
        WB, WC = st.W_B[s].detach().numpy(), st.W_C[s].detach().numpy()
        for b in range(B):
            q = WC @ Pn[s, b, -1]
            total = 0.0
            for i in range(L):
                k = WB @ Pn[s, b, i]
                g = G[s, b, i] if G.ndim == 4 else np.full(st.m, G[s, b, i])
                total += Pn[s, b, i, -1] * float(np.sum(g * k * q))
            assert abs(F[s, b] - total) < 1e-10 * max(1.0, abs(total))


@pytest.mark.parametrize("family", ["mamba2", "mamba2_app12", "gla"])
def test_output_is_the_literal_recurrence_read_at_the_query(family):
    """h_i = decay_i * h_{i-1} + step_i v_i k_i^T (Mamba-2: scalar decay exp(-Delta e^a), step Delta or 1;
    GLA: per-channel decay on the key side), o = h_L q, F = last entry of o (the label row, Eq. (3))."""
    st = _stack(family)
    P = _prompts(2)
    with torch.no_grad():
        F = st(P)
    for s in range(S):
        WB, WC = st.W_B[s].detach().double(), st.W_C[s].detach().double()
        for b in range(B):
            p = P[s, b]
            h = torch.zeros(D, st.m, dtype=torch.float64)  # values (d+1) x keys (m)
            for i in range(L):
                k, v = WB @ p[i], p[i]
                if family == "gla":
                    alpha = torch.sigmoid(st.W_alpha[s].detach() @ p[i])  # (m,), tau = 1
                    h = h * alpha[None, :] + torch.outer(v, k)
                else:
                    delta = torch.nn.functional.softplus(st.w[s].detach() @ p[i])
                    decay = torch.exp(-delta * torch.exp(st.a[s].detach()))
                    step = delta if family == "mamba2" else 1.0
                    h = decay * h + step * torch.outer(v, k)
            o = h @ (WC @ p[-1])
            assert abs(float(o[-1]) - float(F[s, b])) < 1e-10


def test_a_gate_family_is_a_one_layer_stack_with_another_gate():
    """One class family: Eq. (3)'s families are OneLayerStacks (kinds mamba and linear, the same initial values as
    built directly); the others are GLAStacks, OneLayerStacks with another gate."""
    for family, kind in (("mamba", "mamba"), ("none", "linear")):
        st = build_gla(family, D - 1, m=6, generators=torch_generators(range(S), "init"))
        ref = OneLayerStack(kind, D - 1, 6, 0.2, torch_generators(range(S), "init"), dtype=torch.float64)
        assert type(st) is OneLayerStack and st.kind == kind and st.family == family
        for name, p in ref.named_parameters():
            assert torch.equal(getattr(st, name), p), name
    st = _stack("retnet")
    assert isinstance(st, GLAStack) and isinstance(st, OneLayerStack) and st.family == st.kind == "retnet"


@pytest.mark.parametrize("family", GATE_FAMILIES)
def test_prompts_and_tensors_give_the_same_output(family):
    from mambaicl.experiments import fig2
    from mambaicl.data import all_tasks, test_prompts

    pat = fig2.patterns(fig2.FIG2)
    pr = test_prompts(pat, fig2.FIG2.test, all_tasks(6), 8, numpy_streams([0, 1], "t"))
    st = build_gla(family, 30, m=31, generators=torch_generators([0, 1], "init"))
    with torch.no_grad():
        assert torch.allclose(st(pr), st(pr.P), atol=1e-10)
        assert torch.allclose(st.gate(pr), st.gate(pr.P), atol=1e-12)


def test_member_is_one_seed_of_the_stack():
    st = _stack("gla")
    P = _prompts(4)
    one = st.member(1)
    with torch.no_grad():
        assert torch.allclose(one(P[1:2])[0], st(P)[1])
    with pytest.raises(ConfigError, match=r"^s must be an integer in \[0, 1\]"):
        st.member(2)


def test_own_token_gate_families_can_silence_a_token_and_decay_families_cannot():
    """A token whose gate logit is -50 gets weight ~0 under the Mamba and Mamba-2 gates (own-token gates); under
    a decay-only gate (App. 12's Mamba-2, gated retention) its weight is set by the tokens after it and does not
    move."""
    P = _prompts(6)
    for family in ("mamba", "mamba2", "mamba2_app12", "gated_retention"):
        st = _stack(family)
        with torch.no_grad():
            w = st.w.detach()  # (S, D)
            G0 = st.gate(P)[..., 2].clone()
            P2 = P.clone()
            P2[..., 2, :] = (-50.0 * w / (w * w).sum(-1, keepdim=True))[:, None, :]  # w^T p_3 = -50
            G1 = st.gate(P2)[..., 2]
        assert family in OWN_TOKEN_GATE or family not in ("mamba", "mamba2")
        if family in OWN_TOKEN_GATE:
            assert float(G1.max()) < 1e-9 * float(G0.min())
        else:
            assert torch.allclose(G1, G0)


def test_bad_gate_settings_raise_naming_the_field():
    with pytest.raises(ConfigError, match="^family must be one of"):
        GateConfig(family="mamba3")
    with pytest.raises(ConfigError, match="^gamma must be a real number"):
        GateConfig(family="retnet", gamma=-0.5)  # a negative decay
    with pytest.raises(ConfigError, match="^gamma must be a real number"):
        GateConfig(family="retnet", gamma=1.5)
    with pytest.raises(ConfigError, match="^tau must be a real number"):
        GateConfig(family="gated_retention", tau=0.0)
    with pytest.raises(ConfigError, match="^family must be one of"):
        build_gla("hyena", 4, generators=torch_generators([0], "init"))
    with pytest.raises(ConfigError, match="^generators must hold one torch.Generator"):
        GLAStack("retnet", 4, 5, 0.2, [])
    with pytest.raises(ConfigError, match=r"^family 'mamba' is a one-layer kind of Eq. \(3\): build OneLayerStack\('mamba'"):
        GLAStack("mamba", 4, 5, 0.2, torch_generators([0], "init"))
    with pytest.raises(ConfigError, match="^gamma must be a real number"):
        gates.retnet_gate((2, 3), -0.1)
    with pytest.raises(ConfigError, match="^tau must be a real number"):
        gates.gla_gate(torch.zeros(1, 3, 2), 0.0, True)
    with pytest.raises(ConfigError, match="^tau does not apply to kind 'retnet'"):
        build_gla("retnet", 4, generators=torch_generators([0], "init"), tau=2.0)
    with pytest.raises(ConfigError, match="^pass gate settings"):
        build_gla(GateConfig(family="retnet"), 4, generators=torch_generators([0], "init"), gamma=0.5)
