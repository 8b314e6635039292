"""Command line: ``python -m mambaicl reproduce NAME --out DIR [--seed N | --seeds N ...] [--preset P]``.

``python -m mambaicl embed-sst2 [--path DIR] [--cache-dir DIR] [--preset P]`` fills the embedding
cache Chapter 6 and ``reproduce sst2`` read (every sentence and poisoned twin of every regime of the
preset), with a progress bar; a warm cache makes it a no-op.

``python -m mambaicl judge [--store DIR] [--out FILE] [--measured-only]`` reads the stored result of every run of the book (the
result store the chapters fill, default ``$MAMBAICL_CACHE_DIR/results`` or ``~/.cache/mambaicl/results``, or a
folder written by ``reproduce --all --out``), judges every claim they measure (``Result.claims()``) and writes
``results.json`` (default: standard output), the rows the results page shows, without Jupyter.
``python -m mambaicl reproduce --all --out DIR [--preset tiny] [--jobs N]`` runs every run of the book
(:data:`mambaicl.experiments.book.BOOK_RUNS`) with its preset and seeds, one progress bar each, writes
``DIR/<run>/results.json`` and ``DIR/<run>/result.pt``, then ``DIR/results.json`` as ``judge`` does
(``--preset tiny``: each experiment's tiny preset where it has one, a smoke test). ``--jobs N`` runs the
experiments in ``N`` processes at once (one line as each starts and ends instead of progress bars); the
measurements (timings) run first, alone; the bytes written are the same as with one job.

``python -m mambaicl reproduce --list`` lists the experiments (one module each in
:mod:`mambaicl.experiments`). ``reproduce`` runs one with a named preset and writes
``DIR/results.json`` (and ``DIR/artifacts.pt`` when the experiment keeps tensors), atomically;
the same command gives the same bytes. ``--seed N`` runs one seed (for ``fig2``, ``artifacts.pt``
then holds one parameter dict per model, the first release's layout); ``--seeds`` runs several
as one batch (lists in ``seeds`` order); ``--threads N`` sets torch's thread count (default 1; the
results do not depend on it: MKL's products stay on one thread, :func:`mambaicl.device.set_threads`, and the gate
read-outs take their exponential in slices PyTorch does not split, :func:`mambaicl.device.serial_elementwise`; tested
on every ``tiny`` preset). The output folder is replaced as a whole, both files together
(:func:`mambaicl.io.write_outputs`).

Errors: bad input (a :class:`~mambaicl.config.ConfigError`, a missing file, a folder that cannot be
written) ends in one line on stderr and exit status 2; anything else is a bug and shows its
traceback (exit status 1).
"""
from __future__ import annotations

import argparse
import io
import sys
import time

import torch

from . import experiments
from .config import ConfigError, check_choice, check_int, check_seeds
from .device import set_threads
from .io import json_text, prepare_out_dir, write_outputs

__all__ = ["main"]


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, without the usage block."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise ConfigError(message)


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m mambaicl", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    rep = sub.add_parser("reproduce", help="run one experiment of the book and write its results")
    rep.add_argument("name", nargs="?", help="the experiment (see --list)")
    rep.add_argument("--all", action="store_true", help="run every run of the book, then write DIR/results.json")
    rep.add_argument("--list", action="store_true", help="list the experiments and their presets, then exit")
    rep.add_argument("--out", help="output directory (created if missing)")
    group = rep.add_mutually_exclusive_group()
    group.add_argument("--seed", type=int, help="run one seed")
    group.add_argument("--seeds", type=int, nargs="+", help="run several seeds as one batch")
    rep.add_argument("--preset", help="named preset (default: the experiment's own)")
    rep.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    rep.add_argument("--threads", type=int, default=1, help="torch threads (default 1; results do not depend on it)")
    rep.add_argument("--quiet", action="store_true", help="no progress bars")
    rep.add_argument("--jobs", type=int, default=1, help="with --all: experiments run in this many processes")
    jud = sub.add_parser("judge", help="judge every claim from the stored results and write results.json")
    jud.add_argument("--store", help="result store or reproduce --all folder (default: the book's result store)")
    jud.add_argument("--out", help="results.json to write (default: standard output)")
    jud.add_argument("--measured-only", action="store_true", help="write the rows the stored runs measure (a "
                     "smoke-test folder, or while some chapters still judge their rows themselves), not every row")
    emb = sub.add_parser("embed-sst2", help="fill the SST-2 embedding cache of Chapter 6 (progress bar)")
    emb.add_argument("--path", help="GLUE SST-2 folder (default: $MAMBAICL_SST2_DIR, else the Hugging Face hub)")
    emb.add_argument("--cache-dir", help="cache folder (default: $MAMBAICL_CACHE_DIR, else ~/.cache/mambaicl)")
    emb.add_argument("--preset", default="paper", help="the sst2 preset whose regimes are embedded (default paper)")
    emb.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _embed_sst2(args) -> int:
    from .experiments import sst2

    if args.preset not in sst2.PRESETS:
        raise ConfigError(f"unknown preset {args.preset!r} for sst2; known presets: {', '.join(sorted(sst2.PRESETS))}")
    print(f"embedding the SST-2 sentences of preset {args.preset!r} (Chapter 6)", flush=True)
    out = sst2.fill_embedding_cache(sst2.PRESETS[args.preset], path=args.path, cache_dir=args.cache_dir,
                                    progress=not args.quiet)
    print(f"embedding cache filled: {out['sentences']:,} sentences needed, {out['encoded']:,} encoded now, "
          f"in {out['seconds']:.0f} s ({out['cpu_seconds']:.0f} s CPU)", flush=True)
    return 0


def _list() -> int:
    for name in experiments.names():
        mod = experiments.get(name)
        print(f"{name:<12} {mod.DESCRIPTION}")
        print(f"{'':<12} presets: {', '.join(sorted(mod.PRESETS))} (default {mod.DEFAULT_PRESET}); "
              f"default seeds: {' '.join(map(str, mod.DEFAULT_SEEDS))}")
    return 0


def _judge(args) -> int:
    from .experiments.book import judge_results, read_results
    from .io import atomic_write_bytes

    skipped = [] if args.measured_only else None
    text = judge_results(read_results(args.store), only_measured=args.measured_only, skipped=skipped)
    for label, why in skipped or ():
        print(f"{label}: its rows are not measured ({why})", file=sys.stderr)
    if args.out:
        atomic_write_bytes(args.out, text.encode("utf-8"))
    else:
        sys.stdout.write(text)
    return 0


