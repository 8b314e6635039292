"""The results picture: one row per claim of ``book/results.json``, grouped by chapter, coloured by verdict, each
part's outcome a mark (holds / fails / undecided).

Glossary: a *row* is one claim of the registry (:mod:`mambaicl.analysis.claims`); its *parts* are the criterion's
parts (a single criterion is one part); an *outcome* is ``True`` (holds), ``False`` (fails) or ``None``
(undecided), as :func:`mambaicl.analysis.verdicts.part_outcome` computes it.

The figure is drawn on the book's opaque white card (:func:`mambaicl.viz.style.use_style`), so it reads the same
in the site's light and dark modes; colours are Okabe-Ito (colour-blind safe) and every outcome also has its
own marker shape, so nothing rests on colour alone.
"""
from __future__ import annotations

import io

from ..analysis.verdicts import VERDICTS, part_outcome, row_outcomes  # noqa: F401

__all__ = ["VERDICT_COLOURS", "OUTCOME_MARKS", "claim_marks", "results_picture", "picture_svg", "chapter_keys",
           "part_intervals", "details_svg"]

VERDICT_COLOURS = {"identity verified": "#555555", "reproduced": "#009E73", "partly reproduced": "#E69F00",
                   "undecided": "#CC79A7", "not reproduced": "#D55E00", "contradicted": "#8B0000",
                   "diagnostic": "#999999", "beyond the paper": "#0072B2"}
#: outcome -> (marker, face colour, label)
OUTCOME_MARKS = {True: ("o", "#009E73", "part holds"), False: ("X", "#D55E00", "part fails"),
                 None: ("o", "white", "part undecided")}
_CHAPTER_NAMES = {"ch01": "Ch. 1 selective scan", "ch02": "Ch. 2 data model", "ch03": "Ch. 3 training dynamics",
                  "ch04": "Ch. 4 robustness", "ch05": "Ch. 5 mechanism", "ch06": "Ch. 6 SST-2",
                  "ch07": "Ch. 7 beyond the paper", "appendix": "Appendix: Mamba-1"}


def claim_marks(row: dict) -> list:
    """The outcome of each part of one results.json row (``[]`` for a diagnostic; identity rows one part)."""
    c, m = row["criterion"], row["measured"]
    if c["kind"] == "diagnostic":
        return []
    return row_outcomes(c, m)


def _chapter(row: dict) -> str:
    key = row["chapter"].split("_")[0]
    return _CHAPTER_NAMES.get(key, row["chapter"])


def _darker(hex_colour: str, f: float = 0.72) -> str:
    """The colour darkened for text on the white card (the light bands keep the palette's own colour)."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{int(c * f):02x}" for c in (r, g, b))


def results_picture(rows: list, width: float = 7.0):
    """One row per claim, grouped by chapter (chapters in book order, rows in the order given within each), the
    claim's key and verdict in the verdict's colour, one mark per part. Returns the matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from .style import use_style

    use_style()
    order = list(_CHAPTER_NAMES.values())
    rows = sorted(rows, key=lambda r: order.index(_chapter(r)) if _chapter(r) in order else len(order))  # stable
    lines, chapter = [], None  # ("head", name) or ("row", row)
    for r in rows:
        if _chapter(r) != chapter:
            chapter = _chapter(r)
            lines.append(("head", chapter))
        lines.append(("row", r))
    n = len(lines)
    n_parts = max([len(claim_marks(r)) for kind, r in lines if kind == "row"] + [1])
    fig, ax = plt.subplots(figsize=(width, 0.19 * n + 0.9))
    ax.set_xlim(-0.8, n_parts + 0.3)
    ax.set_ylim(n - 0.4, -1.6)
    ax.axis("off")
    x_key, x_verdict = -0.72, n_parts + 0.25
    for y, (kind, r) in enumerate(lines):
        if kind == "head":
            ax.text(x_key, y + 0.15, r, fontsize=8, fontweight="bold", va="center", ha="left", transform=ax.transData,
                    clip_on=False)
            continue
        col = VERDICT_COLOURS[r["verdict"]]
        ax.axhspan(y - 0.45, y + 0.45, xmin=0, xmax=1, color=col, alpha=0.10, lw=0)
        ax.text(x_key, y, r["key"], fontsize=7, va="center", ha="right", clip_on=False)
        ax.text(x_verdict, y, r["verdict"], fontsize=7, va="center", ha="left", color=_darker(col), fontweight="bold",
                clip_on=False)
        for i, o in enumerate(claim_marks(r)):
            mk, face, _ = OUTCOME_MARKS[o]
            ax.plot([i + 0.3], [y], marker=mk, ms=5.5, mfc=face, mec="#333333" if o is None else face, mew=0.9,
                    ls="none")
        if not claim_marks(r):
            ax.text(0.3, y, "no verdict (diagnostic)", fontsize=6.5, va="center", color="#555555")
    handles = [plt.Line2D([], [], marker=mk, ms=5.5, mfc=face, mec="#333333" if o is None else face, ls="none",
                          label=label) for o, (mk, face, label) in OUTCOME_MARKS.items()]
    handles += [plt.Line2D([], [], color=VERDICT_COLOURS[v], lw=5, alpha=0.6, label=v) for v in VERDICTS]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=7, frameon=False,
              handlelength=1.4, columnspacing=1.0)
    fig.tight_layout()
    return fig


