"""The literal selective-scan recurrence of Eq. (1) of Li et al. (2025).

Glossary (code name -> paper symbol):

=============  ==========================================================
``P``          the input ``U`` laid out token-major, ``(batch, L, d0)``
``W_B``        ``W_B`` in ``B_i = u_i^T W_B^T``, shape ``(m, d0)``
``W_C``        ``W_C`` in ``C_i = W_C u_i``, shape ``(m, d0)``
``W``          ``W = (w_1, ..., w_{d0})``; column ``j`` gives ``Delta_{j,i}``
``delta``      ``Delta_{j,i} = softplus(w_j^T u_i)``, ``(batch, d0)``
``A_bar``      ``tilde A_i`` (one scalar per channel, broadcast over m)
``B_bar``      ``tilde B_i``, ``(batch, d0, m)``
``h``          hidden state ``h_i``, ``(batch, d0, m)``
=============  ==========================================================

The state matrix is fixed to ``A = -I_m`` (Section 2 of the paper), so every matrix
exponential in the zero-order-hold discretisation is a scalar multiple of the identity
and the recurrence can be written channel by channel with element-wise operations.
We start from ``h_0 = 0``; the paper writes "starting from h_0 = U", but its own
derivation (App. 11.1) drops that term, and ``U`` (``d0 x m``) only has the right shape
when ``m`` equals the sequence length.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F_

from .scan import selective_scan_heads
from .shapes import check_shapes

__all__ = ["discretize", "selective_scan", "selective_scan_closed_form"]


def _check_scan_shapes(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, W: torch.Tensor) -> None:
    check_shapes(P=(P, "batch L d0"), W_B=(W_B, "m d0"), W_C=(W_C, "m d0"), W=(W, "d0 d0"))


def discretize(u: torch.Tensor, W_B: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-order-hold discretisation of Eq. (1) with ``A = -I``, for one token.

    ``tilde A_{j,i} = diag(exp(Delta_{j,i} A))`` and
    ``tilde B_{j,i} = (Delta_{j,i} B_i)(exp(Delta_{j,i} A) - I)(Delta_{j,i} A)^{-1}``.

    Args:
        u: one token per batch element, ``(batch, d0)``.
        W_B: ``(m, d0)``.
        W: ``(d0, d0)``, column ``j`` is ``w_j``.

    Returns:
        ``A_bar`` of shape ``(batch, d0)`` (the same value for all ``m`` state entries of a
        channel) and ``B_bar`` of shape ``(batch, d0, m)``.
    """
    delta = F_.softplus(u @ W)  # (batch, d0): Delta_{j,i} = softplus(w_j^T u_i)
    A_bar = torch.exp(-delta)  # (batch, d0): exp(Delta A) with A = -I
    # (exp(Delta A) - I)(Delta A)^{-1} = (exp(-Delta) - 1) / (-Delta), which tends to 1 as Delta -> 0
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    zoh = torch.where(delta > 0, torch.expm1(-safe) / (-safe), torch.ones_like(delta))  # (batch, d0)
    B_i = u @ W_B.T  # (batch, m): B_i = u_i^T W_B^T
    B_bar = (delta * zoh).unsqueeze(-1) * B_i.unsqueeze(1)  # (batch, d0, m)
    return A_bar, B_bar


def selective_scan(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, W: torch.Tensor,
                   return_states: bool = False):
    """Run the recurrence of Eq. (1) of Li et al. (2025) token by token.

    ``h_i = h_{i-1} * tilde A_i + (u_i 1_m^T) * tilde B_i`` and ``o_i = h_i C_i`` with
    ``C_i = W_C u_i``, ``A = -I_m`` and ``h_0 = 0``.

    Args:
        P: tokens ``(batch, L, d0)``.
        W_B, W_C: ``(m, d0)``.
        W: ``(d0, d0)`` whose column ``j`` is ``w_j``.
        return_states: also return every state ``h_i``.

    Returns:
        All outputs ``O`` of shape ``(batch, L, d0)``; ``O[:, i]`` is ``o_{i+1}``. With
        ``return_states``, ``(O, H)`` where ``H[:, i]`` is ``h_{i+1}``, ``(batch, L, d0, m)``.
    """
    _check_scan_shapes(P, W_B, W_C, W)
    batch, L, d0 = P.shape
    m = W_B.shape[0]
    h = P.new_zeros(batch, d0, m)  # (batch, d0, m)
    outputs, states = [], []
    for i in range(L):
        u = P[:, i]  # (batch, d0)
        A_bar, B_bar = discretize(u, W_B, W)
        h = h * A_bar.unsqueeze(-1) + u.unsqueeze(-1) * B_bar  # (batch, d0, m)
        C = u @ W_C.T  # (batch, m): C_i = W_C u_i
        outputs.append(torch.einsum("bdm,bm->bd", h, C))  # (batch, d0)
        if return_states:
            states.append(h)
    O = torch.stack(outputs, dim=1)  # (batch, L, d0)
    return (O, torch.stack(states, dim=1)) if return_states else O


def selective_scan_closed_form(P: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """The unrolled form of Eq. (1) derived in App. 11.1, for every channel and position.

    ``o_i = sum_{j<=i} (G_{j,i}(W) * p_j) p_j^T W_B^T W_C p_i`` with the channel-wise gate
    ``G_{j,i}(W) = sigma(W^T p_j) * prod_{k=j+1}^{i} (1 - sigma(W^T p_k))``: the one-head case of
    :func:`mambaicl.models.scan.selective_scan_heads`. Same signature and output as
    :func:`selective_scan`; O(L^2) work, no loop.
    """
    _check_scan_shapes(P, W_B, W_C, W)
    return selective_scan_heads(P, W_B[None], W_C[None], W[None])[:, 0]  # (batch, L, d0)
