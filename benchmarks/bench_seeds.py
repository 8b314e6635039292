"""What eight training seeds cost against one: the seed-batched one-layer Mamba of Figure 2.

Trains ``S = 1`` and ``S = 8`` seeds of the Figure 2 preset (``mambaicl.experiments.fig2.FIG2``: its data
and Mamba's ``TrainConfig``, float64) with :func:`mambaicl.train.fit` for the same number of steps, as a
:class:`mambaicl.models.OneLayerStack` (one batched computation; each seed draws its own prompts). The two
runs are interleaved round by round, alternating which runs first, so that load from other processes
slows both alike. A step is everything ``fit`` does: draw the prompts, forward, hinge loss, backward, SGD.

    python benchmarks/bench_seeds.py [--steps 150] [--rounds 5] [--threads 1] [--dtype float64]

Prints the time per step of every run and, per round, the ratio ``t(8 seeds) / t(1 seed)``; the last line
is ``8 seeds cost N.NNx one seed`` with the median ratio over rounds.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from mambaicl.data import training_tasks
from mambaicl.experiments.fig2 import FIG2, patterns
from mambaicl.models import build_model
from mambaicl.seeding import torch_generators
from mambaicl.train import fit, fit_kwargs, synthetic_sampler


def step_time(n_seeds: int, steps: int, dtype: torch.dtype) -> float:
    """Seconds per training step of ``n_seeds`` seeds of Figure 2's Mamba trained as one stack."""
    tr = FIG2.train["mamba"]
    pat = patterns(FIG2, dtype=dtype)
    seeds = list(range(n_seeds))
    stack = build_model("mamba", FIG2.data.d, m=tr.m, delta=tr.delta, generators=torch_generators(seeds, "init"),
                        dtype=dtype)
    kw = fit_kwargs(tr) | {"steps": steps}
    sampler = synthetic_sampler(pat, FIG2.data, training_tasks(FIG2.data.M1))
    start = time.perf_counter()
    fit(stack, sampler, seed=seeds, record_every=steps, progress=False, **kw)
    return (time.perf_counter() - start) / steps


def main() -> None:
    """Time S = 1 and S = 8 seeds in interleaved rounds and print the cost ratio."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150, help="training steps per run")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (each runs S = 1 and S = 8 once)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    step_time(1, 20, dtype)  # warm-up (allocator, dispatch caches)
    step_time(8, 20, dtype)
    print(f"Figure 2's one-layer Mamba, batch {FIG2.train['mamba'].batch_size}, l_tr = {FIG2.data.l_tr}, "
          f"d = {FIG2.data.d}, {args.dtype}, {args.threads} thread(s), {args.steps} steps per run")
    ratios = []
    for r in range(args.rounds):
        order = (1, 8) if r % 2 == 0 else (8, 1)
        t = {n: step_time(n, args.steps, dtype) for n in order}
        ratios.append(t[8] / t[1])
        print(f"round {r + 1}: 1 seed {1e3 * t[1]:.2f} ms/step, 8 seeds {1e3 * t[8]:.2f} ms/step "
              f"(ran {order[0]} first): ratio {ratios[-1]:.2f}")
    print(f"8 seeds cost {statistics.median(ratios):.2f}x one seed")


if __name__ == "__main__":
    main()
