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
  ``Delta_j = softplus(w_j^T u)``), one per head, run in a closed form of :mod:`mambaicl.models.scan`
  (App. 11.1): linear attention times a gate. By default (``scan="factored"``) a CPU runs the compiled
  kernel :func:`mambaicl.models.scan_kernel.selective_scan_heads_fused` and any other device (or a CPU under
  :func:`mambaicl.device.plain_kernels`) the closed form with the gate factorised into per-token terms; the
  choice is :func:`mambaicl.device.use_compiled`'s. ``scan="chunked"`` never exponentiates a positive number
  and ``scan="quadratic"`` materialises the full gate (what the probe reads); both run as chosen.
* ``"linear"``: the same layer with ``G = 1`` (causal linear attention, Section 3.4).
* ``"softmax"``: causal softmax attention, ``softmax_s(u_s^T W_B^T W_C u_t / sqrt(m))``.
* ``"mamba1"``: standard Mamba-1 blocks (:class:`mambaicl.models.mamba1.Mamba1Block`).

Every layer is residual and (by default) pre-norm: ``x <- x + mixer(RMSNorm(x))`` (on a CPU the norm is
:func:`mambaicl.models.scan_kernel.rms_norm_fused`, its plain expression elsewhere); ``norm="none"``
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
from torch import nn

from ..config import DEEP_KINDS, ConfigError, check_choice, check_int
from ..device import use_compiled
from .defaults import DEEP_DEFAULTS, check_delta
from .gated_attention import check_prompt, gate_from_logits
from .kernels import causal_mask, causal_scores, heads_keys_queries, row_softmax
from .mamba1 import MAMBA1_SCANS, Mamba1Block
from .scan import selective_scan_heads, selective_scan_heads_chunked, selective_scan_heads_factored
from .scan_kernel import rms_norm_fused, selective_scan_heads_fused
from .shapes import tokens

__all__ = [
    "KINDS",
    "NORMS",
    "PAPER_SCANS",
    "build_deep",
    "DeepICLModel",
    "RMSNorm",
    "attention_heads",
    "attend",
]

KINDS = DEEP_KINDS
#: the dtypes the compiled CPU kernels (:mod:`mambaicl.models.scan_kernel`) read and write; others run the plain forms
COMPILED_DTYPES = (torch.float32, torch.float64)
#: where a stack normalises: every layer, no layer, every layer but the first
NORMS = ("rms", "none", "after_first")


class RMSNorm(nn.Module):
    """``x / rms(x) * weight`` over the last dimension (Zhang & Sennrich 2019)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if use_compiled(x.device) and x.dtype in COMPILED_DTYPES:  # one compiled pass each way (rms_norm_fused)
            return rms_norm_fused(x, self.weight, self.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


# ---------------------------------------------------------------- attention layers


def attention_heads(u: torch.Tensor, W_B: torch.Tensor, W_C: torch.Tensor, softmax: bool) -> torch.Tensor:
    """Causal attention weights of every head, ``(batch, H, L(t), L(s))``, zero for ``s > t``.

    Linear: ``u_s^T W_B^T W_C u_t`` (Eq. 3 with ``G = 1``). Softmax: the same scores divided by
    ``sqrt(m)`` and normalised over ``s <= t``.
    """
    scores = causal_scores(*heads_keys_queries(u, W_B, W_C))  # (batch, H, L, L), zero for s > t
    if not softmax:
        return scores
    scores = scores / math.sqrt(W_B.shape[1])
    causal = causal_mask(u.shape[1], u.device)
    return row_softmax(scores.masked_fill(~causal, -math.inf))  # (batch, H, L, L)


def attend(u: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``o_t = sum_s weights[t, s] u_s``, ``(batch, H, L, D)``."""
    return torch.einsum("bhts,bsd->bhtd", weights, u)


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


#: the closed forms of Eq. (1) a paper-style Mamba layer can run (:mod:`mambaicl.models.scan`)
PAPER_SCANS = {"factored": selective_scan_heads_factored, "chunked": selective_scan_heads_chunked,
               "quadratic": selective_scan_heads}


