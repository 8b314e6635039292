"""The validator kit and the configurations shared by every experiment (§3.2, §4.1, Algorithm 1).

Glossary (code name -> paper symbol):

=================  =============================================================
``d``              data dimension ``d`` (tokens have ``d+1`` entries)
``M1``, ``M2``     numbers of relevant / irrelevant patterns ``M_1``, ``M_2``
``V``              number of training outlier patterns ``V``
``beta``           norm ``beta`` of every relevant and irrelevant pattern
``outlier_norm``   norm of the training outliers ``v*_s`` (unstated in the paper)
``kappa_a``        training outlier magnitude ``kappa_a``, Eq. (4)
``p_a``            fraction of training examples with an outlier, Eq. (4)
``K``              ``kappa ~ U(-K, K)``, scale of the irrelevant pattern, Eq. (4)
``l_tr``           context examples in a training prompt, Definition 1
``alpha``          fraction of test examples with an outlier, Eq. (5)
``kappa_a_prime``  test outlier magnitude ``kappa_a'``, Eq. (5)
``K_prime``        ``kappa' ~ U(-K', K')``, Eq. (5)
``l_ts``           context examples in a test prompt, Definition 2
``v_coeffs``       rows ``lambda`` of the test outliers ``v' = sum_s lambda_s v*_s``
``lr``             step size ``eta`` (Algorithm 1)
``batch_size``     batch size ``B`` (Algorithm 1)
``steps``          iterations ``T`` (Algorithm 1)
``delta``          diagonal of ``W_B^(0)``, ``W_C^(0)`` (Section 2)
``m``              state size: rows of ``W_B`` and ``W_C``
=================  =============================================================

One spelling of each hyperparameter holds across the package: ``lr``, ``batch_size``,
``steps``, ``seed``; model kinds are ``"mamba"``, ``"mamba_merged"``, ``"linear"`` (one layer,
Eq. (3)) and ``"mamba"``, ``"linear"``, ``"softmax"``, ``"mamba1"`` (deep stacks).

**The validator kit.** Every configuration in the package validates its fields on creation
with the ``check_*`` functions below, which raise a ``ValueError`` naming the field and the
allowed range, for out-of-range and non-numeric values alike; nothing is clipped silently.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Iterable

__all__ = [
    "check_int",
    "check_real",
    "check_choice",
    "check_bool",
    "check_seeds",
    "check_reals",
    "DataConfig",
    "TestConfig",
    "TrainConfig",
    "DeepConfig",
    "ONE_LAYER_KINDS",
    "DEEP_KINDS",
    "RULES",
    "PLACEMENTS",
    "OPTIMIZERS",
    "LOSSES",
    "V_PRIME_SECTION_4_1",
    "to_dict",
]

RULES = ("A", "B", "C")  # §4.1: (A) flipped, (B) one targeted label, (C) random
PLACEMENTS = ("random", "far", "close")  # outliers at random (R) / farthest from (FQ) / closest to (CQ) the query
OPTIMIZERS = ("sgd", "adam")
ONE_LAYER_KINDS = ("mamba", "mamba_merged", "linear")  # Eq. (3); "linear" is G = 1 (Section 3.4)
DEEP_KINDS = ("mamba", "linear", "softmax", "mamba1")  # residual stacks (§4, App. 8)
LOSSES = ("hinge", "logistic", "squared")
# §4.1: v1*' = 0.7 v1* + 0.6 v2* - 0.4 v3*, v2*' = 0.4 v1* + 0.7 v2* - 0.6 v3*, v3*' = -0.7 v1* + 0.5 v2* + 0.5 v3*
V_PRIME_SECTION_4_1 = ((0.7, 0.6, -0.4), (0.4, 0.7, -0.6), (-0.7, 0.5, 0.5))


# ---------------------------------------------------------------- the validator kit


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]``; else a ``ValueError`` naming ``name`` and the range."""
    if not _is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}]; got {value!r}")
    return int(value)


