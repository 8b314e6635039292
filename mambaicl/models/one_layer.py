"""The one-layer models of Eq. (3): single models and seed stacks, one class family.

Glossary (code name -> paper symbol):

================  =========================================================
``P``             prompt ``(..., l+1, d+1)`` (query last) or a :class:`mambaicl.data.Prompts` batch
``W_B``, ``W_C``  key / query matrices of the equivalent linear attention, ``(m, d+1)``
``W``             the attention form ``W_B^T W_C`` trained as one matrix ("merged product", Chapter 4)
``w``             gate vector ``w = w_{d0}``, ``(d+1,)``
``S``             seeds stacked along a leading axis (:class:`OneLayerStack`)
================  =========================================================

Every model here computes Eq. (3) through one mixin, :class:`Eq3`: ``attention`` (``p_i^T M
p_query``), ``logits`` (``w^T p_i``), ``gate`` (:func:`mambaicl.models.gated_attention.gate_from_logits`)
and ``forward`` (:func:`mambaicl.models.gated_attention.gated_sum`). A single model
(:class:`OneLayerMamba`, :class:`OneLayerMambaMerged`, :class:`OneLayerLinearTransformer`) holds
one set of parameters; :class:`OneLayerStack` holds ``S`` sets stacked on a seed axis, and the gate
families of App. 12 (:class:`mambaicl.models.gla.GLAStack`) are a :class:`OneLayerStack` with
another gate. On a :class:`mambaicl.data.Prompts` batch the projections are read through
its token basis (:meth:`~mambaicl.data.Prompts.basis`, Eq. (4)/(5)) and the tables of :mod:`mambaicl.models.pattern_eq3`
instead of materialising ``P``. Implements Eq. (3) of Li et al. (2025).
"""
from __future__ import annotations

import torch
from torch import nn

from ..config import ONE_LAYER_KINDS, check_choice, check_int
from ..device import use_compiled
from .defaults import ONE_LAYER_DELTA, check_dims, check_generators
from .gated_attention import bilinear_scores, check_prompt, gate_from_logits, gated_sum
from .pattern_eq3 import (attention_table, basis_logits, basis_scores, logit_table, pattern_gated_sum, pattern_scores,
                          pattern_sum)
from .shapes import token_labels, tokens

__all__ = ["Eq3", "OneLayerMamba", "OneLayerLinearTransformer", "OneLayerMambaMerged", "OneLayerStack",
           "ONE_LAYER_KINDS", "GATE_FAMILY", "model_class"]

#: the App. 12 gate family (:data:`mambaicl.models.gla.GATE_FAMILIES`) of each one-layer kind: Eq. (3)'s own gate,
#: or none (``G = 1``, the linear Transformer). The other families are :class:`mambaicl.models.gla.GLAStack`.
GATE_FAMILY = {"mamba": "mamba", "mamba_merged": "mamba", "linear": "none"}


def _diagonal_init(m: int, d: int, delta: float) -> torch.Tensor:
    """``(m, d+1)`` matrix whose first ``min(m, d)`` diagonal entries are ``delta``, zero elsewhere."""
    W = torch.zeros(m, d + 1, dtype=torch.float64)
    k = min(m, d)
    W[torch.arange(k), torch.arange(k)] = delta
    return W


def _gate_init(d: int, generator: torch.Generator | None, dtype: torch.dtype) -> torch.Tensor:
    """``w^(0) ~ N(0, I_{d+1}/(d+1))`` (Section 2), drawn in float64 on the generator's device."""
    device = generator.device if generator is not None else "cpu"
    w = torch.randn(d + 1, generator=generator, dtype=torch.float64, device=device) / (d + 1) ** 0.5
    return w.to(dtype=dtype, device="cpu")


