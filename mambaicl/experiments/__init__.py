"""One module per experiment of the book; ``python -m mambaicl reproduce --list`` lists them.

Every module follows the protocol of :mod:`mambaicl.recipes.base`: named presets, a
``run(preset, *, seeds, device, progress) -> Result`` and ``Result.to_json()``. Adding an
experiment is adding a module here (and its chapter section); the CLI finds it by itself.

**Discovery rule.** A module of this package is an experiment if and only if it assigns ``PRESETS`` at its top
level (every experiment declares its named presets; read from the source, without importing the module). The
result store (``store``) declares no presets, so it is not an experiment; no list of exceptions is kept by hand.
The protocol (:mod:`mambaicl.recipes.base`) and the reusable trainings experiments share (:mod:`mambaicl.recipes`)
live one layer down: an experiment imports recipes, never another experiment.
"""
from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from ..config import ConfigError

__all__ = ["names", "get"]


def _declares_presets(path: Path) -> bool:
    """Whether the module's source assigns ``PRESETS`` at its top level (the discovery rule)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "PRESETS" for t in targets):
            return True
    return False


def names() -> list[str]:
    """The names of all experiments (modules that declare ``PRESETS``), sorted."""
    return list(_names())


@functools.lru_cache(maxsize=1)
def _names() -> tuple:
    here = Path(__path__[0])
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if not m.ispkg and not m.name.startswith("_") and _declares_presets(here / f"{m.name}.py")))


def get(name: str) -> ModuleType:
    """The experiment module called ``name``; a :class:`~mambaicl.config.ConfigError` lists the known names."""
    if name not in names():
        raise ConfigError(f"name must be one of the experiments {', '.join(names())}; got {name!r}")
    module = importlib.import_module(f"{__name__}.{name}")
    for attr in ("PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "run"):
        if not hasattr(module, attr):
            raise RuntimeError(f"experiment module {name!r} lacks {attr} (see mambaicl.recipes.base)")
    module.NAME = name  # the module's name is the experiment's name
    module.DESCRIPTION = (module.__doc__ or name).strip().splitlines()[0]  # and its docstring's first line
    return module
