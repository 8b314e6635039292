"""Training-step time of our 3-layer Mamba-1 stack vs the pure-PyTorch package ``mambapy``.

Both are timed in one run, interleaved step by step, so that load from other processes on the
machine slows both alike; the ratio of the medians is reported.

Shapes (issue 4): d_model = 64, d_state = 16, expand = 2, 3 layers, batch 128, L = 21 tokens
(20 context examples and the query) of dimension d + 1 = 31; one step = forward, hinge loss,
backward, SGD update. ``mambapy`` runs ``MambaConfig(d_model=64, n_layers=3, d_state=16)`` with
its default parallel scan, behind the same linear embedding and readout as ours.

``mambapy`` is a benchmark-only dependency, not needed by the book::

    pip install --no-deps mambapy      # --no-deps keeps the installed torch
    python benchmarks/bench_mamba_block.py [--steps 20] [--threads N]

The last line printed is ``speedup vs mambapy: N.NNx`` (mambapy's median step time / ours).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from mambaicl.models.deep import build_model

D, D_MODEL, BATCH, L = 30, 64, 128, 21


def make_ours(seed: int) -> nn.Module:
    return build_model("mamba1", D, n_layers=3, d_model=D_MODEL, d_state=16, expand=2,
                       generator=torch.Generator().manual_seed(seed))


class MambapyClassifier(nn.Module):
    """mambapy's Mamba stack with our embedding (d+1 -> d_model) and a readout of the query."""

    def __init__(self) -> None:
        super().__init__()
        from mambapy.mamba import Mamba, MambaConfig

        self.embed = nn.Linear(D + 1, D_MODEL, bias=False)
        self.mamba = Mamba(MambaConfig(d_model=D_MODEL, n_layers=3, d_state=16))
        self.readout = nn.Linear(D_MODEL, 1, bias=False)

    def forward(self, P: torch.Tensor) -> torch.Tensor:
        return self.readout(self.mamba(self.embed(P))[:, -1]).squeeze(-1)


def step_fn(model: nn.Module, P: torch.Tensor, z: torch.Tensor):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad()
        loss = torch.clamp(1 - z * model(P), min=0).mean()  # hinge loss
        loss.backward()
        opt.step()
        return loss.item()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="timed steps per model (after 3 warm-up steps)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave PyTorch's default)")
    args = ap.parse_args()
    if args.steps < 1:
        raise ValueError(f"--steps must be >= 1; got {args.steps}")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        import mambapy  # noqa: F401
    except ImportError as e:
        raise SystemExit("mambapy is not installed: pip install --no-deps mambapy") from e
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    P = torch.randn(BATCH, L, D + 1, generator=g)
    P[:, -1, -1] = 0
    z = torch.where(torch.rand(BATCH, generator=g) < 0.5, -1.0, 1.0)
    steps = {"ours": step_fn(make_ours(0), P, z), "mambapy": step_fn(MambapyClassifier(), P, z)}
    times = {k: [] for k in steps}
    for _ in range(3):
        for s in steps.values():
            s()
    for _ in range(args.steps):
        for name, s in steps.items():
            t0 = time.perf_counter()
            s()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {BATCH}, L {L}, d_model {D_MODEL}")
    for k in steps:
        print(f"{k:8s} median step {med[k]:8.1f} ms  (min {min(times[k]) * 1e3:.1f}, max {max(times[k]) * 1e3:.1f})")
    print(f"speedup vs mambapy: {med['mambapy'] / med['ours']:.2f}x")


if __name__ == "__main__":
    main()
