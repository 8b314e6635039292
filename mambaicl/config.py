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
with the ``check_*`` functions of :mod:`mambaicl.checks` (re-exported here), which raise a
:class:`ConfigError` (a ``ValueError``) naming the field and the allowed range, for out-of-range and non-numeric values alike; nothing is clipped silently.
Configurations declare each field's range with :func:`integer`, :func:`real`, :func:`choice`,
:func:`flag` or :func:`reals` and inherit :class:`Config`, which runs the checks.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .checks import (  # noqa: F401  (the kit, re-exported)
    ConfigError, check_int, check_real, check_choice, check_bool, check_reals, check_ints, check_choices,
    check_instance, check_instances, check_seed, check_text, check_seeds,
)

__all__ = [
    "ConfigError",
    "check_int",
    "check_real",
    "check_choice",
    "check_bool",
    "check_seed",
    "check_seeds",
    "check_text",
    "check_reals",
    "check_ints",
    "check_choices",
    "check_instance",
    "check_trains",
    "Config",
    "integers",
    "choices",
    "instance",
    "trains",
    "text",
    "integer",
    "real",
    "choice",
    "flag",
    "reals",
    "DataConfig",
    "TestConfig",
    "TrainConfig",
    "RunConfig",
    "DeepConfig",
    "ONE_LAYER_KINDS",
    "DEEP_KINDS",
    "RULES",
    "PLACEMENTS",
    "RULE_LABELS",
    "PLACEMENT_LABELS",
    "PLACEMENTS_FAR_TO_CLOSE",
    "OPTIMIZERS",
    "LOSSES",
    "V_PRIME_SECTION_4_1",
    "to_dict",
    "jsonable",
    "SYNTHETIC_DATA",
    "SYNTHETIC_TEST",
    "SYNTHETIC_LR",
    "synthetic_trains",
]

RULES = ("A", "B", "C")  # §4.1: (A) flipped, (B) one targeted label, (C) random
PLACEMENTS = ("R", "FQ", "CQ")  # §4.2: outliers at random (R) / farthest from (FQ) / closest to (CQ) the query
PLACEMENTS_FAR_TO_CLOSE = ("FQ", "R", "CQ")  # the same letters ordered by the outliers' distance to the query
#: the display labels of the rules and placements (accepted as input aliases; :mod:`mambaicl.data.vocabulary`)
RULE_LABELS = {"A": "flipped", "B": "targeted", "C": "random label"}
PLACEMENT_LABELS = {"R": "random position", "FQ": "far", "CQ": "close"}
OPTIMIZERS = ("sgd", "adam")
ONE_LAYER_KINDS = ("mamba", "mamba_merged", "linear")  # Eq. (3); "linear" is G = 1 (Section 3.4)
DEEP_KINDS = ("mamba", "linear", "softmax", "mamba1")  # residual stacks (§4, App. 8)
LOSSES = ("hinge", "logistic", "squared")
# §4.1: v1*' = 0.7 v1* + 0.6 v2* - 0.4 v3*, v2*' = 0.4 v1* + 0.7 v2* - 0.6 v3*, v3*' = -0.7 v1* + 0.5 v2* + 0.5 v3*
V_PRIME_SECTION_4_1 = ((0.7, 0.6, -0.4), (0.4, 0.7, -0.6), (-0.7, 0.5, 0.5))


# ---------------------------------------------------------------- the validator kit (mambaicl.checks)

def check_trains(name: str, train, kinds=None, min_m: int | None = None, loss: str | None = None) -> dict:
    """A mapping of model kinds to :class:`RunConfig` (every kind of ``kinds`` when given), each with
    ``m >= min_m`` and the loss ``loss`` when given."""
    if not isinstance(train, dict) or not train or (kinds is not None and set(train) != set(kinds)):
        want = f"each of {tuple(kinds)}" if kinds is not None else "model kinds"
        raise ConfigError(f"{name} must map {want} to a RunConfig; got {train!r}")
    for k, tr in train.items():
        check_instance(f"{name}[{k!r}]", tr, RunConfig)
        if min_m is not None and tr.m < min_m:
            raise ConfigError(f"{name}[{k!r}].m must be >= {min_m} so that the first d diagonal entries of W_B and "
                             f"W_C can be delta (Section 2); got m = {tr.m}")
        if loss is not None and tr.loss != loss:
            raise ConfigError(f"{name}[{k!r}].loss must be {loss!r}; got {tr.loss!r}")
    return train


