"""The registry's rule on JSON rows: a criterion and a measurement (dicts, as in ``book/results.json``) -> an outcome.

:func:`row_outcomes` decides every part of a row (holds, fails, undecided): *holds* from each part's own 95 %
interval (or exact sign test), *fails* only where the interval lies wholly on the wrong side **and** the part's
one-sided p-value (:func:`p_fail`) survives Holm's step-down at family level 2.5 % across the row's parts;
:func:`part_outcome` is the same for a family of one. :func:`outcome_of` / :func:`verdict_of` combine the parts
into a verdict; :func:`decides_toward` and :func:`seeds_needed` say toward which side and with about how many seeds
an undecided part would be decided (``None`` where more seeds cannot decide it); :func:`annotate` writes all of
it into the measured JSON. :mod:`mambaicl.analysis.verdicts` applies the same rule to its
:class:`~mambaicl.analysis.verdicts.Claim` objects, and ``.ci/results_page.py`` re-applies it to
``book/results.json`` (both through :mod:`mambaicl.analysis.verdicts`, which re-exports this module).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..checks import ConfigError

__all__ = ["VERDICTS", "KINDS", "SIDES", "TESTS", "FAMILY_LEVEL", "part_outcome", "part_outcomes", "row_outcomes",
           "part_holds", "part_wrong_side", "verdict_from_outcomes", "outcome_of", "verdict_of", "seeds_needed",
           "decides_toward", "decision_points", "p_fail", "annotate"]

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


#: the level of every "fails": one-sided 2.5 % for the row's family of parts, after Holm's step-down correction
FAMILY_LEVEL = 0.025
#: the tests a part may declare (``criterion["test"]``): the 95 % t interval (default) or the exact sign test
TESTS = ("t", "sign")


def _judged(p: dict) -> bool:
    return p.get("kind") in ("below", "above", "within")


def _test(p: dict) -> str:
    return p.get("test") or "t"


def _se(m: dict) -> float:
    """The standard error behind a stored 95 % interval (its half-width over the t quantile with ``n_seeds - 1`` df,
    the normal one for a single seed); ``nan`` when there is no interval."""
    from .stats import t_quantile

    lo, hi, n = _f(m.get("low")), _f(m.get("high")), int(m.get("n_seeds") or 0)
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        return math.nan
    return (hi - lo) / 2 / (t_quantile(n - 1) if n >= 2 else 1.959963984540054)


def _tail_p(z: float, n: int, upper: bool) -> float:
    """``P(T >= z)`` (``upper``) or ``P(T <= z)`` for Student's t with ``n - 1`` df (normal for one seed)."""
    from scipy.stats import norm, t

    dist = t(n - 1) if n >= 2 else norm()
    return float(dist.sf(z) if upper else dist.cdf(z))


def _sign(p: dict, m: dict) -> dict:
    from .stats import sign_test

    return sign_test([_f(v) for v in m.get("values") or ()], _f(p.get("threshold")))


def p_fail(p: dict, m: dict) -> Optional[float]:
    """The one-sided p-value of the test that part ``p`` *fails* on ``m`` (the mean beyond a decision point on the
    wrong side): from the stored 95 % t interval (its standard error, ``n_seeds - 1`` df) or, for a ``sign`` part,
    the exact sign test of the per-seed values. ``None`` for a part that is not judged (identity, diagnostic) or
    not measurable. At the interval's own level, ``p_fail < 0.025`` is exactly "the whole interval on the wrong
    side"."""
    if not _judged(p):
        return None
    if _test(p) == "sign":
        st = _sign(p, m)
        return st["p_below"] if p["kind"] == "above" else st["p_above"]
    mean, n, se = _f(m.get("mean")), int(m.get("n_seeds") or 0), _se(m)
    if not (math.isfinite(mean) and math.isfinite(se)):
        return None
    a, b = decision_points(p)
    ps = []
    for x, upper in ((b, True), (a, False)):  # beyond the upper point, or below the lower one
        if not math.isfinite(x):
            continue
        if se == 0:
            ps.append(0.0 if (mean > x if upper else mean < x) else 1.0)
        else:
            ps.append(_tail_p((mean - x) / se, n, upper))
    return min(ps) if ps else None