class Eq3:
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
        return token_labels(P)

    def attention(self, P) -> torch.Tensor:
        """``p_i^T M p_query`` for every token, ``(..., l+1)``."""
        if isinstance(P, torch.Tensor):
            check_prompt(P, self.d)
            return bilinear_scores(P, self.bilinear(P.dtype).to(P.device))
        basis = P.basis()
        scores_of = pattern_scores if use_compiled(basis.coef.device) else basis_scores  # compiled, or its twin
        return self._per_prompts(scores_of(self._attention_table(basis), basis), P)

    def logits(self, P) -> torch.Tensor:
        """``w^T p_i`` for every token, ``(..., l+1)`` (gated kinds only)."""
        ref = self._ref(P)
        w = self.w.to(dtype=ref.dtype, device=ref.device)
        if isinstance(P, torch.Tensor):
            return P @ w if w.dim() == 1 else (P @ w[:, None, :, None]).squeeze(-1)
        basis = P.basis()
        return self._per_prompts(basis_logits(self._logit_table(basis), basis), P)

    def _per_prompts(self, out: torch.Tensor, P) -> torch.Tensor:
        """Drop the seed axis :meth:`Prompts.basis` added to a batch without one."""
        return out[0] if token_labels(P).dim() == out.dim() - 1 else out

    def _logit_table(self, basis) -> torch.Tensor:
        """``T = w^T e_a`` of every seed, ``(S, n + 1)`` (:func:`mambaicl.models.pattern_eq3.logit_table`)."""
        w = self.w.to(dtype=basis.coef.dtype, device=basis.coef.device)
        return logit_table(w if self.stacked else w[None], basis.rows)

    def _attention_table(self, basis) -> torch.Tensor:
        """``Q[b, a] = e_a^T M e_b`` of every seed, ``(S, n + 1, n + 1)``: from the factors ``W_B``, ``W_C`` when
        the model has them (:func:`mambaicl.models.pattern_eq3.attention_table`)."""
        dtype, device = basis.coef.dtype, basis.coef.device
        if hasattr(self, "W_B"):
            W_B, W_C = (getattr(self, k).to(dtype=dtype, device=device) for k in ("W_B", "W_C"))
            return attention_table(basis.rows, W_B=W_B if self.stacked else W_B[None],
                                   W_C=W_C if self.stacked else W_C[None])
        M = self.bilinear(dtype).to(device)
        return attention_table(basis.rows, M=M if self.stacked else M[None])

    def gate(self, P) -> torch.Tensor:
        """``G_{i,l+1}(w)`` for every token, ``(..., l+1)``; sums to at most 1 (ones if ungated)."""
        if not self.gated:
            return torch.ones_like(self._ref(P))
        return gate_from_logits(self.logits(P))

    def forward(self, P) -> torch.Tensor:
        """``F(Psi; P)`` of Eq. (3), the query being the last token: ``(batch,)``, or ``(S, batch)`` for a stack.

        On a :class:`mambaicl.data.Prompts` batch: the compiled kernel on the prompts' token basis (on the CPU)
        (:func:`mambaicl.models.pattern_eq3.pattern_gated_sum`, or :func:`~mambaicl.models.pattern_eq3.pattern_sum`
        without a gate)."""
        if not isinstance(P, torch.Tensor) and use_compiled(token_labels(P).device):
            return self._pattern_forward(P)
        if self.gated and not isinstance(P, torch.Tensor):
            P = tokens(P)  # the tensor formula on other devices (and on the CPU under device.plain_kernels())
        y = token_labels(P)
        att = self.attention(P)
        return gated_sum(self.logits(P), att, y) if self.gated else (y * att).sum(-1)


    def _pattern_forward(self, P) -> torch.Tensor:
        basis = P.basis()  # (S, batch, ...), a seed axis added for a single model
        if self.gated:
            F = pattern_gated_sum(self._logit_table(basis), self._attention_table(basis), basis)  # (S, batch)
        else:
            F = pattern_sum(self._attention_table(basis), basis)  # (S, batch)
        return F if self.stacked else F[0]


class _OneLayer(Eq3, nn.Module):
    """A one-layer model of Eq. (3): ``kind`` in :data:`ONE_LAYER_KINDS`; subclasses hold the parameters.

    Parameters are stored in the default dtype; every method computes in the input's dtype and
    on its device. ``forward`` takes a prompt tensor ``(batch, l+1, d+1)`` or a
    :class:`mambaicl.data.Prompts` batch and returns ``F`` ``(batch,)``.
    """

    kind: str = ""
    gated: bool = True

    def __init__(self, d: int, m: int, delta: float | None) -> None:
        super().__init__()
        self.d, self.m, self.delta = check_dims(d, m, ONE_LAYER_DELTA if delta is None else delta)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError


class _Factored(_OneLayer):
    """``W_B``, ``W_C`` ``(m, d+1)`` with Section 2's initialisation; the attention form is their product."""

    def __init__(self, d: int, m: int, delta: float | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta)
        dtype = dtype or torch.get_default_dtype()
        self.W_B = nn.Parameter(_diagonal_init(m, d, self.delta).to(dtype))  # (m, d+1)
        self.W_C = nn.Parameter(_diagonal_init(m, d, self.delta).to(dtype))  # (m, d+1)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``W_B^T W_C``, ``(d+1, d+1)``, computed in ``dtype`` (default: the parameters')."""
        return self.W_B.to(dtype or self.W_B.dtype).T @ self.W_C.to(dtype or self.W_C.dtype)


class OneLayerMamba(_Factored):
    """One-layer Mamba in the closed form of Eq. (3) of Li et al. (2025).

    Args:
        d: data dimension; tokens have ``d+1`` entries (features and label).
        m: state size (rows of ``W_B`` and ``W_C``).
        delta: the first ``d`` diagonal entries of ``W_B`` and ``W_C`` at initialisation
            (default: Section 2's, ``RunConfig.delta``).
        generator: ``torch.Generator`` for ``w ~ N(0, I/(d+1))``; the default generator if ``None``.

    Parameters ``W_B``, ``W_C`` ``(m, d+1)`` and ``w`` ``(d+1,)``.
    """

    kind = "mamba"

    def __init__(self, d: int, m: int, delta: float | None = None, generator: torch.Generator | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta, dtype)
        self.w = nn.Parameter(_gate_init(d, generator, self.W_B.dtype))  # (d+1,)


