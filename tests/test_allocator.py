"""mambaicl.allocator: importing the package keeps freed memory for reuse (no page faults per step)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from mambaicl import allocator

# After a warm-up, 50 steps that each fill and free 30 tensors of 1 MiB; print the minor page faults of the steps.
_LOOP = """
import resource, sys, torch
torch.set_num_threads(1)
{setup}
def step():  # like a training step: many medium tensors that live until the step's end, freed together
    graph = [torch.ones(128 * 1024, dtype=torch.float64) for _ in range(30)]  # 30 x 1 MiB
    return float(sum(t[0] for t in graph))
for _ in range(20):  # warm up: the first blocks fault in once
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(setup: str) -> int:
    out = subprocess.run([sys.executable, "-c", _LOOP.format(setup=setup)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_importing_mambaicl_stops_the_page_faults_of_a_training_steps_tensors():
    # 7,680 pages a step: glibc's defaults return the freed top of the heap (above twice the largest block)
    # to the system, and the next step faults it in again; kept, the blocks are reused without a fault.
    # The plain count is set by glibc alone (at least half the pages of every step: 192,000); the tuned one is
    # a few dozen alone and rose to 256 while the book's chapters ran beside it (faults that other processes'
    # load causes, not the steps'), so the bound is a ratio to the plain process: under 1 % of its faults
    # (3,840 and more), which no step-by-step refaulting can meet and load has never come near.
    plain, tuned = _faults(""), _faults("import mambaicl")
    assert plain > 25 * 7680, (tuned, plain)
    assert tuned < plain / 100, (tuned, plain)
    assert allocator.keep_freed_memory() is True


def test_thresholds_are_glibcs_allowed_values():
    assert allocator.MMAP_THRESHOLD == 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
    assert allocator.TRIM_THRESHOLD >= allocator.MMAP_THRESHOLD