def _holds(p: dict, m: dict) -> Optional[bool]:
    """The part holds (``True``), or not (``False``), or is not measurable (``None``): the whole 95 % interval on
    the paper's side of every decision point, or for a ``sign`` part the exact one-sided sign test at 2.5 %."""
    if _test(p) == "sign":
        st = _sign(p, m)
        return (st["p_above"] if p["kind"] == "above" else st["p_below"]) < FAMILY_LEVEL
    lo, hi = _f(m.get("low")), _f(m.get("high"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    a, b = decision_points(p)
    return lo > a and hi < b


def _wrong_side(p: dict, m: dict) -> bool:
    """The unadjusted "fails": the whole interval beyond a decision point (sign parts: the sign test at 2.5 %)."""
    if _test(p) == "sign":
        q = p_fail(p, m)
        return q is not None and q < FAMILY_LEVEL
    lo, hi = _f(m.get("low")), _f(m.get("high"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    a, b = decision_points(p)
    return hi < a or lo > b


def part_outcomes(parts: Sequence[dict], ms: Sequence[dict]) -> list:
    """The outcome of every part of one row (``True`` holds, ``False`` fails, ``None`` undecided), the row's parts
    one family.

    *Holds* is each part's own test (the whole 95 % interval on the paper's side; for a ``sign`` part the exact
    one-sided sign test at 2.5 %): requiring every part is an intersection-union test and needs no correction.
    *Fails* needs more: the part's interval lies wholly on the wrong side (its one-sided test at 2.5 %) **and** its
    one-sided p-value (:func:`p_fail`) survives Holm's step-down correction at family level 2.5 % one-sided across
    the row's judged parts (:func:`mambaicl.analysis.stats.holm`). A part that fails only without the correction
    is undecided. ``identity`` parts: ``|mean|`` within the tolerance holds, else fails."""
    from .stats import holm

    parts, ms = list(parts), list(ms)
    adj = holm([p_fail(p, m) for p, m in zip(parts, ms)], FAMILY_LEVEL)
    out = []
    for p, m, q in zip(parts, ms, adj):
        if p["kind"] == "identity":
            out.append(abs(_f(m.get("mean"))) <= _f(p["threshold"]))
        elif not _judged(p):
            out.append(None)
        elif _holds(p, m):
            out.append(True)
        elif _wrong_side(p, m) and q is not None and q <= FAMILY_LEVEL:
            out.append(False)
        else:
            out.append(None)
    return out


def part_outcome(p: dict, m: dict) -> Optional[bool]:
    """One criterion on one measurement as a family of one (JSON dicts): ``True`` holds, ``False`` fails, ``None``
    undecided (:func:`part_outcomes`; for a part of an ``all`` criterion use :func:`row_outcomes`, which applies
    Holm's correction across the row).

    ``below``/``above``/``within``: holds when the whole 95 % interval ``[low, high]`` lies on the paper's side of
    every decision point, fails when it lies wholly on the other side of one, else undecided (also when the
    interval is not measurable); a ``sign`` part by the exact sign test. ``identity``: holds when ``|mean|`` is
    within the tolerance, else fails."""
    return part_outcomes([p], [m])[0]


def row_outcomes(criterion: dict, measured: dict) -> list:
    """Each part's outcome of one row (a single criterion is one part), Holm across the row's parts."""
    if criterion["kind"] == "diagnostic":
        return []
    pairs = _pairs(criterion, measured)
    return part_outcomes([p for p, _ in pairs], [m for _, m in pairs])


def part_holds(p: dict, m: dict) -> bool:
    """The part holds (:func:`part_outcome` is ``True``)."""
    return part_outcome(p, m) is True


def part_wrong_side(p: dict, m: dict) -> bool:
    """The part, as a family of one, fails: its whole interval lies on the wrong side of a decision point."""
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
    return verdict_from_outcomes(row_outcomes(criterion, measured))


def verdict_of(row: dict) -> str:
    """The verdict of one ``book/results.json`` row, recomputed from its ``criterion`` and ``measured``."""
    out = outcome_of(row["criterion"], row["measured"])
    return "beyond the paper" if row["criterion"].get("beyond") else out


def decides_toward(p: dict, m: dict) -> Optional[str]:
    """Where more seeds would take an undecided part at the measured mean: ``"holds"`` (the mean on the paper's
    side of every decision point), ``"fails"`` (beyond one) or ``None`` (on a decision point, or not measurable)."""
    if not _judged(p):
        return None
    if _test(p) == "sign":
        st = _sign(p, m)
        up, down = st["n_pos"], st["n_neg"]
        if up == down:
            return None
        return "holds" if (up > down) == (p["kind"] == "above") else "fails"
    mean = _f(m.get("mean"))
    if not math.isfinite(mean):
        return None
    a, b = decision_points(p)
    if a < mean < b:
        return "holds"
    return None if mean in (a, b) else "fails"


def seeds_needed(p: dict, m: dict, family: int = 1) -> Optional[int]:
    """For an undecided part, about how many seeds would decide it at the measured spread, toward
    :func:`decides_toward`; ``None`` where more seeds cannot decide it (a mean on a decision point, no spread, a
    quantity measured once whose interval is a sampling error that seeds do not shrink, an even split of a sign
    test, more than 100,000 seeds).

    Toward *holds*: the fewest seeds whose 95 % t half-width (the interval's half-width read back as a standard
    error) is below the mean's distance to the nearest decision point (:func:`mambaicl.analysis.stats.seeds_to_decide`).
    Toward *fails*: the same at the one-sided level ``FAMILY_LEVEL / family`` (Holm's first step across a row of
    ``family`` judged parts, an upper bound on what Holm needs). A ``sign`` part: the fewest seeds at which the
    measured shares (discordant seeds, and their split) give an exact one-sided p-value below that level. A part
    whose measurement records ``se_fixed``, the part of its standard error that every seed shares (SST-2's reused
    test sentences), is counted by :func:`mambaicl.analysis.stats.seeds_to_decide` (its ``se_shared``): ``None`` where that part alone keeps the
    interval across the decision point."""
    from .stats import seeds_to_decide, t_quantile

    toward = decides_toward(p, m)
    if toward is None:
        return None
    level = FAMILY_LEVEL if toward == "holds" else FAMILY_LEVEL / max(int(family), 1)
    n = int(m.get("n_seeds") or 0)
    if _test(p) == "sign":
        st = _sign(p, m)
        N = st["n_pos"] + st["n_neg"]
        if n < 1 or N == 0:
            return None
        rate, share = N / n, max(st["n_pos"], st["n_neg"]) / N
        for seeds in range(n + 1, 100_001):
            D = int(round(seeds * rate))
            k = int(round(D * share))
            if D and sum(math.comb(D, i) for i in range(k, D + 1)) / 2 ** D < level:
                return seeds
        return None
    lo, hi, mean = _f(m.get("low")), _f(m.get("high")), _f(m.get("mean"))
    if n < 2 or not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(mean)) or hi <= lo:
        return None  # one seed: its interval is a sampling error (one fit, one timing) that more seeds do not shrink
    se = (hi - lo) / 2 / t_quantile(n - 1)
    a, b = decision_points(p)
    dist = min(abs(mean - x) for x in (a, b) if math.isfinite(x))
    shared = _f(m.get("se_fixed"))
    if math.isfinite(shared) and shared > 0:  # a part of the error every seed shares: more seeds do not shrink it
        return seeds_to_decide(se, n, dist, q=1 - level, se_shared=shared)
    return seeds_to_decide(se, max(n, 1), dist, q=1 - level)


def annotate(criterion: dict, measured: dict) -> dict:
    """``measured`` (a copy) with what the rule derives for each judged part: ``holds`` (:func:`row_outcomes`, Holm
    across the row), ``p_fail`` (the one-sided p-value of failing), ``p_holm`` (its Holm-adjusted value in the row's
    family: a part fails only where it is at most 2.5 %), for a ``sign`` part the counts ``n_pos``/``n_neg``, and for
    an undecided part ``decides_toward`` and ``seeds_to_decide`` (absent where more seeds cannot decide)."""
    import json as _json

    from .stats import holm

    measured = _json.loads(_json.dumps(measured))
    if criterion["kind"] == "diagnostic":
        return measured
    pairs = _pairs(criterion, measured)
    outs = part_outcomes([p for p, _ in pairs], [m for _, m in pairs])
    pf = [p_fail(p, m) for p, m in pairs]
    adj = holm(pf, FAMILY_LEVEL)
    family = sum(q is not None for q in pf)
    for (p, m), o, q, qa in zip(pairs, outs, pf, adj):
        m["holds"] = o
        for k in ("p_fail", "p_holm", "seeds_to_decide", "decides_toward", "n_pos", "n_neg"):
            m.pop(k, None)
        if not _judged(p):
            continue
        if q is not None:
            m["p_fail"], m["p_holm"] = float(f"{q:.4g}"), float(f"{qa:.4g}")
        if _test(p) == "sign":
            st = _sign(p, m)
            m["n_pos"], m["n_neg"] = st["n_pos"], st["n_neg"]
        if o is None:
            need = seeds_needed(p, m, family)
            if need is not None:
                m["seeds_to_decide"], m["decides_toward"] = need, decides_toward(p, m)
    return measured


