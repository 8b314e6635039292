"""Test markers by path (README, "Tests"), so that the unit tests can run alone.

* ``book``: the chapter notebooks (nbval) and the tests of the book itself, its build and its site
  (:data:`BOOK_TESTS`);
* ``unit``: every other test under ``tests/``;
* ``slow``: set by hand on an integration test that would push the unit run over its one-minute
  budget (such a test is not ``unit``).

``pytest -m unit`` runs the unit tests only: when the marker expression cannot select a ``book``
item, the book folder and the notebooks are not even collected (no kernel starts). The README's
plain ``pytest`` still runs everything.
"""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
BOOK = ROOT / "book"
BOOK_TESTS = {"test_book.py", "test_build_execute.py", "test_exec_stats.py", "test_exercises.py", "test_site.py"}


def _is_book(path: Path) -> bool:
    path = Path(path)
    return path.suffix == ".ipynb" or BOOK in path.parents or path == BOOK or path.name in BOOK_TESTS


def _book_can_be_selected(config) -> bool:
    """False when ``-m EXPR`` is false for an item whose only marker is ``book`` (e.g. ``-m unit``)."""
    expr = config.getoption("markexpr", default="")
    if not expr:
        return True
    try:
        from _pytest.mark.expression import Expression

        return bool(Expression.compile(expr).evaluate(lambda name, **kw: name == "book"))
    except Exception:  # an unknown pytest version: collect everything, the markers still select
        return True


def pytest_ignore_collect(collection_path, config):
    if _is_book(collection_path) and not _book_can_be_selected(config):
        return True
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_book(item.path):
            item.add_marker(pytest.mark.book)
        elif item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.unit)
