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
    assert nbs.K_SE == 3.0 and nbs.FLOOR_UNITS == 2


@pytest.mark.parametrize("fresh, stored, ok", [
    ("error 0.279 ± 0.010", "error 0.275 ± 0.010", True),      # |0.004| <= 3 x 0.010
    ("error 0.306 ± 0.010", "error 0.275 ± 0.010", False),     # |0.031| >  0.030
    ("error 0.304 ± 0.010", "error 0.275 ± 0.010", True),      # |0.029| <= 0.030
    ("error 0.275 ± 0.041", "error 0.275 ± 0.010", False),     # the SE itself moved by 0.031 > 0.030
    ("0.002 ± 0.000", "0.000 ± 0.000", True),                  # floor: 2 units of 0.001
    ("0.003 ± 0.000", "0.000 ± 0.000", False),                 # 3 units > floor
    # m [lo, hi]: SE = (hi - lo) / (2 x 1.96) = 1.0 for [+12.04, +15.96]; tolerance 3.0 on each of the three
    ("gain +16.9 [+14.9, +18.9]", "gain +14.0 [+12.04, +15.96]", True),
    ("gain +17.1 [+15.0, +18.9]", "gain +14.0 [+12.04, +15.96]", False),
    ("gain +14.0 [+12.04, +19.1]", "gain +14.0 [+12.04, +15.96]", False),
    ("[0.140, 0.260]", "[0.127, 0.248]", True),                 # SE 0.0309: moves of 0.013, 0.012
    ("[0.227, 0.248]", "[0.127, 0.248]", False),                # low moved 0.100 > 0.093
    ("stopped after 250 updates", "stopped after 250 updates", True),
    ("stopped after 500 updates", "stopped after 250 updates", False),   # bare numbers are exact
    ("verdict: holds", "verdict: fails", False),               # words are exact
    ("eta +nan [+nan, +nan]", "eta +nan [+nan, +nan]", True),
    ("-0.000", "+0.000", False),                               # a signed zero is a bare number: exact
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
    stored = _record(0.25, 0.2108, 0.2892, [0.2] * 10, verdict="reproduced")   # SE 0.02
    assert nbs.compare_texts(_record(0.30, 0.26, 0.34, [0.3] * 10, verdict="reproduced"), stored) == []
    assert nbs.compare_texts(_record(0.32, 0.28, 0.36, [0.3] * 10, verdict="reproduced"), stored)  # 0.07 > 0.06
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
    _notebook(tmp_path / "c.ipynb", "error 0.290 ± 0.010")     # within 3 SE of what the cell prints
    ok = _run_nbval(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    _notebook(tmp_path / "c.ipynb", "error 0.330 ± 0.010")     # the stored value moved beyond 3 SE
    bad = _run_nbval(tmp_path)
    assert bad.returncode == 1 and "beyond 3 standard errors" in bad.stdout, bad.stdout
