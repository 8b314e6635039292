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

Every keyword that does not apply to the kind asked for raises a :class:`~mambaicl.config.ConfigError`
naming the keyword and the kind; nothing is ignored. Defaults are the configurations' (see
:mod:`mambaicl.models.defaults`), and ``delta`` has one range for every kind.
"""
from __future__ import annotations

import torch

from ..config import ConfigError, check_choice, check_int
from .deep import KINDS, build_deep
from .defaults import one_layer_m
from .gla import GATE_FAMILIES, build_gla
from .one_layer import ONE_LAYER_KINDS, OneLayerStack, model_class

__all__ = ["build_model", "GATE_KINDS"]

#: one-layer gated-linear-attention kinds of App. 12 besides Mamba ("mamba") and no gate ("linear")
GATE_KINDS = tuple(f for f in GATE_FAMILIES if f not in ("mamba", "none"))


def _reject(kind: str, what: str, why: str, **given) -> None:
    """A :class:`ConfigError` for the first keyword of ``given`` that is set (not ``None``)."""
    for key, value in given.items():
        if value is not None:
            raise ConfigError(f"{key} does not apply to kind {kind!r} {what}; {why}")


def build_model(kind: str, d: int, *, n_layers: int | None = None, m: int | None = None, delta: float | None = None,
                generator: torch.Generator | None = None, generators=None, dtype: torch.dtype | None = None,
                device=None, **kw) -> torch.nn.Module:
    """Build any model of the book.

    Args:
        kind: one-layer kinds ``"mamba"``, ``"mamba_merged"``, ``"linear"`` (Eq. (3)) and the App. 12 gate
            families :data:`GATE_KINDS` (seed stacks only; their ``tau``, ``gamma``, ``a`` go in the
            keywords); deep kinds (with ``n_layers``) ``"mamba"``, ``"linear"``, ``"softmax"``, ``"mamba1"``.
        d: data dimension; prompts are ``(batch, l+1, d+1)``.
        n_layers: ``None`` for the one-layer models of Eq. (3) (Section 2's initialisation);
            an integer for a residual stack (:func:`mambaicl.models.deep.build_deep`, whose
            keywords ``n_heads``, ``d_model``, ``d_state``, ``norm``, ``scan``, ``expand``,
            ``d_conv`` pass through ``kw``).
        m: state size of a one-layer model (rows of ``W_B``, ``W_C``); default ``d + 1``. Deep stacks: ``d_state``.
        delta: initial diagonal of ``W_B``, ``W_C`` (one layer) or their initial scale (deep, not
            ``"mamba1"``); default the configurations'.
        generator: ``torch.Generator`` for the random initial values of one model.
        generators: one generator per seed: a :class:`OneLayerStack` of ``len(generators)``
            one-layer models (not for deep stacks; required for the gate families).
        dtype: parameter dtype; default float64 for one-layer models (the synthetic chapters'
            precision), ``torch.get_default_dtype()`` for deep stacks.
        device: where the model lives (default CPU).

    Raises:
        ConfigError: an invalid value, or a keyword that does not apply to ``kind`` (e.g. ``m`` for a
            deep stack, ``delta`` for ``"mamba1"``, ``generator`` with ``generators``).
    """
    if n_layers is not None:
        check_choice("kind", kind, KINDS)
        _reject(kind, f"with n_layers = {n_layers!r} (a deep stack)",
                "a deep stack's state size is d_state and it is built one seed at a time (generator)",
                m=m, generators=generators)
        if kind == "mamba1":
            _reject(kind, "(a Mamba-1 stack)", "its initialisation follows Gu & Dao (2023)", delta=delta)
        else:
            kw = kw if delta is None else {**kw, "delta": delta}
        model = build_deep(kind, d, n_layers=n_layers, generator=generator, **kw)
        return model.to(dtype=dtype, device=device if device is not None else "cpu")
    check_choice("kind", kind, ONE_LAYER_KINDS + GATE_KINDS)
    check_int("d", d, 1)
    m = one_layer_m(d, m)
    if kind in GATE_KINDS:
        _reject(kind, "(an App. 12 gate family, built as a seed stack)", "pass generators=[...]", generator=generator)
        if generators is None:
            raise ConfigError(f"kind {kind!r} (an App. 12 gate family) is built as a seed stack: pass generators=[...]")
        return build_gla(kind, d, generators=generators, m=m, delta=delta, dtype=dtype or torch.float64,
                         device=device, **kw)
    for key in kw:
        raise ConfigError(f"{key} does not apply to kind {kind!r} without n_layers (a one-layer model of Eq. (3)); "
                          "pass n_layers for a deep stack")
    dtype = dtype or torch.float64
    if generators is not None:
        _reject(kind, "with generators (a seed stack)", "each seed's generator is in generators", generator=generator)
        model = OneLayerStack(kind, d, m, delta, generators, dtype=dtype)
    else:
        model = model_class(kind)(d, m, delta, generator=generator, dtype=dtype)
    return model.to(device if device is not None else "cpu")
