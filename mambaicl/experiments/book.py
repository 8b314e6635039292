"""The runs the book makes, read through the result store: the one table ``judge`` and ``reproduce --all`` share.

Every chapter reads its experiments through :func:`book_result` (the result store,
:func:`mambaicl.experiments.store.stored`), so a build leaves each result in the store under the key of this very
call. :data:`BOOK_RUNS` lists those calls (experiment, preset, seeds); ``python -m mambaicl judge`` recomputes
each key, reads the stored result, asks it which claims it measures (``Result.claims()``: claim key →
:class:`~mambaicl.analysis.claims.ClaimParts`), judges them (:func:`~mambaicl.analysis.claims.judge_all`) and
writes ``results.json`` with the rows function the results page uses (:func:`mambaicl.analysis.results.rows`).

A new experiment: its module in :mod:`mambaicl.experiments` (presets, ``run``, ``Result.claims()``), its rows in
the registry (:mod:`mambaicl.analysis.claims`) and ``book/results.yml``, its line in :data:`BOOK_RUNS`, and its
chapter calls ``glue_claims(book_result(NAME))``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..config import ConfigError
from . import get as experiment
from .store import _file, results_dir, stored

__all__ = ["BookRun", "BOOK_RUNS", "book_run", "book_result", "book_call", "read_results", "claims_of", "judge_results", "run_and_write"]


@dataclass(frozen=True)
class BookRun:
    """One run of the book: ``experiment`` with its preset ``preset`` (``None``: its ``DEFAULT_PRESET``) and its
    ``DEFAULT_SEEDS``; ``label`` names it (the experiment's name, or ``name:preset``). A run that reuses another's
    trained models (``reuse``: that run's label) is stored under a key that names it instead of its ``repr``."""

    def key_kwargs(self, kwargs: dict) -> dict:
        """The keyword arguments of its store key (:func:`~mambaicl.experiments.store.store_key`)."""
        return {**kwargs, **({"reuse": f"book run {self.reuse}"} if self.reuse else {})}

    experiment: str
    preset: Optional[str] = None
    reuse: Optional[str] = None  # the label of the book run whose result this one may reuse (``run(..., reuse=)``)
    function: Optional[str] = None  # a measurement of the module called with no arguments instead of ``run``

    @property
    def label(self) -> str:
        if self.function is not None:
            return f"{self.experiment}.{self.function}"
        return self.experiment if self.preset is None else f"{self.experiment}:{self.preset}"


#: every run a chapter makes through the store, in the book's order
BOOK_RUNS = (
    BookRun("identities", function="eq3_closed_form"), BookRun("identities", function="lemma4_gradient"),
    BookRun("identities", function="definitions"), BookRun("dynamics"), BookRun("dynamics_checks", reuse="dynamics"),
    BookRun("mechanism", "one_layer"), BookRun("mechanism", "mamba1"), BookRun("mechanism"),
    BookRun("mechanism", "fig3_none"), BookRun("timing", function="mamba1_speed"), BookRun("sst2"),
    BookRun("boundary"), BookRun("gates"), BookRun("multiclass"), BookRun("regression"),
    BookRun("fig2"), BookRun("fig2_ablations", reuse="fig2"), BookRun("fig2_complete"), BookRun("seed_tail"), BookRun("context_examples"), BookRun("kappa_lower_bound"), BookRun("batch_size"),
    BookRun("rmsnorm_causal"), BookRun("deep_gate_training"), BookRun("app14_gates"),
)


#: claims measured by several runs together: (the runs' labels, module, function of their results in that order)
JOINT_CLAIMS = (
    (("mechanism:one_layer", "mechanism", "mechanism:fig3_none", "mechanism:mamba1"), "mechanism", "chapter_claims"),
    (("dynamics", "dynamics_checks"), "dynamics_checks", "beta_scaled_claims"),
)


def book_call(run: BookRun, preset: Optional[str] = None) -> tuple:
    """``(fn, args, kwargs)`` of ``run``'s call (``preset``: another preset of the experiment, e.g. ``tiny``, where
    it has one): ``(module.run, (preset,), {"seeds": DEFAULT_SEEDS})`` or a measurement ``(fn, (), {})``."""
    if run.function is not None:  # a measurement: a function of an experiment module or of identities
        return getattr(importlib.import_module(f"{__package__}.{run.experiment}"), run.function), (), {}
    mod = experiment(run.experiment)
    name = preset if preset is not None and preset in mod.PRESETS else run.preset or mod.DEFAULT_PRESET
    if name not in mod.PRESETS:
        raise ConfigError(f"unknown preset {name!r} for {run.experiment}; known presets: {', '.join(sorted(mod.PRESETS))}")
    return mod.run, (mod.PRESETS[name],), {"seeds": tuple(mod.DEFAULT_SEEDS)}


def book_run(name: str, preset: Optional[str] = None) -> BookRun:
    """The entry of :data:`BOOK_RUNS` for experiment ``name`` with preset ``preset``."""
    label = name if preset is None else f"{name}:{preset}"
    for run in BOOK_RUNS:
        if run.label == label:
            return run
    raise ConfigError(f"{label} is not a run of the book (mambaicl.experiments.book.BOOK_RUNS: "
                      f"{', '.join(r.label for r in BOOK_RUNS)})")


def book_result(name: str, preset: Optional[str] = None, *, progress: bool = False, cache_dir=None, reuse=None):
    """The result of the book's run of experiment ``name`` (preset ``preset``, default its own; its default seeds),
    read from the result store or computed and stored (:func:`~mambaicl.experiments.store.stored`): what a chapter
    calls, the key ``judge`` reads back. ``reuse``: the result (or models) of the run :attr:`BookRun.reuse` names,
    handed to ``run`` to skip training it again."""
    run = book_run(name, preset)
    fn, args, kwargs = book_call(run)
    if run.function is None:
        kwargs["progress"] = progress
    if reuse is None:
        return stored(fn, *args, cache_dir=cache_dir, **kwargs)
    if run.reuse is None:
        raise ConfigError(f"{run.label} reuses no other run (BOOK_RUNS declares none)")
    return stored(fn, *args, cache_dir=cache_dir, reuse=reuse, key_as={"reuse": f"book run {run.reuse}"}, **kwargs)


def _load(file: Path):
    try:
        return torch.load(file, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign file: bad input, one line
        raise ConfigError(f"stored result {file} is unreadable ({type(exc).__name__}): rerun the book or "
                          "python -m mambaicl reproduce --all") from None


def read_results(store) -> dict:
    """``{label: result}`` of every book run in ``store``: a result store (``<cache>/results`` or its ``<cache>``
    folder, keyed by the current source) or a folder written by ``reproduce --all --out`` (``<label>/result.pt``).
    Missing runs, a missing or foreign folder and an unreadable file are :class:`ConfigError`."""
    store = Path(store).expanduser() if store is not None else results_dir()
    if not store.is_dir():
        raise ConfigError(f"no result store at {store} (build the book or run python -m mambaicl reproduce --all)")
    if (store / "results").is_dir() and not list(store.glob("*.pt")):
        store = store / "results"
    out, missing = {}, []
    for run in BOOK_RUNS:
        folder = store / run.label.replace(":", "-")
        if (folder / "result.pt").is_file():
            out[run.label] = _load(folder / "result.pt")
            continue
        fn, args, kwargs = book_call(run)
        file = store / _file(fn, args, run.key_kwargs(kwargs), None).name
        if file.is_file():
            out[run.label] = _load(file)
        else:
            missing.append(run.label)
    if missing and not out:
        raise ConfigError(f"{store} holds no result of the book's runs (not a result store of this source: "
                          "build the book or run python -m mambaicl reproduce --all)")
    if missing:
        raise ConfigError(f"{store} lacks the book's runs {', '.join(missing)}: build the book or run "
                          "python -m mambaicl reproduce --all")
    return out


def claims_of(results: dict, skipped: Optional[list] = None) -> dict:
    """``{claim key: ClaimParts}`` of every result (a claim measured twice is an error).

    ``skipped``: a list to collect ``(label, reason)`` of the results whose claims cannot be measured (a smoke-test
    preset without the alphas or seeds a row reads) instead of failing; ``None`` (the book's runs): fail."""
    out = {}

    def add(label, make):
        try:
            claims = make()
        except (ConfigError, KeyError, ValueError, IndexError, ZeroDivisionError) as exc:
            if skipped is None:
                raise
            skipped.append((label, f"{type(exc).__name__}: {exc}"))
            return
        for key, parts in claims.items():
            if key in out:
                raise ConfigError(f"claim {key} is measured twice ({label} and another run)")
            out[key] = parts

    for label, res in results.items():
        if not hasattr(res, "claims"):
            raise ConfigError(f"{label}: its result ({type(res).__name__}) measures no claims (no claims() method)")
        add(label, res.claims)
    for labels, module, function in JOINT_CLAIMS:
        if all(lab in results for lab in labels):
            fn = getattr(experiment(module), function)
            add(" + ".join(labels), lambda: fn(*(results[lab] for lab in labels)))
    return out


def judge_results(results: dict, *, only_measured: bool = False, skipped: Optional[list] = None) -> str:
    """``results.json`` of ``results`` (``{label: result}``): every claim judged
    (:func:`~mambaicl.analysis.claims.judge_all`), the rows built as the results page builds them
    (:func:`mambaicl.analysis.results.rows`). ``only_measured``: the rows these results measure, not every row
    (``skipped``: see :func:`claims_of`)."""
    from ..analysis.claims import judge_all, ours_text
    from ..analysis.results import as_json, row_values, rows

    parts = claims_of(results, skipped)
    if skipped is not None:  # a smoke-test preset: a claim its result cannot measure (too few cells) is skipped
        for key in list(parts):
            try:
                judge_all({key: parts[key]})
            except (ConfigError, ValueError, IndexError, ZeroDivisionError) as exc:
                skipped.append((key, f"{type(exc).__name__}: {exc}"))
                del parts[key]
    judged = judge_all(parts)
    values = {k: row_values(j, ours_text(parts[k], j)) for k, j in judged.items()}
    return as_json(rows(values, where="the stored results", only=set(values) if only_measured else None))


def run_and_write(out, i: int, n: int, run, fn, fargs, kwargs, device: str, progress: bool):
    """Run one book run (``i`` of ``n``: ``fn(*fargs, **kwargs)``) and write ``out/<label>/result.pt`` and
    ``results.json``; its result. ``reproduce --all`` calls it in its own process or in worker processes (it lives
    in an importable module so that spawned workers find it)."""
    import io
    import time

    import torch

    from ..io import atomic_write_bytes, json_text

    t0 = time.time()
    if run.function is None:  # an experiment's run: its preset and seeds, a progress bar
        seeds = kwargs["seeds"]
        print(f"[{i}/{n}] {run.label}: preset {fargs[0].name!r}, seeds {seeds[0]}..{seeds[-1]}", flush=True)
        kwargs = {**kwargs, "device": device, "progress": progress}
    else:
        print(f"[{i}/{n}] {run.label}: a measurement", flush=True)
    res = fn(*fargs, **kwargs)
    folder = out / run.label.replace(":", "-")
    folder.mkdir(exist_ok=True)
    buf = io.BytesIO()
    torch.save(res, buf)
    atomic_write_bytes(folder / "result.pt", buf.getvalue())
    atomic_write_bytes(folder / "results.json", json_text(res.to_dict()).encode("utf-8"))
    if not progress:
        print(f"[{i}/{n}] {run.label}: done in {time.time() - t0:.0f} s", flush=True)
    return res
