"""The GPU path against the CPU: train Figure 2's and Figure 3's tiny presets on both and compare their test errors.

On a machine with CUDA it trains

* Figure 2's ``tiny`` preset (:data:`mambaicl.experiments.fig2.PRESETS` ``["tiny"]``: the three one-layer models, 60
  steps, 400 test prompts per rule and alpha) with :func:`mambaicl.experiments.fig2.run`, and
* a tiny Figure 3 preset (``MECHANISM_PRESETS["tiny"]`` when the package has one, else Figure 3's three-layer
  RMSNorm Mamba trained for 40 fixed steps at its searched step size, 256 test prompts) with
  :func:`mambaicl.experiments.mechanism.run`,

for the same seeds on the GPU and on the CPU, and compares every test error seed by seed. Both devices draw the same
prompts and initial parameters (CPU streams; the models are moved), so the errors differ only through rounding in
training: the check passes when every per-seed error differs by at most ``--tol`` (default 0.02, i.e. 8 of 400
test prompts in Figure 2, 5 of 256 in Figure 3) and the largest difference is printed. Exit status 1 when it fails.

    python benchmarks/gpu_check.py [--seeds 0 1] [--tol 0.02] [--device cuda]

Without CUDA it prints one line saying so and exits 0. ``--plain-cpu`` runs the same comparison on a machine without
a GPU, the plain PyTorch branches that a GPU takes (:func:`mambaicl.device.plain_kernels`) against the compiled CPU
kernels: a check of this script and of those branches, not of a GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time

import torch

from mambaicl.device import plain_kernels
from mambaicl.experiments import fig2, mechanism
from mambaicl.recipes.presets import FIG3, MECHANISM_PRESETS


def fig3_tiny():
    """The package's tiny Figure 3 preset, or Figure 3's model trained 40 fixed steps at its recorded step size."""
    if "tiny" in MECHANISM_PRESETS:
        return MECHANISM_PRESETS["tiny"]
    return dataclasses.replace(FIG3, name="tiny", train=dataclasses.replace(FIG3.train, steps=40, lr=FIG3.searched_lr),
                               lrs=(), searched_lr=0.0, val_every=0, n_test=256, n_group=0, n_placement=0,
                               n_norms=0, n_sums=32, record_steps=(40,))


def errors(name: str, device, seeds, plain: bool = False) -> dict:
    """``{label: [per-seed test error]}`` of one experiment trained on ``device``."""
    with plain_kernels() if plain else contextlib.nullcontext():
        if name == "fig2":
            res = fig2.run(fig2.PRESETS["tiny"], seeds=seeds, device=device, progress=False)
            return {f"{key} rule {rule} alpha {a}": [res.errors_per_seed[key][rule][s][i] for s in range(len(seeds))]
                    for key, by_rule in res.errors_per_seed.items() for rule in by_rule
                    for i, a in enumerate(res.alphas)}
        res = mechanism.run(fig3_tiny(), seeds=seeds, device=device, progress=False)
        return {"three-layer Mamba, test error": list(res.test_error)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--tol", type=float, default=0.02, help="largest allowed per-seed difference of a test error")
    p.add_argument("--device", default="cuda", help="the accelerator compared with the CPU (default cuda)")
    p.add_argument("--plain-cpu", action="store_true",
                   help="no GPU: compare the CPU's plain PyTorch branches (what a GPU runs) with its compiled kernels")
    args = p.parse_args()
    if not args.plain_cpu and not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine (torch.cuda.is_available() is False); nothing to check")
        return 0
    other = "cpu" if args.plain_cpu else args.device
    label = "CPU, plain branches" if args.plain_cpu else f"{other} ({torch.cuda.get_device_name(other)})"
    print(f"gpu_check: Figure 2 tiny and Figure 3 tiny, seeds {args.seeds}, CPU against {label}, tolerance {args.tol}")
    worst, ok = 0.0, True
    for name in ("fig2", "fig3"):
        t0 = time.perf_counter()
        cpu = errors(name, "cpu", args.seeds)
        t1 = time.perf_counter()
        gpu = errors(name, other, args.seeds, plain=args.plain_cpu)
        t2 = time.perf_counter()
        print(f"{name}: CPU {t1 - t0:.1f} s, {label} {t2 - t1:.1f} s")
        for key, per_seed in cpu.items():
            diff = max(abs(a - b) for a, b in zip(per_seed, gpu[key]))
            worst = max(worst, diff)
            bad = diff > args.tol
            ok &= not bad
            if bad or diff > 0:
                print(f"  {'FAIL' if bad else 'ok  '} {key}: CPU {per_seed} vs {gpu[key]} (difference {diff:.4f})")
        print(f"  {len(cpu)} errors x {len(args.seeds)} seeds compared")
    print(f"gpu_check: largest per-seed difference {worst:.4f} (tolerance {args.tol}): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