# ---------------------------------------------------------------- declarative fields


def _field(default, check, **bounds):
    """A dataclass field whose metadata holds its ``check`` (run by :class:`Config`) and, for numbers,
    its ``bounds`` (``low``, ``high``, ``low_open``, ``high_open``), which the tests read to try every
    field just outside its range."""
    metadata = {"check": check, "bounds": bounds}
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def integer(default, low: int | None = None, high: int | None = None, optional: bool = False):
    """A dataclass field holding an integer in ``[low, high]`` (or ``None`` when ``optional``), validated by
    :class:`Config`."""
    return _field(default, lambda name, v: v if (optional and v is None) else check_int(name, v, low, high),
                  low=low, high=high)


def real(default, low: float = -math.inf, high: float = math.inf, low_open: bool = False, high_open: bool = False):
    """A dataclass field holding a finite real in the interval, validated by :class:`Config`."""
    return _field(default, lambda name, v: check_real(name, v, low, high, low_open, high_open),
                  low=low, high=high, low_open=low_open, high_open=high_open)


def choice(default, choices):
    """A dataclass field holding one of ``choices``, validated by :class:`Config`."""
    choices = tuple(choices)
    return _field(default, lambda name, v: check_choice(name, v, choices))


def flag(default: bool):
    """A dataclass field holding ``True`` or ``False``, validated by :class:`Config`."""
    return _field(default, check_bool)


def reals(default, low: float = -math.inf, high: float = math.inf, low_open: bool = False,
          high_open: bool = False, min_len: int = 1, distinct: bool = False, increasing: bool = False):
    """A dataclass field holding a tuple of reals in the interval, validated by :class:`Config`."""
    return _field(tuple(default), lambda name, v: check_reals(name, v, low, high, low_open, high_open, min_len,
                                                              distinct, increasing),
                  low=low, high=high, low_open=low_open, high_open=high_open)


def integers(default, low: int | None = None, high: int | None = None, min_len: int = 1, distinct: bool = False,
             increasing: bool = False):
    """A dataclass field holding a tuple of integers in ``[low, high]``, validated by :class:`Config`."""
    return _field(tuple(default), lambda name, v: check_ints(name, v, low, high, min_len, distinct, increasing),
                  low=low, high=high)


def choices(default, options, min_len: int = 1, distinct: bool = True):
    """A dataclass field holding a tuple of values among ``options``, validated by :class:`Config`."""
    options = tuple(options)
    return _field(tuple(default), lambda name, v: check_choices(name, v, options, min_len, distinct))


def instance(cls, default=None, factory=None, optional: bool = False):
    """A dataclass field holding an instance of ``cls`` (e.g. a nested config), validated by :class:`Config`."""
    check = lambda name, v: check_instance(name, v, cls, optional)  # noqa: E731
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"check": check})
    return dataclasses.field(default=default, metadata={"check": check})


def text(default=dataclasses.MISSING):
    """A dataclass field holding a non-empty string (a name), validated by :class:`Config`."""
    return dataclasses.field(default=default, metadata={"check": check_text})


def trains(factory, kinds=None, min_m: int | None = None, loss: str | None = None):
    """A dataclass field mapping model kinds to :class:`RunConfig`, validated by :class:`Config`."""
    return dataclasses.field(default_factory=factory,
                             metadata={"check": lambda name, v: check_trains(name, v, kinds, min_m, loss)})


