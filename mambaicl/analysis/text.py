"""Numbers as the results rows and the chapters print them: per-seed values as ``mean ± SE`` or ``median [min, max]``.

One formatter for the prose and for the "ours" text a result's ``claims()`` builds, so the row and the sentence
beside it read the same digits (moved from :mod:`mambaicl.viz.mechanism`, which re-exports them).
"""
from __future__ import annotations

from typing import Sequence

from .stats import error_mean_se, mean_se, median_iqr

__all__ = ["GROUP_ORDER", "mean_se_text", "median_range_text"]

#: task groups in the order the figures and rows show them (training tasks first, then farther from them)
GROUP_ORDER = ("training", "reversed", "distance 2", "distance 3")


def mean_se_text(values: Sequence[float], digits: int = 3, n_prompts: int | None = None, seeds: bool = True,
                 fmt: str = "f") -> str:
    """``"mean ± SE (S seeds)"`` of per-seed values (``n_prompts``: a proportion, prompt noise counted)."""
    m, se = error_mean_se(values, n_prompts) if n_prompts else mean_se(values)
    se = 0.0 if se != se else se
    text = f"{m:.{digits}{fmt}} ± {se:.{digits}{fmt}}"
    return text + (f" ({len(list(values))} seeds)" if seeds else "")


def median_range_text(values: Sequence[float], fmt: str = ".2f") -> str:
    """``"median [min, max]"`` of per-seed values, each formatted with ``fmt``: the spread of a quantity whose
    per-seed value depends on the CPU's last bits (an early-stopped step, a deep stack's gate ratio), where one
    seed's value, or an extreme alone, would be read as more than it is."""
    med = median_iqr(values)[0]
    return f"{med:{fmt}} [{min(values):{fmt}}, {max(values):{fmt}}]"
