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
fails stops the build with its message), ``book_execute_after`` (optional ``{docname: [docname, ...]}``: a
chapter that starts only once the chapters it names have executed, when they are executed in the same build;
the Mamba-1 appendix reads the Mamba-1 run that the mechanism chapter computes and stores, and would otherwise
compute it a second time beside it).

Interrupting the build (Ctrl-C, i.e. SIGINT to its process group, or SIGTERM as ``timeout``, a CI limit or a
scheduler sends it) while chapters execute stops every process the extension started within seconds: the
build freezes its workers, kills every descendant (the workers, the kernels, which Jupyter starts in sessions of
their own, and whatever a cell started), caches nothing that was not complete, prints one line on stderr
saying what it stopped, and ends by the signal it received. The workers ignore SIGINT (the build decides), kill
their own kernels when terminated, and die with the build even when it is killed outright (``PR_SET_PDEATHSIG``
on Linux, and a thread that watches the parent everywhere). The process tree is read from ``/proc`` (Linux);
elsewhere the workers are killed and each kernel exits by itself within a second of its worker (ipykernel's
parent poller).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.matching import Matcher

logger = logging.getLogger(__name__)
BUILD_ENV = "MAMBAICL_BOOK_BUILD"


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_GRACE = 3.0  # seconds a stopped process has to exit after SIGTERM before SIGKILL


def _children_map() -> dict[int, list[int]]:
    """``{ppid: [pid, ...]}`` of every process visible in ``/proc`` (empty where there is no ``/proc``)."""
    out: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])  # the name may hold spaces and parentheses
        out.setdefault(ppid, []).append(int(name))
    return out


