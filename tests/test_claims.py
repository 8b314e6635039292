"""The registry of claims (mambaicl.analysis.claims) and book/results.json.

``pytest -k claim`` selects these. Every claim gets counterfactual tests: the registry is handed the
measurement a wrong result would give (the interval moved past the paper's threshold, the sign
flipped, a prediction outside the interval) and must change its verdict.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mambaicl.analysis.claims import CLAIMS, KINDS, VERDICTS, Measured, verdict_of

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "results.json"
JUDGED = [k for k, c in CLAIMS.items() if c.criterion.kind != "diagnostic"]


# ---------------------------------------------------------------- an independent reading of the semantics


def _holds(kind, t, m):
    lo, hi, mean = (math.nan if m[k] is None else m[k] for k in ("low", "high", "mean"))
    return {"below": lambda: hi < t, "above": lambda: lo > t, "contains": lambda: lo <= t <= hi,
            "identity": lambda: abs(mean) <= t}[kind]()


def _wrong(kind, t, m):
    lo, hi = (math.nan if m[k] is None else m[k] for k in ("low", "high"))
    return (kind == "below" and lo > t) or (kind == "above" and hi < t)


def _recompute(row):
    c, m = row["criterion"], row["measured"]
    if c["kind"] == "diagnostic":
        v = "diagnostic"
    elif c["kind"] == "identity":
        v = "identity verified" if _holds("identity", c["threshold"], m) else "not reproduced"
    elif c["kind"] == "all":
        held = [_holds(p["kind"], p["threshold"], mm) for p, mm in zip(c["all"], m["all"])]
        if all(held):
            v = "reproduced"
        elif any(held):
            v = "partly reproduced"
        elif all(_wrong(p["kind"], p["threshold"], mm) for p, mm in zip(c["all"], m["all"])):
            v = "contradicted"
        else:
            v = "not reproduced"
    else:
        v = ("reproduced" if _holds(c["kind"], c["threshold"], m)
             else "contradicted" if _wrong(c["kind"], c["threshold"], m) else "not reproduced")
    return "beyond the paper" if c.get("beyond") else v


def _rows():
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_claim_results_json_recomputes_every_verdict():
    """Every row of book/results.json has a paper quote and a criterion, and its verdict follows from
    ``criterion`` and ``measured`` by the issue's semantics (recomputed here independently of the registry)."""
    rows = _rows()
    assert [r["key"] for r in rows] and {r["key"] for r in rows} == set(CLAIMS)
    for r in rows:
        assert set(r) >= {"key", "chapter", "item", "paper", "criterion", "measured", "verdict"}
        assert r["paper"]["quote"] and r["paper"]["section"], r["key"]
        assert r["criterion"]["kind"] in KINDS and r["criterion"]["text"], r["key"]
        assert set(r["measured"]) >= {"mean", "low", "high", "n_seeds", "values"}, r["key"]
        if r["criterion"]["kind"] == "all":
            assert len(r["criterion"]["all"]) == len(r["measured"]["all"]), r["key"]
        assert r["verdict"] in VERDICTS
        assert r["verdict"] == _recompute(r) == verdict_of(r), r["key"]


def test_claim_thresholds_are_declared_not_measured():
    """Counterfactual at the source: a claim's criterion is fixed in the registry, whatever is measured,
    so handing it another measurement cannot move its threshold."""
    for key in JUDGED:
        c = CLAIMS[key]
        before = c.criterion_json()
        _judge(c, "wrong")
        assert c.criterion_json() == before


# ---------------------------------------------------------------- counterfactual measurements


def _values(kind, t, state, n=5):
    """Five per-seed values whose 95 % t interval makes a ``kind`` criterion at ``t`` hold ("right") or fail
    on the wrong side ("wrong")."""
    scale = max(abs(t), 1.0)
    spread = [-0.02, -0.01, 0.0, 0.01, 0.02][:n]
    if kind == "identity":
        centre = t / 10 if state == "right" else t * 10 + 1e-9
        return [centre] * n
    if kind == "below":
        centre = t - scale if state == "right" else t + scale
    elif kind == "above":
        centre = t + scale if state == "right" else t - scale
    else:  # contains
        centre = t if state == "right" else t + 2 * scale
    return [centre + scale * s for s in spread]


def _judge(claim, state):
    c = claim.criterion
    if c.kind == "all":
        states = state if isinstance(state, list) else [state] * len(c.parts)
        return claim.judge(parts=[_values(p.kind, p.threshold, s) for p, s in zip(c.parts, states)])
    if c.kind == "identity":
        return claim.judge(value=_values("identity", c.threshold, state)[0])
    return claim.judge(per_seed=_values(c.kind, c.threshold, state))


@pytest.mark.parametrize("key", JUDGED)
def test_claim_counterfactual_flips_the_verdict(key):
    """Counterfactual: the registry judges the measurement a right result gives and the one a wrong result
    gives (every interval moved past the paper's threshold, or a prediction moved outside it) differently."""
    claim = CLAIMS[key]
    right, wrong = _judge(claim, "right"), _judge(claim, "wrong")
    expected_right = "identity verified" if claim.criterion.kind == "identity" else "reproduced"
    assert right.outcome == expected_right
    assert wrong.outcome in ("not reproduced", "contradicted")
    assert right.outcome != wrong.outcome
    if claim.beyond:
        assert right.verdict == wrong.verdict == "beyond the paper"
    else:
        assert right.verdict != wrong.verdict