def check_real(name: str, value, low: float = -math.inf, high: float = math.inf,
               low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite ``float`` in the interval; else a ``ValueError`` naming ``name`` and the interval."""
    ok = _is_real(value) and math.isfinite(float(value))
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        lb, hb = ("(" if low_open else "["), (")" if high_open else "]")
        raise ValueError(f"{name} must be a real number in {lb}{low}, {high}{hb}; got {value!r}")
    return float(value)


def check_choice(name: str, value, choices: Iterable) -> object:
    """``value`` if it is one of ``choices``; else a ``ValueError`` listing them."""
    choices = tuple(choices)
    try:
        ok = value in choices
    except TypeError:  # unhashable value
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    """``value`` if it is a ``bool``; else a ``ValueError``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return value


def check_reals(name: str, values, low: float = -math.inf, high: float = math.inf,
                low_open: bool = False, high_open: bool = False, min_len: int = 1) -> tuple:
    """A non-empty tuple of reals, each in the interval (see :func:`check_real`)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a sequence of real numbers; got {values!r}")
    values = tuple(values)
    if len(values) < min_len:
        raise ValueError(f"{name} must hold at least {min_len} value(s); got {values!r}")
    for i, v in enumerate(values):
        check_real(f"{name}[{i}]", v, low, high, low_open, high_open)
    return tuple(float(v) for v in values)


def check_seeds(name: str, seeds) -> tuple:
    """A non-empty tuple of distinct non-negative integer seeds."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise ValueError(f"{name} must be a sequence of non-negative integers; got {seeds!r}")
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError(f"{name} must hold at least one seed")
    for i, s in enumerate(seeds):
        check_int(f"{name}[{i}]", s, 0)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{name} must be distinct; got {seeds!r}")
    return tuple(int(s) for s in seeds)


# ---------------------------------------------------------------- shared configurations


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
        check_int("M1", self.M1, 3)  # Condition 1's cyclic construction needs M1 >= 3
        check_int("M2", self.M2, 1)
        check_int("V", self.V, 1)
        check_int("d", self.d, 1)
        if self.d <= self.M1 + self.M2 + self.V:
            raise ValueError(
                f"d must exceed M1 + M2 + V = {self.M1 + self.M2 + self.V} so that all patterns are "
                f"orthogonal (§3.2 asks M1 + M2 < d, and the outliers are orthogonal to both); got d = {self.d}"
            )
        check_real("beta", self.beta, 1.0)  # §3.2: beta >= 1
        check_real("outlier_norm", self.outlier_norm, 0.0, low_open=True)
        check_real("kappa_a", self.kappa_a, 0.0, low_open=True)
        check_real("p_a", self.p_a, 0.0, 1.0, high_open=True)
        check_real("K", self.K, 0.0, 0.5)  # Eq. (4): K <= 1/2
        check_int("l_tr", self.l_tr, 1)


@dataclass(frozen=True)
class TestConfig:
    """Test prompts: Eq. (5) and Definition 2, with the labelling rule and placement of §4.1."""

    __test__ = False  # not a pytest test class, though its name starts with "Test"

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
        check_int("l_ts", self.l_ts, 1)
        check_real("alpha", self.alpha, 0.0, 1.0, high_open=True)
        check_real("kappa_a_prime", self.kappa_a_prime, 0.0, low_open=True)
        check_real("K_prime", self.K_prime, 1.0, low_open=True)  # Eq. (5): K' > 1
        check_choice("rule", self.rule, RULES)
        check_choice("placement", self.placement, PLACEMENTS)
        check_choice("target_label", self.target_label, (1, -1))
        check_real("L", self.L, 0.0, low_open=True)
        self._check_v_coeffs()

    def _check_v_coeffs(self) -> None:
        rows = self.v_coeffs
        if not isinstance(rows, tuple) or len(rows) == 0 or not all(isinstance(r, tuple) and r for r in rows):
            raise ValueError(f"v_coeffs must be a non-empty tuple of non-empty tuples of reals; got {rows!r}")
        if len({len(r) for r in rows}) != 1:
            raise ValueError(f"v_coeffs rows must all have V entries; got lengths {[len(r) for r in rows]}")
        for i, r in enumerate(rows):
            check_reals(f"v_coeffs[{i}]", r)
            if sum(r) < self.L - 1e-12:
                raise ValueError(
                    f"each row of v_coeffs must have coefficients summing to at least L = {self.L} "
                    f"(Theorem 2(a)); row {r} sums to {sum(r):.3g}"
                )


@dataclass(frozen=True)
class TrainConfig:
    """One run of the training loop :func:`mambaicl.train.fit`; Algorithm 1 is ``optimizer="sgd"``, ``loss="hinge"``.

    ``delta`` and ``m`` set the initialisation of the one-layer models of Section 2.
    """

    lr: float = 0.1
    batch_size: int = 64
    steps: int = 1000
    delta: float = 0.2
    m: int = 31
    optimizer: str = "sgd"
    loss: str = "hinge"

    def __post_init__(self) -> None:
        check_real("lr", self.lr, 0.0, 1.0, low_open=True)  # Theorems 1 and 3: eta <= 1
        check_int("batch_size", self.batch_size, 1)
        check_int("steps", self.steps, 0)
        check_real("delta", self.delta, 0.0, 0.2, low_open=True)  # Section 2: delta in (0, 0.2]
        check_int("m", self.m, 1)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("loss", self.loss, LOSSES)


@dataclass(frozen=True)
class DeepConfig:
    """A residual stack of ``n_layers`` layers of one kind (:func:`mambaicl.models.build_model` with
    ``n_layers``): the paper's three-layer models of §4.1-4.2 and App. 8."""

    kind: str = "mamba"
    n_layers: int = 3
    n_heads: int = 1
    d_model: int = 64
    d_state: int = 16
    delta: float = 0.2
    norm: str = "rms"

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, DEEP_KINDS)
        check_int("n_layers", self.n_layers, 1)
        check_int("n_heads", self.n_heads, 1, 1 if self.kind == "mamba1" else None)
        check_int("d_model", self.d_model, 1)
        check_int("d_state", self.d_state, 1)
        check_real("delta", self.delta, 0.0, 1.0, low_open=True)
        check_choice("norm", self.norm, ("rms", "none"))

    def model_kwargs(self) -> dict:
        """Keyword arguments of :func:`mambaicl.models.build_model` for this stack."""
        kw = {"n_layers": self.n_layers, "n_heads": self.n_heads, "d_model": self.d_model,
              "d_state": self.d_state, "norm": self.norm}
        if self.kind != "mamba1":
            kw["delta"] = self.delta
        return kw


def to_dict(cfg) -> dict:
    """A JSON-ready dict of any config dataclass (tuples become lists, mappings stay mappings)."""
    return _jsonable(dataclasses.asdict(cfg))


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj
