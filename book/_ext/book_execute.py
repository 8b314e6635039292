"""Sphinx extension of the book: execute the chapters in parallel before the build reads them.

MyST-NB's ``cache`` mode (``execute.execute_notebooks: cache`` in ``_config.yml``) executes each
notebook the moment Sphinx reads it, one after the other, so a first build uses one core. This
extension runs first (``builder-inited``): it finds every notebook of the book that the execution
cache (jupyter-cache, ``_build/.jupyter_cache``) does not hold yet, executes them in parallel on
every core (longest first), and stores each executed notebook in that cache exactly as MyST-NB
would (same hash of the code cells and kernelspec, same ``execution_seconds``). MyST-NB then finds
every chapter in the cache and only renders it. A rebuild with nothing changed executes nothing.

A notebook that fails to execute (an exception, or a cell over the timeout) stops the build with a
non-zero exit and a message naming the chapter, the cell and what to do. The failed notebook is
never cached, and the failure happens before Sphinx reads any page, so no page with a traceback is
written and the next ``jupyter-book build .`` executes that chapter again.

The chapters' kernels inherit ``MAMBAICL_BOOK_BUILD=1``: long computations in them (Chapter 6
filling the SST-2 embedding cache) then draw their progress bars in the terminal that runs the
build, not in the stored page (``mambaicl.notebook.progress_stream``).

Settings (``sphinx: config:`` in ``_config.yml``): ``book_execute_workers`` (default: the number of
cores), ``book_execute_order`` (optional path of a JSON file ``{"chapters": {docname: seconds}}``
of measured times, used to start the longest chapters first), ``book_execute_prelude`` (optional
``{docname: command}``: a command run on every core, before the chapters, when that chapter is to
be executed; the book fills Chapter 6's SST-2 embedding cache this way, with its progress bar in
the terminal, so that the filling does not share one core with the other chapters; a command that
fails stops the build with its message).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.matching import Matcher

logger = logging.getLogger(__name__)
BUILD_ENV = "MAMBAICL_BOOK_BUILD"


def _execute(path: str, cwd: str, timeout, allow_errors: bool) -> dict:
    """Execute one notebook in a fresh kernel (worker process); a picklable summary of the run."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    nb = nbformat.read(path, as_version=4)
    res = single_nb_execution(nb, cwd=cwd, timeout=timeout, allow_errors=allow_errors,
                              meta_override=True, record_timing=True)
    cells = []  # (index, seconds) of every executed code cell, from nbclient's timestamps
    failed = None
    for i, cell in enumerate(res.nb.cells):
        if cell.cell_type != "code":
            continue
        ex = cell.metadata.get("execution", {})
        start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
        if start and end:
            from datetime import datetime

            t0, t1 = (datetime.fromisoformat(s.replace("Z", "+00:00")) for s in (start, end))
            cells.append((i, (t1 - t0).total_seconds()))
        if res.err is not None and failed is None:
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
                failed = i
            elif start and not end:  # started, never finished: the cell that timed out
                failed = i
        cell.metadata.pop("execution", None)  # no per-run timestamps in the cache
    if res.err is not None and failed is None and cells:
        failed = cells[-1][0] + 1 if cells[-1][0] + 1 < len(res.nb.cells) else cells[-1][0]
    out = {"path": path, "seconds": res.time, "cells": cells, "error": None}
    if res.err is not None:
        src = res.nb.cells[failed].source if failed is not None else ""
        out["error"] = {"name": type(res.err).__name__, "text": (res.exc_string or str(res.err))[-3000:],
                        "cell": failed, "source": src}
    else:
        out["nb"] = nbformat.writes(res.nb)
    return out


def _notebooks(app) -> list[Path]:
    """Every ``.ipynb`` of the book that Sphinx will read and MyST-NB would execute."""
    src = Path(app.srcdir)
    excluded = Matcher(list(app.config.exclude_patterns) + ["_build/**", "**/.ipynb_checkpoints/**"])
    no_exec = Matcher(list(getattr(app.config, "nb_execution_excludepatterns", []) or []))
    out = []
    for path in sorted(src.rglob("*.ipynb")):
        rel = path.relative_to(src).as_posix()
        if not excluded(rel) and not no_exec(rel):
            out.append(path)
    return out


def _order(app, paths: list[Path]) -> list[Path]:
    """Longest first: measured times from ``book_execute_order`` when given, else file size."""
    measured = {}
    spec = app.config.book_execute_order
    if spec and (Path(app.srcdir) / spec).is_file():
        try:
            measured = json.loads((Path(app.srcdir) / spec).read_text())["chapters"]
        except (ValueError, KeyError, TypeError):
            measured = {}

    def key(p: Path):
        doc = p.relative_to(app.srcdir).with_suffix("").as_posix()
        return (-float(measured.get(doc, {}).get("seconds", 0) if isinstance(measured.get(doc), dict)
                       else measured.get(doc, 0)), -p.stat().st_size)

    return sorted(paths, key=key)


