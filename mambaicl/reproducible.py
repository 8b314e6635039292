"""Printing numbers at the precision every CPU reproduces (the conventions page, "Two levels of reproducibility").

A chapter's stored outputs are validated cell by cell on whichever machine runs ``pytest``. Two kinds
of printed number are not the same on every CPU although the computation is deterministic:

* a **rounding residual** (``|recurrence - closed form|``, an inner product of orthogonal
  vectors): its last bits depend on the order in which the CPU's vector units add, so
  ``2.13e-14`` on one machine is ``1.78e-14`` on another. What is reproducible is the bound it
  meets: :func:`residual_bound` reports ``1e-12`` for every residual below it;
* a **signed zero**: ``-1e-17`` prints as ``-0.000`` on one machine and ``+1e-17`` as ``+0.000``
  on another; :func:`fixed` rounds first and drops the sign of zero.

Glossary: ``RESIDUAL_BOUNDS`` are the bounds a residual is reported against, smallest first; a
residual at or above the largest is returned unchanged (a real discrepancy, printed in full).
"""
from __future__ import annotations

import math

from .config import ConfigError

__all__ = ["RESIDUAL_BOUNDS", "residual_bound", "residual_text", "fixed"]

# Float64 residuals of the book's identities are 1e-16 .. 1e-13; 1e-12 sits three decades above the
# largest, so no CPU's rounding can move a residual across it. The larger bounds serve float32 checks.
RESIDUAL_BOUNDS = (1e-12, 1e-9, 1e-6)


def _finite(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
        raise ConfigError(f"{name} must be a real number, got {type(x).__name__}")
    x = float(x)
    if math.isnan(x):
        raise ConfigError(f"{name} must be a number, got nan")
    return x


def residual_bound(x) -> float:
    """The smallest of :data:`RESIDUAL_BOUNDS` strictly above ``|x|``, or ``|x|`` itself above them all.

    Args:
        x: a rounding residual (a float, or a 0-d tensor/array).
    Returns:
        the bound the residual meets, the same on every CPU (``|x|`` when it meets none: a failure
        to be seen, never hidden).
    """
    x = abs(_finite(x, "residual"))
    for bound in RESIDUAL_BOUNDS:
        if x < bound:
            return bound
    return x


def residual_text(x) -> str:
    """``"< 1e-12"`` for a residual below a bound of :data:`RESIDUAL_BOUNDS`, else the residual itself."""
    b = residual_bound(x)
    return f"< {b:.0e}" if b in RESIDUAL_BOUNDS and abs(float(x)) < b else f"{b:.3g}"


def fixed(x, digits: int = 3, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals and no signed zero (``-1e-17`` prints as ``0.000``, ``+0.000`` with ``sign``)."""
    if isinstance(digits, bool) or not isinstance(digits, int) or not 0 <= digits <= 15:
        raise ConfigError(f"digits must be an integer in [0, 15], got {digits!r}")
    x = _finite(x, "x")
    r = round(x, digits) + 0.0  # -0.0 + 0.0 is +0.0 in IEEE 754 (round to nearest)
    return f"{r:+.{digits}f}" if sign else f"{r:.{digits}f}"
