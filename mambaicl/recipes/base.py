"""The protocol every experiment module follows, and the result base class.

An experiment is one module of :mod:`mambaicl.experiments`; its module name is the name used by
``python -m mambaicl reproduce NAME`` and the first line of its docstring says what it reproduces
(``--list`` prints it). It defines

==================  ====================================================================
``PRESETS``         ``{name: preset}``: :class:`Preset` subclasses holding every setting
``DEFAULT_PRESET``  the preset the CLI uses when ``--preset`` is not given
``DEFAULT_SEEDS``   the seeds the CLI uses when ``--seed(s)`` is not given
``run``             ``run(preset, *, seeds, device=None, progress=True) -> Result``
==================  ====================================================================

``Result`` objects are dataclasses; :meth:`Result.to_json` is what the CLI writes to
``results.json`` (sorted keys, byte-stable) and :meth:`Result.artifacts` what it writes to
``artifacts.pt`` (``None``: no such file). Chapters call ``run`` too, so the book and the CLI
compute the same numbers with the same code.
"""
from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import torch

from ..config import Config, ConfigError, check_seeds, jsonable, text
from ..io import json_text

__all__ = ["Preset", "Result", "internal", "resolve_seeds", "resolve_device"]


@dataclasses.dataclass(frozen=True)
class Preset(Config):
    """Base of every experiment's presets: its ``name``, the key under which ``PRESETS`` holds it.
    Subclasses declare their settings with the validator kit of :mod:`mambaicl.config`."""

    name: str = text()


def internal(default=None):
    """A result field kept in memory (models, tensors for the chapter) but not written to ``results.json``."""
    return dataclasses.field(default=default, repr=False, compare=False, metadata={"internal": True})


@dataclasses.dataclass
class Result:
    """Base class of every experiment's result; subclasses add their fields."""

    def to_dict(self) -> dict:
        """The JSON-ready content of ``results.json``: every field except those marked ``internal``."""
        return jsonable({f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                       if not f.metadata.get("internal")})

    def to_json(self) -> str:
        """``results.json``: :meth:`to_dict` with sorted keys, byte-identical for identical runs."""
        return json_text(self.to_dict())

    def artifacts(self) -> dict[str, Any] | None:
        """Tensors worth keeping (trained parameters, patterns) for ``artifacts.pt``; ``None`` if none."""
        return None


def resolve_seeds(seeds) -> tuple:
    """``seeds`` as a validated tuple (an ``int`` means one seed); checked by :func:`mambaicl.config.check_seeds`."""
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        seeds = (seeds,)
    return check_seeds("seeds", seeds)


def resolve_device(device) -> torch.device:
    """``device`` as a ``torch.device`` (default CPU; pass ``mambaicl.default_device()`` for a GPU)."""
    if device is None:
        return torch.device("cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device must be a torch device or its name (cpu, cuda, ...); got {device!r}") from None
