"""``benchmarks/bench_deep.py``: its ``--bound`` stand-ins keep the step's shapes and are always put back."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mambaicl.models import scan_kernel

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_deep.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_deep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("t0", [0, 6])
def test_free_gates_and_scores_have_the_real_shapes_strides_and_dtypes(bench, t0):
    N, L, H, D, m = 3, 7, 2, 5, 4
    proj = torch.randn(N, L, H, D + 2 * m, generator=torch.Generator().manual_seed(0))
    real, free = scan_kernel._gates_scores(proj, D, m, t0), bench._free_gates_scores(proj, D, m, t0)
    for a, b in zip(real, free):
        assert (a.shape, a.stride(), a.dtype) == (b.shape, b.stride(), b.dtype)


def test_free_scan_puts_the_kernels_back_even_after_an_error(bench):
    before = {name: getattr(scan_kernel, name) for name in ("_forward", "_backward", "_gates_scores")}
    with pytest.raises(RuntimeError):
        with bench.free_scan(bench.FREE["scan free"]):
            assert scan_kernel._forward is bench._free_forward
            raise RuntimeError("stop")
    assert {name: getattr(scan_kernel, name) for name in before} == before


def test_a_free_step_runs_the_stack_and_steps_it(bench):
    model, update, P, z = bench.setup(1)
    start = [p.detach().clone() for p in model.parameters()]
    with bench.free_scan(bench.FREE["scan free"]):
        bench.step(model, update, P, z)
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), start))  # it did step


def test_the_bound_mode_prints_both_ceilings_and_the_ratio_last():
    run = subprocess.run([sys.executable, str(SCRIPT), "--bound", "--rounds", "1", "--steps", "1", "--seeds", "1"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines[1:5]] == ["fused", "plain", "scan loops free", "scan free"]
    assert sum(ln.startswith("ceiling, ") for ln in lines) == 2
    assert lines[-1].startswith("fused step ") and lines[-1].endswith("x faster than plain")
