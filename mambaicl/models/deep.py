"""Multi-layer, multi-head models with one interface: Mamba stacks and Transformers (§4.1-4.2, App. 8.1).

Glossary (code name -> paper symbol):

==================  ======================================================================
``P``               prompt, ``(batch, L, d+1)`` with ``L = l+1`` and the query last (Eq. 2)
``x``               residual stream, ``(batch, L, d_model)``; ``x_0 = P E^T``
``u``               normalised layer input ``RMSNorm(x)`` = the paper's ``U`` of Eq. (1)
``W_B``, ``W_C``    per-head key / query matrices of Eq. (1) and (3), ``(H, m, d_model)``
``W``               per-head gate matrix ``W = (w_1, ..., w_{d0})`` of Eq. (1), ``(H, d_model, d_model)``
``scores``          ``u_s^T W_B^T W_C u_t``, row ``t`` reads column ``s``, ``(batch, H, L, L)``
``G``               channel-wise gate ``G_{s,t}(W)`` of App. 11.1, ``(batch, H, L(t), L(s), d_model)``
``W_O``             mixes the heads back into the stream, ``(d_model, H * d_model)``
``readout``         ``F = readout^T x_L[query]``; starts as ``e_{d+1}`` (the label row), as in Eq. (3)
==================  ======================================================================

Kinds (:func:`build_deep`, reached through :func:`mambaicl.models.build_model` with ``n_layers``):

* ``"mamba"``: the paper's selective-scan layer (Eq. 1 with ``A = -I``, per-channel
  ``Delta_j = softplus(w_j^T u)``), one per head, run in its quadratic closed form
  (App. 11.1): linear attention times a gate, with the gate factorised into per-token terms
  (:func:`selective_scan_heads_factored`). ``scan="chunked"`` (:func:`selective_scan_heads_chunked`, what the factored form falls back to
  when the gates saturate) never exponentiates a positive number; ``scan="quadratic"`` materialises the full gate
  (:func:`selective_scan_heads`, what the probe uses) and ``scan="sequential"`` runs the literal
  recurrence :func:`mambaicl.models.recurrence.selective_scan` (the plain twin).
* ``"linear"``: the same layer with ``G = 1`` (causal linear attention, Section 3.4).
* ``"softmax"``: causal softmax attention, ``softmax_s(u_s^T W_B^T W_C u_t / sqrt(m))``.
* ``"mamba1"``: standard Mamba-1 blocks (:class:`mambaicl.models.mamba1.Mamba1Block`).

Every layer is residual and (by default) pre-norm: ``x <- x + mixer(RMSNorm(x))``; ``norm="none"``
drops the RMSNorm, ``norm="after_first"`` drops it in the first layer only. Values are the tokens
themselves (``u_s``), as in Eq. (1) and (3); the heads are combined by ``W_O``.

``probe(P)`` runs the same layers with ``probe=True`` and returns, per layer, the tensors that
layer used to compute its output: ``"attention"`` ``(batch, H, L, L)`` (query row ``[..., -1, :]``)
and, for gated models, ``"gate"`` ``(batch, H, L, C)``: the gate of every token seen from the query,
per channel ``C``. For ``"mamba"`` the paper's scalar gate ``G_{i,l+1}(w)`` (``w = w_{d0}``) is
channel :attr:`DeepICLModel.label_channel`.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F_
from torch import nn

from ..config import DEEP_KINDS, check_choice, check_int, check_real
from .gated_attention import check_prompt
from .mamba1 import Mamba1Block
from .recurrence import selective_scan

__all__ = [
    "KINDS",
    "build_deep",
    "DeepICLModel",
    "RMSNorm",
    "paper_scan_terms",
    "gated_mix",
    "selective_scan_heads",
    "selective_scan_heads_factored",
    "selective_scan_heads_chunked",
    "NORMS",
    "selective_scan_heads_seq",
    "attention_heads",
    "attention_heads_seq",
]

KINDS = DEEP_KINDS
#: where a stack normalises: every layer, no layer, every layer but the first
NORMS = ("rms", "none", "after_first")


class RMSNorm(nn.Module):
    """``x / rms(x) * weight`` over the last dimension (Zhang & Sennrich 2019)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


# ---------------------------------------------------------------- the paper's layer, multi-head


