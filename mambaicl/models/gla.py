"""One-layer gated linear attention with a pluggable gate: the App. 12 families in the frame of Eq. (3).

Glossary (code name -> paper symbol):

=================  =====================================================================
``P``              prompt ``(p_1, ..., p_l, p_query)``, stacked ``(S, batch, l+1, d+1)`` or a
                   :class:`mambaicl.data.Prompts` batch ``(S, batch, ...)``
``W_B``, ``W_C``   key / query matrices of the linear attention, ``(S, m, d+1)``
``w``              gate vector ``w`` (Mamba, Mamba-2, gated retention), ``(S, d+1)``
``a``              Mamba-2's scalar ``a`` (``A = -e^a``), ``(S,)``
``W_alpha``        GLA's gate matrix ``W`` (one logit per state channel), ``(S, m, d+1)``
``gamma``          RetNet's fixed decay; ``tau`` the temperature of gated retention / GLA
``G``              weight of example ``i`` in the output read at the query, ``(S, batch, l+1)``
                   (GLA: one per state channel, ``(S, batch, l+1, m)``)
``F``              ``sum_i y_i sum_c G_{i,c} (W_B p_i)_c (W_C p_query)_c``, ``(S, batch)``
=================  =====================================================================

Every model is ``F(P) = sum_{i=1}^{l+1} G_{i,l+1} y_i p_i^T W_B^T W_C p_query`` (Eq. (3) with the
gate swapped), trained from Section 2's initialisation (``W_B = W_C = delta I``,
``w ~ N(0, I/(d+1))``). The families (App. 12 of Li et al. 2025, :data:`GATE_FAMILIES`):

==================  =========================================================================
``mamba``           Eq. (3): ``G_i = sigma(w^T p_i) prod_{j>i} (1 - sigma(w^T p_j))``
``mamba2``          Mamba-2 recurrence ``h_i = exp(Delta_i A) h_{i-1} + Delta_i v_i k_i^T``:
                    ``G_i = Delta_i prod_{j>i} exp(-Delta_j e^a)``, ``Delta_j = softplus(w^T p_j)``
``mamba2_app12``    App. 12's Mamba-2: the same decays, no ``Delta_i`` on the token's own input
``gated_retention`` ``G_i = prod_{j>i} sigma(w^T p_j)^{1/tau}``
``retnet``          ``G_i = gamma^{l+1-i}``: fixed, no input dependence
``gla``             GLA recurrence, one decay per state channel:
                    ``G_{i,c} = prod_{j>i} sigma((W_alpha p_j)_c)^{1/tau}``
``gla_app12``       App. 12's GLA output formula: each key gated by its own ``sigma((W_alpha p_i)_c)^{1/tau}``
``none``            ``G = 1``: the linear Transformer (Section 3.4)
==================  =========================================================================

Only ``mamba``, ``mamba2`` and ``gla_app12`` give a token a weight that depends on the token
itself (:data:`OWN_TOKEN_GATE`); in the decay-only families a token's weight is set by the tokens
*after* it. One class family holds them all: the ``mamba`` family *is* Eq. (3) and ``none`` the
linear Transformer, i.e. :class:`mambaicl.models.one_layer.OneLayerStack` of kind ``"mamba"`` and ``"linear"``
(:func:`kind_of_family`; :func:`build_gla` builds those for them); every other family is a :class:`GLAStack`, a
:class:`~mambaicl.models.one_layer.OneLayerStack` (same parameters, same initial values, same attention and
logits) with the gate swapped. The gates are those of :mod:`mambaicl.models.gates`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..config import Config, ConfigError, check_choice, check_int, choice, real
from ..device import use_compiled
from .gates import gated_retention_gate, gla_gate, mamba2_gate, retnet_gate
from .defaults import check_generators, one_layer_m
from .one_layer import OneLayerStack
from .pattern_gla import channel_table, pattern_gla_sum
from .shapes import token_labels, tokens

__all__ = ["GATE_FAMILIES", "OWN_TOKEN_GATE", "INPUT_DEPENDENT", "GATE_SETTINGS", "GateConfig", "GLAStack",
           "build_gla", "kind_of_family"]

GATE_FAMILIES = ("mamba", "mamba2", "mamba2_app12", "gated_retention", "retnet", "gla", "gla_app12", "none")
#: families whose weight of token i depends on token i itself
OWN_TOKEN_GATE = ("mamba", "mamba2", "gla_app12")
#: families whose gate depends on the input at all
INPUT_DEPENDENT = ("mamba", "mamba2", "mamba2_app12", "gated_retention", "gla", "gla_app12")
#: the families each setting of :class:`GateConfig` applies to
GATE_SETTINGS = {"tau": ("gated_retention", "gla", "gla_app12"), "gamma": ("retnet",), "a": ("mamba2", "mamba2_app12")}
_SCALAR_W = ("mamba", "mamba2", "mamba2_app12", "gated_retention")
_CHANNEL = ("gla", "gla_app12")
#: the families that are one-layer kinds of Eq. (3) (:data:`mambaicl.models.one_layer.GATE_FAMILY`, inverted)
_EQ3_KIND = {"mamba": "mamba", "none": "linear"}


def kind_of_family(family: str) -> str:
    """The model kind (:func:`mambaicl.models.build_model`) of a gate family: ``"mamba"`` for Eq. (3)'s gate,
    ``"linear"`` for none, else the family itself (a :class:`GLAStack`)."""
    return _EQ3_KIND.get(check_choice("family", family, GATE_FAMILIES), family)


@dataclass(frozen=True)
class GateConfig(Config):
    """A gate family and its fixed hyperparameters (validated; a ``ValueError`` names the field).

    ``tau``: temperature of gated retention and GLA (``gamma = sigma(.)^{1/tau}``), ``> 0``.
    ``gamma``: RetNet's fixed decay, in ``(0, 1]`` (default ``1 - 2^-5``, RetNet's fastest head).
    ``a``: initial Mamba-2 ``a`` (``A = -e^a``; learned).
    """

    family: str = choice("mamba", GATE_FAMILIES)
    tau: float = real(1.0, 0.0, low_open=True)
    gamma: float = real(1 - 2 ** -5, 0.0, 1.0, low_open=True)
    a: float = real(0.0, -10.0, 10.0)


class GLAStack(OneLayerStack):
    """``S`` one-layer gated-linear-attention models of one gate family other than Eq. (3)'s (``mamba``) and none
    (``none``), which are :class:`OneLayerStack` kinds ``"mamba"`` and ``"linear"``; parameters stacked on a seed
    axis.

    Args:
        gate: a :class:`GateConfig` (or a family name).
        d, m, delta: data dimension, state size (``m >= d``), initial diagonal of ``W_B``, ``W_C``.
        generators: one ``torch.Generator`` per seed for the random initial gate parameters.
        dtype: parameter dtype (default float64).

    ``forward`` takes stacked prompts (tensor ``(S, batch, l+1, d+1)`` or ``Prompts``) and returns
    ``F`` ``(S, batch)``; as for every :class:`OneLayerStack`, training the sum over seeds of each
    seed's mean loss gives every seed its own gradient.
    """

    def __init__(self, gate, d: int, m: int, delta: float | None, generators, dtype: torch.dtype | None = None) -> None:
        gate = gate if isinstance(gate, GateConfig) else GateConfig(family=gate)
        if gate.family in _EQ3_KIND:
            raise ConfigError(f"family {gate.family!r} is a one-layer kind of Eq. (3): build "
                              f"OneLayerStack({_EQ3_KIND[gate.family]!r}, ...) (build_gla does), not a GLAStack")
        generators = check_generators(generators)
        # the families with a gate vector w draw it as OneLayerMamba does; the others draw nothing here
        super().__init__("mamba" if gate.family in _SCALAR_W else "linear", d, m, delta, generators,
                         dtype=dtype or torch.float64)
        self.gate_config, self.kind, self.gated = gate, gate.family, True
        dtype, S = self.W_B.dtype, self.n_seeds
        if self.family in ("mamba2", "mamba2_app12"):
            self.a = nn.Parameter(torch.full((S,), self.gate_config.a, dtype=dtype))  # (S,)
        if self.family in _CHANNEL:
            W_alpha = [torch.randn(m, d + 1, generator=g, dtype=torch.float64) / (d + 1) ** 0.5 for g in generators]
            self.W_alpha = nn.Parameter(torch.stack(W_alpha).to(dtype))  # (S, m, d+1)

    def member(self, s: int) -> "GLAStack":
        """Seed ``s`` as a one-seed stack (a copy of its parameters)."""
        check_int("s", s, 0, self.n_seeds - 1)
        one = GLAStack(self.gate_config, self.d, self.m, self.delta, [torch.Generator().manual_seed(0)],
                       dtype=self.W_B.dtype)
        with torch.no_grad():
            for name, p in one.named_parameters():
                p.copy_(getattr(self, name)[s : s + 1])
        return one.to(self.W_B.device)

    def logits(self, P) -> torch.Tensor:
        """Gate logits: ``w^T p_i`` ``(S, batch, l+1)`` (scalar families) or ``W_alpha p_i`` ``(S, batch, l+1, m)`` (GLA)."""
        if self.family in _SCALAR_W:
            return super().logits(P)
        if self.family in _CHANNEL:
            ref = self._ref(P)
            X = tokens(P)
            return torch.einsum("sbld,smd->sblm", X.to(ref.dtype), self.W_alpha.to(ref.dtype))
        raise ConfigError(f"the {self.family!r} gate has no logits (it does not depend on the input)")

    def gate(self, P, channels: bool = False) -> torch.Tensor:
        """``G_{i,l+1}`` for every token, ``(S, batch, l+1)``; GLA: the mean over state channels, or
        ``(S, batch, l+1, m)`` with ``channels=True``."""
        ref = self._ref(P)
        cfg, fam = self.gate_config, self.family
        if fam == "retnet":
            return retnet_gate(tuple(ref.shape), cfg.gamma, dtype=ref.dtype, device=ref.device)
        x = self.logits(P)
        if fam in ("mamba2", "mamba2_app12"):
            return mamba2_gate(x, self.a.to(ref.dtype)[:, None, None], input_step=fam == "mamba2")
        if fam == "gated_retention":
            return gated_retention_gate(x, cfg.tau)
        G = gla_gate(x, cfg.tau, recurrent=fam == "gla")  # (S, batch, L, m)
        return G if channels else G.mean(-1)

    def forward(self, P) -> torch.Tensor:
        """``F`` of every seed on its own prompts, ``(S, batch)``.

        The channel-gated families (GLA) on a :class:`mambaicl.data.Prompts` batch on the CPU take the compiled
        kernel on the prompts' token basis (:func:`mambaicl.models.pattern_gla.pattern_gla_sum`); elsewhere, and
        under :func:`mambaicl.device.plain_kernels`, the tensor formula below."""
        ref = self._ref(P)
        y = token_labels(P)  # (S, batch, L)
        if self.family in _CHANNEL and not isinstance(P, torch.Tensor) and use_compiled(ref.device):
            basis = P.basis()  # (S, batch, ...)
            dtype, device = basis.coef.dtype, basis.coef.device
            Kt, At, Ct = (channel_table(getattr(self, k).to(dtype=dtype, device=device), basis.rows)
                          for k in ("W_B", "W_alpha", "W_C"))  # (S, n+1, m) each
            F = pattern_gla_sum(Kt, At, Ct, basis, self.gate_config.tau, recurrent=self.family == "gla")
            return self._per_prompts(F, P)  # (S, batch)
        if self.family in _CHANNEL:
            X = tokens(P).to(ref.dtype)  # (S, batch, L, d+1)
            keys = torch.einsum("sbld,smd->sblm", X, self.W_B.to(ref.dtype))  # W_B p_i
            query = torch.einsum("sbd,smd->sbm", X[:, :, -1], self.W_C.to(ref.dtype))  # W_C p_query
            G = self.gate(P, channels=True)  # (S, batch, L, m)
            return torch.einsum("sbl,sblm,sbm->sb", y, G * keys, query)
        return (self.gate(P) * y * self.attention(P)).sum(-1)


def build_gla(family, d: int, *, generators, m: int | None = None, delta: float | None = None, dtype=None,
              device=None, **gate_kw) -> OneLayerStack:
    """A stack of ``len(generators)`` seeds of one gate family: ``family`` a name of :data:`GATE_FAMILIES` (with
    ``tau``, ``gamma``, ``a`` in ``gate_kw``, each only for the families of :data:`GATE_SETTINGS` it applies to)
    or a :class:`GateConfig`; ``m`` defaults to ``d + 1``. Families ``mamba`` and ``none`` give the
    :class:`OneLayerStack` of kind ``"mamba"`` and ``"linear"`` (Eq. (3)), the others a :class:`GLAStack`."""
    if isinstance(family, GateConfig):
        if gate_kw:
            raise ConfigError(f"pass gate settings {sorted(gate_kw)} inside the GateConfig, not as keywords")
        gate = family
    else:
        for key in gate_kw:
            if key not in GATE_SETTINGS:
                raise ConfigError(f"{key} does not apply to kind {family!r} (a gate family); "
                                  f"gate settings: {sorted(GATE_SETTINGS)}")
            if family not in GATE_SETTINGS[key]:
                raise ConfigError(f"{key} does not apply to kind {family!r}; it applies to {GATE_SETTINGS[key]}")
        gate = GateConfig(family=family, **gate_kw)
    if gate.family in _EQ3_KIND:
        stack = OneLayerStack(_EQ3_KIND[gate.family], d, one_layer_m(d, m), delta, generators,
                              dtype=dtype or torch.float64)
    else:
        stack = GLAStack(gate, d, one_layer_m(d, m), delta, generators, dtype=dtype)
    return stack.to(device if device is not None else "cpu")
