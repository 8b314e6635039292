"""Multi-class prompts of App. 13: ``C = 2^H`` classes from ``H`` binary levels, and stacked prompt batches.

Glossary (code name -> paper symbol):

=================  =====================================================================
``H``              number of binary levels; ``C = 2^H`` classes
``x_h``            coordinates ``(h-1) d + 1 .. h d`` of an input ``x`` in ``R^{d H}`` (``d_H = d H``),
                   each following Eq. (4) (training) or Eq. (5) (test)
``P_h``            level ``h``'s prompt block ``((x_{i,h}; y_{i,h}))_i``, ``(l+1, d+1)``
``P``              App. 13's prompt ``(P_1^T, ..., P_H^T)^T``: tokens of ``(d+1) H`` entries
``z``              the label ``z in {+1, -1}^H`` (one binary label per level)
=================  =====================================================================

**The construction (App. 13, implemented literally).** Each input is ``H`` stacked copies of the
binary data model: level ``h`` has its own task (drawn from the same task set), its own examples and
its own outlier draws (the appendix says only that ``x_h`` "follows the definition in (4)"; we read
this as independent levels). All levels use the same patterns: they live in disjoint coordinate
blocks, so they are orthogonal across levels anyway, and the models are equivariant under rotations
within a block (see :mod:`mambaicl.experiments.fig2`).

**Stacked layout.** The H-head model of App. 13, Eq. (36), has one ``(W_B,h, W_C,h, w_h)`` per level and
head ``h`` reads only block ``P_h``; so a batch of multi-class prompts is stored level by level, with
members ordered seed-major (member ``s H + h`` is level ``h`` of seed ``s``), exactly the layout of a
:class:`mambaicl.models.OneLayerStack` of ``S H`` members.

**Streams.** Level 0 of seed ``s`` uses the stream of the binary problem (``(s, stage)``); level
``h >= 1`` uses ``(s, "<stage>/level<h>")``. Level 0 of a multi-class prompt is therefore exactly the
binary (Figure 2) prompt of that seed, and the first ``H'`` levels of an ``H``-level batch are an
``H'``-level batch.
"""
from __future__ import annotations

from dataclasses import fields

import torch

from ..config import ConfigError, TestConfig, check_int
from ..metric import zero_one_error
from ..seeding import numpy_streams
from .patterns import Patterns
from .prompts import Prompts, materialize, test_prompts

__all__ = ["concat_prompts", "level_stage", "multiclass_test_prompts", "stacked_prompt", "all_levels_error", "level_errors"]

_SHARED = ("mu", "nu", "outliers")


def concat_prompts(parts, interleave: bool = False) -> Prompts:
    """Join prompt batches ``(S_k, batch, ...)`` along the member axis.

    ``interleave=False``: ``part 0``'s members, then ``part 1``'s, ... (``cat``);
    ``interleave=True`` (all parts ``(S, batch, ...)``): member ``s K + k`` is member ``s`` of part ``k``.
    The pattern rows (``mu``, ``nu``, ``outliers``) must be the same in every part.
    """
    parts = list(parts)
    if not parts:
        raise ConfigError("parts must hold at least one Prompts batch")
    for p in parts[1:]:
        for name in _SHARED:
            if not torch.equal(getattr(p, name), getattr(parts[0], name)):
                raise ConfigError(f"parts must share the same {name} rows to be joined")
    out = {}
    for f in fields(Prompts):
        vals = [getattr(p, f.name) for p in parts]
        if f.name in _SHARED:
            out[f.name] = vals[0]
        elif interleave:
            st = torch.stack(vals, dim=1)  # (S, K, batch, ...)
            out[f.name] = st.reshape(st.shape[0] * st.shape[1], *st.shape[2:])
        else:
            out[f.name] = torch.cat(vals, dim=0)
    return Prompts(**out)


def level_stage(stage: str, h: int) -> str:
    """The stream name of level ``h``: ``stage`` itself for level 0, ``"<stage>/level<h>"`` otherwise."""
    check_int("h", h, 0)
    return stage if h == 0 else f"{stage}/level{h}"


def _levels(draw, streams_by_level) -> Prompts:
    return concat_prompts([draw(g) for g in streams_by_level], interleave=True)


def multiclass_test_prompts(pat: Patterns, test: TestConfig, tasks: torch.Tensor, batch: int, seeds, stage: str,
                            H: int) -> Prompts:
    """Definition 2 prompts for every level (streams ``(s, level_stage(stage, h))``), ``(S H, batch, ...)``."""
    check_int("H", H, 1)
    gens = [numpy_streams(seeds, level_stage(stage, h)) for h in range(H)]
    return _levels(lambda g: test_prompts(pat, test, tasks, batch, g), gens)


def stacked_prompt(pr: Prompts, s: int, H: int) -> torch.Tensor:
    """App. 13's prompt of seed ``s``: ``P = (P_1^T, ..., P_H^T)^T`` token-major, ``(batch, l+1, (d+1) H)``."""
    blocks = [materialize(pr[s * H + h]) for h in range(H)]  # each (batch, l+1, d+1)
    return torch.cat(blocks, dim=-1)


def level_errors(F: torch.Tensor, z: torch.Tensor) -> list:
    """The 0-1 error of each level (:func:`mambaicl.evaluate.zero_one_error`), ``F``, ``z`` ``(H, n)``."""
    return [zero_one_error(F[h], z[h]) for h in range(F.shape[0])]


def all_levels_error(F: torch.Tensor, z: torch.Tensor) -> float:
    """Fraction of prompts with at least one wrong level; ``F``, ``z`` ``(H, n)``.

    A level is wrong when ``z_h F_h <= 0`` or ``F_h`` is not finite (the book's one convention,
    :func:`mambaicl.evaluate.zero_one_error`). The prompt is right iff its smallest margin
    ``min_h z_h F_h`` is positive with every ``F_h`` finite: the margins of non-finite outputs are
    set to NaN (which ``amin`` propagates) and the minimum goes through ``zero_one_error``.
    """
    F, z = torch.as_tensor(F), torch.as_tensor(z)
    if F.dim() != 2 or F.shape != z.shape:
        raise ConfigError(f"F and z must both have shape (H, n); got {tuple(F.shape)} and {tuple(z.shape)}")
    margin = torch.where(torch.isfinite(F), z.to(F.dtype) * F, torch.full_like(F, float("nan")))
    worst = torch.amin(margin, dim=0)  # (n,)
    return zero_one_error(worst, torch.ones_like(worst))
