"""The statistical check of chaotic cells (tests/nbval_statistical.py): within tolerance passes, beyond fails.

Every expected outcome below is worked out by hand from the declared tolerance (K_SE = 3 stored
standard errors, never below 2 units of the last printed digit), not by calling the checker twice.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("nbval_statistical_t", ROOT / "tests" / "nbval_statistical.py")
nbs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = nbs
_spec.loader.exec_module(nbs)


def test_declared_tolerance():
    assert (nbs.K_SE, nbs.FLOOR_UNITS, nbs.BARE_REL, nbs.SPREAD_GROWTH) == (3.0, 2, 0.05, 4.0)


@pytest.mark.parametrize("fresh, stored, ok", [
    # m ± s: tolerance 3 sqrt(s_stored² + s_fresh²) = 3 sqrt(2) 0.010 = 0.0424 here
    ("error 0.279 ± 0.010", "error 0.275 ± 0.010", True),
    ("error 0.317 ± 0.010", "error 0.275 ± 0.010", True),      # |0.042| <= 0.0424
    ("error 0.318 ± 0.010", "error 0.275 ± 0.010", False),     # |0.043| >  0.0424
    ("error 0.275 ± 0.041", "error 0.275 ± 0.010", False),     # the fresh SE over 4 x the stored
    ("error 0.300 ± 0.040", "error 0.275 ± 0.010", True),      # 4 x exactly; tolerance 3 sqrt(0.0017) = 0.124
    ("0.002 ± 0.000", "0.000 ± 0.000", True),                  # floor: 2 units of 0.001
    ("0.003 ± 0.000", "0.000 ± 0.000", False),                 # 3 units > floor
    # m [lo, hi]: SE = (hi - lo) / (2 x 1.96) = 1.0 for both intervals below; tolerance 3 sqrt(2) = 4.243
    ("gain +18.2 [+16.24, +20.16]", "gain +14.0 [+12.04, +15.96]", True),
    ("gain +18.3 [+16.34, +20.26]", "gain +14.0 [+12.04, +15.96]", False),
    ("[0.140, 0.260]", "[0.127, 0.248]", True),                 # SE 0.0309 and 0.0306: moves of 0.013, 0.012
    ("[0.267, 0.388]", "[0.127, 0.248]", False),                # moves of 0.140 > 3 sqrt(2) 0.0309 = 0.131
    # a median and a range of stopping steps: SE 12.76 and 25.5, tolerance 85.6
    ("350 [300, 400]", "300 [300, 350]", True),
    ("stopped after 250 updates", "stopped after 250 updates", True),
    ("stopped after 500 updates", "stopped after 250 updates", False),   # a bare number moving 100 %
    ("loses 16.7 points", "loses 16.5 points", True),          # a bare mean: 5 % of 16.5 = 0.825
    ("0.009", "0.008", True),                                  # one unit of its last digit
    ("0.010", "0.008", False),
    ("0.241 0.235", "0.235 0.241", True),                      # 5 % of 0.235 = 0.01175, of 0.241 = 0.01205
    ("0.241", "0.225", False),                                 # 0.016 > 5 % of 0.225 = 0.01125
    ("verdict: holds", "verdict: fails", False),               # words are exact
    ("eta +nan [+nan, +nan]", "eta +nan [+nan, +nan]", True),
    ("-0.000", "+0.000", True),                                # a signed zero: the same value
    ("alpha = 0.80, 10 seeds", "alpha = 0.70, 10 seeds", False),   # a setting moving 14 %
    # k of n seeds: k within 3 sqrt(k (n - k) / n) = 3 sqrt(2.5) = 4.74 of the stored 5 of 10, n exact
    ("suppressing: 9/10", "suppressing: 5/10", True),
    ("suppressing: 10/10", "suppressing: 5/10", False),
    ("positive in 2 of 10 seeds", "positive in 0 of 10 seeds", True),    # sd 0: the floor of 2
    ("positive in 3 of 10 seeds", "positive in 0 of 10 seeds", False),
    ("positive in 5 of 11 seeds", "positive in 5 of 10 seeds", False),
])
def test_text_rules(fresh, stored, ok):
    assert (nbs.compare_texts(fresh, stored) == []) is ok


def _record(mean, low, high, values, **extra):
    return repr(json.dumps({"mean": mean, "low": low, "high": high, "n_seeds": len(values), "values": values,
                            **extra}, sort_keys=True))


def test_registry_records():
    stored = _record(0.25, 0.2108, 0.2892, [0.2] * 10, verdict="reproduced")   # SE 0.02; both: 3 sqrt(2) 0.02 = 0.0849
    assert nbs.compare_texts(_record(0.33, 0.2908, 0.3692, [0.3] * 10, verdict="reproduced"), stored) == []
    assert nbs.compare_texts(_record(0.34, 0.3008, 0.3792, [0.3] * 10, verdict="reproduced"), stored)  # 0.09 > 0.085
    assert nbs.compare_texts(_record(0.25, 0.05, 0.45, [0.3] * 10, verdict="reproduced"), stored)  # SE x 5
    assert nbs.compare_texts(_record(0.25, 0.2108, 0.2892, [0.2] * 10, verdict="not reproduced"), stored)
    assert nbs.compare_texts(_record(0.25, 0.2108, 0.2892, [0.2] * 9, verdict="reproduced"), stored)


def test_marker_is_a_comment_line_of_its_own():
    assert nbs.is_statistical("# NBVAL_STATISTICAL\n# (reason: chaotic)\nx = 1")
    assert not nbs.is_statistical("x = 1  # NBVAL_STATISTICAL is mentioned here")
    assert not nbs.is_statistical("print('# NBVAL_STATISTICAL')")


def _notebook(path: Path, stored_text: str):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("# NBVAL_STATISTICAL\n# (reason: a test)\nprint('error 0.275 ± 0.010')")
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored_text + "\n")]
    strict = nbformat.v4.new_code_cell("print('exact 1.5')")
    strict.execution_count = 2
    strict.outputs = [nbformat.v4.new_output("stream", name="stdout", text="exact 1.5\n")]
    nb.cells = [cell, strict]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


def _run_nbval(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "nbval_statistical",
         "--nbval", "--nbval-current-env", "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path / "c.ipynb")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "tests")})


@pytest.mark.slow
def test_nbval_plugin_end_to_end(tmp_path):
    _notebook(tmp_path / "c.ipynb", "error 0.310 ± 0.010")     # within 3 SE (0.042) of what the cell prints
    ok = _run_nbval(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    _notebook(tmp_path / "c.ipynb", "error 0.330 ± 0.010")     # the stored value moved beyond 3 SE (0.042)
    bad = _run_nbval(tmp_path)
    assert bad.returncode == 1 and "beyond 3 standard errors" in bad.stdout, bad.stdout


def test_streams_and_displays_compared_kind_by_kind_as_nbval_does():
    out = lambda text: {"output_type": "stream", "name": "stdout", "text": text}  # noqa: E731
    rec = lambda text: {"output_type": "display_data", "data": {"text/plain": text}}  # noqa: E731
    stored = [out("a 0.50 ± 0.01\n"), rec("'x'"), out("b 2\n")]
    fresh = [rec("'x'"), out("a 0.51 ± 0.01\nb 2\n")]          # the same, arriving in another order
    assert nbs.compare_outputs(fresh, stored) == []
    assert nbs.compare_outputs([rec("'y'"), out("a 0.51 ± 0.01\nb 2\n")], stored)   # a word changed
    assert nbs.compare_outputs([out("a 0.51 ± 0.01\nb 2\n")], stored)               # an output missing


def test_records_compare_failing_counts_binomially_and_skip_derived_fields():
    base = dict(mean=0.25, low=0.2108, high=0.2892, n_seeds=10, values=[0.2] * 10)
    stored = repr(json.dumps({**base, "seeds_to_decide": 2986, "tail": {"failing": 2, "n": 10}}))
    fresh = repr(json.dumps({**base, "seeds_to_decide": 985, "tail": {"failing": 4, "n": 10}}))   # sd 1.26: 3.8
    assert nbs.compare_texts(fresh, stored) == []
    moved = repr(json.dumps({**base, "seeds_to_decide": 985, "tail": {"failing": 7, "n": 10}}))
    assert nbs.compare_texts(moved, stored)


def test_a_tails_quantiles_take_the_records_standard_error_and_its_interval_follows_the_count():
    """Rule 5: a tail has no interval of its own for its median and quartiles (they are quantiles of the record's
    per-seed values, so they move with the record's standard error), and its Clopper-Pearson interval is a
    function of the failing count. The case met in CI: Chapter 5's three-layer stack, reversed-task error per
    seed on one CPU and another; the median moved by half a prompt in 256."""
    tail = dict(failing=0, n=10, low=0.0, high=0.308497, median=0.00195312, q1=0.0, q3=0.00683594)
    base = dict(mean=0.0109375, low=-0.00299078, high=0.0248658, n_seeds=10, values=[0.0] * 10)  # SE 0.0071
    stored = repr(json.dumps({**base, "tail": tail}))
    fresh = repr(json.dumps({**base, "mean": 0.0085, "tail": {**tail, "median": 0.0, "q3": 0.0039}}))
    assert nbs.compare_texts(fresh, stored) == []
    far = repr(json.dumps({**base, "tail": {**tail, "median": 0.06}}))  # 0.058 > 3 x 0.0100 (SE of the difference)
    assert "median" in " ".join(nbs.compare_texts(far, stored))
    one_fails = repr(json.dumps({**base, "tail": {**tail, "failing": 1, "low": 0.0025, "high": 0.445}}))
    assert nbs.compare_texts(one_fails, stored) == []  # the count within its binomial tolerance, its interval with it


def test_declared_verdict_words_may_flip_only_with_numbers_within_tolerance():
    """Rule 6: a cell's declared alternatives (a threshold verdict at a knife edge) may differ between two runs;
    undeclared words may not, and the numbers the words come from are still checked."""
    source = ("# NBVAL_STATISTICAL\n# (reason: chaotic)\n"
              "# (verdict words: holds | does not hold; distinguishably more | not distinguishably more)\nprint(1)\n")
    words = nbs.verdict_words(source)
    assert words == [["holds", "does not hold"], ["distinguishably more", "not distinguishably more"]]
    stored = "drop: +1.0 ± 0.5 -> holds; Mamba's drop is distinguishably more\n"
    fresh = "drop: +0.9 ± 0.5 -> does not hold; Mamba's drop is not distinguishably more\n"
    assert nbs.compare_texts(fresh, stored, words=words) == []
    assert nbs.compare_texts(fresh, stored)  # undeclared: the words must be identical
    far = "drop: -3.0 ± 0.5 -> does not hold; Mamba's drop is not distinguishably more\n"
    assert nbs.compare_texts(far, stored, words=words)  # the number behind the flip moved beyond tolerance
    assert nbs.compare_texts(fresh.replace("drop:", "rise:"), stored, words=words)  # other words still exact


def test_a_records_holds_is_derived_from_its_interval_and_not_compared_again():
    base = dict(mean=0.25, low=0.2108, high=0.2892, n_seeds=10, values=[0.2] * 10)
    stored = repr(json.dumps({**base, "holds": True}))
    fresh = repr(json.dumps({**base, "low": 0.205, "holds": None}))  # the interval moved within tolerance, across the edge
    assert nbs.compare_texts(fresh, stored) == []
    assert "holds" in nbs.DERIVED_KEYS