def _reproduce_all(args) -> int:
    from pathlib import Path

    from .experiments.book import BOOK_RUNS, book_call, judge_results, run_and_write
    from .io import atomic_write_bytes

    if args.name or args.seed is not None or args.seeds:
        raise ConfigError("--all runs the book's runs with their own seeds: give no name, --seed or --seeds")
    if not args.out:
        raise ConfigError("--out DIR is required (the folder for results.json)")
    out = Path(args.out)
    labels = {r.label.replace(":", "-") for r in BOOK_RUNS} | {"results.json"}
    if out.exists() and (not out.is_dir() or any(p.name not in labels for p in out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty folder or an earlier reproduce --all folder")
    check_choice("--device", args.device, ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",))
    set_threads(check_int("--threads", args.threads, 1))
    jobs = check_int("--jobs", args.jobs, 1)
    calls = [(r, *book_call(r, args.preset)) for r in BOOK_RUNS]  # every preset checked before any run
    out.mkdir(parents=True, exist_ok=True)
    results, start = {}, time.time()
    numbered = list(enumerate(calls, 1))
    # measurements (timings) first and alone, then the experiments, in this process or in ``jobs`` processes; a run
    # that reuses another's result (BookRun.reuse) starts once that one has finished and is handed its result
    order = [c for c in numbered if c[1][0].function is not None] + [c for c in numbered if c[1][0].function is None]

    def one(i, run, fn, fargs, kwargs, progress):
        if run.reuse is not None:
            kwargs = {**kwargs, "reuse": results[run.reuse]}
        return run_and_write, (out, i, len(calls), run, fn, fargs, kwargs, args.device, progress)

    if jobs == 1:
        for i, (run, fn, fargs, kwargs) in order:
            f, a = one(i, run, fn, fargs, kwargs, not args.quiet)
            results[run.label] = f(*a)
    else:
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        for i, (run, fn, fargs, kwargs) in [c for c in order if c[1][0].function is not None]:
            f, a = one(i, run, fn, fargs, kwargs, False)
            results[run.label] = f(*a)
        waiting = [c for c in order if c[1][0].function is None]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=set_threads, initargs=(torch.get_num_threads(),)) as pool:
            running: dict = {}
            while waiting or running:
                ready = [c for c in waiting if c[1][0].reuse is None or c[1][0].reuse in results]
                for c in ready:
                    waiting.remove(c)
                    i, (run, fn, fargs, kwargs) = c
                    f, a = one(i, run, fn, fargs, kwargs, False)
                    running[pool.submit(f, *a)] = run.label
                if not running:
                    raise RuntimeError(f"book runs wait for runs that never come: {[c[1][0].label for c in waiting]}")
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    results[running.pop(fut)] = fut.result()
    results = {r.label: results[r.label] for r, *_ in calls}  # the book's order, whatever finished first
    skipped = None if args.preset is None else []  # a smoke-test preset: the rows it can measure
    text = judge_results(results, only_measured=skipped is not None, skipped=skipped)
    atomic_write_bytes(out / "results.json", text.encode("utf-8"))
    for label, why in skipped or ():
        print(f"{label}: its rows are not measured on preset {args.preset!r} ({why})", flush=True)
    print(f"wrote {out / 'results.json'} ({len(calls)} runs) in {time.time() - start:.0f} s", flush=True)
    return 0


def _reproduce(args) -> int:
    if args.list:
        return _list()
    if args.all:
        return _reproduce_all(args)
    if not args.name:
        raise ConfigError("name the experiment to reproduce (python -m mambaicl reproduce --list shows them)")
    if args.name not in experiments.names():  # the name first: "reproduce nope" is about the name, not --out
        raise ConfigError(f"unknown experiment {args.name!r}; known experiments: {', '.join(experiments.names())}")
    if not args.out:
        raise ConfigError("--out DIR is required (the folder for results.json)")
    mod = experiments.get(args.name)
    preset_name = args.preset or mod.DEFAULT_PRESET
    if preset_name not in mod.PRESETS:
        raise ConfigError(f"unknown preset {preset_name!r} for {args.name}; known presets: {', '.join(sorted(mod.PRESETS))}")
    seeds = check_seeds("seeds", (args.seed,) if args.seed is not None else (args.seeds or mod.DEFAULT_SEEDS))
    check_choice("--device", args.device, ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",))
    threads = check_int("--threads", args.threads, 1)
    out = prepare_out_dir(args.out)
    set_threads(threads)  # small tensors: one thread is fastest; the count changes no bit (device.set_threads)
    start = time.time()
    print(f"reproducing {args.name} with preset {preset_name!r}, seeds {' '.join(map(str, seeds))}", flush=True)
    result = mod.run(mod.PRESETS[preset_name], seeds=seeds, device=args.device, progress=not args.quiet)
    files = {"results.json": json_text(result.to_dict()).encode("utf-8")}
    art = result.single_seed_artifacts() if args.seed is not None and hasattr(result, "single_seed_artifacts") \
        else result.artifacts()
    if art is not None:
        buf = io.BytesIO()
        torch.save(art, buf)
        files["artifacts.pt"] = buf.getvalue()
    write_outputs(out, files)  # both files land together
    written = list(files)
    if hasattr(result, "summary"):
        print(result.summary())
    print(f"wrote {', '.join(str(out / w) for w in written)} in {time.time() - start:.0f} s", flush=True)
    return 0


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command == "reproduce":
            return _reproduce(args)
        if args.command == "judge":
            return _judge(args)
        if args.command == "embed-sst2":
            return _embed_sst2(args)
        raise ConfigError(f"unknown command {args.command!r}")
    except (ConfigError, FileNotFoundError, PermissionError) as exc:  # bad input; anything else is a bug
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"python -m mambaicl: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
