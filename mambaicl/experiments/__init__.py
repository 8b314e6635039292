"""One module per experiment of the book; ``python -m mambaicl reproduce --list`` lists them.

Every module follows the protocol of :mod:`mambaicl.experiments.base`: named presets, a
``run(preset, *, seeds, device, progress) -> Result`` and ``Result.to_json()``. Adding an
experiment is adding a module here (and its chapter section); the CLI finds it by itself.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

__all__ = ["names", "get"]

_NOT_EXPERIMENTS = {"base", "store", "mechanism_fit", "sst2_train"}  # the protocol, the result store, two helper modules


def names() -> list[str]:
    """The names of all experiments, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_EXPERIMENTS
                  and not m.name.startswith("_"))


def get(name: str) -> ModuleType:
    """The experiment module called ``name``; a ``ValueError`` lists the known names."""
    if name not in names():
        raise ValueError(f"unknown experiment {name!r}; known experiments: {', '.join(names())}")
    module = importlib.import_module(f"{__name__}.{name}")
    for attr in ("PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "run"):
        if not hasattr(module, attr):
            raise RuntimeError(f"experiment module {name!r} lacks {attr} (see mambaicl.experiments.base)")
    module.NAME = name  # the module's name is the experiment's name
    module.DESCRIPTION = (module.__doc__ or name).strip().splitlines()[0]  # and its docstring's first line
    return module
