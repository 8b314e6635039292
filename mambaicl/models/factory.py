"""One factory for every model of the book: :func:`build_model`.

=====================  =================================================================
call                   model
=====================  =================================================================
``build_model("mamba", d)``                 :class:`OneLayerMamba`, Eq. (3)
``build_model("mamba_merged", d)``          :class:`OneLayerMambaMerged` (one matrix ``W``)
``build_model("linear", d)``                :class:`OneLayerLinearTransformer` (``G = 1``)
``build_model(kind, d, generators=[...])``  :class:`OneLayerStack`: one model per seed, stacked
``build_model("mamba2", d, generators=...)``  App. 12 gate families (:mod:`.gla`): ``"mamba2"``,
                                            ``"mamba2_app12"``, ``"gated_retention"``, ``"retnet"``,
                                            ``"gla"``, ``"gla_app12"`` (seed stacks; ``tau``, ``gamma``, ``a``)
``build_model(kind, d, n_layers=3, ...)``   :class:`DeepICLModel`: ``"mamba"``, ``"linear"``,
                                            ``"softmax"`` or ``"mamba1"`` layers (§4, App. 8)
=====================  =================================================================
"""
from __future__ import annotations

import torch

from ..config import check_choice, check_int, check_real
from .deep import KINDS, build_deep
from .gated_attention import ONE_LAYER_KINDS, OneLayerStack, _CLASSES
from .gla import GATE_FAMILIES, build_gla

__all__ = ["build_model", "GATE_KINDS"]

#: one-layer gated-linear-attention kinds of App. 12 besides Mamba ("mamba") and no gate ("linear")
GATE_KINDS = tuple(f for f in GATE_FAMILIES if f not in ("mamba", "none"))


def build_model(kind: str, d: int, *, n_layers: int | None = None, m: int | None = None, delta: float = 0.2,
                generator: torch.Generator | None = None, generators=None, dtype: torch.dtype | None = None,
                device=None, **deep_kw) -> torch.nn.Module:
    """Build any model of the book.

    Args:
        kind: one-layer kinds ``"mamba"``, ``"mamba_merged"``, ``"linear"`` (Eq. (3)) and the App. 12 gate
            families :data:`GATE_KINDS` (seed stacks only; their ``tau``, ``gamma``, ``a`` go in the
            keywords); deep kinds (with ``n_layers``) ``"mamba"``, ``"linear"``, ``"softmax"``, ``"mamba1"``.
        d: data dimension; prompts are ``(batch, l+1, d+1)``.
        n_layers: ``None`` for the one-layer models of Eq. (3) (Section 2's initialisation);
            an integer for a residual stack (:func:`mambaicl.models.deep.build_deep`, whose
            keywords ``n_heads``, ``d_model``, ``d_state``, ``norm``, ``scan``, ``expand``,
            ``d_conv`` pass through ``deep_kw``).
        m: state size of a one-layer model (rows of ``W_B``, ``W_C``); default ``d + 1``.
        delta: initial diagonal of ``W_B``, ``W_C`` (one layer) or their initial scale (deep).
        generator: ``torch.Generator`` for the random initial values.
        generators: one generator per seed: a :class:`OneLayerStack` of ``len(generators)``
            one-layer models (not for deep stacks).
        dtype: parameter dtype; default float64 for one-layer models (the synthetic chapters'
            precision), ``torch.get_default_dtype()`` for deep stacks.
        device: where the model lives (default CPU).
    """
    if n_layers is None and kind in GATE_KINDS:
        if generators is None:
            raise ValueError(f"kind {kind!r} (an App. 12 gate family) is built as a seed stack: pass generators=[...]")
        return build_gla(kind, d, generators=generators, m=m, delta=delta, dtype=dtype or torch.float64,
                         device=device, **deep_kw)
    if n_layers is None:
        check_choice("kind", kind, ONE_LAYER_KINDS + GATE_KINDS)
        check_int("d", d, 1)
        m = d + 1 if m is None else check_int("m", m, 1)
        check_real("delta", delta, 0.0, low_open=True)
        if deep_kw:
            raise ValueError(f"unknown keyword(s) {sorted(deep_kw)} for a one-layer model; "
                             "pass n_layers for a deep stack")
        dtype = dtype or torch.float64
        if generators is not None:
            model = OneLayerStack(kind, d, m, delta, generators, dtype=dtype)
        else:
            cls = _CLASSES[kind]
            model = cls(d, m, delta, dtype=dtype) if kind == "linear" else cls(d, m, delta, generator=generator,
                                                                                dtype=dtype)
    else:
        check_choice("kind", kind, KINDS)
        if generators is not None:
            raise ValueError("generators (one model per seed) is only for one-layer models; "
                             "build one deep model per seed")
        model = build_deep(kind, d, n_layers=n_layers, generator=generator, delta=delta, **deep_kw) \
            if kind != "mamba1" else build_deep(kind, d, n_layers=n_layers, generator=generator, **deep_kw)
        if dtype is not None:
            model = model.to(dtype)
    return model.to(device if device is not None else "cpu")