class Config:
    """Base of every configuration: validates each field declared with :func:`integer`, :func:`real`,
    :func:`choice`, :func:`flag` or :func:`reals` on creation, then calls :meth:`_check` for
    conditions that involve several fields. Subclasses are frozen dataclasses."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            check = f.metadata.get("check")
            if check is not None:
                check(f.name, getattr(self, f.name))
        self._check()

    def _check(self) -> None:
        """Checks across fields (none by default)."""


# ---------------------------------------------------------------- shared configurations


@dataclass(frozen=True)
class DataConfig(Config):
    """Patterns and training prompts: §3.2, Eq. (4) and Definition 1."""

    d: int = integer(30, 1)
    M1: int = integer(6, 3)  # Condition 1's cyclic construction needs M1 >= 3
    M2: int = integer(10, 1)
    V: int = integer(3, 1)
    beta: float = real(3.0, 1.0)  # §3.2: beta >= 1
    outlier_norm: float = real(3.0, 0.0, low_open=True)
    kappa_a: float = real(2.0, 0.0, low_open=True)
    p_a: float = real(0.6, 0.0, 1.0, high_open=True)
    K: float = real(0.5, 0.0, 0.5)  # Eq. (4): K <= 1/2
    l_tr: int = integer(20, 1)

    def _check(self) -> None:
        if self.d <= self.M1 + self.M2 + self.V:
            raise ConfigError(
                f"d must exceed M1 + M2 + V = {self.M1 + self.M2 + self.V} so that all patterns are "
                f"orthogonal (§3.2 asks M1 + M2 < d, and the outliers are orthogonal to both); got d = {self.d}"
            )


@dataclass(frozen=True)
class TestConfig(Config):
    """Test prompts: Eq. (5) and Definition 2, with the labelling rule and placement of §4.1."""

    __test__ = False  # not a pytest test class, though its name starts with "Test"

    l_ts: int = integer(20, 1)
    alpha: float = real(0.0, 0.0, 1.0, high_open=True)
    kappa_a_prime: float = real(2.0, 0.0, low_open=True)
    K_prime: float = real(1.5, 1.0, low_open=True)  # Eq. (5): K' > 1
    rule: str = choice("A", RULES)
    placement: str = choice("R", PLACEMENTS + tuple(PLACEMENT_LABELS.values()))  # a label is stored as its letter
    target_label: int = choice(1, (1, -1))
    v_coeffs: tuple = V_PRIME_SECTION_4_1
    L: float = real(0.3, 0.0, low_open=True)

    def _check(self) -> None:
        letter = {v: k for k, v in PLACEMENT_LABELS.items()}.get(self.placement, self.placement)
        object.__setattr__(self, "placement", letter)  # the alias is mapped once, here
        rows = self.v_coeffs
        if not isinstance(rows, tuple) or len(rows) == 0 or not all(isinstance(r, tuple) and r for r in rows):
            raise ConfigError(f"v_coeffs must be a non-empty tuple of non-empty tuples of reals; got {rows!r}")
        if len({len(r) for r in rows}) != 1:
            raise ConfigError(f"v_coeffs rows must all have V entries; got lengths {[len(r) for r in rows]}")
        for i, r in enumerate(rows):
            check_reals(f"v_coeffs[{i}]", r)
            if sum(r) < self.L - 1e-12:
                raise ConfigError(
                    f"each row of v_coeffs must have coefficients summing to at least L = {self.L} "
                    f"(Theorem 2(a)); row {r} sums to {sum(r):.3g}"
                )


@dataclass(frozen=True)
class TrainConfig(Config):
    """What the training loop :func:`mambaicl.train.train` reads, and nothing else: the batch size ``B``, the
    number of updates ``T``, the optimizer and the loss. Algorithm 1 is ``optimizer="sgd"``, ``loss="hinge"``.

    The step size and the initialisation belong to each member (:class:`mambaicl.train.Member`); a preset that
    fixes them per model kind holds a :class:`RunConfig`.
    """

    batch_size: int = integer(64, 1)
    steps: int = integer(1000, 0)
    optimizer: str = choice("sgd", OPTIMIZERS)
    loss: str = choice("hinge", LOSSES)


@dataclass(frozen=True)
class RunConfig(TrainConfig):
    """One model kind's training in a preset: the loop's :class:`TrainConfig` plus what its members read, the
    step size ``lr`` (:attr:`Member.lr <mambaicl.train.Member>`) and, for the one-layer models of Section 2, the
    initialisation ``delta`` and ``m`` (:func:`mambaicl.models.build_model`). Pass it to
    :func:`mambaicl.train.train` as it is: the loop reads its :class:`TrainConfig` fields only.
    """

    lr: float = real(0.1, 0.0, 1.0, low_open=True)  # Theorems 1 and 3: eta <= 1
    delta: float = real(0.2, 0.0, 0.2, low_open=True)  # Section 2: delta in (0, 0.2]
    m: int = integer(31, 1)


@dataclass(frozen=True)
class DeepConfig(Config):
    """A residual stack of ``n_layers`` layers of one kind (:func:`mambaicl.models.build_model` with
    ``n_layers``): the paper's three-layer models of §4.1-4.2 and App. 8."""

    kind: str = choice("mamba", DEEP_KINDS)
    n_layers: int = integer(3, 1)  # residual layers
    n_heads: int = integer(1, 1)  # heads per layer (a Mamba-1 block has one)
    d_model: int = integer(64, 1)  # width of the residual stream
    d_state: int = integer(16, 1)  # state size per head
    delta: float = real(0.2, 0.0, 1.0, low_open=True)
    norm: str = choice("rms", ("rms", "none", "after_first"))  # models.deep.NORMS

    def _check(self) -> None:
        if self.kind == "mamba1":
            check_int("n_heads", self.n_heads, 1, 1)  # a Mamba-1 block has no heads

    def model_kwargs(self) -> dict:
        """Keyword arguments of :func:`mambaicl.models.build_model` for this stack."""
        kw = {"n_layers": self.n_layers, "n_heads": self.n_heads, "d_model": self.d_model,
              "d_state": self.d_state, "norm": self.norm}
        if self.kind != "mamba1":
            kw["delta"] = self.delta
        return kw