def picture_svg(rows: list) -> str:
    """:func:`results_picture` as SVG text, deterministic (fixed hash salt, no date, text kept as text)."""
    import matplotlib.pyplot as plt

    with plt.rc_context({"svg.hashsalt": "mambaicl-results", "svg.fonttype": "none"}):
        fig = results_picture(rows)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------ per-chapter details


def chapter_keys(rows: list) -> list:
    """The chapters of ``rows`` with a judged part, in book order (``"ch03"``, ..., ``"appendix"``)."""
    keys = []
    for k in _CHAPTER_NAMES:
        if any(r["chapter"].split("_")[0] == k and claim_marks(r) and r["criterion"]["kind"] != "identity"
               for r in rows):
            keys.append(k)
    return keys


def _part_lines(rows: list, chapter: str) -> list:
    out = []
    for r in rows:
        if r["chapter"].split("_")[0] != chapter or r["criterion"]["kind"] in ("identity", "diagnostic"):
            continue
        c, m = r["criterion"], r["measured"]
        pairs = list(zip(c["all"], m["all"])) if c["kind"] == "all" else [(c, m)]
        for i, ((p, mm), o) in enumerate(zip(pairs, row_outcomes(c, m))):
            out.append((f"{r['key']}" + (f" [{i + 1}]" if len(pairs) > 1 else ""), p, mm, o))
    return out


def part_intervals(rows: list, chapter: str, cols: int = 3, width: float = 7.0):
    """Every judged part of one chapter's claims, one small panel each in the part's own units: our 95 % interval
    and mean (coloured by the part's outcome), the decision points (dashed) and the region where the part holds
    (shaded). Returns the matplotlib figure."""
    import math

    import matplotlib.pyplot as plt

    from .style import use_style

    use_style()
    lines = _part_lines(rows, chapter)
    n_rows = max(1, math.ceil(len(lines) / cols))
    fig, axes = plt.subplots(n_rows, cols, figsize=(width, 0.85 * n_rows + 0.3), squeeze=False)
    for ax in axes.flat[len(lines):]:
        ax.axis("off")
    for ax, (label, p, m, o) in zip(axes.flat, lines):
        lo, hi, mean = (math.nan if m.get(k) is None else float(m[k]) for k in ("low", "high", "mean"))
        t = float(p["threshold"])
        mg = float(p.get("margin") or 0.0)
        a = -math.inf if p["kind"] == "below" or p.get("side") == "below" else t - (mg if p["kind"] == "within" else 0)
        b = math.inf if p["kind"] == "above" or p.get("side") == "above" else t + (mg if p["kind"] == "within" else 0)
        pts = [x for x in (lo, hi, mean, a, b) if math.isfinite(x)]
        span = (max(pts) - min(pts)) or max(abs(t), 1.0) * 0.1
        x0, x1 = min(pts) - 0.15 * span, max(pts) + 0.15 * span
        ax.axvspan(max(a, x0), min(b, x1), color="#009E73", alpha=0.12, lw=0)
        for x in (a, b):
            if math.isfinite(x):
                ax.axvline(x, color="#333333", ls="--", lw=0.8)
        col = {True: "#009E73", False: "#D55E00", None: "#CC79A7"}[o]
        if math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [0, 0], color=col, lw=2.2, solid_capstyle="butt")
        if math.isfinite(mean):
            ax.plot([mean], [0], "o", color=col, ms=3.5)
        ax.set_xlim(x0, x1)
        ax.set_ylim(-1, 1)
        ax.set_yticks([])
        ax.grid(False)
        ax.spines["left"].set_visible(False)
        ax.tick_params(axis="x", labelsize=5.5, length=2, pad=1)
        ax.locator_params(axis="x", nbins=4)
        words = p["text"] if len(p["text"]) <= 52 else p["text"][:51] + "…"
        ax.set_title(f"{label}\n{words}", fontsize=5.5, loc="left", pad=2)
    fig.tight_layout(h_pad=0.5, w_pad=0.8)
    return fig


def details_svg(rows: list, chapter: str) -> str:
    """:func:`part_intervals` as deterministic SVG text."""
    import matplotlib.pyplot as plt

    with plt.rc_context({"svg.hashsalt": "mambaicl-results", "svg.fonttype": "none"}):
        fig = part_intervals(rows, chapter)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
