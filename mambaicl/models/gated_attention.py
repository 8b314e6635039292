"""The closed form of a one-layer Mamba: linear attention followed by a gate, Eq. (3).

Glossary (code name -> paper symbol):

================  =========================================================
``P``             prompt ``P = (p_1, ..., p_l, p_query)`` token-major, ``(..., l+1, d+1)``
``W_B``, ``W_C``  key / query matrices of the equivalent linear attention, ``(m, d+1)``
``M``             the bilinear form ``W_B^T W_C`` of the attention, ``(d+1, d+1)``
``W``             the same form trained as one matrix ("merged product", Chapter 4)
``w``             gate vector ``w = w_{d0}``, ``(d+1,)``
``logits``        ``w^T p_i`` for every token, ``(..., l+1)``
``attention``     ``p_i^T W_B^T W_C p_query`` for ``i = 1..l+1``, ``(..., l+1)``
``gate``          ``G_{i,l+1}(w)``, ``(..., l+1)``
``F``             ``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T W_B^T W_C p_query``, ``(...)``
``S``             seeds stacked along a leading axis (:class:`OneLayerStack`)
================  =========================================================

The gate is computed in log space, ``log G_i = log sigma(w^T p_i) + sum_{j>i} log(1 -
sigma(w^T p_j))``, with one reverse cumulative sum: O(l) work and no overflow for any
logit. :func:`gate_naive` is the O(l^2) product written exactly as in Eq. (3).
:func:`gated_sum` fuses the gate with the weighted sum and has a hand-written backward pass;
:func:`gated_sum_reference` is its autograd twin.

Every model accepts either a prompt tensor ``P`` or a :class:`mambaicl.data.Prompts` batch. For
the latter, :func:`prompt_logits` and :func:`query_attention` read the projections ``w^T p_i``
and ``p_i^T M p_query`` from tables of the patterns' projections instead of materialising ``P``
(Eq. (4)/(5): a token is a sum of at most three patterns and its label). The models of this
module are the paper's: Implements Eq. (3) of Li et al. (2025).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F_
from torch import nn
from torch.autograd.function import once_differentiable

from ..config import ONE_LAYER_KINDS

__all__ = [
    "check_prompt",
    "bilinear_scores",
    "attention_scores",
    "gate_from_logits",
    "gate_values",
    "gate_naive",
    "gate_grad_w",
    "gated_sum",
    "gated_sum_reference",
    "mamba_output",
    "linear_transformer_output",
    "prompt_logits",
    "query_attention",
    "OneLayerMamba",
    "OneLayerLinearTransformer",
    "OneLayerMambaMerged",
    "OneLayerStack",
    "ONE_LAYER_KINDS",
]



def check_prompt(P: torch.Tensor, d: int | None = None) -> None:
    """Raise a ``ValueError`` unless ``P`` is a batch of prompts in the layout of Eq. (2).

    Args:
        P: ``(..., l+1, d+1)``; the last token is the query and its label entry must be 0.
        d: the data dimension the model expects, or ``None`` to skip that check.
    """
    if not isinstance(P, torch.Tensor):
        raise ValueError(f"P must be a torch.Tensor of shape (batch, l+1, d+1); got {type(P).__name__}")
    if P.dim() < 3:
        raise ValueError(
            f"P must have shape (batch, l+1, d+1) with the query as the last token; got shape {tuple(P.shape)}"
        )
    if d is not None and P.shape[-1] != d + 1:
        raise ValueError(
            f"P's last dimension must be d+1 = {d + 1} (d = {d} features plus the label row); got {P.shape[-1]}"
        )
    if P.shape[-2] < 1:
        raise ValueError("P must contain at least the query token (l+1 >= 1)")
    if torch.any(P[..., -1, -1] != 0):
        raise ValueError(
            "the query (last token of P) must have label entry 0, as in Eq. (2); "
            f"got nonzero label entries in {int((P[..., -1, -1] != 0).sum())} prompt(s)"
        )


# ---------------------------------------------------------------- Eq. (3) on a prompt tensor


def _per_prompt(v: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """Give a per-model vector ``v`` ``(..., D)`` the prompt batch axis of ``P``: ``(..., 1, D)`` if stacked."""
    return v if v.dim() == 1 else v.unsqueeze(-2)


def bilinear_scores(P: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """``p_i^T M p_query`` for every token, ``(..., l+1)``; ``M`` is ``(D, D)`` or stacked ``(S, D, D)``."""
    query = P[..., -1, :]  # (..., D)
    v = query @ M.transpose(-1, -2)  # (..., D): M p_query (batched over a leading seed axis if M is stacked)
    return (P @ v.unsqueeze(-1)).squeeze(-1)  # (..., l+1)


def attention_scores(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor) -> torch.Tensor:
    """Linear-attention scores ``p_i^T W_B^T W_C p_query`` of Eq. (3), ``(..., l+1)``."""
    return bilinear_scores(P, W_B.transpose(-1, -2) @ W_C)


def gate_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """``G_i = sigma(x_i) prod_{j>i} (1 - sigma(x_j))`` from logits ``x`` ``(..., L)``, in log space, O(L)."""
    log_keep = F_.logsigmoid(-logits)  # (..., L): log(1 - sigma(x_j))
    # suffix sums sum_{j>i} log_keep[j], by a reverse cumsum without subtraction
    suffix = torch.flip(torch.cumsum(torch.flip(log_keep, dims=[-1]), dim=-1), dims=[-1])  # j >= i
    after = torch.cat([suffix[..., 1:], torch.zeros_like(suffix[..., :1])], dim=-1)  # j > i
    return torch.exp(F_.logsigmoid(logits) + after)  # (..., L)


def gate_values(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gate ``G_{i,l+1}(w)`` of Eq. (3) in O(l), computed in log space, ``(..., l+1)``.

    ``G_i = sigma(w^T p_i) prod_{j=i+1}^{l+1} (1 - sigma(w^T p_j))``; for the query
    (``i = l+1``) the product is empty and ``G = sigma(w^T p_query)``.
    """
    logits = (P @ _per_prompt(w, P).unsqueeze(-1)).squeeze(-1)  # (..., l+1): w^T p_i
    return gate_from_logits(logits)


