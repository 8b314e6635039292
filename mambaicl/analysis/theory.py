"""The theorems' predicted quantities, up to the constants the paper leaves unspecified.

Glossary: ``p_a``, ``alpha``, ``l_tr``, ``l_ts``, ``M1``, ``beta`` as in the paper; ``lr`` is the
step size ``eta``.
Every function returns the bracketed expression of the theorem it names; ``Theta(.)`` and
``≳`` hide constants, so these are orders of magnitude, not exact thresholds.
"""
from __future__ import annotations

import math

__all__ = ["alpha_threshold_mamba", "alpha_threshold_lt", "T_M", "T_T", "l_ts_lower_lt", "l_ts_lower_mamba"]


def alpha_threshold_mamba(p_a: float, l_tr: int, l_ts: int) -> float:
    """Theorem 2(c): Mamba generalises for ``alpha < min(1, p_a l_tr / l_ts)``."""
    return min(1.0, p_a * l_tr / l_ts)


def alpha_threshold_lt() -> float:
    """Theorem 4(c): the linear Transformer generalises for ``alpha < 1/2``."""
    return 0.5


def T_M(lr: float, p_a: float, beta: float, M1: int) -> float:
    """Theorem 1, Eq. (2): ``eta^-1 (1 - p_a)^-1 beta^-2 M1`` iterations for Mamba."""
    return M1 / (lr * (1 - p_a) * beta**2)


def T_T(lr: float, p_a: float, beta: float, M1: int, l_tr: int) -> float:
    """Theorem 3(iv): ``eta^-1 (1 - p_a)^-1 beta^-2 l_tr^-1 M1`` iterations for the linear Transformer."""
    return T_M(lr, p_a, beta, M1) / l_tr


def l_ts_lower_lt(alpha: float, M1: int) -> float:
    """Theorem 4(d), Eq. (3): ``max{(1 - alpha)^-1, alpha / (1/2 - alpha)^2} log M1``; infinite at ``alpha >= 1/2``."""
    if not 0 <= alpha < 1:
        raise ValueError(f"alpha must lie in [0, 1); got {alpha}")
    if alpha >= 0.5:
        return math.inf
    return max(1 / (1 - alpha), alpha / (0.5 - alpha) ** 2) * math.log(M1)


def l_ts_lower_mamba(alpha: float, M1: int) -> float:
    """Theorem 2(d): ``(1 - alpha)^-1 log M1``."""
    if not 0 <= alpha < 1:
        raise ValueError(f"alpha must lie in [0, 1); got {alpha}")
    return math.log(M1) / (1 - alpha)
from .information import information_bound, information_bound_all_tasks, training_information_bound  # noqa: E402,F401  (Figure 2's information bound)
