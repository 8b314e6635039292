"""Every configuration of the package, every field: a wrong type or a value just outside the declared
range raises a ``ValueError`` that names the field (the validator kit of :mod:`mambaicl.config`).

The cases are generated from the fields' own declarations, so a new field or a new preset class is
covered without writing a test for it; the test fails if a configuration class is never reached.
"""
from __future__ import annotations

import dataclasses
import math
import re

import pytest

import mambaicl.models.gla  # noqa: F401  (registers GateConfig)
from mambaicl import config as C
from mambaicl import experiments


def _subclasses(cls) -> set:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def _collect(obj, found: dict) -> None:
    """Every Config instance reachable from ``obj`` through dataclass fields, mappings and sequences."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if isinstance(obj, C.Config):
            found.setdefault(type(obj), obj)
        for f in dataclasses.fields(obj):
            _collect(getattr(obj, f.name), found)
    elif isinstance(obj, dict):
        for v in obj.values():
            _collect(v, found)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _collect(v, found)


def _instances() -> dict:
    found: dict = {}
    for name in experiments.names():
        module = experiments.get(name)
        _collect(list(module.PRESETS.values()), found)
    for cls in (C.DataConfig, C.TestConfig, C.TrainConfig, C.RunConfig, C.DeepConfig):
        _collect(cls(), found)
    return found


INSTANCES = _instances()


def _outside(bounds: dict, is_int: bool) -> list:
    """Values just outside the declared range (none where the side is unbounded)."""
    low, high = bounds.get("low"), bounds.get("high")
    out = []
    if low is not None and math.isfinite(low):
        out.append(low - 1 if is_int else (low if bounds.get("low_open") else low - 1e-6 * max(1, abs(low))))
    if high is not None and math.isfinite(high):
        out.append(high + 1 if is_int else (high if bounds.get("high_open") else high + 1e-6 * max(1, abs(high))))
    return out


def _cases():
    for cls, inst in sorted(INSTANCES.items(), key=lambda kv: kv[0].__name__):
        for f in dataclasses.fields(inst):
            if "check" not in f.metadata:
                continue
            yield pytest.param(inst, f.name, object(), id=f"{cls.__name__}.{f.name}=object")
            bad_str = "" if isinstance(getattr(inst, f.name), str) else "3"  # a name field takes any non-empty str
            yield pytest.param(inst, f.name, bad_str, id=f"{cls.__name__}.{f.name}=str")
            bounds = f.metadata.get("bounds", {})
            if not bounds:
                continue
            is_int = "low_open" not in bounds  # integer() and integers() declare no open ends
            wrap = (lambda v: (v,)) if isinstance(getattr(inst, f.name), tuple) else (lambda v: v)
            for v in _outside(bounds, is_int) + ([] if is_int else [math.nan]):
                yield pytest.param(inst, f.name, wrap(v), id=f"{cls.__name__}.{f.name}={wrap(v)}")


@pytest.mark.parametrize("inst, field, value", list(_cases()))
def test_field_rejects_value_naming_it(inst, field, value):
    with pytest.raises(C.ConfigError, match=rf"^{re.escape(field)}(\[\d+\])? must"):  # anchored: fields d, K, m, ...
        dataclasses.replace(inst, **{field: value})


def test_every_config_class_is_reached_and_declares_its_fields():
    classes = {c for c in _subclasses(C.Config) if not c.__subclasses__()}  # bases such as Preset excluded
    classes.add(C.TrainConfig)  # a base (of RunConfig) that the engine's callers also build themselves
    assert set(INSTANCES) == classes, f"no instance of {classes - set(INSTANCES)}"
    for cls in classes:
        checked = [f.name for f in dataclasses.fields(cls) if "check" in f.metadata]
        assert checked, f"{cls.__name__} validates none of its fields"


def test_bounds_are_inclusive_or_open_as_declared():
    # independent of the generated cases above: the edges themselves are accepted where closed
    assert C.RunConfig(lr=1.0).lr == 1.0 and C.RunConfig(delta=0.2).delta == 0.2
    with pytest.raises(ValueError, match=r"lr must be a real number in \(0\.0, 1\.0\]"):
        C.RunConfig(lr=0.0)
    assert C.DataConfig(K=0.5).K == 0.5
    with pytest.raises(ValueError, match=r"p_a must be a real number in \[0\.0, 1\.0\)"):
        C.DataConfig(p_a=1.0)
    with pytest.raises(ValueError, match="l_tr must be an integer"):
        C.DataConfig(l_tr=2.5)
    with pytest.raises(ValueError, match=r"^alpha must be a real number in \[0.0, 1.0\); got True"):
        C.TestConfig(alpha=True)  # bools are not numbers here


def _cross_field_cases():
    """Rules that involve several fields (each class's ``_check``), one case per rule."""
    from mambaicl.experiments import boundary, fig2, gates, multiclass, regression, sst2
    from mambaicl.models.gla import GateConfig

    budget = {**gates.TINY.train, "none": dataclasses.replace(gates.TINY.train["none"], steps=7)}
    return {
        "d must exceed": lambda: C.DataConfig(d=19),  # d <= M1 + M2 + V
        "v_coeffs": lambda: C.TestConfig(v_coeffs=((0.1, 0.1, 0.0),)),  # a row sums below L
        "n_heads": lambda: C.DeepConfig(kind="mamba1", n_heads=2),
        "m must be >=": lambda: fig2.Fig2Preset(name="x", train={"mamba": C.RunConfig(m=20)}),
        "kind": lambda: fig2.Fig2Preset(name="x", train={"gru": C.RunConfig()}),
        "power of 2": lambda: multiclass.MulticlassPreset(name="x", classes=(6,)),
        "family": lambda: gates.GatesPreset(name="x", gates=(GateConfig(family="s4"),), train={"s4": C.RunConfig()}),
        "budget": lambda: dataclasses.replace(gates.TINY, train=budget),
        "loss": lambda: dataclasses.replace(regression.TINY, one_layer={k: C.RunConfig(m=6)
                                                                        for k in ("mamba", "linear")}),
        "models": lambda: boundary.BoundaryPreset(name="x", models=("transformer",)),
        "regimes": lambda: sst2.SST2Preset(name="x", regimes=()),
        "tables": lambda: sst2.Regime("r", "a definition", sst2.HELD_OUT, ()),
        "unique": lambda: sst2.Table("t", (sst2.Run("a", "linear"), sst2.Run("a", "mamba")), alphas=(0.5,)),
    }


@pytest.mark.parametrize("match", list(_cross_field_cases()))
def test_cross_field_rules_raise(match):
    with pytest.raises(ValueError, match=match):
        _cross_field_cases()[match]()


def test_a_seed_tuple_is_checked_once_where_it_enters(monkeypatch):
    """resolve_seeds (a run's entry) checks each seed once; the Seeds it returns pass every later check unchanged,
    and are equal to, hashed and pickled as the plain tuple (the result store and torch.save see no new type)."""
    import pickle

    from mambaicl import checks
    from mambaicl.recipes.base import resolve_seeds
    from mambaicl.seeding import numpy_streams

    seen = []
    real = checks.check_seed
    monkeypatch.setattr(checks, "check_seed", lambda name, s: seen.append(s) or real(name, s))
    seeds = resolve_seeds(range(3))
    assert seen == [0, 1, 2] and type(seeds) is checks.Seeds
    assert resolve_seeds(seeds) is seeds and C.check_seeds("seeds", seeds) is seeds and len(numpy_streams(seeds, "t")) == 3
    assert seen == [0, 1, 2]
    assert seeds == (0, 1, 2) and hash(seeds) == hash((0, 1, 2)) and repr(seeds) == "(0, 1, 2)"
    assert type(pickle.loads(pickle.dumps(seeds))) is tuple
    with pytest.raises(C.ConfigError, match=r"^seeds must be distinct"):
        resolve_seeds((1, 1))


def test_check_instances_is_the_one_non_empty_tuple_check():
    from mambaicl.checks import check_instances

    assert check_instances("xs", (1, 2), int) == (1, 2)
    with pytest.raises(C.ConfigError, match=r"^xs must be a non-empty tuple of int; got \(\)"):
        check_instances("xs", (), int)
    with pytest.raises(C.ConfigError, match=r"^xs must be a non-empty tuple of int; got \[1\]"):
        check_instances("xs", [1], int)
    with pytest.raises(C.ConfigError, match=r"^xs\[1\] must be a int"):
        check_instances("xs", (1, "2"), int)
    with pytest.raises(C.ConfigError, match="must be a non-empty string"):
        C.check_text("name", "  ")


def test_prompt_sources_are_equal_by_class_and_key():
    from mambaicl.data.source import KeyedSource
    from mambaicl.members import SampledData

    a, b = SampledData(lambda n, s: None, 2, key="k"), SampledData(lambda n, s: None, 2, key="k")
    assert isinstance(a, KeyedSource) and a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != SampledData(lambda n, s: None, 2, key="other") and a != "k"
