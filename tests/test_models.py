"""Eq. (1) and Eq. (3): the recurrence, its closed form, the gate and its gradient."""
import pytest
import numpy as np
import torch

import mambaicl
from mambaicl import OneLayerLinearTransformer, OneLayerMamba, selective_scan
from mambaicl.config import DataConfig, TestConfig
from mambaicl.data import all_tasks, make_patterns, training_prompts, training_tasks
from mambaicl.data import test_prompts as draw_test_prompts
from mambaicl.config import ConfigError
from mambaicl.models import (
    build_model,
    gated_sum,
    attention_scores,
    gate_grad_w,
    gate_naive,
    gate_values,
    mamba_output,
    selective_scan_closed_form,
)
from mambaicl.seeding import numpy_streams, torch_generator, torch_generators
from reference_kernels import gate_loop, gated_sum_reference


def random_prompt(batch, L, d, generator, dtype=torch.float64, scale=1.0):
    P = scale * torch.randn(batch, L, d + 1, generator=generator, dtype=dtype)
    P[:, :, -1] = torch.where(torch.rand(batch, L, generator=generator) < 0.5, -1.0, 1.0).to(dtype)
    P[:, -1, -1] = 0
    return P


def reference_F(P, W_B, W_C, w):
    """Eq. (3) written as plainly as possible: loops over prompts and tokens."""
    out = []
    for P_n in P:
        q = P_n[-1]
        total = torch.zeros((), dtype=P.dtype)
        L = P_n.shape[0]
        for i in range(L):
            G = torch.sigmoid(w @ P_n[i])
            for j in range(i + 1, L):
                G = G * (1 - torch.sigmoid(w @ P_n[j]))
            total = total + G * P_n[i, -1] * (P_n[i] @ W_B.T @ W_C @ q)
        out.append(total)
    return torch.stack(out)


@pytest.mark.parametrize("L,d,m", [(1, 3, 2), (5, 4, 3), (21, 30, 21), (40, 7, 9)])
def test_recurrence_matches_closed_form_at_every_position(L, d, m):
    g = torch.Generator().manual_seed(L * 100 + d)
    P = random_prompt(3, L, d, g)
    W_B = torch.randn(m, d + 1, generator=g, dtype=torch.float64)
    W_C = torch.randn(m, d + 1, generator=g, dtype=torch.float64)
    W = torch.randn(d + 1, d + 1, generator=g, dtype=torch.float64)
    O = selective_scan(P, W_B, W_C, W)
    assert O.shape == (3, L, d + 1)
    assert (O - selective_scan_closed_form(P, W_B, W_C, W)).abs().max() < 1e-10
    # The label channel of o_i is Eq. (3) read with p_i as the query: F of the prefix ending at i.
    for i in range(L):
        F_i = mamba_output(P[:, : i + 1], W_B, W_C, W[:, -1])
        assert (O[:, i, -1] - F_i).abs().max() < 1e-10


def test_onelayer_mamba_matches_recurrence_and_reference():
    g = torch.Generator().manual_seed(0)
    d, L = 6, 9
    model = OneLayerMamba(d, m=L, generator=g)
    with torch.no_grad():
        for p in (model.W_B, model.W_C, model.w):
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    P = random_prompt(4, L, d, g)
    W_B, W_C, w = (p.detach().double() for p in (model.W_B, model.W_C, model.w))
    W = torch.randn(d + 1, d + 1, generator=g, dtype=torch.float64)
    W[:, -1] = w
    F_model = model(P)
    assert F_model.dtype == torch.float64 and F_model.shape == (4,)
    assert (F_model - selective_scan(P, W_B, W_C, W)[:, -1, -1]).abs().max() < 1e-10
    assert (F_model - reference_F(P, W_B, W_C, w)).abs().max() < 1e-10
    assert (model.attention(P) - attention_scores(P, W_B, W_C)).abs().max() < 1e-12
    assert (model.gate(P) - gate_naive(P, w)).abs().max() < 1e-12


def test_gate_sums_to_one_minus_product_and_decays():
    g = torch.Generator().manual_seed(1)
    P = random_prompt(5, 30, 4, g)
    w = torch.randn(5, generator=g, dtype=torch.float64)
    G = gate_values(P, w)
    keep = 1 - torch.sigmoid(P @ w)
    assert torch.allclose(G.sum(1), 1 - keep.prod(1), atol=1e-12)
    assert torch.all(G.sum(1) <= 1)


