"""The registry's rule on JSON rows: a criterion and a measurement (dicts, as in ``book/results.json``) -> an outcome.

:func:`part_outcome` decides one part (holds, fails, undecided) from the 95 % interval and the criterion's decision
points; :func:`outcome_of` / :func:`verdict_of` combine the parts into a verdict; :func:`seeds_needed` says how many
seeds would decide an undecided part. :mod:`mambaicl.analysis.verdicts` applies the same rule to its
:class:`~mambaicl.analysis.verdicts.Claim` objects, and ``.ci/results_page.py`` re-applies it to
``book/results.json`` (both through :mod:`mambaicl.analysis.verdicts`, which re-exports this module).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..checks import ConfigError

__all__ = ["VERDICTS", "KINDS", "SIDES", "part_outcome", "part_holds", "part_wrong_side", "verdict_from_outcomes",
           "outcome_of", "verdict_of", "seeds_needed", "decision_points"]

VERDICTS = ("identity verified", "reproduced", "partly reproduced", "undecided", "not reproduced", "contradicted",
            "diagnostic", "beyond the paper")
KINDS = ("below", "above", "within", "identity", "diagnostic", "all")
SIDES = ("below", "above")


def _f(v):
    return math.nan if v is None else float(v)


def decision_points(p: dict) -> tuple:
    """``(lower decision point, upper decision point)``: the interval wholly above the lower one and below the upper
    one holds (``nan``: no bound on that side)."""
    t, kind = _f(p.get("threshold")), p["kind"]
    if kind == "below":
        return -math.inf, t
    if kind == "above":
        return t, math.inf
    if kind == "within":
        m, side = _f(p.get("margin")), p.get("side")
        return (t - m if side != "below" else -math.inf), (t + m if side != "above" else math.inf)
    raise ConfigError(f"criterion kind must be one of ('below', 'above', 'within') to have decision points; got {kind!r}")


def part_outcome(p: dict, m: dict) -> Optional[bool]:
    """One criterion on one measurement (JSON dicts): ``True`` holds, ``False`` fails, ``None`` undecided.

    ``below``/``above``/``within``: holds when the whole 95 % interval ``[low, high]`` lies on the paper's side of
    every decision point, fails when it lies wholly on the other side of one, else undecided (also when the
    interval is not measurable). ``identity``: holds when ``|mean|`` is within the tolerance, else fails."""
    lo, hi, mean = _f(m.get("low")), _f(m.get("high")), _f(m.get("mean"))
    if p["kind"] == "identity":
        return abs(mean) <= _f(p["threshold"])
    a, b = decision_points(p)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    if lo > a and hi < b:
        return True
    if hi < a or lo > b:
        return False
    return None


def part_holds(p: dict, m: dict) -> bool:
    """The part holds (:func:`part_outcome` is ``True``)."""
    return part_outcome(p, m) is True


def part_wrong_side(p: dict, m: dict) -> bool:
    """The part fails: its whole interval lies on the wrong side of a decision point."""
    return part_outcome(p, m) is False


def verdict_from_outcomes(outcomes: Sequence[Optional[bool]]) -> str:
    """A claim's verdict from its parts' outcomes: all hold, ``reproduced``; all fail, ``contradicted``; some hold
    and some fail, ``partly reproduced``; some fail and none holds, ``not reproduced``; none fails but not all hold,
    ``undecided``."""
    held, failed = sum(o is True for o in outcomes), sum(o is False for o in outcomes)
    if held == len(outcomes):
        return "reproduced"
    if failed == len(outcomes):
        return "contradicted"
    if held and failed:
        return "partly reproduced"
    return "not reproduced" if failed else "undecided"


def _pairs(criterion: dict, measured: dict) -> list:
    if criterion["kind"] != "all":
        return [(criterion, measured)]
    parts, ms = criterion["all"], measured["all"]
    if len(parts) != len(ms):
        raise ConfigError(f"measured['all'] must hold one measurement per part of the criterion ({len(parts)}); got {len(ms)}")
    return list(zip(parts, ms))


def outcome_of(criterion: dict, measured: dict) -> str:
    """The verdict of ``criterion`` on ``measured`` (JSON dicts, as in ``book/results.json``), by the rule above."""
    kind = criterion["kind"]
    if kind == "diagnostic":
        return "diagnostic"
    if kind not in KINDS:
        raise ConfigError(f"criterion kind must be one of {KINDS}; got {kind!r}")
    if kind == "identity":
        return "identity verified" if part_holds(criterion, measured) else "not reproduced"
    return verdict_from_outcomes([part_outcome(p, m) for p, m in _pairs(criterion, measured)])


def verdict_of(row: dict) -> str:
    """The verdict of one ``book/results.json`` row, recomputed from its ``criterion`` and ``measured``."""
    out = outcome_of(row["criterion"], row["measured"])
    return "beyond the paper" if row["criterion"].get("beyond") else out


def seeds_needed(p: dict, m: dict) -> Optional[int]:
    """For an undecided part, the seeds that would decide it at the measured spread (the interval's half-width
    read back as a standard error): the fewest whose 95 % t half-width is below the mean's distance to the nearest
    decision point (:func:`mambaicl.analysis.stats.seeds_to_decide`)."""
    from .stats import seeds_to_decide, t_quantile

    lo, hi, mean, n = _f(m.get("low")), _f(m.get("high")), _f(m.get("mean")), int(m.get("n_seeds") or 0)
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(mean)) or hi <= lo:
        return None
    se = (hi - lo) / 2 / (t_quantile(n - 1) if n >= 2 else 1.959963984540054)
    a, b = decision_points(p)
    dist = min(abs(mean - x) for x in (a, b) if math.isfinite(x))
    return seeds_to_decide(se, max(n, 1), dist)
