"""Command line: ``python -m mambaicl reproduce fig2 --out DIR [--seed N] [--preset NAME]``.

Trains the one-layer Mamba and the linear Transformer with the named preset, sweeps the test
outlier fraction alpha for labelling rules A, B, C and writes ``DIR/results.json`` and
``DIR/artifacts.pt`` (see :func:`mambaicl.experiments.run_fig2`).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time

import torch

from .config import PRESETS, get_preset
from .experiments import run_fig2

__all__ = ["main", "atomic_write_bytes"]


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mambaicl", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="reproduce a figure of the paper")
    rep.add_argument("figure", choices=["fig2"], help="which figure")
    rep.add_argument("--out", required=True, help="output directory (created if missing)")
    rep.add_argument("--seed", type=int, default=0, help="seed of every generator (default 0)")
    rep.add_argument("--preset", default="fig2", choices=sorted(PRESETS), help="named preset (default fig2)")
    rep.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.seed < 0:
        raise SystemExit(f"--seed must be a non-negative integer; got {args.seed}")
    torch.set_num_threads(1)  # tiny tensors: one thread is several times faster than two
    os.makedirs(args.out, exist_ok=True)
    preset = get_preset(args.preset)
    start = time.time()
    print(f"reproducing Figure 2 with preset {preset.name!r}, seed {args.seed}", flush=True)
    results, artifacts = run_fig2(preset, seed=args.seed, progress=not args.quiet)
    text = json.dumps(results, indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(os.path.join(args.out, "results.json"), text.encode())
    buf = io.BytesIO()
    torch.save(artifacts, buf)
    atomic_write_bytes(os.path.join(args.out, "artifacts.pt"), buf.getvalue())
    for kind, by_rule in results["errors"].items():
        for rule, errs in by_rule.items():
            row = " ".join(f"{e:.3f}" for e in errs)
            print(f"{kind:>18} rule {rule}: {row}")
    print(f"alphas: {results['alphas']}; wrote {args.out}/results.json and artifacts.pt "
          f"in {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
