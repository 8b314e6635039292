"""Write the introduction's diagram, book/images/intro_summary.svg (``fig-intro-summary``).

The introduction is a plain MyST page, so its figure is a committed SVG drawn by
:func:`mambaicl.viz.learn.fig_intro_summary`; ``tests/test_viz_learn.py`` redraws it and fails when
the committed file is out of date.

    python .ci/intro_figure.py            # rewrite the SVG
"""
from pathlib import Path
import sys

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET = ROOT / "book" / "images" / "intro_summary.svg"


def main(path: Path = TARGET) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    from mambaicl.viz import use_style
    from mambaicl.viz.learn import write_intro_summary

    use_style()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_intro_summary(path)
    return path


if __name__ == "__main__":
    print(main())
