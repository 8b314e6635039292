"""Test markers by path (README, "Tests"), so that the unit tests can run alone.

* ``book``: the chapter notebooks (nbval) and the tests of the book itself, its build and its site
  (:data:`BOOK_TESTS`);
* ``unit``: every other test under ``tests/``;
* ``slow``: an integration test that would push the unit run over its one-minute budget on two
  cores (such a test is not ``unit``): set with ``@pytest.mark.slow`` or listed in :data:`SLOW`
  with the reason (CPU seconds measured in a unit run, 2026-12-02).

A test process runs torch on one thread (:func:`_one_torch_thread`): ``-n auto`` already runs one
worker per core.

``pytest -m unit`` runs the unit tests only: when the marker expression cannot select a ``book``
item, the book folder and the notebooks are not even collected (no kernel starts). The README's
plain ``pytest`` still runs everything.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
BOOK = ROOT / "book"
BOOK_TESTS = {"test_book.py", "test_build_execute.py", "test_exec_stats.py", "test_exercises.py", "test_site.py"}
SLOW = {  # node id (prefix) -> why it is not a unit test; run by plain `pytest` and `pytest -m slow`
    "tests/test_dynamics.py::test_a_slot_of_a_batched_sweep_equals_its_separate_run": "a sweep run twice (~25 s CPU)",
    "tests/test_dynamics.py::test_run_is_byte_identical_and_the_cli_writes_it": "the tiny preset run twice (~22 s CPU)",
    "tests/test_fig2_cli.py::test_fig2_five_seeds_reevaluate_independently": "the full fig2 preset (~22 s CPU)",
    "tests/test_sst2_experiments.py::test_run_writes_every_regime_and_is_byte_identical": "every regime (~21 s CPU)",
    "tests/test_beyond_experiments.py::test_cli_lists_and_writes_the_four_experiments": "two CLI runs (~17 s CPU)",
    "tests/test_train.py::test_batched_run_is_byte_identical_on_a_rerun": "a same-process rerun (~11 s CPU); the "
    "thread-count test of tests/test_cli_errors.py checks byte identity across processes and thread counts",
    "tests/test_fig2_cli.py::test_rerun_is_byte_identical": "three CLI runs in a fixture (~11 s CPU), shared by",
    "tests/test_fig2_cli.py::test_results_layout_with_seeds": "the same fixture",
    "tests/test_fig2_cli.py::test_one_seed_keeps_the_first_layout": "the same fixture",
    "tests/test_sst2_experiments.py::test_validation_curve_records_and_picks_a_step": "SST-2 training (~9 s CPU)",
    "tests/test_sst2_experiments.py::test_oracle_and_tiny_table_end_to_end": "an SST-2 table end to end (~7 s CPU)",
    "tests/test_sst2_experiments.py::test_training_stops_when_the_validation_loss_stops_improving": "early-stopped "
    "training and its replay (~10 s CPU)",
    "tests/test_sst2_experiments.py::test_seeds_trained_as_one_batch_equal_each_seed_alone": "two runs trained twice "
    "with validation readings (~6 s CPU)",
    "tests/test_device_branches.py::test_set_threads_changes_no_bit_of_a_matrix_product": "a subprocess per MKL code "
    "path, each importing torch (~8 s CPU)",
}


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Torch runs one thread in a test process (then restores its count), as the CLI does by default.

    ``-n auto`` starts one worker per core; torch's default of one thread per core in each of them
    oversubscribes the cores, which about doubles the CPU time of a test (OpenMP threads wait for each
    other) for the small tensors of the tests. A test of thread-count independence sets its own count.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _load_statistical_plugin():
    """tests/nbval_statistical.py: the statistical check of ``# NBVAL_STATISTICAL`` cells (a plugin of nbval)."""
    spec = importlib.util.spec_from_file_location("nbval_statistical", ROOT / "tests" / "nbval_statistical.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("nbval_statistical", module)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("nbval_statistical"):
        config.pluginmanager.register(_load_statistical_plugin(), "nbval_statistical")


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
        if any(item.nodeid.startswith(prefix) for prefix in SLOW):
            item.add_marker(pytest.mark.slow)
        if _is_book(item.path):
            item.add_marker(pytest.mark.book)
        elif item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.unit)