def to_dict(cfg) -> dict:
    """A JSON-ready dict of any config dataclass (tuples become lists, mappings stay mappings)."""
    return jsonable(dataclasses.asdict(cfg))


def jsonable(obj):
    """``obj`` with mapping keys as strings, tuples as lists and arrays or tensors (anything with
    ``tolist``) as nested lists: what :func:`mambaicl.io.write_json` can write."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj.tolist() if hasattr(obj, "tolist") and not isinstance(obj, (int, float, str, bool)) else obj


# ---------------------------------------------------------------- shared experiment defaults (synthetic chapters)

#: the synthetic data of §4.1 (Figure 2's), shared by Chapters 3, 4 and 7
SYNTHETIC_DATA = DataConfig()
#: Figure 2's test shift: kappa_a' = kappa_a / L (Chapter 4 explains the choice)
SYNTHETIC_TEST = TestConfig(kappa_a_prime=round(2.0 / 0.3, 2))
#: Figure 2's step sizes from Chapter 4's search: eta = 1 for both Mamba parametrisations, 0.01 for the linear Transformer
SYNTHETIC_LR = {"mamba": 1.0, "mamba_merged": 1.0, "linear": 0.01}
#: the seed of Part I's ("Learn") illustrative models and their prompts (Part II's experiments use seeds 0-9)
LEARN_SEED = 2025


def synthetic_trains(**kw) -> dict:
    """A fresh ``{kind: RunConfig}`` of the one-layer models at :data:`SYNTHETIC_LR` (``kw`` overrides fields)."""
    return {k: RunConfig(**({"lr": lr} | kw)) for k, lr in SYNTHETIC_LR.items()}
