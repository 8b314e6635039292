"""Training-step time of our 3-layer Mamba-1 stack vs the pure-PyTorch package ``mambapy``, after proving
that the two compute the same function.

1. **Equivalence.** Our stack's weights are copied into ``mambapy``'s (they map one to one:
   ``in_proj``, the depthwise causal ``conv1d``, ``x_proj``, ``dt_proj``, ``A_log``, ``D``,
   ``out_proj``, each layer's RMSNorm, plus our embedding and read-out around both), and the
   outputs and every parameter gradient of one hinge-loss step are asserted to agree, for both
   of ``mambapy``'s scans (``pscan=True`` and the sequential loop). The check is printed.
2. **Timing.** Ours against both ``mambapy`` modes, interleaved step by step and alternating which
   runs first, so that load from other processes slows all alike. For each mode we report the
   median of the per-pair ratios ``t_mambapy / t_ours`` with its interquartile range.

Shapes: d_model = 64, d_state = 16, expand = 2, 3 layers, batch 128, L = 21 tokens (20 context
examples and the query) of dimension d + 1 = 31; one step = forward, hinge loss, backward, SGD.

``mambapy`` is a benchmark-only dependency, not needed by the book::

    pip install --no-deps mambapy      # --no-deps keeps the installed torch
    python benchmarks/bench_mamba_block.py [--steps 20] [--threads N]

The last line printed is ``speedup vs mambapy: N.NNx``: the median per-pair ratio against the
*faster* of mambapy's two modes.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from mambaicl.models import build_model
from mambaicl.seeding import torch_generator

D, D_MODEL, BATCH, L, LAYERS = 30, 64, 128, 21, 3


def make_ours(seed: int) -> nn.Module:
    return build_model("mamba1", D, n_layers=LAYERS, d_model=D_MODEL, d_state=16, expand=2,
                       generator=torch_generator(seed, "init"))


class MambapyClassifier(nn.Module):
    """mambapy's Mamba stack between our embedding (d+1 -> d_model) and read-out of the query token."""

    def __init__(self, pscan: bool) -> None:
        super().__init__()
        from mambapy.mamba import Mamba, MambaConfig

        self.embed = nn.Linear(D + 1, D_MODEL, bias=False)
        self.mamba = Mamba(MambaConfig(d_model=D_MODEL, n_layers=LAYERS, d_state=16, pscan=pscan))
        self.readout = nn.Linear(D_MODEL, 1, bias=False)

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        return self.readout(self.mamba(self.embed(P))[:, -1]).squeeze(-1)


def copy_weights(ours: nn.Module, theirs: MambapyClassifier) -> None:
    """Copy every parameter of our stack into ``theirs`` (the one-to-one map of the module docstring)."""
    with torch.no_grad():
        theirs.embed.weight.copy_(ours.embed)
        theirs.readout.weight.copy_(ours.readout.unsqueeze(0))
        for i, layer in enumerate(theirs.mamba.layers):
            mine, mix = ours.mixers[i], layer.mixer
            layer.norm.weight.copy_(ours.norms[i].weight)
            mix.in_proj.weight.copy_(mine.in_proj.weight)
            mix.conv1d.weight.copy_(mine.conv_weight.unsqueeze(1))  # (E, 1, d_conv)
            mix.conv1d.bias.copy_(mine.conv_bias)
            mix.x_proj.weight.copy_(mine.x_proj.weight)
            mix.dt_proj.weight.copy_(mine.dt_proj.weight)
            mix.dt_proj.bias.copy_(mine.dt_proj.bias)
            mix.A_log.copy_(mine.A_log)
            mix.D.copy_(mine.D)
            mix.out_proj.weight.copy_(mine.out_proj.weight)