def paper_scan_terms(u: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, W: torch.Tensor):
    """Scores and channel-wise gates of Eq. (1) unrolled (App. 11.1 of Li et al. 2025), every head.

    ``scores[t, s] = u_s^T W_B^T W_C u_t`` and
    ``G[t, s, c] = sigma(w_c^T u_s) prod_{r=s+1}^{t} (1 - sigma(w_c^T u_r))`` for ``s <= t``, else 0.

    Args:
        u: ``(batch, L, D)``.  W_B, W_C: ``(H, m, D)``.  W: ``(H, D, D)``, ``W[h][:, c] = w_c``.

    Returns:
        ``scores`` ``(batch, H, L, L)`` and ``G`` ``(batch, H, L, L, D)``, both zero for ``s > t``.
    """
    L = u.shape[1]
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool, device=u.device))  # (t, s)
    keys = torch.einsum("bld,hmd->bhlm", u, W_B)  # (batch, H, L, m): W_B u_s
    queries = torch.einsum("bld,hmd->bhlm", u, W_C)  # (batch, H, L, m): W_C u_t
    scores = (queries @ keys.transpose(-1, -2)) * causal  # (batch, H, L(t), L(s))
    logits = torch.einsum("bld,hdc->bhlc", u, W)  # (batch, H, L, D): w_c^T u_s
    cum = torch.cumsum(F_.logsigmoid(-logits), dim=2)  # (batch, H, L, D): sum_{r<=t} log(1 - sigma)
    log_G = F_.logsigmoid(logits).unsqueeze(2) + cum.unsqueeze(3) - cum.unsqueeze(2)  # (batch, H, t, s, D)
    G = torch.exp(log_G.masked_fill(~causal[:, :, None], -math.inf))  # (batch, H, L, L, D)
    return scores, G


