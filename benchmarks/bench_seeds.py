"""What eight training seeds cost against one: the seed-batched one-layer Mamba of Figure 2.

Trains ``S = 1`` and ``S = 8`` seeds of the Figure 2 preset (``mambaicl.experiments.fig2.FIG2``: its data
and Mamba's ``TrainConfig``, float64) with the engine :func:`mambaicl.train.train` for the same number of steps,
as one :class:`mambaicl.models.OneLayerStack` (one batched computation; each seed draws its own prompts). The two
runs are interleaved round by round, alternating which runs first, so that load from other processes
slows both alike. A step is everything the engine does: draw the prompts, forward, hinge loss, backward, SGD.

    python benchmarks/bench_seeds.py [--steps 150] [--rounds 5] [--threads 1] [--dtype float64] [--also-threads 2]
                                     [--clock wall]

``--clock cpu`` times the process's CPU time instead of the wall clock: on a shared machine it is far less
sensitive to other processes at one thread (at two threads it sums both threads' time, i.e. the cost, not the
latency).

Prints the time per step of every run and, per round, the ratio ``t(8 seeds) / t(1 seed)``, then the cost model
``t(S) = a + b S`` from the medians (``a`` what every step costs whatever the seed count, ``b`` what one more seed
costs; the ratio is ``(a + 8 b) / (a + b)``, so it rises when ``a`` falls), then the part of a
step spent drawing the prompts (one NumPy SFC64 stream per seed: a cost that grows with the seeds), first at
``--also-threads`` threads (a line ``at 2 threads: 8 seeds cost N.NNx one seed``), then at ``--threads``; the last
lines are ``20 seeds cost N.NNx one seed`` and, last, ``8 seeds cost N.NNx one seed``: the median ratios over
rounds at ``--threads`` (default one).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import dataclasses

from mambaicl.experiments.fig2 import FIG2, members, patterns
from mambaicl.seeding import numpy_stream
from mambaicl.train import train


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def step_time(n_seeds: int, steps: int, dtype: torch.dtype, clock=time.perf_counter) -> float:
    """Seconds per training step of ``n_seeds`` seeds of Figure 2's Mamba trained as one stack."""
    cfg = dataclasses.replace(FIG2.train["mamba"], steps=steps)
    ms = members(FIG2, patterns(FIG2, dtype=dtype), range(n_seeds), "mamba")
    start = clock()
    train(ms, cfg, record_every=steps, progress=False)
    return (clock() - start) / steps


def sampling_time(n_seeds: int, steps: int, dtype: torch.dtype, clock=time.perf_counter) -> float:
    """Seconds per step spent drawing the prompts alone: each seed's own NumPy stream (SFC64, ``(seed, "train")``)
    draws its uniforms, which become Definition 1 prompts (what the engine does per step)."""
    ms = members(FIG2, patterns(FIG2, dtype=dtype), range(n_seeds), "mamba")
    gens = [numpy_stream(m.seed, "train") for m in ms]
    data, batch = ms[0].data, FIG2.train["mamba"].batch_size
    start = clock()
    for _ in range(steps):
        data.sample(batch, gens)
    return (clock() - start) / steps


def ratio(steps: int, rounds: int, dtype: torch.dtype, threads: int, label: str = "", clock=time.perf_counter,
          many: int = 8) -> float:
    """The median over interleaved rounds of ``t(many seeds) / t(1 seed)`` at ``threads`` torch threads."""
    torch.set_num_threads(threads)
    step_time(1, 20, dtype)  # warm-up (allocator, dispatch caches)
    step_time(many, 20, dtype)
    ratios, times = [], {1: [], many: []}
    for r in range(rounds):
        order = (1, many) if r % 2 == 0 else (many, 1)
        t = {n: step_time(n, steps, dtype, clock) for n in order}
        ratios.append(t[many] / t[1])
        for n in t:
            times[n].append(t[n])
        print(f"{label}round {r + 1}: 1 seed {1e3 * t[1]:.2f} ms/step, {many} seeds {1e3 * t[many]:.2f} ms/step "
              f"(ran {order[0]} first): ratio {ratios[-1]:.2f}")
    t1, tm = statistics.median(times[1]), statistics.median(times[many])
    per_seed = (tm - t1) / (many - 1)
    print(f"{label}cost model t(S) = a + b S (medians): a = {1e3 * (t1 - per_seed):.2f} ms per step whatever the seed "
          f"count (Python, dispatch, autograd, optimizer), b = {1e3 * per_seed:.3f} ms per seed")
    draw = {n: sampling_time(n, steps, dtype, clock) for n in (1, many)}
    print(f"{label}of which drawing the prompts: 1 seed {1e3 * draw[1]:.2f} ms/step, {many} seeds "
          f"{1e3 * draw[many]:.2f} ms/step (each seed draws from its own stream, so this part grows with the seeds)")
    return statistics.median(ratios)


def main() -> None:
    """Time S = 1 and S = 8 seeds in interleaved rounds and print the cost ratio (also at ``--also-threads``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150, help="training steps per run")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (each runs S = 1 and S = 8 once)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--also-threads", type=int, default=2, help="also report this thread count first (0: skip)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--clock", choices=tuple(CLOCKS), default="wall", help="wall clock or the process's CPU time")
    args = p.parse_args()
    dtype, clock = getattr(torch, args.dtype), CLOCKS[args.clock]
    print(f"Figure 2's one-layer Mamba, batch {FIG2.train['mamba'].batch_size}, l_tr = {FIG2.data.l_tr}, "
          f"d = {FIG2.data.d}, {args.dtype}, {args.steps} steps per run, {args.clock} clock")
    if args.also_threads and args.also_threads != args.threads:
        r = ratio(args.steps, args.rounds, dtype, args.also_threads, f"[{args.also_threads} threads] ", clock)
        print(f"at {args.also_threads} threads: 8 seeds cost {r:.2f}x one seed")
    r20 = ratio(args.steps, args.rounds, dtype, args.threads, f"[{args.threads} thread(s), 20 seeds] ", clock, many=20)
    print(f"20 seeds cost {r20:.2f}x one seed ({r20 / 20:.3f}x one seed per seed)")
    r = ratio(args.steps, args.rounds, dtype, args.threads, f"[{args.threads} thread(s)] ", clock)
    print(f"8 seeds cost {r:.2f}x one seed")


if __name__ == "__main__":
    main()