@pytest.mark.parametrize("key", [k for k in JUDGED if CLAIMS[k].criterion.kind == "all"])
def test_claim_counterfactual_one_failing_part_is_partly(key):
    """Counterfactual: one part of a several-part claim moved past its threshold makes the verdict
    ``partly reproduced``; every part wrong makes it ``not reproduced`` or ``contradicted``."""
    claim = CLAIMS[key]
    n = len(claim.criterion.parts)
    for i in range(n):
        states = ["right"] * n
        states[i] = "wrong"
        assert _judge(claim, states).outcome == "partly reproduced", (key, i)


@pytest.mark.parametrize("key", [k for k in JUDGED if CLAIMS[k].criterion.kind in ("below", "above")])
def test_claim_counterfactual_sign_flip_contradicts(key):
    """Counterfactual: the whole interval on the wrong side of a one-sided bound is ``contradicted``."""
    assert _judge(CLAIMS[key], "wrong").outcome == "contradicted"


@pytest.mark.parametrize("key", JUDGED)
def test_claim_counterfactual_from_our_measurement(key):
    """Counterfactual from book/results.json: move our own interval (every part) to the other side of the paper's
    threshold or prediction; the registry's outcome must change."""
    row = next(r for r in _rows() if r["key"] == key)
    c, m = row["criterion"], row["measured"]
    pairs = list(zip(c["all"], m["all"])) if c["kind"] == "all" else [(c, m)]
    flipped = []
    for p, mm in pairs:
        t = p["threshold"]
        lo, hi, mean = (math.nan if mm[k] is None else mm[k] for k in ("low", "high", "mean"))
        held = _holds(p["kind"], t, mm)  # as measured (a "not measurable" part, nan, does not hold)
        if not math.isfinite(hi - lo):
            lo = hi = mean if math.isfinite(mean) else t
        half = (hi - lo) / 2
        gap = abs(t) * 0.5 + 2 * half + 1e-6
        if p["kind"] == "identity":
            new = 10 * t + 1e-9 if held else 0.0
            flipped.append({"mean": new, "low": new, "high": new})
            continue
        if p["kind"] == "contains":
            centre = t + gap if held else t
        elif p["kind"] == "below":
            centre = t + half + gap if held else t - half - gap
        else:
            centre = t - half - gap if held else t + half + gap
        flipped.append({"mean": centre, "low": centre - half, "high": centre + half})
    if c["kind"] == "all":
        cf = {**row, "criterion": {**c, "beyond": False}, "measured": {**m, "all": flipped}}
        same = {**row, "criterion": {**c, "beyond": False}}
    else:
        cf = {**row, "criterion": {**c, "beyond": False}, "measured": {**m, **flipped[0]}}
        same = {**row, "criterion": {**c, "beyond": False}}
    before, after = _recompute(same), _recompute(cf)
    if before == "partly reproduced":  # flipping every part turns partly into partly: flip only the failing ones
        assert after == "partly reproduced"
        fixed = [f if not _holds(p["kind"], p["threshold"], mm) else mm for (p, mm), f in zip(pairs, flipped)]
        assert _recompute({**cf, "measured": {**m, "all": fixed}}) == "reproduced"
    else:
        assert after != before, (key, before)


def test_claim_measured_of_uses_the_t_interval():
    """The book's rule: 95 % t with seeds − 1 df (not 2 SE): 5 seeds give mean ± 2.776 SE."""
    vals = [1.0, 2.0, 3.0, 4.0, 5.0]
    m = Measured.of(vals)
    se = math.sqrt(2.5 / 5)
    assert m.mean == 3.0 and abs(m.high - 3.0 - 2.7764451 * se) < 1e-6 and m.n_seeds == 5
    # a value 2.2 SE above the mean is inside the t interval: not claimed below it (the 2-SE rule would claim it)
    claim = CLAIMS["cor2i"]
    t = claim.criterion.threshold
    per_seed = [t - 2.2 * se + (v - 3.0) for v in vals]
    assert claim.judge(per_seed=per_seed).verdict == "not reproduced"


def test_claim_declarations_state_no_seed_count_the_measurement_records_it():
    """A seed count typed into a declaration goes stale when a preset's seeds change; the registry refuses it,
    and every judged row of results.json records how many seeds its verdict rests on (``n_seeds``)."""
    import dataclasses
    import re

    from mambaicl.config import ConfigError

    for c in CLAIMS.values():
        assert not re.search(r"\d+\s*seeds?\b", c.tasks), (c.key, c.tasks)
    c = next(iter(CLAIMS.values()))
    with pytest.raises(ConfigError, match=r"^fig2|^eq3|tasks must not state a seed count"):
        dataclasses.replace(c, tasks="FIG2 preset (5 seeds)")
    for r in json.loads(RESULTS.read_text(encoding="utf-8")):
        assert isinstance(r["measured"].get("n_seeds"), int) and r["measured"]["n_seeds"] >= 1, r["key"]