def gated_mix(u: torch.Tensor, scores: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``o_t = sum_{s<=t} (G[t, s] * u_s) scores[t, s]`` (App. 11.1), ``(batch, H, L, D)``."""
    return torch.einsum("bhtsc,bsc,bhts->bhtc", G, u, scores)  # (batch, H, L, D)


def selective_scan_heads(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head in the quadratic closed form, ``(batch, H, L, D)``; fast twin."""
    return gated_mix(u, *paper_scan_terms(u, W_B, W_C, W))


#: largest ``|log prod (1 - sigma)|`` for which :func:`selective_scan_heads_factored` factorises the
#: gate; exp(60) ~ 1e26 leaves a margin of 1e12 below the float32 maximum for products in the backward pass
FACTORED_LOG_LIMIT = 60.0


def selective_scan_heads_factored(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head with the gate factorised; same signature and output as :func:`selective_scan_heads`.

    ``G[t, s, c] = exp(cum_t,c) * sigma(w_c^T u_s) exp(-cum_s,c)`` with
    ``cum_t = sum_{r<=t} log(1 - sigma(w_c^T u_r))``, so that
    ``o_t = exp(cum_t) * sum_s scores[t, s] (sigma_s exp(-cum_s) u_s)``: one batched matrix
    product, no ``(L, L, D)`` gate tensor. When ``-cum`` exceeds :data:`FACTORED_LOG_LIMIT`
    somewhere (``exp(-cum)`` could overflow: saturated gates, as after training) it returns
    :func:`selective_scan_heads_chunked` instead, which never exponentiates a positive number.
    """
    logits = torch.einsum("bld,hdc->bhlc", u, W)  # (batch, H, L, D): w_c^T u_s
    cum = torch.cumsum(F_.logsigmoid(-logits), dim=2)  # (batch, H, L, D), <= 0
    if float(-cum.detach().min()) > FACTORED_LOG_LIMIT:
        return selective_scan_heads_chunked(u, W_B, W_C, W)
    L = u.shape[1]
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool, device=u.device))  # (t, s)
    keys = torch.einsum("bld,hmd->bhlm", u, W_B)  # (batch, H, L, m)
    queries = torch.einsum("bld,hmd->bhlm", u, W_C)  # (batch, H, L, m)
    scores = (queries @ keys.transpose(-1, -2)) * causal  # (batch, H, L(t), L(s))
    values = torch.exp(F_.logsigmoid(logits) - cum) * u.unsqueeze(1)  # (batch, H, L, D): sigma_s e^{-cum_s} u_s
    return torch.exp(cum) * (scores @ values)  # (batch, H, L, D)


#: tokens per chunk of :func:`selective_scan_heads_chunked` (measured fastest for L = 21 on a CPU)
SCAN_CHUNK = 7


def selective_scan_heads_chunked(u, W_B, W_C, W, chunk: int = SCAN_CHUNK) -> torch.Tensor:
    """Eq. (1) for every head, chunk by chunk; same signature and output as :func:`selective_scan_heads`.

    The sequence is cut into chunks of ``chunk`` tokens (the last one zero-padded; padding comes
    after every real token, so causality leaves the outputs unchanged). With ``c`` the running
    sum of ``log(1 - sigma)`` inside a chunk, the gate within a chunk is
    ``G[t, s, c] = exp(c_t) * sigma_s exp(-c_s)``: factorised as in
    :func:`selective_scan_heads_factored` when ``-c`` stays below :data:`FACTORED_LOG_LIMIT` in
    every chunk, materialised (``(chunk, chunk)`` per chunk, every exponent ``<= 0``) otherwise.
    Across chunks a state ``S = sum_s G[end, s] u_s (W_B u_s)^T`` ``(batch, H, D, m)`` is carried,
    decayed by each chunk's product of ``1 - sigma`` and read by ``exp(c_t) S W_C u_t``. No
    exponent of the inter-chunk part is positive, so saturated gates (as after training) cannot
    overflow it, which is why :func:`selective_scan_heads_factored` falls back to this form.
    """
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer; got {chunk!r}")
    batch, L, D = u.shape
    H = W_B.shape[0]
    K = -(-L // chunk)  # number of chunks
    if K * chunk > L:
        u = F_.pad(u, (0, 0, 0, K * chunk - L))  # (batch, K*chunk, D)
    logits = torch.einsum("bld,hdc->bhlc", u, W)  # (batch, H, L', D)

    def cut(x):  # (batch, H, L', ...) -> (batch, H, K, chunk, ...)
        return x.reshape(batch, H, K, chunk, *x.shape[3:])

    log_s = cut(F_.logsigmoid(logits))  # (batch, H, K, C, D): log sigma_s
    c = torch.cumsum(cut(F_.logsigmoid(-logits)), dim=3)  # (batch, H, K, C, D): sum of log(1 - sigma) in the chunk
    keys = cut(torch.einsum("bld,hmd->bhlm", u, W_B))  # (batch, H, K, C, m)
    queries = cut(torch.einsum("bld,hmd->bhlm", u, W_C))  # (batch, H, K, C, m)
    uc = u.reshape(batch, 1, K, chunk, D)  # (batch, 1, K, C, D)
    causal = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool, device=u.device))  # (t, s)
    scores = (queries @ keys.transpose(-1, -2)) * causal  # (batch, H, K, C(t), C(s))
    if float(-c.detach().min()) <= FACTORED_LOG_LIMIT:  # within a chunk exp(-c) cannot overflow
        o = torch.exp(c) * (scores @ (torch.exp(log_s - c) * uc))  # (batch, H, K, C, D)
    else:
        log_G = (log_s - c).unsqueeze(3) + c.unsqueeze(4)  # (batch, H, K, t, s, D), <= 0 for s <= t
        G = torch.exp(log_G.masked_fill(~causal[:, :, None], -math.inf))
        o = (G * (scores.unsqueeze(-1) * uc.unsqueeze(3))).sum(4)  # (batch, H, K, C, D)
    if K > 1:
        to_end = torch.exp(log_s + c[:, :, :, -1:] - c)  # (batch, H, K, C, D): G[end of chunk, s]
        local = (to_end * uc).transpose(-1, -2) @ keys  # (batch, H, K, D, m)
        decay = torch.exp(c[:, :, :, -1]).unsqueeze(-1)  # (batch, H, K, D, 1): prod of (1 - sigma) over a chunk
        S = torch.zeros_like(local[:, :, 0])  # (batch, H, D, m): the state entering chunk 0
        entering = [S]
        for dec, loc in list(zip(decay.unbind(2), local.unbind(2)))[:-1]:
            S = dec * S + loc
            entering.append(S)
        S_in = torch.stack(entering, dim=2)  # (batch, H, K, D, m)
        o = o + torch.exp(c) * (queries @ S_in.transpose(-1, -2))  # (batch, H, K, C, D)
    return o.reshape(batch, H, K * chunk, D)[:, :, :L]  # (batch, H, L, D)


def selective_scan_heads_seq(u, W_B, W_C, W) -> torch.Tensor:
    """Eq. (1) for every head by the literal recurrence :func:`selective_scan`, ``(batch, H, L, D)``."""
    return torch.stack([selective_scan(u, W_B[h], W_C[h], W[h]) for h in range(W_B.shape[0])], dim=1)


# ---------------------------------------------------------------- attention layers


def attention_heads(u: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, softmax: bool) -> torch.Tensor:
    """Causal attention weights of every head, ``(batch, H, L(t), L(s))``, zero for ``s > t``.

    Linear: ``u_s^T W_B^T W_C u_t`` (Eq. 3 with ``G = 1``). Softmax: the same scores divided by
    ``sqrt(m)`` and normalised over ``s <= t``.
    """
    L = u.shape[1]
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool, device=u.device))
    keys = torch.einsum("bld,hmd->bhlm", u, W_B)  # (batch, H, L, m)
    queries = torch.einsum("bld,hmd->bhlm", u, W_C)  # (batch, H, L, m)
    scores = queries @ keys.transpose(-1, -2)  # (batch, H, L, L)
    if not softmax:
        return scores * causal
    scores = scores / math.sqrt(W_B.shape[1])
    return torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1)  # (batch, H, L, L)


def attend(u: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``o_t = sum_s weights[t, s] u_s``, ``(batch, H, L, D)``."""
    return torch.einsum("bhts,bsd->bhtd", weights, u)


def attention_heads_seq(u, W_B, W_C, softmax: bool) -> torch.Tensor:
    """Plain-loop twin of ``attend(u, attention_heads(...))``: one query position at a time.

    For linear attention this is the recurrent form ``S_t = S_{t-1} + u_t (W_B u_t)^T``,
    ``o_t = S_t W_C u_t``. Returns ``(batch, H, L, D)``.
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


# ---------------------------------------------------------------- mixers


class _HeadsMixer(nn.Module):
    """Shared parameters of the paper-style layers: ``W_B``, ``W_C`` ``(H, m, D)`` and ``W_O``."""

    def __init__(self, d_model: int, n_heads: int, d_state: int, delta: float, generator) -> None:
        super().__init__()
        std = delta / math.sqrt(d_model)  # scores u^T W_B^T W_C u ~ delta^2 sqrt(m) at initialisation
        self.W_B = nn.Parameter(_normal((n_heads, d_state, d_model), std, generator))  # (H, m, D)
        self.W_C = nn.Parameter(_normal((n_heads, d_state, d_model), std, generator))  # (H, m, D)
        self.W_O = nn.Parameter(torch.eye(d_model).repeat(1, n_heads) / n_heads)  # (D, H*D): mean of heads

    def combine(self, o: torch.Tensor) -> torch.Tensor:
        """``(batch, H, L, D) -> (batch, L, D)`` through ``W_O``."""
        batch, H, L, D = o.shape
        return o.permute(0, 2, 1, 3).reshape(batch, L, H * D) @ self.W_O.T  # (batch, L, D)


_PAPER_SCANS = {"factored": selective_scan_heads_factored, "chunked": selective_scan_heads_chunked,
                "quadratic": selective_scan_heads, "sequential": selective_scan_heads_seq}


class PaperMambaMixer(_HeadsMixer):
    """The selective-scan layer of Eq. (1) (``A = -I``, per-channel ``Delta_j``), ``n_heads`` copies."""

    def __init__(self, d_model, n_heads, d_state, delta, generator, scan: str = "factored") -> None:
        super().__init__(d_model, n_heads, d_state, delta, generator)
        if scan not in _PAPER_SCANS:
            raise ValueError(f"scan must be one of {tuple(_PAPER_SCANS)} for kind 'mamba'; got {scan!r}")
        self.scan = scan
        # w ~ N(0, I/d0) for every channel and head, as w^(0) in Section 2
        self.W = nn.Parameter(_normal((n_heads, d_model, d_model), d_model ** -0.5, generator))  # (H, D, D)

    def forward(self, u: torch.Tensor, probe: bool = False):
        out = self.combine(_PAPER_SCANS[self.scan](u, self.W_B, self.W_C, self.W))  # (batch, L, D)
        if not probe:
            return out
        return out, {"attention": self.scores(u), "gate": self.query_gate(u)}

    def scores(self, u: torch.Tensor) -> torch.Tensor:
        """``u_s^T W_B^T W_C u_t`` of every head, zero for ``s > t``, ``(batch, H, L(t), L(s))``."""
        L = u.shape[1]
        causal = torch.tril(torch.ones(L, L, dtype=torch.bool, device=u.device))
        keys = torch.einsum("bld,hmd->bhlm", u, self.W_B)  # (batch, H, L, m)
        queries = torch.einsum("bld,hmd->bhlm", u, self.W_C)  # (batch, H, L, m)
        return (queries @ keys.transpose(-1, -2)) * causal

    def query_gate(self, u: torch.Tensor) -> torch.Tensor:
        """The gate of every token read from the last one, ``G[L-1, s, c]`` of App. 11.1, ``(batch, H, L, D)``.

        ``sigma(w_c^T u_s) prod_{r=s+1}^{L-1} (1 - sigma(w_c^T u_r))`` in log space (a suffix sum, no
        difference of large numbers); the row :func:`paper_scan_terms` would give, without its
        ``(L, L, D)`` tensor.
        """
        logits = torch.einsum("bld,hdc->bhlc", u, self.W)  # (batch, H, L, D)
        keep = F_.logsigmoid(-logits)  # log(1 - sigma)
        after = torch.flip(torch.cumsum(torch.flip(keep, [2]), 2), [2])  # (batch, H, L, D): sum_{r >= s}
        after = torch.cat([after[:, :, 1:], torch.zeros_like(after[:, :, :1])], dim=2)  # sum_{r > s}
        return torch.exp(F_.logsigmoid(logits) + after)


class AttentionMixer(_HeadsMixer):
    """Causal linear or softmax attention with ``n_heads`` heads; values are the tokens."""

    def __init__(self, d_model, n_heads, d_state, delta, generator, softmax: bool) -> None:
        super().__init__(d_model, n_heads, d_state, delta, generator)
        self.softmax = softmax

    def forward(self, u: torch.Tensor, probe: bool = False):
        weights = attention_heads(u, self.W_B, self.W_C, self.softmax)  # (batch, H, L, L)
        out = self.combine(attend(u, weights))
        return (out, {"attention": weights}) if probe else out


class Mamba1Mixer(Mamba1Block):
    """:class:`Mamba1Block` with the mixer interface ``forward(u, probe)``."""

    def __init__(self, d_model, d_state, generator, scan: str = "fast", expand: int = 2, d_conv: int = 4) -> None:
        super().__init__(d_model, d_state=d_state, expand=expand, d_conv=d_conv, generator=generator)
        if scan not in ("fast", "sequential", "kernel"):
            raise ValueError(f"scan must be 'fast', 'sequential' or 'kernel' for kind 'mamba1'; got {scan!r}")
        self.scan = scan

    def forward(self, u: torch.Tensor, probe: bool = False):
        return super().forward(u, scan=self.scan, probe=probe)


# ---------------------------------------------------------------- the model


class DeepICLModel(nn.Module):
    """``n_layers`` residual pre-norm layers of one kind; ``forward(P) -> F (batch,)``.

    Built by :func:`mambaicl.models.build_model` (``n_layers`` given); see the module docstring for the layers and the probe.
    """

    def __init__(self, kind: str, d: int, mixers: list[nn.Module], d_model: int, generator, norm: str = "rms") -> None:
        super().__init__()
        self.kind, self.d, self.d_model = kind, d, d_model
        self.norms = nn.ModuleList([RMSNorm(d_model) if norm == "rms" or (norm == "after_first" and i > 0)
                                    else nn.Identity() for i in range(len(mixers))])
        self.mixers = nn.ModuleList(mixers)
        if d_model >= d + 1:  # embed the prompt by zero padding: channel c of x_0 is row c of P
            E = torch.eye(d_model, d + 1)
            r = torch.zeros(d_model)
            r[d] = 1.0  # F reads the label row of the query, like e_{d+1}^T o_{l+1} in Eq. (3)
        else:
            E = _normal((d_model, d + 1), (d + 1) ** -0.5, generator)
            r = _normal((d_model,), d_model ** -0.5, generator)
        self.embed = nn.Parameter(E)  # (d_model, d+1)
        self.readout = nn.Parameter(r)  # (d_model,)

    @property
    def label_channel(self) -> int | None:
        """Stream channel that starts as the label row of ``P`` (``None`` if ``d_model < d+1``)."""
        return self.d if self.d_model >= self.d + 1 else None

    def _run(self, P, probe: bool):
        if not isinstance(P, torch.Tensor):  # a mambaicl.data.Prompts batch: materialise Eq. (2)
            P = P.P
        check_prompt(P, self.d)
        x = P.to(self.embed.dtype) @ self.embed.T  # (batch, L, d_model)
        records = []
        for norm, mixer in zip(self.norms, self.mixers):
            if probe:
                out, rec = mixer(norm(x), probe=True)
                records.append(rec)
            else:
                out = mixer(norm(x))
            x = x + out  # (batch, L, d_model)
        return x[:, -1] @ self.readout, records  # (batch,)

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        """``F(P)``, the prediction for the query (last token), ``(batch,)``."""
        return self._run(P, probe=False)[0]

    def probe(self, P: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """One dict per layer with ``"attention"`` and (gated kinds) ``"gate"``, plus ``"F"`` in each.

        Runs the same layers as :meth:`forward`, each returning the tensors it computed its
        output from; ``"F"`` is the prediction of that pass (equal to ``forward(P)``).
        """
        with torch.no_grad():
            F, records = self._run(P, probe=True)
        for rec in records:
            rec["F"] = F
        return records


def _normal(shape, std: float, generator) -> torch.Tensor:
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * std).to(torch.get_default_dtype())


_KW = {
    "mamba": {"d_state": 16, "delta": 0.2, "scan": "factored", "norm": "rms"},
    "linear": {"d_state": 16, "delta": 0.2, "norm": "rms"},
    "softmax": {"d_state": 16, "delta": 0.2, "norm": "rms"},
    "mamba1": {"d_state": 16, "scan": "fast", "expand": 2, "d_conv": 4, "norm": "rms"},
}


def build_deep(kind: str, d: int, *, n_layers: int = 3, n_heads: int = 1, d_model: int = 64,
               generator: torch.Generator | None = None, device=None, **kw) -> DeepICLModel:
    """A multi-layer in-context classifier of one of :data:`KINDS`.

    Args:
        kind: ``"mamba"`` (the paper's selective-scan layer), ``"linear"``, ``"softmax"`` or
            ``"mamba1"`` (standard Mamba-1 blocks).
        d: data dimension; prompts are ``(batch, L, d+1)``.
        n_layers, n_heads, d_model: depth, heads per layer (``"mamba1"``: must be 1), stream width.
        generator: CPU ``torch.Generator`` for every random initial value (global RNG if ``None``).
        device: where the model lives (default CPU; pass ``default_device()`` to use a GPU).
        **kw: ``d_state`` (``m``, default 16), ``delta`` (init scale of ``W_B``, ``W_C``, default
            0.2), ``scan`` (``"mamba"``: ``"factored"``/``"quadratic"``/``"sequential"``; ``"mamba1"``:
            ``"fast"``/``"sequential"``/``"kernel"``), ``expand`` and ``d_conv`` (``"mamba1"``),
            ``norm`` (``"rms"``: pre-norm RMSNorm in every layer, the default; ``"none"``: no
            normalisation; ``"after_first"``: RMSNorm in every layer but the first, which reads the
            raw tokens as the one-layer model of Eq. (3) does).

    Returns:
        A :class:`DeepICLModel` with ``forward(P) -> (batch,)`` and ``probe(P)``.
    """
    check_choice("kind", kind, KINDS)
    for name, v in (("d", d), ("n_layers", n_layers), ("n_heads", n_heads), ("d_model", d_model)):
        check_int(name, v, 1)
    unknown = set(kw) - set(_KW[kind])
    if unknown:
        raise ValueError(f"unknown keyword(s) {sorted(unknown)} for kind {kind!r}; allowed: {sorted(_KW[kind])}")
    opts = {**_KW[kind], **kw}
    check_int("d_state", opts["d_state"], 1)
    if kind != "mamba1":
        check_real("delta", opts["delta"], 0.0, 1.0, low_open=True)
    check_choice("norm", opts["norm"], NORMS)
    if kind == "mamba1":
        check_int("n_heads", n_heads, 1, 1)  # a Mamba-1 block has no heads
        check_int("expand", opts["expand"], 1)
        check_int("d_conv", opts["d_conv"], 1)
    mixers = [_mixer(kind, d_model, n_heads, opts, generator) for _ in range(n_layers)]
    model = DeepICLModel(kind, d, mixers, d_model, generator, norm=opts["norm"])
    return model.to(device if device is not None else "cpu")


def _mixer(kind, d_model, n_heads, o, g) -> nn.Module:
    if kind == "mamba":
        return PaperMambaMixer(d_model, n_heads, o["d_state"], o["delta"], g, scan=o["scan"])
    if kind in ("linear", "softmax"):
        return AttentionMixer(d_model, n_heads, o["d_state"], o["delta"], g, softmax=kind == "softmax")
    return Mamba1Mixer(d_model, o["d_state"], g, scan=o["scan"], expand=o["expand"], d_conv=o["d_conv"])