def _grad_pairs(ours: nn.Module, theirs: MambapyClassifier):
    yield "embed", ours.embed.grad, theirs.embed.weight.grad
    yield "readout", ours.readout.grad, theirs.readout.weight.grad.squeeze(0)
    for i, layer in enumerate(theirs.mamba.layers):
        mine, mix = ours.mixers[i], layer.mixer
        yield f"layer {i} norm", ours.norms[i].weight.grad, layer.norm.weight.grad
        for a, b in (("in_proj", "in_proj"), ("x_proj", "x_proj"), ("dt_proj", "dt_proj"), ("out_proj", "out_proj")):
            yield f"layer {i} {a}", getattr(mine, a).weight.grad, getattr(mix, b).weight.grad
        yield f"layer {i} dt bias", mine.dt_proj.bias.grad, mix.dt_proj.bias.grad
        yield f"layer {i} conv", mine.conv_weight.grad, mix.conv1d.weight.grad.squeeze(1)
        yield f"layer {i} conv bias", mine.conv_bias.grad, mix.conv1d.bias.grad
        yield f"layer {i} A_log", mine.A_log.grad, mix.A_log.grad
        yield f"layer {i} D", mine.D.grad, mix.D.grad


def check_equivalence(P: torch.Tensor, z: torch.Tensor, pscan: bool, tol: float = 1e-4) -> float:
    """Largest relative difference of outputs and gradients between ours and mambapy; raises past ``tol``."""
    ours, theirs = make_ours(0), MambapyClassifier(pscan)
    copy_weights(ours, theirs)
    outs = []
    for model in (ours, theirs):
        F = model(P)
        torch.clamp(1 - z * F, min=0).mean().backward()
        outs.append(F.detach())
    worst = float((outs[0] - outs[1]).abs().max() / outs[1].abs().max())
    for name, g1, g2 in _grad_pairs(ours, theirs):
        rel = float((g1 - g2).abs().max() / g2.abs().max().clamp_min(1e-12))
        if rel > tol:
            raise AssertionError(f"gradient of {name} differs from mambapy (pscan={pscan}) by {rel:.1e} (relative)")
        worst = max(worst, rel)
    if worst > tol:
        raise AssertionError(f"outputs differ from mambapy (pscan={pscan}) by {worst:.1e} (relative)")
    return worst


def step_fn(model: nn.Module, P: torch.Tensor, z: torch.Tensor):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad()
        loss = torch.clamp(1 - z * model(P), min=0).mean()  # hinge loss
        loss.backward()
        opt.step()
        return loss.item()

    return step


def _quartiles(xs):
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main() -> None:
    """Check equivalence with mambapy, then time both interleaved and print the speed-up."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="timed steps per model (after 3 warm-up steps)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave PyTorch's default)")
    args = ap.parse_args()
    if args.steps < 2:
        raise SystemExit(f"--steps must be >= 2; got {args.steps}")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import mambapy  # noqa: F401
    except ImportError:
        raise SystemExit("mambapy is not installed: pip install --no-deps mambapy") from None
    g = torch_generator(0, "benchmark")
    P = torch.randn(BATCH, L, D + 1, generator=g)
    P[:, -1, -1] = 0
    z = torch.where(torch.rand(BATCH, generator=g) < 0.5, -1.0, 1.0)
    for pscan in (True, False):
        err = check_equivalence(P[:16], z[:16], pscan)
        print(f"equivalence with mambapy (pscan={pscan}): outputs and all gradients agree, "
              f"largest relative difference {err:.1e}")
    torch.manual_seed(0)
    steps = {"ours": step_fn(make_ours(0), P, z),
             "mambapy pscan": step_fn(MambapyClassifier(pscan=True), P, z),
             "mambapy sequential": step_fn(MambapyClassifier(pscan=False), P, z)}
    for _ in range(3):
        for s in steps.values():
            s()
    times = {k: [] for k in steps}
    order = list(steps)
    for i in range(args.steps):
        for name in (order if i % 2 == 0 else order[::-1]):  # alternate which runs first
            t0 = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - t0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {BATCH}, L {L}, d_model {D_MODEL}")
    for k in steps:
        print(f"{k:>18s}: median step {statistics.median(times[k]) * 1e3:8.1f} ms")
    ratio = {}
    for mode in ("mambapy pscan", "mambapy sequential"):
        r = [t / o for t, o in zip(times[mode], times["ours"])]
        q1, med, q3 = _quartiles(r)
        ratio[mode] = med
        print(f"{mode:>18s} / ours: median per-pair ratio {med:.2f}x (IQR {q1:.2f}-{q3:.2f})")
    faster = min(ratio, key=lambda k: statistics.median(times[k]))
    print(f"faster mambapy mode: {faster.split()[1]}")
    print(f"speedup vs mambapy: {ratio[faster]:.2f}x")


if __name__ == "__main__":
    main()