def _failure_message(app, out: dict) -> str:
    err, rel = out["error"], Path(out["path"]).relative_to(app.srcdir).as_posix()
    first = next((line for line in err["source"].splitlines() if line.strip() and not line.startswith("#")),
                 err["source"].splitlines()[0] if err["source"] else "")
    tail = "\n".join(err["text"].rstrip().splitlines()[-12:])
    return (f"chapter {rel} failed to execute: {err['name']} in cell {err['cell']} "
            f"(`{first.strip()[:100]}`).\n{tail}\n"
            f"What to do: run the chapter on its own to see the whole traceback "
            f"(`jupyter execute {rel}`, or open it in Jupyter), fix the cause, then run "
            f"`jupyter-book build .` again: the failed chapter was not cached and no page was written, "
            f"so the next build executes it again. A cell that timed out on a busy machine can be given "
            f"more time with `execute.timeout` in _config.yml.")


def _prelude(app, todo: list[Path]) -> None:
    """Run the configured command of every chapter about to be executed (inherits the terminal)."""
    import shlex
    import subprocess
    import sys

    for doc, command in (app.config.book_execute_prelude or {}).items():
        if not any(p.relative_to(app.srcdir).with_suffix("").as_posix() == doc for p in todo):
            continue
        argv = shlex.split(command)
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        logger.info(f"[book_execute] before {doc}: {command}")
        t0 = time.perf_counter()
        run = subprocess.run(argv, cwd=app.srcdir, stdout=subprocess.PIPE, text=True)
        for line in (run.stdout or "").splitlines():
            logger.info(f"[book_execute]   {line}")
        if run.returncode != 0:
            raise ExtensionError(f"`{command}` (needed by {doc}) failed with exit code {run.returncode}; "
                                 "its message is above. Fix the cause and run `jupyter-book build .` again.")
        logger.info(f"[book_execute] {command}: done in {time.perf_counter() - t0:.0f} s")


def _pre_execute(app) -> None:
    if app.config.nb_execution_mode != "cache":
        return
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    import nbformat

    cache_path = app.config.nb_execution_cache_path or str(Path(app.outdir).parent / ".jupyter_cache")
    cache = get_cache(cache_path)
    todo = []
    for path in _notebooks(app):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            todo.append(path)
    if not todo:
        logger.info("[book_execute] every chapter is in the execution cache; nothing to execute")
        return
    todo = _order(app, todo)
    _prelude(app, todo)
    workers = max(1, min(len(todo), app.config.book_execute_workers or os.cpu_count() or 1))
    timeout = app.config.nb_execution_timeout
    allow = bool(app.config.nb_execution_allow_errors)
    logger.info(f"[book_execute] executing {len(todo)} chapter(s) on {workers} core(s), longest first "
                f"(cell timeout {timeout} s): " + ", ".join(p.stem for p in todo))
    t0 = time.perf_counter()
    failures, timings = [], {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        jobs = {pool.submit(_execute, str(p), str(p.parent), timeout, allow): p for p in todo}
        for job in as_completed(jobs):
            out = job.result()
            rel = Path(out["path"]).relative_to(app.srcdir).as_posix()
            if out["error"] is not None:
                failures.append(out)
                logger.info(f"[book_execute] FAILED {rel} after {out['seconds']:.0f} s")
                continue
            nb = nbformat.reads(out["nb"], as_version=4)
            longest = max(out["cells"], key=lambda c: c[1]) if out["cells"] else (None, 0.0)
            cache.cache_notebook_bundle(
                CacheBundleIn(nb, out["path"], data={"execution_seconds": out["seconds"],
                                                     "longest_cell": longest[0],
                                                     "longest_cell_seconds": longest[1]}),
                check_validity=False, overwrite=True)
            timings[rel] = out["seconds"]
            logger.info(f"[book_execute] executed {rel} in {out['seconds']:.0f} s "
                        f"(longest cell {longest[1]:.0f} s) [{time.perf_counter() - t0:.0f} s elapsed]")
    if failures:
        raise ExtensionError("\n\n".join(_failure_message(app, f) for f in failures))
    logger.info(f"[book_execute] {len(todo)} chapter(s) executed in {time.perf_counter() - t0:.0f} s")


def setup(app):
    app.add_config_value("book_execute_workers", 0, "env")
    app.add_config_value("book_execute_order", "", "env")
    app.add_config_value("book_execute_prelude", {}, "env")
    os.environ[BUILD_ENV] = "1"  # the chapters' kernels inherit it (progress bars to the terminal)
    app.connect("builder-inited", _pre_execute, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
