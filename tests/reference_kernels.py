"""Plain-loop references the fast kernels of mambaicl.models are tested against (float64, tight tolerances).

Each is written as directly as its equation allows, with no shared code with the kernel it checks
beyond the literal recurrence of Eq. (1) (:func:`mambaicl.models.recurrence.selective_scan`).
"""
import math

import torch

from mambaicl.models.recurrence import selective_scan


def gate_loop(logits: torch.Tensor) -> torch.Tensor:
    """Eq. (3)'s gate ``G_i = sigma(x_i) prod_{j>i} (1 - sigma(x_j))`` along the last axis, by a loop over ``j``."""
    sig = torch.sigmoid(logits)
    L = logits.shape[-1]
    cols = []
    for i in range(L):
        g = sig[..., i]
        for j in range(i + 1, L):
            g = g * (1 - sig[..., j])
        cols.append(g)
    return torch.stack(cols, dim=-1)


def gated_sum_reference(logits: torch.Tensor, att: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``F = sum_i G_i y_i a_i`` with the looped gate and autograd: the twin of ``gated_sum``."""
    return (gate_loop(logits) * y * att).sum(-1)


def decay_gate_loop(gamma: torch.Tensor) -> torch.Tensor:
    """``G_i = prod_{j>i} gamma_j`` along the last axis, the product written out (App. 12)."""
    L = gamma.shape[-1]
    cols = []
    for i in range(L):
        g = torch.ones_like(gamma[..., 0])
        for j in range(i + 1, L):
            g = g * gamma[..., j]
        cols.append(g)
    return torch.stack(cols, dim=-1)


def selective_scan_heads_seq(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head by the literal recurrence, ``(batch, H, L, D)``."""
    return torch.stack([selective_scan(u, W_B[h], W_C[h], W[h]) for h in range(W_B.shape[0])], dim=1)


def attention_heads_seq(u, W_B, W_C, softmax: bool) -> torch.Tensor:
    """Causal linear / softmax attention one query position at a time, ``(batch, H, L, D)``.

    For linear attention this is the recurrent form ``S_t = S_{t-1} + u_t (W_B u_t)^T``, ``o_t = S_t W_C u_t``.
    """
    batch, L, D = u.shape
    H, m = W_B.shape[:2]
    outs = []
    S = u.new_zeros(batch, H, D, m)  # (batch, H, D, m): sum_s u_s k_s^T
    for t in range(L):
        k = torch.einsum("bd,hmd->bhm", u[:, t], W_B)  # (batch, H, m)
        q = torch.einsum("bd,hmd->bhm", u[:, t], W_C)  # (batch, H, m)
        if not softmax:
            S = S + u[:, t, None, :, None] * k[:, :, None, :]
            outs.append(torch.einsum("bhdm,bhm->bhd", S, q))  # (batch, H, D)
            continue
        keys = torch.einsum("bsd,hmd->bhsm", u[:, : t + 1], W_B)  # (batch, H, t+1, m)
        a = torch.softmax(torch.einsum("bhsm,bhm->bhs", keys, q) / math.sqrt(m), dim=-1)  # (batch, H, t+1)
        outs.append(torch.einsum("bhs,bsd->bhd", a, u[:, : t + 1]))
    return torch.stack(outs, dim=2)  # (batch, H, L, D)


def algorithm_1(model, pat, data, tasks, streams, *, steps: int, batch_size: int, lr: float, callback=None):
    """Algorithm 1 of Li et al. (2025) written out on one given model: at each step, fresh Definition 1 prompts
    from ``streams`` (NumPy streams: one per seed of a stack, or one), the mean hinge loss, and a plain
    ``torch.optim.SGD`` step (a stack's seeds summed). ``callback(step, model)`` after each update."""
    from mambaicl.data import training_prompts

    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    for step in range(steps):
        pr = training_prompts(pat, data, tasks, batch_size, streams)
        opt.zero_grad()
        torch.clamp(1 - pr.z * model(pr), min=0).mean(-1).sum().backward()
        opt.step()
        if callback is not None:
            callback(step, model)
    return model


def three_paths(model, pr, weights) -> list:
    """``[(F, gradients)]`` of ``model`` on the prompt batch ``pr`` by its compiled kernel, by the plain twin
    (:func:`mambaicl.device.plain_kernels`, what a GPU runs) and by the formula on the materialised prompts
    ``pr.P``; the gradients are those of ``sum(F * weights)`` with respect to ``model.parameters()``."""
    params = list(model.parameters())
    out = []
    for make in (lambda: model(pr), lambda: _plain(model, pr), lambda: model(pr.P)):
        F = make()
        out.append((F, torch.autograd.grad((F * weights).sum(), params)))
    return out


def _plain(model, pr):
    from mambaicl.device import plain_kernels

    with plain_kernels():
        return model(pr)