def test_gate_with_equal_logits_is_geometric():
    # G_i = s (1-s)^(L-i) when every token has the same logit
    P_eq = torch.zeros(1, 10, 5, dtype=torch.float64)
    P_eq[..., 0] = 1.0
    w_eq = torch.tensor([0.4, 0, 0, 0, 0], dtype=torch.float64)
    s = torch.sigmoid(torch.tensor(0.4, dtype=torch.float64))
    expected = s * (1 - s) ** torch.arange(9, -1, -1, dtype=torch.float64)
    assert torch.allclose(gate_values(P_eq, w_eq)[0], expected, atol=1e-14)


def test_gate_gradient_of_lemma4_matches_autograd():
    g = torch.Generator().manual_seed(2)
    P = random_prompt(2, 8, 5, g)
    w = torch.randn(6, generator=g, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda v: gate_values(P, v), w)  # (batch, L, d+1)
    assert (gate_grad_w(P, w) - jac).abs().max() < 1e-12


def test_loss_gradient_in_w_as_written_in_lemma4_proof():
    """d hinge / dw = sum over prompts with z F < 1 of z sum_i y_i attn_i G_i (sum_{s>i} sigma_s p_s - (1 - sigma_i) p_i)."""
    g = torch.Generator().manual_seed(3)
    d, L = 5, 7
    P = random_prompt(16, L, d, g)
    W_B = 0.6 * torch.randn(4, d + 1, generator=g, dtype=torch.float64)
    W_C = 0.6 * torch.randn(4, d + 1, generator=g, dtype=torch.float64)
    w = torch.randn(d + 1, generator=g, dtype=torch.float64, requires_grad=True)
    F = mamba_output(P, W_B, W_C, w)
    z = torch.where(torch.rand(16, generator=g) < 0.5, -1.0, 1.0).double()
    active = (z * F.detach() < 1).double()  # the hinge's active region: only these prompts carry a gradient
    assert 0 < active.sum() < 16  # both regions occur, so the mask matters
    torch.relu(1 - z * F).sum().backward()
    attn = attention_scores(P, W_B, W_C)
    y = P[:, :, -1]
    paper = (active * z)[:, None, None] * (y * attn)[:, :, None] * (-gate_grad_w(P, w.detach()))
    assert (paper.sum((0, 1)) - w.grad).abs().max() < 1e-12


def test_linear_transformer_is_mamba_with_unit_gate(monkeypatch):
    """Mamba's own closed form (mamba_output) with its gate forced to 1 is the linear Transformer."""
    from mambaicl.models import gated_attention

    g = torch.Generator().manual_seed(4)
    d = 5
    lt = OneLayerLinearTransformer(d, m=4).double()
    with torch.no_grad():
        for p in lt.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    P = random_prompt(3, 11, d, g)
    assert torch.equal(lt.gate(P), torch.ones(3, 11, dtype=torch.float64))
    w = torch.randn(d + 1, generator=g, dtype=torch.float64)
    with_gate = mamba_output(P, lt.W_B.detach(), lt.W_C.detach(), w)
    monkeypatch.setattr(gated_attention, "gate_values", lambda P, w: torch.ones(P.shape[:-1], dtype=P.dtype))
    unit_gate = mamba_output(P, lt.W_B.detach(), lt.W_C.detach(), w)
    assert (lt(P) - unit_gate).abs().max() < 1e-12
    assert (lt(P) - with_gate).abs().max() > 1e-3  # the gate matters, so the forcing was effective


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_logits_are_stable(dtype):
    g = torch.Generator().manual_seed(5)
    d = 4
    model = OneLayerMamba(d, m=5, generator=g)
    P = random_prompt(2, 50, d, g, dtype=dtype)
    with torch.no_grad():
        model.w.copy_(torch.tensor([1e3, -1e3, 0.0, 0.0, 0.0]))
    P[:, :, 0] = torch.where(torch.rand(2, 50, generator=g) < 0.5, 1.0, -1.0).to(dtype)
    P[:, :, 1] = 0.0
    G = model.gate(P)
    F = model(P)
    assert torch.isfinite(G).all() and torch.isfinite(F).all()
    assert G.dtype == dtype and F.dtype == dtype
    assert (G >= 0).all() and (G.sum(1) <= 1 + 1e-6).all()
    F.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    # the recurrence stays finite too (Delta underflows to 0 for very negative logits)
    W = torch.zeros(d + 1, d + 1, dtype=dtype)
    W[:, -1] = model.w.detach().to(dtype)
    O = selective_scan(P, model.W_B.detach().to(dtype), model.W_C.detach().to(dtype), W)
    assert torch.isfinite(O).all()