def _descendants(pid: int) -> list[int]:
    """Every descendant of ``pid``, parents before children."""
    tree, out, todo = _children_map(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def _signal_all(pids, sig) -> None:
    """Send ``sig`` to each of ``pids`` and to the process group each leads (a kernel's session)."""
    own = os.getpgrp()
    for pid in pids:
        try:
            if os.getpgid(pid) == pid and pid != own:
                os.killpg(pid, sig)
            os.kill(pid, sig)
        except OSError:
            pass


def _reap(pids) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except OSError:
            pass


def _stop_tree(roots, grace: float = _GRACE) -> list[int]:
    """Stop ``roots`` and every descendant: freeze them (no new process starts), SIGTERM, then SIGKILL what is
    left after ``grace`` seconds. Returns every pid that was stopped."""
    roots = [p for p in roots if _alive(p)]
    _signal_all(roots, signal.SIGSTOP)
    pids = list(roots)
    for pid in roots:
        pids += [d for d in _descendants(pid) if d not in pids]
    _signal_all(pids[::-1], signal.SIGTERM)  # children first: a kernel before the worker that waits for it
    _signal_all(pids, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(roots)
        if not any(_alive(p) for p in pids):
            return pids
        time.sleep(0.05)
    _signal_all(pids, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        _reap(roots)
        time.sleep(0.05)
    return pids


def _end_worker(code: int) -> None:
    """Kill this worker's kernel (a session leader) with what its cells started, then exit at once."""
    _signal_all(_children_map().get(os.getpid(), []), signal.SIGKILL)
    os._exit(code)


def _worker_init(parent: int) -> None:
    """In each worker: ignore Ctrl-C (the build decides), kill its own kernel when terminated, die with the build.

    A Python signal handler runs only when the main thread runs Python code (:func:`_execute` keeps it waking);
    a thread also watches the parent (every 0.2 s) and ends the worker itself when it is gone, whether or not
    the SIGTERM of ``PR_SET_PDEATHSIG`` was handled first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: _end_worker(128 + signum))
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the build dies
        except (OSError, AttributeError):
            pass

    def watch():
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # signals go to the main thread, whose wait ends
        while os.getppid() == parent:
            time.sleep(0.2)
        _end_worker(128 + signal.SIGTERM)

    threading.Thread(target=watch, name="book_execute-watch-parent", daemon=True).start()


class _Stop:
    """SIGINT/SIGTERM handlers of the build while it executes chapters: they only record the signal (the loop
    that waits for the workers looks every half second), so no cache write is ever cut in half."""

    def __init__(self) -> None:
        self.signum, self._old = None, {}

    def __enter__(self) -> "_Stop":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._old[sig] = signal.signal(sig, self._record)
        return self

    def _record(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def die(self, message: str) -> None:
        """Say ``message`` on stderr and end the build by the signal it received (the shell sees an interrupt)."""
        print(f"[book_execute] interrupted by {signal.Signals(self.signum).name}: {message}", file=sys.stderr,
              flush=True)
        self.__exit__()
        signal.signal(self.signum, signal.SIG_DFL)
        os.kill(os.getpid(), self.signum)
        time.sleep(5)
        os._exit(128 + self.signum)


def _execute(path: str, cwd: str, timeout, allow_errors: bool) -> dict:
    """Execute one notebook in a fresh kernel (worker process); a picklable summary of the run."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    nb = nbformat.read(path, as_version=4)
    box = {}

    def run():  # off the main thread: nbclient then leaves the worker's signal handlers alone (it replaces
        # SIGINT's and SIGTERM's with a kernel cleanup while it runs, and resets them to Python's defaults after)
        try:
            box["res"] = single_nb_execution(nb, cwd=cwd, timeout=timeout, allow_errors=allow_errors,
                                             meta_override=True, record_timing=True)
        except BaseException as exc:  # noqa: BLE001 - raised again in the worker's main thread below
            box["exc"] = exc

    thread = threading.Thread(target=run, name="book_execute-notebook", daemon=True)
    thread.start()
    while thread.is_alive():  # the main thread wakes often, so that a SIGTERM's handler runs at once
        thread.join(0.2)
    if "exc" in box:
        raise box["exc"]
    res = box["res"]
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


def _after(app, todo: list[Path]) -> dict:
    """``{path: {paths it waits for}}`` from ``book_execute_after``, restricted to the chapters of ``todo``
    (a chapter already in the execution cache is not waited for). A failed chapter is never finished, so a
    chapter waiting for it is not started: the failure stops the build."""
    spec = app.config.book_execute_after or {}
    if not isinstance(spec, dict):
        raise ExtensionError(f"book_execute_after must be a mapping {{docname: [docname, ...]}}; got {spec!r}")
    by_doc = {p.relative_to(app.srcdir).with_suffix("").as_posix(): p for p in todo}
    out = {}
    for doc, before in spec.items():
        if isinstance(before, str):
            before = [before]
        if doc in by_doc:
            out[by_doc[doc]] = {by_doc[b] for b in before if b in by_doc}
    return out


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


def _prelude(app, todo: list[Path], stop: _Stop) -> None:
    """Run the configured command of every chapter about to be executed (inherits the terminal)."""
    import shlex
    import subprocess

    for doc, command in (app.config.book_execute_prelude or {}).items():
        if not any(p.relative_to(app.srcdir).with_suffix("").as_posix() == doc for p in todo):
            continue
        argv = shlex.split(command)
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        logger.info(f"[book_execute] before {doc}: {command}")
        t0 = time.perf_counter()
        run = subprocess.Popen(argv, cwd=app.srcdir, stdout=subprocess.PIPE, text=True)
        out = []
        reader = threading.Thread(target=lambda: out.append(run.stdout.read()), daemon=True)
        reader.start()
        while run.poll() is None and stop.signum is None:
            time.sleep(0.2)
        if run.returncode is not None and run.returncode < 0 and stop.signum is None:
            time.sleep(0.5)  # killed by Ctrl-C to the whole group: the build's own signal comes with it
        if stop.signum is not None:
            _stop_tree([run.pid])
            stop.die(f"stopped `{command}` (run before {doc}); no chapter was executed")
        reader.join()
        for line in "".join(out).splitlines():
            logger.info(f"[book_execute]   {line}")
        if run.returncode != 0:
            raise ExtensionError(f"`{command}` (needed by {doc}) failed with exit code {run.returncode}; "
                                 "its message is above. Fix the cause and run `jupyter-book build .` again.")
        logger.info(f"[book_execute] {command}: done in {time.perf_counter() - t0:.0f} s")


def _pre_execute(app) -> None:
    if app.config.nb_execution_mode != "cache":
        return
    from jupyter_cache import get_cache
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
    with _Stop() as stop:
        _prelude(app, todo, stop)
        failures, timings = _execute_all(app, todo, cache, stop)
    if failures:
        raise ExtensionError("\n\n".join(_failure_message(app, f) for f in failures))


def _keep(app, out: dict, cache, failures: list, timings: dict, t0: float) -> None:
    """Cache one chapter's complete execution (or record its failure)."""
    from jupyter_cache.base import CacheBundleIn
    import nbformat

    rel = Path(out["path"]).relative_to(app.srcdir).as_posix()
    if out["error"] is not None:
        failures.append(out)
        logger.info(f"[book_execute] FAILED {rel} after {out['seconds']:.0f} s")
        return
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


def _execute_all(app, todo: list[Path], cache, stop: _Stop):
    """Execute ``todo`` on the workers, caching each chapter as it completes; stop everything on a signal."""
    workers = max(1, min(len(todo), app.config.book_execute_workers or os.cpu_count() or 1))
    timeout = app.config.nb_execution_timeout
    allow = bool(app.config.nb_execution_allow_errors)
    logger.info(f"[book_execute] executing {len(todo)} chapter(s) on {workers} core(s), longest first "
                f"(cell timeout {timeout} s): " + ", ".join(p.stem for p in todo))
    t0 = time.perf_counter()
    failures, timings = [], {}
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(os.getpid(),))
    after = _after(app, todo)
    waiting = list(todo)  # longest first; a chapter is submitted once the chapters it waits for are done
    finished: set = set()

    def submit_ready() -> set:
        ready = [p for p in waiting if not (after.get(p, set()) - finished)]
        for p in ready:
            waiting.remove(p)
        return {pool.submit(_execute, str(p), str(p.parent), timeout, allow): p for p in ready}

    try:
        jobs = submit_ready()
        pending = set(jobs)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            broken = [job for job in done if job.exception() is not None]
            for job in done:
                if job not in broken:
                    _keep(app, job.result(), cache, failures, timings, t0)
                    finished.add(jobs[job])
            if waiting and not broken and stop.signum is None:
                new = submit_ready()
                jobs.update(new)
                pending |= set(new)
            if broken and stop.signum is None:
                time.sleep(1.0)  # a worker killed by a signal to the whole group: the build's own comes with it
            if stop.signum is not None:
                procs = list(getattr(pool, "_processes", None) or {})
                _stop_tree(procs)
                pool.shutdown(wait=False, cancel_futures=True)
                stop.die(f"stopped {len(procs)} worker(s) and their kernels; "
                         f"{len(timings)} chapter(s) executed and cached, {len(todo) - len(timings) - len(failures)} "
                         "not cached (nothing half-done is kept; the next build executes them)")
            for job in broken:
                job.result()  # a worker that died for another reason: its error stops the build
    finally:
        pool.shutdown(wait=stop.signum is None)
    if not failures:
        logger.info(f"[book_execute] {len(todo)} chapter(s) executed in {time.perf_counter() - t0:.0f} s")
    return failures, timings


def setup(app):
    app.add_config_value("book_execute_workers", 0, "env")
    app.add_config_value("book_execute_order", "", "env")
    app.add_config_value("book_execute_prelude", {}, "env")
    app.add_config_value("book_execute_after", {}, "env")
    os.environ[BUILD_ENV] = "1"  # the chapters' kernels inherit it (progress bars to the terminal)
    app.connect("builder-inited", _pre_execute, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
