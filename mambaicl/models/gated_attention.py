"""The closed form of a one-layer Mamba: linear attention followed by a gate, Eq. (3).

Glossary (code name -> paper symbol):

================  =========================================================
``P``             prompt ``P = (p_1, ..., p_l, p_query)`` token-major, ``(batch, l+1, d+1)``
``W_B``, ``W_C``  key / query matrices of the equivalent linear attention, ``(m, d+1)``
``w``             gate vector ``w = w_{d0}``, ``(d+1,)``
``attention``     ``p_i^T W_B^T W_C p_query`` for ``i = 1..l+1``, ``(batch, l+1)``
``gate``          ``G_{i,l+1}(w)``, ``(batch, l+1)``
``F``             ``F(Psi; P) = sum_i G_{i,l+1}(w) y_i p_i^T W_B^T W_C p_query``, ``(batch,)``
================  =========================================================

The gate is computed in log space, ``log G_i = log sigma(w^T p_i) + sum_{j>i} log(1 -
sigma(w^T p_j))``, with one reverse cumulative sum: O(l) work and no overflow for any
logit. :func:`gate_naive` is the O(l^2) product written exactly as in Eq. (3).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F_
from torch import nn

__all__ = [
    "check_prompt",
    "attention_scores",
    "gate_values",
    "gate_naive",
    "gate_grad_w",
    "mamba_output",
    "linear_transformer_output",
    "OneLayerMamba",
    "OneLayerLinearTransformer",
]


def check_prompt(P: torch.Tensor, d: int | None = None) -> None:
    """Raise a ``ValueError`` unless ``P`` is a batch of prompts in the layout of Eq. (2).

    Args:
        P: ``(batch, l+1, d+1)``; the last token is the query and its label entry must be 0.
        d: the data dimension the model expects, or ``None`` to skip that check.
    """
    if not isinstance(P, torch.Tensor):
        raise ValueError(f"P must be a torch.Tensor of shape (batch, l+1, d+1); got {type(P).__name__}")
    if P.dim() != 3:
        raise ValueError(
            f"P must have shape (batch, l+1, d+1) with the query as the last token; got shape {tuple(P.shape)}"
        )
    if d is not None and P.shape[-1] != d + 1:
        raise ValueError(
            f"P's last dimension must be d+1 = {d + 1} (d = {d} features plus the label row); "
            f"got {P.shape[-1]}"
        )
    if P.shape[1] < 1:
        raise ValueError("P must contain at least the query token (l+1 >= 1)")
    if torch.any(P[:, -1, -1] != 0):
        raise ValueError(
            "the query (last token of P) must have label entry 0, as in Eq. (2); "
            f"got nonzero label entries in {int((P[:, -1, -1] != 0).sum())} prompt(s)"
        )


def attention_scores(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor) -> torch.Tensor:
    """Linear-attention scores ``p_i^T W_B^T W_C p_query`` of Eq. (3), ``(batch, l+1)``."""
    query = P[:, -1]  # (batch, d+1)
    v = query @ W_C.T @ W_B  # (batch, d+1): (W_B^T W_C p_query)^T
    return torch.einsum("bld,bd->bl", P, v)  # (batch, l+1)


def gate_values(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gate ``G_{i,l+1}(w)`` of Eq. (3) in O(l), computed in log space, ``(batch, l+1)``.

    ``G_i = sigma(w^T p_i) prod_{j=i+1}^{l+1} (1 - sigma(w^T p_j))``; for the query
    (``i = l+1``) the product is empty and ``G = sigma(w^T p_query)``.
    """
    logits = P @ w  # (batch, l+1): w^T p_i
    log_keep = F_.logsigmoid(-logits)  # (batch, l+1): log(1 - sigma(w^T p_j))
    # suffix sums sum_{j>i} log_keep[j], by a reverse cumsum without subtraction
    suffix = torch.flip(torch.cumsum(torch.flip(log_keep, dims=[1]), dim=1), dims=[1])  # (batch, l+1), j >= i
    after = torch.cat([suffix[:, 1:], torch.zeros_like(suffix[:, :1])], dim=1)  # (batch, l+1), j > i
    return torch.exp(F_.logsigmoid(logits) + after)  # (batch, l+1)


