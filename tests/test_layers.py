"""The package's layers, read from the import statements (nothing is run): data flows one way.

``train`` -> ``recipes`` -> ``experiments``: an experiment imports recipes, never another experiment (the result
store and the registry of ``experiments/__init__.py`` are not experiments); ``analysis`` and ``viz`` import neither
``train`` nor an experiment nor a recipe, and ``analysis`` not the notebook layer; ``recipes`` import no experiment.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "mambaicl"

#: imports that are known to break a rule and are scheduled to move (module -> imported modules); keep it short
PENDING: dict = {}


def _imports(path: Path) -> set:
    """Every module ``path`` imports, as absolute dotted names (relative imports resolved; ``from . import x``
    gives ``package.x``)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in out if m.startswith("mambaicl")}


def _modules(folder: str) -> list:
    return sorted((PKG / folder).glob("*.py"))


def _experiments() -> set:
    from mambaicl import experiments

    return {f"mambaicl.experiments.{n}" for n in experiments.names()}


def _broken(folder: str, forbidden) -> dict:
    out = {}
    for path in _modules(folder):
        key = f"{folder}/{path.name}"
        excused = PENDING.get(key, set())
        bad = {m for m in _imports(path) if forbidden(m) and not any(m == e or m.startswith(e + ".") for e in excused)}
        if bad:
            out[key] = sorted(bad)
    return out


def test_no_experiment_imports_another():
    exps = _experiments()
    out = {}
    for path in _modules("experiments"):
        me = f"mambaicl.experiments.{path.stem}"
        bad = sorted(m for m in _imports(path) if m in exps and m != me)
        if bad:
            out[path.name] = bad
    assert out == {}


@pytest.mark.parametrize("folder", ["analysis", "viz"])
def test_analysis_and_viz_import_no_training_and_no_experiment(folder):
    def forbidden(m: str) -> bool:
        return (m == "mambaicl.train" or m.startswith("mambaicl.train.") or m.startswith("mambaicl.experiments")
                or m.startswith("mambaicl.recipes") or m == "mambaicl.members"
                or (folder == "analysis" and m.startswith("mambaicl.notebook")))

    assert _broken(folder, forbidden) == {}


def test_recipes_import_no_experiment():
    assert _broken("recipes", lambda m: m.startswith("mambaicl.experiments")) == {}


def test_the_pending_exceptions_are_still_needed():
    """An exception that no longer breaks a rule is removed from :data:`PENDING` (the list only shrinks)."""
    for key, mods in PENDING.items():
        assert mods <= _imports(PKG / key), key
