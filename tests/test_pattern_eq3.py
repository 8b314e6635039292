"""The fused Eq. (3) kernel in pattern coordinates (mambaicl.models.pattern_eq3) against independent computations:
the autograd formula on materialised prompts (``mamba_output``), ``gradcheck`` of the hand-written backward,
and the attention table by its definition."""
import pytest
import torch

from mambaicl.config import DataConfig
from mambaicl.data import make_patterns, training_prompts, training_tasks
from mambaicl.models import OneLayerMamba, OneLayerMambaMerged, OneLayerStack, mamba_output
from mambaicl.models.pattern_eq3 import attention_table, logit_table, pattern_gated_sum
from mambaicl.seeding import numpy_streams, torch_generators

DATA = DataConfig(d=14, M1=4, M2=5, V=3, l_tr=7, p_a=0.5)


def _prompts(S: int | None, batch: int = 6):
    pat = make_patterns(DATA, torch.Generator().manual_seed(0))
    gens = numpy_streams(range(S or 1), "train")
    pr = training_prompts(pat, DATA, training_tasks(DATA.M1), batch, gens if S else gens[0])
    assert bool(pr.outlier.any())  # the outlier look-ups are exercised
    return pr


def _perturbed(model):
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


@pytest.mark.parametrize("kind", ["mamba", "mamba_merged"])
def test_stack_on_prompts_matches_the_formula_on_materialised_prompts(kind):
    """F and every parameter's gradient of a seed stack equal mamba_output (autograd, Eq. (3) as written) per seed."""
    pr = _prompts(3)
    stack = _perturbed(OneLayerStack(kind, DATA.d, 13, 0.3, torch_generators(range(3), "init"), dtype=torch.float64))
    F = stack(pr)  # the fused kernel
    grads = torch.autograd.grad((F * torch.linspace(-1, 2, F.numel()).view_as(F)).sum(), list(stack.parameters()))
    for s in range(3):
        one = stack.member(s)
        params = dict(one.named_parameters())
        eye = torch.eye(DATA.d + 1, dtype=torch.float64)
        W_B, W_C = (params["W_B"], params["W_C"]) if kind == "mamba" else (eye, params["W"])  # W = I^T W
        ref = mamba_output(pr[s].P, W_B, W_C, params["w"])
        assert (F[s] - ref).abs().max() < 1e-12
        weights = torch.linspace(-1, 2, F.numel()).view_as(F)[s]
        ref_grads = torch.autograd.grad((ref * weights).sum(), list(params.values()))
        for name, g, r in zip(params, grads, ref_grads):
            assert (g[s] - r).abs().max() < 1e-11, name


