"""Model defaults and the checks every model constructor shares, read from the configurations of :mod:`mambaicl.config`.

The defaults of the models are those of the configurations, declared once there: the one-layer
models of Eq. (3) take ``delta`` from :class:`mambaicl.config.RunConfig` (Section 2's
initialisation), the deep stacks take every default of :class:`mambaicl.config.DeepConfig`. One
range holds for ``delta`` across every model kind: that of ``DeepConfig.delta``.
"""
from __future__ import annotations

import dataclasses

import torch

from ..config import ConfigError, DeepConfig, RunConfig, check_int, check_real

__all__ = ["DELTA_RANGE", "ONE_LAYER_DELTA", "DEEP_DEFAULTS", "one_layer_m", "check_delta", "check_dims",
           "check_generators"]


def _field(cls, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


#: ``delta`` (initial diagonal of ``W_B``, ``W_C``, or their scale in a deep stack): one range for every kind
DELTA_RANGE: dict = dict(_field(DeepConfig, "delta").metadata["bounds"])
#: Section 2's ``delta`` of the one-layer models
ONE_LAYER_DELTA: float = _field(RunConfig, "delta").default
#: defaults of a deep stack (:func:`mambaicl.models.deep.build_deep`)
DEEP_DEFAULTS: dict = {f.name: f.default for f in dataclasses.fields(DeepConfig) if f.name != "kind"}


def one_layer_m(d: int, m: int | None) -> int:
    """The state size of a one-layer model: ``m``, or ``d + 1`` (``W_B^T W_C`` of full rank) if ``None``."""
    return d + 1 if m is None else m


def check_delta(delta) -> float:
    """``delta`` as a float in :data:`DELTA_RANGE`; else a :class:`~mambaicl.config.ConfigError`."""
    return check_real("delta", delta, **DELTA_RANGE)


def check_dims(d, m, delta) -> tuple[int, int, float]:
    """``d >= 1``, ``m >= 1`` and ``delta`` in :data:`DELTA_RANGE` for a one-layer model."""
    return check_int("d", d, 1), check_int("m", m, 1), check_delta(delta)


def check_generators(generators) -> list:
    """A non-empty list of ``torch.Generator`` (one per seed of a stack)."""
    if isinstance(generators, torch.Generator) or not hasattr(generators, "__iter__"):
        raise ConfigError(f"generators must be a sequence of torch.Generator (one per seed); got {generators!r}")
    generators = list(generators)
    if not generators:
        raise ConfigError("generators must hold one torch.Generator per seed (at least one)")
    for i, g in enumerate(generators):
        if not isinstance(g, torch.Generator):
            raise ConfigError(f"generators[{i}] must be a torch.Generator; got {g!r}")
    return generators