class PaperMambaMixer(_HeadsMixer):
    """The selective-scan layer of Eq. (1) (``A = -I``, per-channel ``Delta_j``), ``n_heads`` copies."""

    def __init__(self, d_model, n_heads, d_state, delta, generator, scan: str = "factored") -> None:
        super().__init__(d_model, n_heads, d_state, delta, generator)
        self.scan = check_choice("scan", scan, tuple(PAPER_SCANS))
        # w ~ N(0, I/d0) for every channel and head, as w^(0) in Section 2
        self.W = nn.Parameter(_normal((n_heads, d_model, d_model), d_model ** -0.5, generator))  # (H, D, D)

    def forward(self, u: torch.Tensor, probe: bool = False, last_only: bool = False):
        """The layer's output ``(batch, L, D)``, or the last token's alone ``(batch, 1, D)`` with ``last_only``."""
        out = self.combine(self.run_scan(u, last_only=last_only and not probe))  # (batch, L or 1, D)
        if not probe:
            return out
        return out, {"attention": self.scores(u), "gate": self.query_gate(u)}

    def run_scan(self, u: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """Eq. (1) of every head, ``(batch, H, L, D)``: the compiled kernel
        (:func:`mambaicl.models.scan_kernel.selective_scan_heads_fused`) for the default ``scan="factored"`` where
        :func:`mambaicl.device.use_compiled` says so (a CPU), else the plain closed form ``PAPER_SCANS[scan]``
        (a GPU, :func:`mambaicl.device.plain_kernels`, or an explicitly chosen ``"chunked"`` / ``"quadratic"``).
        ``last_only``: the last token's row alone, ``(batch, H, 1, D)`` (the compiled kernel skips the others)."""
        if self.scan == "factored" and use_compiled(u.device) and u.dtype in COMPILED_DTYPES:
            return selective_scan_heads_fused(u, self.W_B, self.W_C, self.W, last_only=last_only)
        o = PAPER_SCANS[self.scan](u, self.W_B, self.W_C, self.W)
        return o[:, :, -1:] if last_only else o

    def scores(self, u: torch.Tensor) -> torch.Tensor:
        """``u_s^T W_B^T W_C u_t`` of every head, zero for ``s > t``, ``(batch, H, L(t), L(s))``."""
        return causal_scores(*heads_keys_queries(u, self.W_B, self.W_C))

    def query_gate(self, u: torch.Tensor) -> torch.Tensor:
        """The gate of every token read from the last one, ``G[L-1, s, c]`` of App. 11.1, ``(batch, H, L, D)``.

        ``sigma(w_c^T u_s) prod_{r=s+1}^{L-1} (1 - sigma(w_c^T u_r))``: Eq. (3)'s gate
        (:func:`mambaicl.models.gated_attention.gate_from_logits`) of every channel, the row
        :func:`mambaicl.models.scan.paper_scan_terms` would give, without its ``(L, L, D)`` tensor.
        """
        logits = torch.einsum("bld,hdc->bhlc", u, self.W)  # (batch, H, L, D)
        return gate_from_logits(logits, dim=2)  # (batch, H, L, D)


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
        self.scan = check_choice("scan", scan, MAMBA1_SCANS)

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
        P = tokens(P)  # a mambaicl.data.Prompts batch: materialise Eq. (2)
        check_prompt(P, self.d)
        x = P.to(self.embed.dtype) @ self.embed.T  # (batch, L, d_model)
        records = []
        last = len(self.mixers) - 1
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers)):
            if probe:
                out, rec = mixer(norm(x), probe=True)
                records.append(rec)
            elif i == last and isinstance(mixer, PaperMambaMixer):
                # the readout reads the last token only: the last selective scan computes that row alone
                out = mixer(norm(x), last_only=True)  # (batch, 1, d_model)
                x = x[:, -1:]
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
        output from; ``"F"`` is the prediction of that pass (``forward(P)`` up to its last bit: ``forward`` runs the
        last selective scan on the last token alone).
        """
        with torch.no_grad():
            F, records = self._run(P, probe=True)
        for rec in records:
            rec["F"] = F
        return records


def _normal(shape, std: float, generator) -> torch.Tensor:
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * std).to(torch.get_default_dtype())


#: keywords of each kind beyond the shared ``d_state`` and ``norm``, with the defaults that are not
#: :class:`mambaicl.config.DeepConfig`'s (``n_layers``, ``n_heads``, ``d_model``, ``d_state``, ``delta``,
#: ``norm`` default to its fields, declared once there)
KIND_KEYWORDS = {
    "mamba": {"delta": DEEP_DEFAULTS["delta"], "scan": "factored"},
    "linear": {"delta": DEEP_DEFAULTS["delta"]},
    "softmax": {"delta": DEEP_DEFAULTS["delta"]},
    "mamba1": {"scan": "fast", "expand": 2, "d_conv": 4},
}


def build_deep(kind: str, d: int, *, n_layers: int | None = None, n_heads: int | None = None,
               d_model: int | None = None, generator: torch.Generator | None = None, device=None,
               **kw) -> DeepICLModel:
    """A multi-layer in-context classifier of one of :data:`KINDS`.

    Args:
        kind: ``"mamba"`` (the paper's selective-scan layer), ``"linear"``, ``"softmax"`` or
            ``"mamba1"`` (standard Mamba-1 blocks).
        d: data dimension; prompts are ``(batch, L, d+1)``.
        n_layers, n_heads, d_model: depth, heads per layer (``"mamba1"``: must be 1), stream width
            (defaults: :class:`mambaicl.config.DeepConfig`'s).
        generator: CPU ``torch.Generator`` for every random initial value (global RNG if ``None``).
        device: where the model lives (default CPU; pass ``default_device()`` to use a GPU).
        **kw: ``d_state`` (``m``) and ``norm`` (``"rms"``: pre-norm RMSNorm in every layer; ``"none"``:
            no normalisation; ``"after_first"``: RMSNorm in every layer but the first, which reads the
            raw tokens as the one-layer model of Eq. (3) does), defaults ``DeepConfig``'s; then the
            keywords of :data:`KIND_KEYWORDS`: ``delta`` (init scale of ``W_B``, ``W_C``; not for
            ``"mamba1"``), ``scan`` (``"mamba"``: one of :data:`PAPER_SCANS`; ``"mamba1"``: one of
            :data:`mambaicl.models.mamba1.MAMBA1_SCANS`), ``expand`` and ``d_conv`` (``"mamba1"``).
            A keyword that does not apply to ``kind`` raises a :class:`~mambaicl.config.ConfigError`.

    Returns:
        A :class:`DeepICLModel` with ``forward(P) -> (batch,)`` and ``probe(P)``.
    """
    check_choice("kind", kind, KINDS)
    n_layers = DEEP_DEFAULTS["n_layers"] if n_layers is None else n_layers
    n_heads = DEEP_DEFAULTS["n_heads"] if n_heads is None else n_heads
    d_model = DEEP_DEFAULTS["d_model"] if d_model is None else d_model
    for name, v in (("d", d), ("n_layers", n_layers), ("n_heads", n_heads), ("d_model", d_model)):
        check_int(name, v, 1)
    allowed = {"d_state": DEEP_DEFAULTS["d_state"], "norm": DEEP_DEFAULTS["norm"], **KIND_KEYWORDS[kind]}
    for key in kw:
        if key not in allowed:
            raise ConfigError(f"{key} does not apply to kind {kind!r} with n_layers (a deep stack); "
                              f"its keywords: {sorted(allowed)}")
    opts = {**allowed, **kw}
    check_int("d_state", opts["d_state"], 1)
    if "delta" in opts:
        check_delta(opts["delta"])
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
