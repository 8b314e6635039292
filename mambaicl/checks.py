"""The validator kit: :class:`ConfigError` and the ``check_*`` functions every configuration and
every public function of the package validates its parameters with (re-exported by :mod:`mambaicl.config`).

Each check returns the value (converted: ``int``, ``float``, ``tuple``) or raises a :class:`ConfigError`
whose message starts with the field's name and gives the allowed range, for out-of-range and
non-numeric values alike; nothing is clipped silently.
"""
from __future__ import annotations

import math
import numbers
from typing import Iterable

class ConfigError(ValueError):
    """An invalid parameter: the message names the field and the allowed values or range.

    A subclass of ``ValueError``, so ``except ValueError`` still catches it; the CLI catches *only*
    this (with ``FileNotFoundError`` and ``PermissionError``) as bad input.
    """


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]``; else a ``ValueError`` naming ``name`` and the range."""
    if not _is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise ConfigError(f"{name} must be an integer in [{lo}, {hi}]; got {value!r}")
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
        raise ConfigError(f"{name} must be a real number in {lb}{low}, {high}{hb}; got {value!r}")
    return float(value)


def check_choice(name: str, value, choices: Iterable) -> object:
    """``value`` if it is one of ``choices``; else a ``ValueError`` listing them."""
    choices = tuple(choices)
    try:
        ok = value in choices
    except TypeError:  # unhashable value
        ok = False
    if not ok:
        raise ConfigError(f"{name} must be one of {choices}; got {value!r}")
    return value


def check_bool(name: str, value) -> bool:
    """``value`` if it is a ``bool``; else a ``ValueError``."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False; got {value!r}")
    return value


def _sequence(name: str, values, what: str, min_len: int) -> tuple:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ConfigError(f"{name} must be a sequence of {what}; got {values!r}")
    values = tuple(values)
    if len(values) < min_len:
        raise ConfigError(f"{name} must hold at least {min_len} value(s); got {values!r}")
    return values


def _order(name: str, values: tuple, distinct: bool, increasing: bool) -> None:
    if distinct and len(set(values)) != len(values):
        raise ConfigError(f"{name} must be distinct; got {values!r}")
    if increasing and list(values) != sorted(set(values)):
        raise ConfigError(f"{name} must be increasing; got {values!r}")


def check_reals(name: str, values, low: float = -math.inf, high: float = math.inf,
                low_open: bool = False, high_open: bool = False, min_len: int = 1, distinct: bool = False,
                increasing: bool = False) -> tuple:
    """A tuple of reals, each in the interval (see :func:`check_real`), optionally distinct / increasing."""
    values = _sequence(name, values, "real numbers", min_len)
    for i, v in enumerate(values):
        check_real(f"{name}[{i}]", v, low, high, low_open, high_open)
    _order(name, values, distinct, increasing)
    return tuple(float(v) for v in values)


def check_ints(name: str, values, low: int | None = None, high: int | None = None, min_len: int = 1,
               distinct: bool = False, increasing: bool = False) -> tuple:
    """A tuple of integers, each in ``[low, high]`` (see :func:`check_int`), optionally distinct / increasing."""
    values = _sequence(name, values, "integers", min_len)
    for i, v in enumerate(values):
        check_int(f"{name}[{i}]", v, low, high)
    _order(name, values, distinct, increasing)
    return tuple(int(v) for v in values)


def check_choices(name: str, values, options, min_len: int = 1, distinct: bool = True) -> tuple:
    """A tuple of values, each one of ``options`` (see :func:`check_choice`), distinct by default."""
    values = _sequence(name, values, f"values among {tuple(options)}", min_len)
    for i, v in enumerate(values):
        check_choice(f"{name}[{i}]", v, options)
    _order(name, values, distinct, False)
    return values


def check_instance(name: str, value, cls, optional: bool = False):
    """``value`` if it is an instance of ``cls`` (or ``None`` when ``optional``); else a ``ValueError``."""
    if (value is None and optional) or isinstance(value, cls):
        return value
    raise ConfigError(f"{name} must be {'None or ' if optional else ''}a {cls.__name__}; got {value!r}")


def check_instances(name: str, values, cls) -> tuple:
    """A non-empty tuple of instances of ``cls`` (a preset's runs, tables, regimes, gates): the tuple itself, each
    item checked by :func:`check_instance` as ``name[i]``; else a ``ValueError``."""
    if not isinstance(values, tuple) or not values:
        raise ConfigError(f"{name} must be a non-empty tuple of {cls.__name__}; got {values!r}")
    for i, v in enumerate(values):
        check_instance(f"{name}[{i}]", v, cls)
    return values


def check_seed(name: str, seed) -> int:
    """One seed: a non-negative integer (the one rule every seed of the package is checked by)."""
    if not _is_int(seed) or seed < 0:
        raise ConfigError(f"{name} must be a non-negative integer; got {seed!r}")
    return int(seed)


def check_text(name: str, value) -> str:
    """A non-empty string that is not blank (a name: a preset's, a stage's, a run's; a definition)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a non-empty string; got {value!r}")
    return value


class Seeds(tuple):
    """A tuple of seeds already checked by :func:`check_seeds`: a seed tuple is checked once, where it enters (a CLI
    argument, a ``run(...)`` call: :func:`mambaicl.recipes.base.resolve_seeds`), and passed on as this type, which
    every later :func:`check_seeds` returns unchanged. Equal to, hashed and printed like the plain tuple."""

    __slots__ = ()

    def __reduce__(self):  # pickled (torch.save, the result store) as the plain tuple it stands for
        return (tuple, (tuple(self),))


def check_seeds(name: str, seeds) -> Seeds:
    """A non-empty tuple of distinct non-negative integer seeds (each checked by :func:`check_seed`), returned as
    :class:`Seeds`; a :class:`Seeds` is returned as it is (checked where it entered)."""
    if type(seeds) is Seeds:
        return seeds
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise ConfigError(f"{name} must be a sequence of non-negative integers; got {seeds!r}")
    seeds = tuple(seeds)
    if not seeds:
        raise ConfigError(f"{name} must hold at least one seed")
    for i, s in enumerate(seeds):
        check_seed(f"{name}[{i}]", s)
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{name} must be distinct; got {seeds!r}")
    return Seeds(int(s) for s in seeds)