def gate_naive(P: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Gate of Eq. (3) as the literal O(l^2) product; the plain twin of :func:`gate_values`."""
    sig = torch.sigmoid(P @ w)  # (batch, L)
    L = sig.shape[1]
    later = torch.triu(torch.ones(L, L, dtype=torch.bool, device=P.device), diagonal=1)  # (i, j): j > i
    factors = torch.where(later, 1 - sig.unsqueeze(1), torch.ones_like(sig).unsqueeze(1))  # (batch, i, j)
    return sig * torch.prod(factors, dim=2)  # (batch, L)


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


def mamba_output(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``F(Psi; P)`` of Eq. (3): gated linear attention read at the query, ``(batch,)``."""
    y = P[:, :, -1]  # (batch, l+1): labels, 0 at the query
    return (gate_values(P, w) * y * attention_scores(P, W_B, W_C)).sum(dim=1)  # (batch,)


def linear_transformer_output(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor) -> torch.Tensor:
    """Eq. (3) with ``G = 1``: the one-layer single-head linear Transformer of Section 3.4."""
    y = P[:, :, -1]  # (batch, l+1)
    return (y * attention_scores(P, W_B, W_C)).sum(dim=1)  # (batch,)


def _diagonal_init(m: int, d: int, delta: float) -> torch.Tensor:
    """``(m, d+1)`` matrix whose first ``min(m, d)`` diagonal entries are ``delta``, zero elsewhere."""
    W = torch.zeros(m, d + 1, dtype=torch.float64)
    k = min(m, d)
    W[torch.arange(k), torch.arange(k)] = delta
    return W


class _GatedAttentionBase(nn.Module):
    """Shared parameters ``W_B``, ``W_C`` and the checks on ``P``."""

    def __init__(self, d: int, m: int, delta: float = 0.2) -> None:
        super().__init__()
        if not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive integer (the data dimension); got {d!r}")
        if not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be a positive integer (the state size); got {m!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < float("inf")):
            raise ValueError(f"delta must be a positive finite number (Section 2 uses (0, 0.2]); got {delta!r}")
        self.d, self.m, self.delta = d, m, float(delta)
        dtype = torch.get_default_dtype()
        self.W_B = nn.Parameter(_diagonal_init(m, d, delta).to(dtype))  # (m, d+1)
        self.W_C = nn.Parameter(_diagonal_init(m, d, delta).to(dtype))  # (m, d+1)

    def _params_like(self, P: torch.Tensor) -> tuple[torch.Tensor, ...]:
        check_prompt(P, self.d)
        return tuple(p.to(dtype=P.dtype, device=P.device) for p in self._param_list())

    def _param_list(self) -> list[torch.Tensor]:
        return [self.W_B, self.W_C]

    def attention(self, P: torch.Tensor) -> torch.Tensor:
        """``p_i^T W_B^T W_C p_query`` for every token, ``(batch, l+1)``."""
        W_B, W_C = self._params_like(P)[:2]
        return attention_scores(P, W_B, W_C)


class OneLayerMamba(_GatedAttentionBase):
    """One-layer Mamba in the closed form of Eq. (3) of Li et al. (2025).

    Args:
        d: data dimension; tokens have ``d+1`` entries (features and label).
        m: state size (rows of ``W_B`` and ``W_C``).
        delta: the first ``d`` diagonal entries of ``W_B`` and ``W_C`` at initialisation.
        generator: ``torch.Generator`` for ``w ~ N(0, I/(d+1))``; the default generator if ``None``.

    Parameters ``W_B``, ``W_C`` ``(m, d+1)`` and ``w`` ``(d+1,)`` are stored in the default
    dtype; every method computes in ``P``'s dtype and on ``P``'s device.
    """

    def __init__(self, d: int, m: int, delta: float = 0.2, generator: torch.Generator | None = None) -> None:
        super().__init__(d, m, delta)
        device = generator.device if generator is not None else "cpu"
        w = torch.randn(d + 1, generator=generator, dtype=torch.float64, device=device) / (d + 1) ** 0.5
        self.w = nn.Parameter(w.to(dtype=torch.get_default_dtype(), device="cpu"))  # (d+1,)

    def _param_list(self) -> list[torch.Tensor]:
        return [self.W_B, self.W_C, self.w]

    def gate(self, P: torch.Tensor) -> torch.Tensor:
        """``G_{i,l+1}(w)`` for every token, ``(batch, l+1)``; sums to at most 1."""
        w = self._params_like(P)[2]
        return gate_values(P, w)

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        """``F(Psi; P)`` of Eq. (3), the query being the last token, ``(batch,)``."""
        W_B, W_C, w = self._params_like(P)
        return mamba_output(P, W_B, W_C, w)


class OneLayerLinearTransformer(_GatedAttentionBase):
    """One-layer single-head linear Transformer: Eq. (3) with ``G_{i,l+1} = 1`` (Section 3.4)."""

    def gate(self, P: torch.Tensor) -> torch.Tensor:
        """All ones, ``(batch, l+1)``: the linear Transformer has no gate."""
        check_prompt(P, self.d)
        return torch.ones(P.shape[:2], dtype=P.dtype, device=P.device)

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        """``sum_i y_i p_i^T W_B^T W_C p_query``, ``(batch,)``."""
        W_B, W_C = self._params_like(P)
        return linear_transformer_output(P, W_B, W_C)