def gate_naive(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gate of Eq. (3) as the literal O(l^2) product; the plain twin of :func:`gate_values`."""
    sig = torch.sigmoid((P @ _per_prompt(w, P).unsqueeze(-1)).squeeze(-1))  # (..., L)
    L = sig.shape[-1]
    later = torch.triu(torch.ones(L, L, dtype=torch.bool, device=P.device), diagonal=1)  # (i, j): j > i
    factors = torch.where(later, 1 - sig.unsqueeze(-2), torch.ones_like(sig).unsqueeze(-2))  # (..., i, j)
    return sig * torch.prod(factors, dim=-1)  # (..., L)


def gate_grad_w(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Analytic ``dG_i/dw`` from the proof of Lemma 4 (App. 11.3), ``(batch, l+1, d+1)``.

    ``dG_i/dw = G_i ((1 - sigma_i) p_i - sum_{s>i} sigma_s p_s)``. The proof of Lemma 4
    writes ``G_i (sum_{s>i} sigma_s p_s - (1 - sigma_i) p_i)``, which is the same vector with
    the opposite sign: it enters ``d loss / dw = -z dF/dw``.
    """
    sig = torch.sigmoid(P @ w)  # (batch, L)
    G = gate_values(P, w)  # (batch, L)
    weighted = sig.unsqueeze(-1) * P  # (batch, L, d+1): sigma_s p_s
    suffix = torch.flip(torch.cumsum(torch.flip(weighted, dims=[1]), dim=1), dims=[1])  # sum_{s>=i}
    after = suffix - weighted  # (batch, L, d+1): sum_{s>i}
    return G.unsqueeze(-1) * ((1 - sig).unsqueeze(-1) * P - after)  # (batch, L, d+1)


class _GatedSum(torch.autograd.Function):
    """``F = sum_i G_i(x) y_i a_i`` with the gate of Eq. (3); backward written out (see :func:`gated_sum`)."""

    @staticmethod
    def forward(ctx, logits, att, y):
        log_sig = F_.logsigmoid(logits)  # (..., L): log sigma_i
        log_keep = log_sig - logits  # log(1 - sigma_i), exact
        suffix = torch.flip(torch.cumsum(torch.flip(log_keep, [-1]), -1), [-1])  # sum_{j>=i}
        after = torch.cat([suffix[..., 1:], torch.zeros_like(suffix[..., :1])], -1)  # sum_{j>i}
        G = torch.exp(log_sig + after)  # (..., L)
        Gy = G * y
        c = Gy * att  # (..., L): each token's vote
        ctx.save_for_backward(log_sig, Gy, c)
        return c.sum(-1)

    @staticmethod
    @once_differentiable
    def backward(ctx, gF):
        log_sig, Gy, c = ctx.saved_tensors
        g = gF.unsqueeze(-1)
        g_logits = g_att = None
        if ctx.needs_input_grad[0]:
            sig = torch.exp(log_sig)
            before = torch.cumsum(c, -1) - c  # sum_{i<k} c_i
            g_logits = g * (c - sig * (c + before))  # c_k (1 - sigma_k) - sigma_k sum_{i<k} c_i
        if ctx.needs_input_grad[1]:
            g_att = g * Gy
        return g_logits, g_att, None


def gated_sum(logits: torch.Tensor, att: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``F = sum_i G_{i,L}(x) y_i a_i`` (Eq. (3) given the logits ``x_i = w^T p_i`` and scores ``a_i``), ``(...)``.

    Fused forward and a hand-written backward:
    ``dF/da_i = G_i y_i`` and ``dF/dx_k = c_k (1 - sigma_k) - sigma_k sum_{i<k} c_i`` with
    ``c_i = G_i y_i a_i``. Same signature and output as :func:`gated_sum_reference`.
    """
    return _GatedSum.apply(logits, att, y)


def gated_sum_reference(logits: torch.Tensor, att: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Plain twin of :func:`gated_sum`: the gate of :func:`gate_from_logits` and autograd."""
    return (gate_from_logits(logits) * y * att).sum(-1)


def mamba_output(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``F(Psi; P)`` of Eq. (3): gated linear attention read at the query, ``(...)``."""
    y = P[..., -1]  # (..., l+1): labels, 0 at the query
    return (gate_values(P, w) * y * attention_scores(P, W_B, W_C)).sum(dim=-1)


def linear_transformer_output(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor) -> torch.Tensor:
    """Eq. (3) with ``G = 1``: the one-layer single-head linear Transformer of Section 3.4."""
    return (P[..., -1] * attention_scores(P, W_B, W_C)).sum(dim=-1)


# ---------------------------------------------------------------- Eq. (3) on the prompts' variables


def _take(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``out[s, ...] = table[s, index[s, ...]]`` for a table ``(S, n)`` and index ``(S, ...)``."""
    return table.gather(1, index.reshape(index.shape[0], -1)).view(index.shape)


def prompt_logits(pr, w: torch.Tensor) -> torch.Tensor:
    """``w^T p_i`` for every token of stacked prompts ``pr`` ``(S, batch, ...)``, ``(S, batch, l+1)``.

    ``w`` is ``(S, d+1)``. By Eq. (4)/(5), ``w^T p_i = w^T mu_{j_i} + kappa_i w^T nu_{k_i} +
    c_i w^T v_{s_i} + y_i w_{d+1}``: three look-ups in tables of the patterns' projections.
    """
    d, l = pr.mu.shape[-1], pr.l
    wx = w[:, :d]  # (S, d)
    out = _take(wx @ pr.mu.T, pr.relevant) + pr.kappa * _take(wx @ pr.nu.T, pr.irrelevant)  # (S, B, L)
    out = out + pr.y * w[:, d, None, None]
    head = out[..., :l] + pr.outlier_scale * _take(wx @ pr.outliers.T, pr.outlier_index)
    return torch.cat([head, out[..., l:]], dim=-1)


def query_attention(pr, M: torch.Tensor) -> torch.Tensor:
    """``p_i^T M p_query`` for every token of stacked prompts ``pr``, ``(S, batch, l+1)``; ``M`` is ``(S, D, D)``.

    The query has no outlier and label 0, so ``u = M (x_query; 0)`` is a sum of two rows of
    the tables ``mu M^T``, ``nu M^T``; then ``p_i^T u`` is read like :func:`prompt_logits`.
    """
    d, l = pr.mu.shape[-1], pr.l
    S, B = pr.relevant.shape[:2]
    Mx = M[..., :d]  # (S, D, d): acts on x_query
    A_mu, A_nu = pr.mu @ Mx.transpose(1, 2), pr.nu @ Mx.transpose(1, 2)  # (S, M1, D), (S, M2, D)
    D = M.shape[-1]
    j_q, k_q = pr.relevant[..., -1], pr.irrelevant[..., -1]  # (S, B)
    u = A_mu.gather(1, j_q.unsqueeze(-1).expand(S, B, D)) \
        + pr.kappa[..., -1:] * A_nu.gather(1, k_q.unsqueeze(-1).expand(S, B, D))  # (S, B, D): M p_query
    ux = u[..., :d]  # (S, B, d)
    att = (ux @ pr.mu.T).gather(2, pr.relevant) + pr.kappa * (ux @ pr.nu.T).gather(2, pr.irrelevant)
    att = att + pr.y * u[..., d:]
    head = att[..., :l] + pr.outlier_scale * (ux @ pr.outliers.T).gather(2, pr.outlier_index)
    return torch.cat([head, att[..., l:]], dim=-1)  # (S, B, L)


# ---------------------------------------------------------------- the models


def _diagonal_init(m: int, d: int, delta: float) -> torch.Tensor:
    """``(m, d+1)`` matrix whose first ``min(m, d)`` diagonal entries are ``delta``, zero elsewhere."""
    W = torch.zeros(m, d + 1, dtype=torch.float64)
    k = min(m, d)
    W[torch.arange(k), torch.arange(k)] = delta
    return W


def _check_dims(d, m, delta) -> None:
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"d must be a positive integer (the data dimension); got {d!r}")
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be a positive integer (the state size); got {m!r}")
    if not (isinstance(delta, (int, float)) and not isinstance(delta, bool) and 0 < delta < float("inf")):
        raise ValueError(f"delta must be a positive finite number (Section 2 uses (0, 0.2]); got {delta!r}")


def _gate_init(d: int, generator: torch.Generator | None, dtype: torch.dtype) -> torch.Tensor:
    """``w^(0) ~ N(0, I_{d+1}/(d+1))`` (Section 2), drawn in float64 on the generator's device."""
    device = generator.device if generator is not None else "cpu"
    w = torch.randn(d + 1, generator=generator, dtype=torch.float64, device=device) / (d + 1) ** 0.5
    return w.to(dtype=dtype, device="cpu")


class _Eq3:
    """``attention``, ``logits``, ``gate`` and ``forward`` of Eq. (3), for one model or a seed stack.

    Works on a prompt tensor ``(..., l+1, d+1)`` or a :class:`mambaicl.data.Prompts` batch; a stack
    (``stacked = True``) has parameters with a leading seed axis and prompts ``(S, batch, ...)``.
    Needs ``d``, ``gated``, ``bilinear(dtype)`` and (gated) ``w``.
    """

    stacked = False

    def _ref(self, P) -> torch.Tensor:
        """A tensor with the prompts' dtype, device and ``(..., l+1)`` shape; checks a prompt tensor."""
        if isinstance(P, torch.Tensor):
            check_prompt(P, self.d)
            return P[..., -1]
        return P.kappa

    def _coded(self, fn, P, param: torch.Tensor) -> torch.Tensor:
        """``fn(prompts, param)`` of the variables path, adding and removing a seed axis for one model."""
        return fn(P, param) if self.stacked else fn(P[None], param[None])[0]

    def attention(self, P) -> torch.Tensor:
        """``p_i^T M p_query`` for every token, ``(..., l+1)``."""
        ref = self._ref(P)
        M = self.bilinear(ref.dtype).to(ref.device)
        return bilinear_scores(P, M) if isinstance(P, torch.Tensor) else self._coded(query_attention, P, M)

    def logits(self, P) -> torch.Tensor:
        """``w^T p_i`` for every token, ``(..., l+1)`` (gated kinds only)."""
        ref = self._ref(P)
        w = self.w.to(dtype=ref.dtype, device=ref.device)
        if isinstance(P, torch.Tensor):
            return P @ w if w.dim() == 1 else (P @ w[:, None, :, None]).squeeze(-1)
        return self._coded(prompt_logits, P, w)

    def gate(self, P) -> torch.Tensor:
        """``G_{i,l+1}(w)`` for every token, ``(..., l+1)``; sums to at most 1 (ones if ungated)."""
        if not self.gated:
            return torch.ones_like(self._ref(P))
        return gate_from_logits(self.logits(P))

    def forward(self, P) -> torch.Tensor:
        """``F(Psi; P)`` of Eq. (3), the query being the last token: ``(batch,)``, or ``(S, batch)`` for a stack."""
        y = P[..., -1] if isinstance(P, torch.Tensor) else P.y
        att = self.attention(P)
        return gated_sum(self.logits(P), att, y) if self.gated else (y * att).sum(-1)


class _OneLayer(_Eq3, nn.Module):
    """A one-layer model of Eq. (3): ``kind`` in :data:`ONE_LAYER_KINDS`; subclasses hold the parameters.

    Parameters are stored in the default dtype; every method computes in the input's dtype and
    on its device. ``forward`` takes a prompt tensor ``(batch, l+1, d+1)`` or a
    :class:`mambaicl.data.Prompts` batch and returns ``F`` ``(batch,)``.
    """

    kind: str = ""
    gated: bool = True

    def __init__(self, d: int, m: int, delta: float) -> None:
        super().__init__()
        _check_dims(d, m, delta)
        self.d, self.m, self.delta = d, m, float(delta)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError


class _Factored(_OneLayer):
    """``W_B``, ``W_C`` ``(m, d+1)`` with Section 2's initialisation; the attention form is their product."""

    def __init__(self, d: int, m: int, delta: float = 0.2, dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta)
        dtype = dtype or torch.get_default_dtype()
        self.W_B = nn.Parameter(_diagonal_init(m, d, delta).to(dtype))  # (m, d+1)
        self.W_C = nn.Parameter(_diagonal_init(m, d, delta).to(dtype))  # (m, d+1)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``W_B^T W_C``, ``(d+1, d+1)``, computed in ``dtype`` (default: the parameters')."""
        return self.W_B.to(dtype or self.W_B.dtype).T @ self.W_C.to(dtype or self.W_C.dtype)


class OneLayerMamba(_Factored):
    """One-layer Mamba in the closed form of Eq. (3) of Li et al. (2025).

    Args:
        d: data dimension; tokens have ``d+1`` entries (features and label).
        m: state size (rows of ``W_B`` and ``W_C``).
        delta: the first ``d`` diagonal entries of ``W_B`` and ``W_C`` at initialisation.
        generator: ``torch.Generator`` for ``w ~ N(0, I/(d+1))``; the default generator if ``None``.

    Parameters ``W_B``, ``W_C`` ``(m, d+1)`` and ``w`` ``(d+1,)``.
    """

    kind = "mamba"

    def __init__(self, d: int, m: int, delta: float = 0.2, generator: torch.Generator | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta, dtype)
        self.w = nn.Parameter(_gate_init(d, generator, self.W_B.dtype))  # (d+1,)


class OneLayerLinearTransformer(_Factored):
    """One-layer single-head linear Transformer: Eq. (3) with ``G_{i,l+1} = 1`` (Section 3.4).

    ``OneLayerLinearTransformer(d, m, delta=0.2)``: parameters ``W_B``, ``W_C`` ``(m, d+1)``.
    """

    kind = "linear"
    gated = False


class OneLayerMambaMerged(_OneLayer):
    """One-layer Mamba whose attention form ``W = W_B^T W_C`` is trained as one matrix ("merged product").

    ``F = sum_i G_{i,l+1}(w) y_i p_i^T W p_query`` with ``W`` ``(d+1, d+1)`` initialised to
    ``W_B^(0)T W_C^(0)`` (``delta^2`` on the first ``d`` diagonal entries), the same gate and the
    same Algorithm 1. Not the paper's parametrisation: Chapter 4 compares the two.
    """

    kind = "mamba_merged"

    def __init__(self, d: int, m: int, delta: float = 0.2, generator: torch.Generator | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta)
        dtype = dtype or torch.get_default_dtype()
        init = _diagonal_init(m, d, delta).to(dtype)
        self.W = nn.Parameter(init.T @ init)  # (d+1, d+1): W_B^(0)T W_C^(0)
        self.w = nn.Parameter(_gate_init(d, generator, dtype))  # (d+1,)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``W``, ``(d+1, d+1)``, in ``dtype`` (default: the parameter's)."""
        return self.W.to(dtype or self.W.dtype)


_CLASSES = {"mamba": OneLayerMamba, "mamba_merged": OneLayerMambaMerged, "linear": OneLayerLinearTransformer}


class OneLayerStack(_Eq3, nn.Module):
    """``S`` independent one-layer models of one kind, their parameters stacked along a seed axis.

    Training the stack on the sum over seeds of each seed's mean loss gives every seed exactly
    its own gradient, so SGD (or Adam) on the stack equals training each seed alone, up to
    floating-point rounding; one batched computation replaces ``S``.

    Args:
        kind: ``"mamba"``, ``"mamba_merged"`` or ``"linear"``.
        d, m, delta: as for :class:`OneLayerMamba`.
        generators: one ``torch.Generator`` per seed for ``w^(0)`` (gated kinds; ignored otherwise).

    ``forward`` takes stacked prompts (a ``(S, batch, l+1, d+1)`` tensor or a ``(S, batch, ...)``
    :class:`mambaicl.data.Prompts`) and returns ``F`` ``(S, batch)``; :meth:`member` returns seed
    ``s`` as a single model.
    """

    stacked = True

    def __init__(self, kind: str, d: int, m: int, delta: float, generators, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if kind not in _CLASSES:
            raise ValueError(f"kind must be one of {ONE_LAYER_KINDS}; got {kind!r}")
        generators = list(generators)
        if not generators:
            raise ValueError("generators must hold one torch.Generator per seed (at least one)")
        self.kind, self.d, self.m, self.delta = kind, d, m, float(delta)
        self.gated = _CLASSES[kind].gated
        self._dtype = dtype or torch.get_default_dtype()
        members = [self._single(g) for g in generators]
        for name, _ in members[0].named_parameters():
            self.register_parameter(name, nn.Parameter(torch.stack([dict(mm.named_parameters())[name].detach()
                                                                    for mm in members])))

    def _single(self, generator=None) -> _OneLayer:
        cls = _CLASSES[self.kind]
        dtype = next(self.parameters()).dtype if len(list(self.parameters())) else self._dtype
        return cls(self.d, self.m, self.delta, dtype=dtype) if cls is OneLayerLinearTransformer else \
            cls(self.d, self.m, self.delta, generator=generator, dtype=dtype)

    @property
    def n_seeds(self) -> int:
        return next(self.parameters()).shape[0]

    def member(self, s: int) -> _OneLayer:
        """Seed ``s`` as a single model of the same kind (a copy of its parameters)."""
        if not 0 <= s < self.n_seeds:
            raise ValueError(f"s must lie in [0, {self.n_seeds}); got {s!r}")
        ref = next(self.parameters())
        model = self._single(torch.Generator().manual_seed(0))
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(getattr(self, name)[s])
        return model.to(ref.device)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The attention form of every seed, ``(S, d+1, d+1)``, computed in ``dtype``."""
        if self.kind == "mamba_merged":
            return self.W.to(dtype or self.W.dtype)
        return self.W_B.to(dtype or self.W_B.dtype).transpose(1, 2) @ self.W_C.to(dtype or self.W_C.dtype)
