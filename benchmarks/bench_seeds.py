"""What a training step costs per seed: the seed-batched one-layer Mamba of Figure 2, ``t(S) = a + b S``.

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

Prints the time per step of every run, then the cost model ``t(S) = a + b S`` from the medians over rounds (``a``
what every step costs whatever the seed count, in ms; ``b`` what one more seed costs, in µs), then the part of a
step spent drawing the prompts (one NumPy SFC64 stream per seed: a cost that grows with the seeds), first at
``--also-threads`` threads, then at ``--threads`` for 20 and for 8 seeds; the last line is the cost model at
``--threads`` (default one) with 8 seeds.

The ratio ``t(8 seeds) / t(1 seed) = (a + 8 b) / (a + b)`` is printed beside the model for reference only: it is
not a target (an earlier version of this benchmark had one). It rises whenever the fixed cost ``a`` falls, so a
faster step can only look worse by it; what the book pays per seed is ``b``, and per step ``a``.
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


def cost_model(steps: int, rounds: int, dtype: torch.dtype, threads: int, label: str = "", clock=time.perf_counter,
               many: int = 8) -> tuple[float, float]:
    """``(a, b)`` in seconds of ``t(S) = a + b S`` at ``threads`` torch threads, from the medians over interleaved
    rounds of ``t(1 seed)`` and ``t(many seeds)``."""
    torch.set_num_threads(threads)
    step_time(1, 20, dtype)  # warm-up (allocator, dispatch caches)
    step_time(many, 20, dtype)
    times = {1: [], many: []}
    for r in range(rounds):
        order = (1, many) if r % 2 == 0 else (many, 1)
        t = {n: step_time(n, steps, dtype, clock) for n in order}
        for n in t:
            times[n].append(t[n])
        print(f"{label}round {r + 1}: 1 seed {1e3 * t[1]:.2f} ms/step, {many} seeds {1e3 * t[many]:.2f} ms/step "
              f"(ran {order[0]} first)")
    t1, tm = statistics.median(times[1]), statistics.median(times[many])
    b = (tm - t1) / (many - 1)
    a = t1 - b
    draw = {n: sampling_time(n, steps, dtype, clock) for n in (1, many)}
    print(f"{label}of which drawing the prompts: 1 seed {1e3 * draw[1]:.2f} ms/step, {many} seeds "
          f"{1e3 * draw[many]:.2f} ms/step (each seed draws from its own stream, so this part grows with the seeds)")
    return a, b


def model_line(a: float, b: float, many: int, threads: int) -> str:
    """The cost model as one line, with the ratio for reference (not a target: it rises whenever ``a`` falls)."""
    return (f"cost model at {threads} thread(s), t(S) = a + b S: a = {1e3 * a:.2f} ms per step whatever the seeds "
            f"(Python, dispatch, autograd, optimizer), b = {1e6 * b:.0f} us per seed "
            f"[t({many})/t(1) = {(a + many * b) / (a + b):.2f}, for reference only]")


def main() -> None:
    """Time 1, 8 and 20 seeds in interleaved rounds and print the cost model (also at ``--also-threads``)."""
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
        a, b = cost_model(args.steps, args.rounds, dtype, args.also_threads, f"[{args.also_threads} threads] ", clock)
        print(model_line(a, b, 8, args.also_threads))
    a, b = cost_model(args.steps, args.rounds, dtype, args.threads, f"[{args.threads} thread(s), 20 seeds] ", clock,
                      many=20)
    print(model_line(a, b, 20, args.threads))
    a, b = cost_model(args.steps, args.rounds, dtype, args.threads, f"[{args.threads} thread(s)] ", clock)
    print(model_line(a, b, 8, args.threads))

if __name__ == "__main__":
    main()
