"""The results picture (mambaicl.viz.results): one row per claim, one mark per part, each outcome its own mark."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from mambaicl.analysis.claims import CLAIMS  # noqa: E402
from mambaicl.viz.results import OUTCOME_MARKS, claim_marks, picture_svg, results_picture  # noqa: E402


def _rows():
    rows = []
    for i, (key, c) in enumerate(CLAIMS.items()):
        if c.criterion.kind == "identity":
            j = c.judge(value=0.0)
        elif c.criterion.kind == "all":
            j = c.judge(parts=[[p.threshold + d for d in (-(i % 3) * 0.5, 0.1, 0.2)] for p in c.criterion.parts])
        else:
            j = c.judge(per_seed=[(c.criterion.threshold or 0.0) + d for d in (-0.5, 0.1, 0.2)])
        rows.append({"key": key, "chapter": c.chapter, "criterion": c.criterion_json(), "measured": j.measured_json(),
                     "verdict": j.verdict})
    return rows


def test_claim_picture_has_one_row_per_claim_and_one_mark_per_part():
    import matplotlib.pyplot as plt

    rows = _rows()
    fig = results_picture(rows)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert sorted(t for t in texts if t in CLAIMS) == sorted(CLAIMS)  # each claim's key exactly once
    verdict_words = [t for t in texts if t in {r["verdict"] for r in rows}]
    assert len(verdict_words) == len(rows)
    marks = [ln for ln in ax.lines if ln.get_marker() in {m for m, _, _ in OUTCOME_MARKS.values()}]
    assert len(marks) == sum(len(claim_marks(r)) for r in rows)
    assert fig.get_size_inches()[0] <= 7.5  # page width
    assert fig.get_facecolor()[:3] == (1.0, 1.0, 1.0)  # an opaque white card: the same in light and dark mode
    plt.close(fig)


def test_claim_picture_svg_is_deterministic():
    rows = _rows()
    assert picture_svg(rows) == picture_svg(rows)


def test_claim_detail_figures_have_one_panel_per_judged_part():
    import matplotlib.pyplot as plt

    from mambaicl.viz.results import chapter_keys, part_intervals

    rows = _rows()
    keys = chapter_keys(rows)
    assert keys and keys == sorted(keys, key=lambda k: (k == "appendix", k))
    for ch in keys:
        fig = part_intervals(rows, ch)
        want = sum(len(claim_marks(r)) for r in rows
                   if r["chapter"].startswith(ch) and r["criterion"]["kind"] not in ("identity", "diagnostic"))
        assert sum(ax.axison for ax in fig.axes) == want, ch
        plt.close(fig)