def test_initialisation_follows_section_2():
    model = OneLayerMamba(30, m=21, delta=0.2, generator=torch.Generator().manual_seed(0))
    assert model.W_B.shape == (21, 31) and model.w.shape == (31,)
    expected = torch.zeros(21, 31)
    expected[range(21), range(21)] = 0.2
    assert torch.equal(model.W_B.detach(), expected) and torch.equal(model.W_C.detach(), expected)
    big = OneLayerMamba(30, m=40)
    assert torch.equal(torch.diagonal(big.W_B.detach())[:30], torch.full((30,), 0.2))
    assert big.W_B.detach()[30, 30] == 0  # only the first d diagonal entries


def test_same_generator_same_model():
    a = OneLayerMamba(10, 5, generator=torch.Generator().manual_seed(7))
    b = OneLayerMamba(10, 5, generator=torch.Generator().manual_seed(7))
    c = OneLayerMamba(10, 5, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a.w, b.w) and not torch.equal(a.w, c.w)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: torch.zeros(2, 5, 7), "last dimension must be d\\+1 = 6"),
        (lambda: torch.zeros(5, 6), "shape \\(batch, l\\+1, d\\+1\\)"),
        (lambda: torch.ones(2, 5, 6), "label entry 0"),
    ],
)
@pytest.mark.parametrize("cls", [OneLayerMamba, OneLayerLinearTransformer])
def test_bad_prompts_raise_clear_errors(cls, make, message):
    model = cls(5, 4)
    with pytest.raises(ConfigError, match=message):
        model(make())


@pytest.mark.parametrize("kwargs, message", [({"d": 0, "m": 3}, "^d must be an integer"),
                                             ({"d": 3, "m": 0}, "^m must be an integer"),
                                             ({"d": 3, "m": 3, "delta": -0.5}, r"^delta must be a real number in \(0"),
                                             ({"d": 3, "m": 3, "delta": 1.5}, r"^delta must be a real number in \(0")])
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        OneLayerMamba(**kwargs)


def test_scan_shape_errors():
    P = torch.zeros(1, 3, 4)
    with pytest.raises(ConfigError, match="^W must have shape"):
        selective_scan(P, torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(3, 3))
    with pytest.raises(ConfigError, match="^W_B must have shape"):
        selective_scan(P, torch.zeros(2, 5), torch.zeros(2, 5), torch.zeros(4, 4))


def test_public_api_names():
    for name in ["selective_scan", "OneLayerMamba", "OneLayerLinearTransformer", "OneLayerMambaMerged", "build_model",
                 "zero_one_error"]:
        assert hasattr(mambaicl, name)


# ---------------------------------------------------------------- Eq. (3) read from the prompts' variables


def _perturbed(kind, seed=0):
    g = torch.Generator().manual_seed(seed)
    model = build_model(kind, 30, generator=g)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


@pytest.mark.parametrize("kind", ["mamba", "mamba_merged", "linear"])
@pytest.mark.parametrize("which", ["train", "test"])
def test_variables_path_equals_materialised_prompts(kind, which):
    """F, attention and logits computed from the prompts' variables equal those of the materialised P."""
    data = DataConfig()
    pat = make_patterns(data, torch.Generator().manual_seed(0))
    if which == "train":
        pr = training_prompts(pat, data, training_tasks(6), 64, np.random.default_rng(1))
    else:
        test = TestConfig(alpha=0.6, rule="C", placement="close", kappa_a_prime=6.0, K_prime=2.0)
        pr = draw_test_prompts(pat, test, all_tasks(6), 64, np.random.default_rng(2))
    model = _perturbed(kind)
    assert (model(pr) - model(pr.P)).abs().max() < 1e-12
    assert (model.attention(pr) - model.attention(pr.P)).abs().max() < 1e-12
    if kind != "linear":
        assert (model.logits(pr) - pr.P @ model.w).abs().max() < 1e-12


