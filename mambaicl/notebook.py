"""Glue numbers into the chapters' prose.

``glue`` forwards to MyST-NB's ``glue`` when the book tool chain is installed; on Colab or
Binder, where MyST-NB may be missing, it just records the value so the chapter still runs. It
returns ``None``, so a cell that ends with ``glue(...)`` displays nothing (no stray value in the
page); the glued value appears where the prose cites it with ``{glue:text}`` or ``{glue:figure}``.
"""
from __future__ import annotations

from typing import Any

__all__ = ["glue", "GLUED"]

GLUED: dict[str, Any] = {}


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record ``value`` under ``name`` for ``{glue:text}`` / ``{glue:figure}`` roles in the chapter's prose."""
    GLUED[name] = value
    try:
        from myst_nb import glue as _glue
    except ImportError:  # running outside the book tool chain
        return None
    _glue(name, value, display=display)
    return None
