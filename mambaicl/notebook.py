"""Small helpers for the chapters: glue numbers into the prose, pick a device.

``glue`` forwards to MyST-NB's ``glue`` when the book is built; on Colab or Binder, where
MyST-NB may be missing, it just records the value so the chapter still runs.
"""
from __future__ import annotations

from typing import Any

__all__ = ["glue", "GLUED"]

GLUED: dict[str, Any] = {}


def glue(name: str, value: Any, display: bool = False) -> Any:
    """Record ``value`` under ``name`` for ``{glue:text}`` roles in the chapter's prose."""
    GLUED[name] = value
    try:
        from myst_nb import glue as _glue
    except ImportError:  # running outside the book tool chain
        return value
    _glue(name, value, display=display)
    return value
