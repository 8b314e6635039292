"""One training step of Figure 3's three-layer Mamba stacks: the compiled scan against the plain autograd scan.

Builds the ``fig3`` preset's stack of its ten seeds (``mambaicl.experiments.mechanism.FIG3``, seeds
``MECHANISM_SEEDS``: one :class:`mambaicl.models.deep_stack.StackedDeepModel`, the seeds a batch axis, float32,
batch 64, ``L = 21``) as the engine builds it, draws one batch per seed from its own training stream, and times one step as the engine takes it:
forward, hinge loss, backward, SGD with each seed's step size (:class:`mambaicl.train.StepSizes`). The fused path is
the default on a CPU (:func:`mambaicl.models.scan_kernel.selective_scan_heads_fused_stacked` over all seeds' rows in
one call, the compiled RMSNorm); the plain path is the same step under :func:`mambaicl.device.plain_kernels` (the
autograd closed forms a GPU runs, member by member, and the plain norm). The two are alternated step
by step, which one goes first alternating by round, at one torch thread and one Numba thread, so that load from
other processes slows both alike; the batch is drawn once (the draw costs the same on both paths).

    python benchmarks/bench_deep.py [--rounds 15] [--steps 3] [--seeds 10] [--trained 0] [--clock cpu] [--bound]

``--trained N`` first trains the stack ``N`` steps (on the fused path): a step of a trained stack, whose gates
saturate, is what most of a run costs (the plain factored form then falls back to the chunked form).
``--clock cpu`` times the process's CPU time (less sensitive to other processes at one thread).

``--bound`` also alternates, in the same rounds, the fused step with parts of the compiled scan made free (their
outputs filled with constants of the right shape, no work; after each such step the parameters are put back,
untimed, to those the timing started from):
``scan loops free`` (the Numba forward and backward, :func:`mambaicl.models.scan_kernel._forward` and ``_backward``)
and ``scan free`` (those and the PyTorch gates and scores, ``_gates_scores``). What is left is the step's cost
outside the scan (the batched matrix products the plain path runs too, the norm, the update): the fastest step any
scan kernel of this design could give, printed as a ceiling on the ratio.

Prints the median time per step of each path and, last, ``fused step N.NNx faster than plain`` (the ratio of
the medians; issue 38's target: 3x).
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numba
import torch

from mambaicl.device import plain_kernels
from mambaicl.experiments.mechanism import FIG3, MECHANISM_SEEDS, seed_members
from mambaicl.members import Draws, build_members
from mambaicl.models import scan_kernel
from mambaicl.train import StepSizes, loss_per_model

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def setup(n_seeds: int):
    """The FIG3 stack of the first ``n_seeds`` of ``MECHANISM_SEEDS``, its optimizer and one batch per seed."""
    group = seed_members(FIG3, MECHANISM_SEEDS[:n_seeds])
    model = build_members(group, "cpu")
    update = StepSizes(model, [m.lr for m in group], FIG3.train.optimizer)
    P, z = Draws(group, "train", "cpu")(FIG3.train.batch_size)
    return model, update, P, z


def step(model, update, P, z) -> None:
    """One step as the engine takes it: forward, the members' hinge losses, backward and SGD."""
    update(loss_per_model(FIG3.train.loss, model(P), z).sum())


def _free_forward(u, sig, f, sc, t0, o) -> None:
    o.fill(1e-3)


def _free_backward(g_o, o, u, sig, f, sc, t0, g_u, g_proj, g_sc) -> None:
    g_u.fill(1e-3)
    g_proj.fill(1e-3)
    g_sc.fill(1e-3)


def _free_gates_scores(proj, D, m, t0):
    """:func:`mambaicl.models.scan_kernel._gates_scores`' outputs, shapes and layouts, filled with constants."""
    N, L, H, _ = proj.shape
    sig = proj.new_full((N, L, H, D), 0.5)
    keys = proj[..., D:D + m].transpose(1, 2)
    queries = proj[:, t0:, :, D + m:].transpose(1, 2)
    return sig, sig, keys, queries, proj.new_full((N, H, L - t0, L), 1e-2)


#: the parts of the compiled scan a ``--bound`` path makes free: ``scan_kernel`` attribute -> free stand-in
FREE = {
    "scan loops free": {"_forward": _free_forward, "_backward": _free_backward},
    "scan free": {"_forward": _free_forward, "_backward": _free_backward, "_gates_scores": _free_gates_scores},
}


@contextlib.contextmanager
def free_scan(parts: dict):
    """``scan_kernel``'s functions named in ``parts`` replaced by their free stand-ins, put back on exit."""
    saved = {name: getattr(scan_kernel, name) for name in parts}
    try:
        for name, fn in parts.items():
            setattr(scan_kernel, name, fn)
        yield
    finally:
        for name, fn in saved.items():
            setattr(scan_kernel, name, fn)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=3, help="steps per path and round")
    ap.add_argument("--seeds", type=int, default=len(MECHANISM_SEEDS))
    ap.add_argument("--trained", type=int, default=0, help="train the stack this many steps first")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    ap.add_argument("--bound", action="store_true",
                    help="also time the fused step with the compiled scan made free (the ceiling of the ratio)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    clock = CLOCKS[args.clock]
    model, update, P, z = setup(args.seeds)
    for _ in range(args.trained):
        step(model, update, P, z)

    def fused():
        step(model, update, P, z)

    def plain():
        with plain_kernels():
            step(model, update, P, z)

    paths = {"fused": fused, "plain": plain}
    undo = {}  # name -> untimed call after each step of that path
    if args.bound:
        saved = [p.detach().clone() for p in model.parameters()]

        def put_back():  # a free step's gradients are constants: its update is undone (untimed)
            with torch.no_grad():
                for p, q in zip(model.parameters(), saved):
                    p.copy_(q)

        def bounded(parts):
            def run():
                with free_scan(parts):
                    step(model, update, P, z)
            return run

        for name, parts in FREE.items():
            paths[name], undo[name] = bounded(parts), put_back
    for name, run in paths.items():  # warm-up: compilation (cached), allocator, dispatch caches
        run()
        if name in undo:
            undo[name]()
    times = {name: [] for name in paths}
    for r in range(args.rounds):
        order = tuple(paths) if r % 2 == 0 else tuple(reversed(paths))
        for name in order:
            for _ in range(args.steps):
                start = clock()
                paths[name]()
                times[name].append(clock() - start)
                if name in undo:
                    undo[name]()
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"FIG3 stack: {args.seeds} seeds x batch {FIG3.train.batch_size}, {FIG3.model.n_layers} layers, "
          f"d_model {FIG3.model.d_model}, {args.trained} steps trained; {args.rounds} rounds x {args.steps} steps "
          f"per path ({args.clock} clock, 1 thread)")
    for name in paths:
        print(f"{name}: median {1e3 * med[name]:.1f} ms per step ({1e3 * med[name] / args.seeds:.2f} ms per seed)")
    for name in FREE if args.bound else ():
        print(f"ceiling, {name}: a fused step whose {name.split(' free')[0]} cost nothing would be "
              f"{med['plain'] / med[name]:.2f}x faster than plain")
    print(f"fused step {med['plain'] / med['fused']:.2f}x faster than plain")


if __name__ == "__main__":
    main()