def test_basis_lookups_are_the_projections_of_the_materialised_prompts():
    """basis_logits / basis_scores read w^T p_i and p_i^T M p_query from the tables of the token basis; checked
    against P @ w and the bilinear form on the materialised prompts (einsum), single and stacked."""
    from mambaicl.models.pattern_eq3 import attention_table, basis_logits, basis_scores, logit_table

    data = DataConfig()
    pat = make_patterns(data, torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(3)
    w = torch.randn(data.d + 1, generator=g, dtype=torch.float64)
    M = torch.randn(data.d + 1, data.d + 1, generator=g, dtype=torch.float64)
    one = training_prompts(pat, data, training_tasks(6), 16, np.random.default_rng(1))
    b = one.basis()
    assert (basis_logits(logit_table(w[None], b.rows), b)[0] - one.P @ w).abs().max() < 1e-12
    ref = torch.einsum("bld,de,be->bl", one.P, M, one.P[:, -1])
    assert (basis_scores(attention_table(b.rows, M=M[None]), b)[0] - ref).abs().max() < 1e-12
    stacked = training_prompts(pat, data, training_tasks(6), 16, numpy_streams([0, 1], "p"))
    b = stacked.basis()
    W = torch.stack([w, -w])  # (S, d+1)
    assert (basis_logits(logit_table(W, b.rows), b) - torch.einsum("sbld,sd->sbl", stacked.P, W)).abs().max() < 1e-12
    Ms = torch.stack([M, M.T])
    ref = torch.einsum("sbld,sde,sbe->sbl", stacked.P, Ms, stacked.P[:, :, -1])
    assert (basis_scores(attention_table(b.rows, M=Ms), b) - ref).abs().max() < 1e-12


def test_gate_from_logits_is_the_looped_product_along_any_axis():
    from mambaicl.models import gate_from_logits

    x = 4 * torch.randn(3, 2, 9, 5, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    assert (gate_from_logits(x) - gate_loop(x)).abs().max() < 1e-14
    assert (gate_from_logits(x, dim=2) - gate_loop(x.movedim(2, -1)).movedim(-1, 2)).abs().max() < 1e-14


def test_gated_sum_matches_its_autograd_twin():
    g = torch.Generator().manual_seed(9)
    x = (3 * torch.randn(5, 13, generator=g, dtype=torch.float64)).requires_grad_()
    a = torch.randn(5, 13, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.where(torch.rand(5, 13, generator=g) < 0.5, -1.0, 1.0).double()
    F1, F2 = gated_sum(x, a, y), gated_sum_reference(x, a, y)
    assert (F1 - F2).abs().max() < 1e-13
    v = torch.randn(5, generator=g, dtype=torch.float64)
    g1 = torch.autograd.grad((F1 * v).sum(), (x, a))
    g2 = torch.autograd.grad((F2 * v).sum(), (x, a))
    for u, w in zip(g1, g2):
        assert (u - w).abs().max() < 1e-12
    assert torch.autograd.gradcheck(lambda x, a: gated_sum(x, a, y), (x, a))


def test_merged_model_is_mamba_with_w_equal_to_the_product():
    g = torch.Generator().manual_seed(5)
    mamba = _perturbed("mamba", 5)
    merged = build_model("mamba_merged", 30, generator=g)
    init = build_model("mamba", 30, generator=g)
    assert torch.equal(merged.W.detach(), (init.W_B.T @ init.W_C).detach())  # initialised to W_B^(0)T W_C^(0)
    with torch.no_grad():
        merged.W.copy_(mamba.W_B.T @ mamba.W_C)
        merged.w.copy_(mamba.w)
    P = random_prompt(6, 21, 30, g)
    assert (merged(P) - reference_F(P, mamba.W_B.detach(), mamba.W_C.detach(), mamba.w.detach())).abs().max() < 1e-10


def test_stack_members_are_the_single_models():
    stack = build_model("mamba", 30, generators=torch_generators([4, 2], "init"))
    for i, s in enumerate((4, 2)):
        single = build_model("mamba", 30, generator=torch_generator(s, "init"))
        assert torch.equal(stack.member(i).w, single.w) and torch.equal(stack.W_B[i], single.W_B)
    g = torch.Generator().manual_seed(0)
    P = random_prompt(2 * 5, 21, 30, g).view(2, 5, 21, 31)
    F = stack(P)
    for i in range(2):
        assert (F[i] - stack.member(i)(P[i])).abs().max() < 1e-12
    with pytest.raises(ConfigError, match=r"^s must be an integer in \[0, 1\]"):
        stack.member(2)


def test_gate_families_need_a_seed_stack():
    from mambaicl.models import GATE_KINDS

    assert set(GATE_KINDS) >= {"mamba2", "gated_retention", "retnet", "gla"}
    with pytest.raises(ConfigError, match="^kind 'retnet' .* seed stack"):
        build_model("retnet", 30)
    with pytest.raises(ConfigError, match="^gamma must be a real number"):
        build_model("retnet", 30, generators=torch_generators([0], "init"), gamma=-0.5)


# ---------------------------------------------------------------- build_model ignores no keyword

_G = torch.Generator().manual_seed(0)


@pytest.mark.parametrize("call, key, kind", [
    (lambda: build_model("mamba", 30, n_layers=2, m=5), "m", "mamba"),
    (lambda: build_model("mamba1", 8, n_layers=1, delta=0.1), "delta", "mamba1"),
    (lambda: build_model("mamba", 8, n_layers=1, generators=[_G]), "generators", "mamba"),
    (lambda: build_model("linear", 8, n_layers=1, scan="factored"), "scan", "linear"),
    (lambda: build_model("softmax", 8, n_layers=1, expand=2), "expand", "softmax"),
    (lambda: build_model("mamba", 8, generator=_G, generators=[_G]), "generator", "mamba"),
    (lambda: build_model("linear", 8, generator=_G, generators=[_G]), "generator", "linear"),
    (lambda: build_model("retnet", 8, generator=_G, generators=[_G]), "generator", "retnet"),
    (lambda: build_model("gated_retention", 8, generator=_G), "generator", "gated_retention"),
    (lambda: build_model("retnet", 8, generators=[_G], tau=2.0), "tau", "retnet"),
    (lambda: build_model("gla", 8, generators=[_G], gamma=0.9), "gamma", "gla"),
    (lambda: build_model("gated_retention", 8, generators=[_G], a=1.0), "a", "gated_retention"),
    (lambda: build_model("mamba2", 8, generators=[_G], n_heads=2), "n_heads", "mamba2"),
    (lambda: build_model("mamba", 8, tau=1.0), "tau", "mamba"),
    (lambda: build_model("mamba_merged", 8, d_model=16), "d_model", "mamba_merged"),
])
def test_build_model_rejects_keywords_that_do_not_apply(call, key, kind):
    with pytest.raises(ConfigError, match=f"^{key} does not apply to kind '{kind}'"):
        call()


@pytest.mark.parametrize("build", [
    lambda delta: build_model("mamba", 8, delta=delta),
    lambda delta: build_model("linear", 8, generators=[torch.Generator()], delta=delta),
    lambda delta: build_model("retnet", 8, generators=[torch.Generator()], delta=delta),
    lambda delta: build_model("mamba", 8, n_layers=1, delta=delta),
    lambda delta: build_model("softmax", 8, n_layers=1, delta=delta),
])
def test_one_delta_range_for_every_kind(build):
    from mambaicl.models.defaults import DELTA_RANGE

    assert DELTA_RANGE == {"low": 0.0, "high": 1.0, "low_open": True, "high_open": False}
    for ok in (0.05, 0.2, 1.0):
        build(ok)
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ConfigError, match=r"^delta must be a real number in \(0.0, 1.0\]"):
            build(bad)


def test_model_defaults_are_the_configurations():
    from mambaicl.config import DeepConfig, RunConfig

    deep = build_model("mamba", 8, n_layers=1)
    assert deep.d_model == DeepConfig().d_model and len(deep.mixers) == 1
    assert deep.mixers[0].W_B.shape[:2] == (DeepConfig().n_heads, DeepConfig().d_state)
    assert build_model("mamba", 8).delta == RunConfig().delta
    three = build_model("mamba", 8, n_layers=DeepConfig().n_layers)
    same = build_model("mamba", 8, generator=None, **{**DeepConfig().model_kwargs()})
    assert [p.shape for p in three.parameters()] == [p.shape for p in same.parameters()]


def test_check_shapes_binds_symbols_and_names_the_first_mismatch():
    from mambaicl.models.shapes import check_shapes

    P, W_B = torch.zeros(2, 5, 4), torch.zeros(3, 4)
    assert check_shapes(P=(P, "batch L d0"), W_B=(W_B, "m d0")) == {"batch": 2, "L": 5, "d0": 4, "m": 3}
    with pytest.raises(ConfigError, match=r"^W_C must have shape \(m=3, d0=4\); got \(3, 5\)"):
        check_shapes(P=(P, "batch L d0"), W_B=(W_B, "m d0"), W_C=(torch.zeros(3, 5), "m d0"))
    with pytest.raises(ConfigError, match=r"^P must have shape \(batch, L, d0\); got \(5, 4\)"):
        check_shapes(P=(torch.zeros(5, 4), "batch L d0"))


def test_no_model_reads_a_prompt_field_by_name():
    """Models read a prompt batch only through its methods (tokens, labels, basis): changing Definition 1's
    token layout touches mambaicl/data only."""
    import dataclasses
    import pathlib
    import re

    from mambaicl.data import Prompts

    names = [f.name for f in dataclasses.fields(Prompts)] + ["P"]
    pattern = re.compile(r"\b(?:P|pr|prompts)\.(" + "|".join(names) + r")\b")
    for path in sorted(pathlib.Path(mambaicl.models.__file__).parent.glob("*.py")):
        hits = [line for line in path.read_text().splitlines() if pattern.search(line)]
        assert not hits, f"{path.name} reads prompt fields: {hits}"