@pytest.mark.parametrize("cls", [OneLayerMamba, OneLayerMambaMerged])
def test_single_model_on_prompts_matches_the_prompt_tensor(cls):
    pr = _prompts(None)
    model = _perturbed(cls(DATA.d, 13, 0.3, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    F = model(pr)
    assert F.shape == (6,)
    ref = model(pr.P)  # the tensor path: gated_sum on bilinear scores and logits
    assert (F - ref).abs().max() < 1e-12
    g = torch.autograd.grad(F.sum(), list(model.parameters()))
    r = torch.autograd.grad(ref.sum(), list(model.parameters()))
    assert all((a - b).abs().max() < 1e-11 for a, b in zip(g, r))


def test_attention_table_by_its_definition():
    """Q[b, a] = e_a^T W_B^T W_C e_b with e_a over (mu; 0), (nu; 0), (v; 0), (0; 1); T[a] = w^T e_a."""
    pat = make_patterns(DATA, torch.Generator().manual_seed(0))
    rows = torch.cat([pat.mu, pat.nu, pat.v])  # (n, d)
    D = DATA.d + 1
    basis = torch.zeros(rows.shape[0] + 1, D, dtype=torch.float64)
    basis[:-1, :-1], basis[-1, -1] = rows, 1.0
    g = torch.Generator().manual_seed(2)
    W_B, W_C = (torch.randn(2, 9, D, generator=g, dtype=torch.float64) for _ in range(2))
    M = W_B.transpose(1, 2) @ W_C
    want = torch.einsum("ad,sde,be->sba", basis, M, basis)
    assert (attention_table(rows, W_B=W_B, W_C=W_C) - want).abs().max() < 1e-12
    assert (attention_table(rows, M=M) - want).abs().max() < 1e-12
    w = torch.randn(2, D, generator=g, dtype=torch.float64)
    assert (logit_table(w, rows) - torch.einsum("ad,sd->sa", basis, w)).abs().max() < 1e-12


def test_token_basis_rebuilds_the_prompts():
    """sum_k coef_k e_{index_k} is the materialised prompt P of Eq. (2), token by token."""
    pr = _prompts(2, batch=5)
    b = pr.basis()
    D = DATA.d + 1
    E = torch.zeros(b.rows.shape[0] + 1, D, dtype=b.rows.dtype)
    E[:-1, :-1], E[-1, -1] = b.rows, 1.0
    rebuilt = (b.coef.unsqueeze(-1) * E[b.index]).sum(-2)  # (S, B, L, D)
    assert (rebuilt - pr.P).abs().max() < 1e-12
    assert torch.equal(b.coef[..., -1], pr.y)  # the last term is the label


def test_pattern_gated_sum_gradcheck():
    """The compiled backward against finite differences (float64) for the tables T and Q."""
    pr = _prompts(2, batch=3)
    b = pr.basis()
    g = torch.Generator().manual_seed(3)
    n1 = b.rows.shape[0] + 1
    T = torch.randn(2, n1, generator=g, dtype=torch.float64, requires_grad=True)
    R = torch.randn(2, n1, n1, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda T, R: pattern_gated_sum(T, R, b), (T, R))


def test_large_logits_give_finite_gates_and_outputs():
    """Logits of +-800 (exp overflows) leave F and its gradients finite: sigma and 1 - sigma come from one exp."""
    pr = _prompts(1, batch=4)
    b = pr.basis()
    n1 = b.rows.shape[0] + 1
    T = torch.full((1, n1), 800.0, dtype=torch.float64, requires_grad=True)
    T2 = torch.full((1, n1), -800.0, dtype=torch.float64, requires_grad=True)
    R = torch.ones(1, n1, n1, dtype=torch.float64, requires_grad=True)
    for t in (T, T2):
        F = pattern_gated_sum(t, R, b)
        gT, gR = torch.autograd.grad(F.sum(), (t, R))
        assert torch.isfinite(F).all() and torch.isfinite(gT).all() and torch.isfinite(gR).all()


def test_token_basis_compiled_pass_equals_its_tensor_twin():
    """Prompts.basis's one compiled pass gives the bytes of its plain tensor operations (plain_kernels), for training
    and test prompts, float64 and float32, a seed-indexed view and a slice of the batch."""
    from mambaicl.device import plain_kernels

    from mambaicl.config import TestConfig
    from mambaicl.data import all_tasks, test_prompts

    pr = _prompts(3, batch=7)
    pat = make_patterns(DATA, torch.Generator().manual_seed(0))
    te = test_prompts(pat, TestConfig(alpha=0.6, rule="B"), all_tasks(DATA.M1), 5, numpy_streams(range(2), "test"))
    cases = [pr, pr.to_dtype(torch.float32), pr[1], pr[:, 2:5], te]
    for case in cases:
        fast = case.basis()
        with plain_kernels():
            plain = case.basis()
        assert torch.equal(fast.index, plain.index) and fast.index.dtype == plain.index.dtype
        assert torch.equal(fast.coef, plain.coef) and fast.coef.dtype == plain.coef.dtype
        assert torch.equal(fast.rows, plain.rows)


@pytest.mark.parametrize("kind", ["linear"])
def test_ungated_stack_compiled_equals_its_plain_twin_and_the_prompt_tensor(kind):
    """A linear-attention stack on a prompt batch: the compiled ungated sum (pattern_sum) against the look-ups in
    PyTorch (device.plain_kernels(), what a GPU runs) and the formula on materialised prompts, values and gradients."""
    from reference_kernels import three_paths

    pr = _prompts(3)
    stack = _perturbed(OneLayerStack(kind, DATA.d, 13, 0.3, torch_generators(range(3), "init"), dtype=torch.float64))
    weights = torch.linspace(-1, 2, 3 * 6).view(3, 6).double()
    (F, g), (F_plain, g_plain), (F_tensor, g_tensor) = three_paths(stack, pr, weights)
    for ref, ref_g in ((F_plain, g_plain), (F_tensor, g_tensor)):
        assert (F - ref).abs().max() < 1e-12
        assert all((a - b).abs().max() < 1e-11 for a, b in zip(g, ref_g))


def test_pattern_scores_equals_its_plain_twin_and_the_prompt_tensor():
    """The compiled scores (one pass, written-out backward) against the PyTorch look-ups (basis_scores, under
    device.plain_kernels(), what a GPU runs) and the bilinear form on materialised prompts: values and gradients."""
    from mambaicl.device import plain_kernels

    pr = _prompts(3)
    stack = _perturbed(OneLayerStack("mamba", DATA.d, 13, 0.3, torch_generators(range(3), "init"), dtype=torch.float64))
    weights = torch.linspace(-1, 2, 3 * 6 * (DATA.l_tr + 1)).view(3, 6, -1).double()
    params = [stack.W_B, stack.W_C]
    att = stack.attention(pr)
    g = torch.autograd.grad((att * weights).sum(), params)
    with plain_kernels():
        att_plain = stack.attention(pr)
    g_plain = torch.autograd.grad((att_plain * weights).sum(), params)
    att_tensor = stack.attention(pr.P)
    assert att.shape == att_plain.shape == (3, 6, DATA.l_tr + 1)
    assert (att - att_plain).abs().max() <= 1e-13 * att_plain.abs().max()
    assert (att - att_tensor).abs().max() <= 1e-12 * att_tensor.abs().max()
    for a, b in zip(g, g_plain):
        assert (a - b).abs().max() <= 1e-11 * b.abs().max()


@pytest.mark.parametrize("name", ["pattern_sum", "pattern_scores"])
def test_table_look_ups_gradcheck(name):
    """The ungated sum's and the scores' compiled backward against finite differences (float64) for the table Q."""
    from mambaicl.models import pattern_eq3

    pr = _prompts(2, batch=3)
    b = pr.basis()
    n1 = b.rows.shape[0] + 1
    R = torch.randn(2, n1, n1, generator=torch.Generator().manual_seed(4), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda R: getattr(pattern_eq3, name)(R, b), (R,))
