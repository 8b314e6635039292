"""Theorem 4(d)'s alpha-dependence: three forms of the examples a linear Transformer needs, and their fits.

Theorem 4(d) (§3.4) asks for ``l_ts >= max{Theta((1-alpha)^-1), Theta(alpha / (1/2 - alpha)^2)} log M1``
examples. Its proof (App. 10.4) bounds the error by ``exp(-l_ts (1/2 - alpha)^2 alpha) <= eps``, which
needs ``l_ts >= alpha^-1 (1/2 - alpha)^-2 log(1/eps)``. Counting votes (the same-pattern examples with a
flipped label against the rest) with the central limit theorem gives ``alpha (1 - alpha) / (1/2 - alpha)^2``.
All three share ``(1/2 - alpha)^-2`` and differ in the power of ``alpha`` (+1, -1, and about +0.5 over
``alpha`` in ``[0.2, 0.45]``).
"""
from __future__ import annotations

import math
from typing import Sequence

from ..checks import ConfigError

__all__ = ["FORMS", "FORM_LABELS", "form", "fit_form", "alpha_exponent"]

#: the three forms, by name
FORMS = ("statement", "proof", "clt")
FORM_LABELS = {"statement": "α/(½−α)² (statement)", "proof": "α⁻¹(½−α)⁻² (proof, App. 10.4)",
               "clt": "α(1−α)/(½−α)² (central limit)"}


def form(name: str, alpha: float) -> float:
    """The ``alpha``-dependence ``g(alpha)`` of Theorem 4(d)'s statement, its proof or the central limit form."""
    if not 0 < alpha < 0.5:
        raise ConfigError(f"alpha must lie in (0, 1/2); got {alpha!r}")
    gap = (0.5 - alpha) ** 2
    if name == "statement":
        return alpha / gap
    if name == "proof":
        return 1.0 / (alpha * gap)
    if name == "clt":
        return alpha * (1 - alpha) / gap
    raise ConfigError(f"form must be one of {FORMS}; got {name!r}")


def _check(alphas: Sequence[float], needed: Sequence[float]) -> None:
    if len(alphas) != len(needed) or len(alphas) < 2:
        raise ConfigError(f"alphas and needed must be aligned, at least 2 each; got {len(alphas)} and {len(needed)}")
    if not all(math.isfinite(v) and v > 0 for v in needed):
        raise ConfigError(f"needed lengths must be finite and positive; got {list(needed)}")


def fit_form(name: str, alphas: Sequence[float], needed: Sequence[float]) -> tuple:
    """Least-squares fit of ``log l* = log C + log g(alpha)`` (one free constant ``C``, the theorem's hidden
    constant and ``log`` factor): returns ``(C, rms)``, ``rms`` the root mean square of the log residuals."""
    _check(alphas, needed)
    r = [math.log(n) - math.log(form(name, a)) for a, n in zip(alphas, needed)]
    c = sum(r) / len(r)
    return math.exp(c), math.sqrt(sum((v - c) ** 2 for v in r) / len(r))


def alpha_exponent(alphas: Sequence[float], needed: Sequence[float]) -> float:
    """The power ``a`` of ``alpha`` in ``l* = C alpha^a (1/2 - alpha)^-2`` (least squares in logs): +1 for the
    statement, -1 for the proof."""
    _check(alphas, needed)
    x = [math.log(a) for a in alphas]
    y = [math.log(n) + 2 * math.log(0.5 - a) for a, n in zip(alphas, needed)]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((u - mx) ** 2 for u in x)
    if sxx == 0:
        raise ConfigError("alphas must not all be equal")
    return sum((u - mx) * (v - my) for u, v in zip(x, y)) / sxx