class OneLayerLinearTransformer(_Factored):
    """One-layer single-head linear Transformer: Eq. (3) with ``G_{i,l+1} = 1`` (Section 3.4).

    ``OneLayerLinearTransformer(d, m, delta=None)``: parameters ``W_B``, ``W_C`` ``(m, d+1)``; it draws
    nothing at random, so ``generator`` is accepted and unused.
    """

    kind = "linear"
    gated = False

    def __init__(self, d: int, m: int, delta: float | None = None, generator: torch.Generator | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta, dtype)


class OneLayerMambaMerged(_OneLayer):
    """One-layer Mamba whose attention form ``W = W_B^T W_C`` is trained as one matrix ("merged product").

    ``F = sum_i G_{i,l+1}(w) y_i p_i^T W p_query`` with ``W`` ``(d+1, d+1)`` initialised to
    ``W_B^(0)T W_C^(0)`` (``delta^2`` on the first ``d`` diagonal entries), the same gate and the
    same Algorithm 1. Not the paper's parametrisation: Chapter 4 compares the two.
    """

    kind = "mamba_merged"

    def __init__(self, d: int, m: int, delta: float | None = None, generator: torch.Generator | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__(d, m, delta)
        dtype = dtype or torch.get_default_dtype()
        init = _diagonal_init(m, d, self.delta).to(dtype)
        self.W = nn.Parameter(init.T @ init)  # (d+1, d+1): W_B^(0)T W_C^(0)
        self.w = nn.Parameter(_gate_init(d, generator, dtype))  # (d+1,)

    def bilinear(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """``W``, ``(d+1, d+1)``, in ``dtype`` (default: the parameter's)."""
        return self.W.to(dtype or self.W.dtype)


_CLASSES = {"mamba": OneLayerMamba, "mamba_merged": OneLayerMambaMerged, "linear": OneLayerLinearTransformer}


def model_class(kind: str) -> type:
    """The single-model class of a one-layer ``kind`` of :data:`ONE_LAYER_KINDS`."""
    return _CLASSES[check_choice("kind", kind, ONE_LAYER_KINDS)]


class OneLayerStack(Eq3, nn.Module):
    """``S`` independent one-layer models of one kind, their parameters stacked along a seed axis.

    Training the stack on the sum over seeds of each seed's mean loss gives every seed exactly
    its own gradient, so SGD (or Adam) on the stack equals training each seed alone, up to
    floating-point rounding; one batched computation replaces ``S``.

    Args:
        kind: ``"mamba"``, ``"mamba_merged"`` or ``"linear"``.
        d, m, delta: as for :class:`OneLayerMamba`.
        generators: one ``torch.Generator`` per seed for ``w^(0)`` (gated kinds; the linear kind draws
            nothing, and takes only their number).

    ``forward`` takes stacked prompts (a ``(S, batch, l+1, d+1)`` tensor or a ``(S, batch, ...)``
    :class:`mambaicl.data.Prompts`) and returns ``F`` ``(S, batch)``; :meth:`member` returns seed
    ``s`` as a single model.
    """

    stacked = True

    def __init__(self, kind: str, d: int, m: int, delta: float | None, generators,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        cls = model_class(kind)
        generators = check_generators(generators)
        self.kind, self.gated = kind, cls.gated
        self.d, self.m, self.delta = check_dims(d, m, ONE_LAYER_DELTA if delta is None else delta)
        self._dtype = dtype or torch.get_default_dtype()
        members = [self._single(g) for g in generators]
        for name, _ in members[0].named_parameters():
            self.register_parameter(name, nn.Parameter(torch.stack([dict(mm.named_parameters())[name].detach()
                                                                    for mm in members])))

    def _single(self, generator=None) -> _OneLayer:
        dtype = next(self.parameters()).dtype if len(list(self.parameters())) else self._dtype
        return _CLASSES[self.kind](self.d, self.m, self.delta, generator=generator, dtype=dtype)

    @property
    def n_seeds(self) -> int:
        return next(self.parameters()).shape[0]

    @property
    def family(self) -> str:
        """The stack's gate family (App. 12): :data:`GATE_FAMILY` of its kind, or a :class:`GLAStack`'s own."""
        return GATE_FAMILY.get(self.kind, self.kind)

    def member(self, s: int) -> nn.Module:
        """Seed ``s`` as a single model of the same kind (a copy of its parameters)."""
        check_int("s", s, 0, self.n_seeds - 1)
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
