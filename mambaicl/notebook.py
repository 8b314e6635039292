"""Glue numbers into the chapters' prose.

``glue`` forwards to MyST-NB's ``glue`` when the book tool chain is installed; on Colab or
Binder, where MyST-NB may be missing, it just records the value so the chapter still runs. It
returns ``None``, so a cell that ends with ``glue(...)`` displays nothing (no stray value in the
page); the glued value appears where the prose cites it with ``{glue:text}`` or ``{glue:figure}``.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional, TextIO

__all__ = ["glue", "glue_judgement", "glue_claims", "GLUED", "BUILD_ENV", "progress_stream"]

BUILD_ENV = "MAMBAICL_BOOK_BUILD"  # set by the book's build (book/_ext/book_execute.py) for its kernels

GLUED: dict[str, Any] = {}


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record ``value`` under ``name`` for ``{glue:text}`` / ``{glue:figure}`` roles in the chapter's prose."""
    GLUED[name] = value
    try:
        from myst_nb import glue as _glue
    except ImportError:  # running outside the book tool chain
        return None
    _glue(name, value, display=display)
    return None


def glue_all(numbers: dict, prefix: str = "") -> None:
    """Glue every ``{name: value}`` the package derived for a chapter's prose, as ``<prefix><name>``."""
    for name, value in numbers.items():
        glue(f"{prefix}{name}", value)


def show(report) -> None:
    """Print a package report and glue its numbers: ``report`` is ``(text, {name: value})``, what the experiment
    modules' ``*_numbers`` and ``*_report`` functions return (the numbers are derived there, once)."""
    text, numbers = report
    print(text)
    glue_all(numbers)


def glue_judgement(judgement, ours: str) -> None:
    """Glue one results row: ``res_<key>_ours`` (our number, as text), ``res_<key>_verdict`` and
    ``res_<key>_measured`` (JSON), the three values ``.ci/results_page.py`` reads from the stored notebook
    (:func:`mambaicl.analysis.results.row_values`). Returns ``None``, so a cell that ends with it displays nothing."""
    from .analysis.results import row_values

    name = judgement.claim.key.replace("-", "_")
    for k, v in row_values(judgement, ours).items():
        glue(f"res_{name}_{k}", v)


def glue_claims(result) -> dict:
    """Judge every claim a result measures and glue its row: ``result.claims()`` (``{key: ClaimParts}``, or that
    dict itself) → :func:`mambaicl.analysis.claims.judge_all` → :func:`glue_judgement` per claim.

    Returns ``{key: Judgement}`` for the prose's checks (outcome, failing parts); the same judgements
    ``python -m mambaicl judge`` computes from the stored result.
    """
    from .analysis.claims import judge_all, ours_text

    parts = result if isinstance(result, dict) else result.claims()
    judged = judge_all(parts)
    for key, j in judged.items():
        glue_judgement(j, ours_text(parts[key], j))
    return judged


def progress_stream() -> Optional[TextIO]:
    """Where a long computation in a chapter draws its progress bar, or ``None`` for the notebook.

    While the book's build executes a chapter (``$MAMBAICL_BOOK_BUILD`` set), the bar goes to the
    terminal that runs the build and never into the stored page: the kernel's ``sys.stderr`` is
    captured into the notebook, but ``sys.stderr.fileno()`` is ipykernel's copy of the original
    standard error, i.e. the terminal. Elsewhere (Jupyter, Colab, a script) ``None``: the caller
    shows its usual bar (``tqdm.auto``) where the reader is.
    """
    if not os.environ.get(BUILD_ENV):
        return None
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # no file descriptor behind sys.stderr
        fd = 2
    try:
        return open(os.dup(fd), "w", buffering=1, encoding="utf-8", errors="replace")
    except OSError:
        return None
