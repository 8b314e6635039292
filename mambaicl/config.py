"""Validated configurations and named presets for the synthetic experiments (§3.2, §4.1).

Glossary (code name -> paper symbol):

================  =============================================================
``d``             data dimension ``d`` (tokens have ``d+1`` entries)
``M1``, ``M2``    numbers of relevant / irrelevant patterns ``M_1``, ``M_2``
``V``             number of training outlier patterns ``V``
``beta``          norm ``beta`` of every relevant and irrelevant pattern
``outlier_norm``  norm of the training outliers ``v*_s`` (unstated in the paper)
``kappa_a``       training outlier magnitude ``kappa_a``, Eq. (4)
``p_a``           fraction of training examples with an outlier, Eq. (4)
``K``             ``kappa ~ U(-K, K)``, scale of the irrelevant pattern, Eq. (4)
``l_tr``          context examples in a training prompt, Definition 1
``alpha``         fraction of test examples with an outlier, Eq. (5)
``kappa_a_prime`` test outlier magnitude ``kappa_a'``, Eq. (5)
``K_prime``       ``kappa' ~ U(-K', K')``, Eq. (5)
``l_ts``          context examples in a test prompt, Definition 2
``v_coeffs``      rows ``lambda`` of the test outliers ``v' = sum_s lambda_s v*_s``
``eta``, ``B``    SGD step size and batch size, Algorithm 1
``T``             number of SGD iterations
``delta``         diagonal of ``W_B^(0)``, ``W_C^(0)`` (Section 2)
``m``             state size: rows of ``W_B`` and ``W_C``
================  =============================================================

Every constructor validates its fields and raises a ``ValueError`` that names the parameter
and its allowed range; nothing is clipped silently.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

__all__ = [
    "DataConfig",
    "TestConfig",
    "TrainConfig",
    "Preset",
    "RULES",
    "PLACEMENTS",
    "V_PRIME_SECTION_4_1",
    "PLAIN",
    "FIG2",
    "PRESETS",
    "get_preset",
    "to_dict",
]

RULES = ("A", "B", "C")  # §4.1: (A) flipped, (B) one targeted label, (C) random
PLACEMENTS = ("random", "far", "close")  # outliers at random / farthest from / closest to the query
# §4.1: v1*' = 0.7 v1* + 0.6 v2* - 0.4 v3*, v2*' = 0.4 v1* + 0.7 v2* - 0.6 v3*, v3*' = -0.7 v1* + 0.5 v2* + 0.5 v3*
V_PRIME_SECTION_4_1 = ((0.7, 0.6, -0.4), (0.4, 0.7, -0.6), (-0.7, 0.5, 0.5))


def _int_at_least(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")


def _real_in(name: str, value, low: float, high: float, low_open: bool = False, high_open: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        lb, hb = ("(" if low_open else "["), (")" if high_open else "]")
        raise ValueError(f"{name} must be a real number in {lb}{low}, {high}{hb}; got {value!r}")


@dataclass(frozen=True)
class DataConfig:
    """Patterns and training prompts: §3.2, Eq. (4) and Definition 1."""

    d: int = 30
    M1: int = 6
    M2: int = 10
    V: int = 3
    beta: float = 3.0
    outlier_norm: float = 3.0
    kappa_a: float = 2.0
    p_a: float = 0.6
    K: float = 0.5
    l_tr: int = 20

    def __post_init__(self) -> None:
        _int_at_least("M1", self.M1, 3)  # Condition 1's cyclic construction needs M1 >= 3
        _int_at_least("M2", self.M2, 1)
        _int_at_least("V", self.V, 1)
        _int_at_least("d", self.d, 1)
        if self.d <= self.M1 + self.M2 + self.V:
            raise ValueError(
                f"d must exceed M1 + M2 + V = {self.M1 + self.M2 + self.V} so that all patterns are "
                f"orthogonal (§3.2 asks M1 + M2 < d, and the outliers are orthogonal to both); got d = {self.d}"
            )
        _real_in("beta", self.beta, 1.0, math.inf)  # §3.2: beta >= 1
        _real_in("outlier_norm", self.outlier_norm, 0.0, math.inf, low_open=True)
        _real_in("kappa_a", self.kappa_a, 0.0, math.inf, low_open=True)
        _real_in("p_a", self.p_a, 0.0, 1.0, high_open=True)
        _real_in("K", self.K, 0.0, 0.5)  # Eq. (4): K <= 1/2
        _int_at_least("l_tr", self.l_tr, 1)


@dataclass(frozen=True)
class TestConfig:
    """Test prompts: Eq. (5) and Definition 2, with the labelling rule and placement of §4.1."""

    l_ts: int = 20
    alpha: float = 0.0
    kappa_a_prime: float = 2.0
    K_prime: float = 1.5
    rule: str = "A"
    placement: str = "random"
    target_label: int = 1
    v_coeffs: tuple = V_PRIME_SECTION_4_1
    L: float = 0.3

    def __post_init__(self) -> None:
        _int_at_least("l_ts", self.l_ts, 1)
        _real_in("alpha", self.alpha, 0.0, 1.0, high_open=True)
        _real_in("kappa_a_prime", self.kappa_a_prime, 0.0, math.inf, low_open=True)
        _real_in("K_prime", self.K_prime, 1.0, math.inf, low_open=True)  # Eq. (5): K' > 1
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES} (§4.1: A flipped, B targeted, C random); got {self.rule!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}; got {self.placement!r}")
        if self.target_label not in (1, -1):
            raise ValueError(f"target_label must be +1 or -1 (rule B); got {self.target_label!r}")
        _real_in("L", self.L, 0.0, math.inf, low_open=True)
        self._check_v_coeffs()

    def _check_v_coeffs(self) -> None:
        rows = self.v_coeffs
        if not isinstance(rows, tuple) or len(rows) == 0 or not all(isinstance(r, tuple) and r for r in rows):
            raise ValueError(f"v_coeffs must be a non-empty tuple of non-empty tuples of reals; got {rows!r}")
        if len({len(r) for r in rows}) != 1:
            raise ValueError(f"v_coeffs rows must all have V entries; got lengths {[len(r) for r in rows]}")
        for r in rows:
            if sum(r) < self.L - 1e-12:
                raise ValueError(
                    f"each row of v_coeffs must have coefficients summing to at least L = {self.L} "
                    f"(Theorem 2(a)); row {r} sums to {sum(r):.3g}"
                )


@dataclass(frozen=True)
class TrainConfig:
    """SGD with the hinge loss (Algorithm 1) and the initialisation of Section 2."""

    eta: float = 0.1
    B: int = 64
    T: int = 1000
    delta: float = 0.2
    m: int = 31

    def __post_init__(self) -> None:
        _real_in("eta", self.eta, 0.0, 1.0, low_open=True)  # Theorems 1 and 3: eta <= 1
        _int_at_least("B", self.B, 1)
        _int_at_least("T", self.T, 1)
        _real_in("delta", self.delta, 0.0, 0.2, low_open=True)  # Section 2: delta in (0, 0.2]
        _int_at_least("m", self.m, 1)


@dataclass(frozen=True)
class Preset:
    """A named, complete Figure 2 experiment: data, one training config per model, the test shift."""

    name: str
    data: DataConfig = field(default_factory=DataConfig)
    train_mamba: TrainConfig = field(default_factory=TrainConfig)
    train_lt: TrainConfig = field(default_factory=TrainConfig)
    test: TestConfig = field(default_factory=TestConfig)
    alphas: tuple = tuple(round(0.1 * i, 1) for i in range(10))
    rules: tuple = RULES
    n_test: int = 4000

    def __post_init__(self) -> None:
        for key, tr in (("train_mamba", self.train_mamba), ("train_lt", self.train_lt)):
            if tr.m < self.data.d:
                raise ValueError(
                    f"{key}.m must be >= data.d = {self.data.d} so that the first d diagonal entries of "
                    f"W_B and W_C can be delta (Section 2); got m = {tr.m}"
                )
        if len(self.test.v_coeffs[0]) != self.data.V:
            raise ValueError(f"test.v_coeffs rows must have V = {self.data.V} entries; got {len(self.test.v_coeffs[0])}")
        if not self.alphas or any(not isinstance(a, (int, float)) or not (0 <= a < 1) for a in self.alphas):
            raise ValueError(f"alphas must be a non-empty tuple of values in [0, 1); got {self.alphas!r}")
        if not self.rules or any(r not in RULES for r in self.rules):
            raise ValueError(f"rules must be a non-empty tuple drawn from {RULES}; got {self.rules!r}")
        _int_at_least("n_test", self.n_test, 1)


def to_dict(cfg) -> dict:
    """A JSON-ready dict of any config above (tuples become lists)."""
    return dataclasses.asdict(cfg)


# "plain": the first honest attempt. Test outliers exactly as strong as the training ones
# (kappa_a' = kappa_a, the lower end of Theorem 2(b)); irrelevant patterns at K' = 1.5.
_PLAIN_TRAIN = TrainConfig(eta=0.1, B=64, T=1000, delta=0.2, m=31)
PLAIN = Preset(
    name="plain",
    train_mamba=_PLAIN_TRAIN,
    train_lt=_PLAIN_TRAIN,
    test=TestConfig(kappa_a_prime=2.0, K_prime=1.5),
)
# "fig2": the step sizes come from the search of Chapter 4 (lowest validation hinge loss on
# Definition 1 prompts, i.e. on the *training* distribution, per model), and
# kappa_a' = kappa_a / L: the weakest test outlier (coefficients summing to L) then projects
# on the training outliers as strongly as a training outlier does (Theorem 2(a)-(b)).
FIG2 = Preset(
    name="fig2",
    train_mamba=TrainConfig(eta=0.3, B=64, T=1000, delta=0.2, m=31),
    train_lt=TrainConfig(eta=0.01, B=64, T=1000, delta=0.2, m=31),
    test=TestConfig(kappa_a_prime=round(2.0 / 0.3, 2), K_prime=1.5),
)
PRESETS = {"plain": PLAIN, "fig2": FIG2}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; a ``ValueError`` lists the known names."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known presets: {sorted(PRESETS)}")
    return PRESETS[name]
