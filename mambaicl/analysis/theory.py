"""The theorems' predicted quantities, up to the constants the paper leaves unspecified.

Glossary: ``p_a``, ``alpha``, ``l_tr``, ``l_ts``, ``M1``, ``beta`` as in the paper; ``lr`` is the
step size ``eta``.
Every function returns the bracketed expression of the theorem it names; ``Theta(.)`` and
``≳`` hide constants, so these are orders of magnitude, not exact thresholds.
"""
from __future__ import annotations

import math

from ..checks import ConfigError, check_int

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
        raise ConfigError(f"alpha must lie in [0, 1); got {alpha}")
    if alpha >= 0.5:
        return math.inf
    return max(1 / (1 - alpha), alpha / (0.5 - alpha) ** 2) * math.log(M1)


def l_ts_lower_mamba(alpha: float, M1: int) -> float:
    """Theorem 2(d): ``(1 - alpha)^-1 log M1``."""
    if not 0 <= alpha < 1:
        raise ConfigError(f"alpha must lie in [0, 1); got {alpha}")
    return math.log(M1) / (1 - alpha)


# ------------------------------------------------------------------------------------------ predicted exponents
# Defined here, next to the theorems, so that the registry of claims (``analysis.claims``) reads the paper's
# predictions from the analysis layer alone; Chapter 3's dynamics runs and the boundary grid import them from here
# (a test asserts they are the same objects).

#: the swept factors of T_M = Theta(eta^-1 (1-p_a)^-1 beta^-2 M1) and T_T = T_M / Theta(l_tr)
FACTORS = ("lr", "one_minus_p_a", "beta", "M1", "l_tr")
#: the factors of Lemma 4's rates measured over the whole early horizon (eta left out: +1 for any dynamics close
#: to gradient flow)
EARLY_FACTORS = ("one_minus_p_a", "beta", "M1", "l_tr")
#: exponent of each factor in Lemma 3's growth rate (Eq. (10): eta (1-p_a) beta / M1) and Lemma 4's rates
#: (v*^T w: eta beta^2 kappa_a (1-p_a) / V; (mu_j, 0) w: eta (1-p_a) beta^2 / M1; their ratio mu / v)
LEMMA_PREDICTED = {
    "lemma3": {"lr": 1.0, "one_minus_p_a": 1.0, "beta": 1.0, "M1": -1.0, "l_tr": 0.0},
    "lemma4_v": {"lr": 1.0, "one_minus_p_a": 1.0, "beta": 2.0, "M1": 0.0, "l_tr": 0.0},
    "lemma4_mu": {"lr": 1.0, "one_minus_p_a": 1.0, "beta": 2.0, "M1": -1.0, "l_tr": 0.0},
    "lemma4_ratio": {"lr": 0.0, "one_minus_p_a": 0.0, "beta": 0.0, "M1": -1.0, "l_tr": 0.0},
}


#: exponent of each factor in Theorem 1's T_M (Mamba) and Theorem 3's T_T (linear Transformer)
THEOREM_PREDICTED = {"mamba": {"lr": -1.0, "one_minus_p_a": -1.0, "beta": -2.0, "M1": 1.0, "l_tr": 0.0},
                     "linear": {"lr": -1.0, "one_minus_p_a": -1.0, "beta": -2.0, "M1": 1.0, "l_tr": -1.0}}


def alpha_limit_mamba_d(l_ts: int, M1: int) -> float:
    """The largest ``alpha`` allowed by Theorem 2(d)'s lower bound ``l_ts >= (1 - alpha)^{-1} log M1`` with the
    hidden constant set to 1: ``1 - log(M1) / l_ts`` (about ``log M1`` clean examples expected in the prompt)."""
    _check_lengths(l_ts, M1)
    return max(0.0, 1.0 - math.log(M1) / l_ts)


def alpha_limit_lt_d(l_ts: int, M1: int) -> float:
    """The largest ``alpha < 1/2`` allowed by Theorem 4(d), ``l_ts >= max{(1 - alpha)^{-1}, alpha / (1/2 - alpha)^2}
    log M1``, constants set to 1 (the smaller root of ``c (1/2 - alpha)^2 = alpha`` with ``c = l_ts / log M1``)."""
    _check_lengths(l_ts, M1)
    c = l_ts / math.log(M1)
    # c alpha^2 - (c + 1) alpha + c / 4 = 0, smaller root in [0, 1/2)
    root = ((c + 1) - math.sqrt((c + 1) ** 2 - c * c)) / (2 * c)
    return max(0.0, min(root, alpha_limit_mamba_d(l_ts, M1)))


def _check_lengths(l_ts, M1) -> None:
    check_int("l_ts", l_ts, 1)
    check_int("M1", M1, 2)


__all__ += ["FACTORS", "EARLY_FACTORS", "LEMMA_PREDICTED", "THEOREM_PREDICTED", "alpha_limit_mamba_d", "alpha_limit_lt_d"]

from .information import information_bound, information_bound_all_tasks, training_information_bound  # noqa: E402,F401  (Figure 2's information bound)
