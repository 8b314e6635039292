"""The execution-statistics page: generated from the measurement, and the timeout leaves 3x slack."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STATS = json.loads((ROOT / "book" / "exec_stats.json").read_text())
TIMEOUT = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"]


def test_the_page_is_generated_from_the_measurement():
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "exec_stats.py"), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_every_chapter_of_the_book_was_measured():
    chapters = {p.stem for p in (ROOT / "book").glob("*.ipynb")}
    assert {Path(doc).name for doc in STATS["chapters"]} == chapters


def test_the_cell_timeout_leaves_three_times_the_longest_measured_cell():
    longest = max(c["longest_cell_seconds"] for c in STATS["chapters"].values())
    assert TIMEOUT >= 3 * longest, f"execute.timeout {TIMEOUT} s < 3 x the longest cell ({longest} s)"


# The book's target is a first build under 10 minutes on 2 idle cores. Chapter 8 (issue 31: the seed tail over
# 60 seeds, the causal checks) took it past that; the issue asks for the measured time and its profile, not for
# fewer seeds, so the page reports the measurement and this test holds the build to what CI can afford (its
# whole run, two executions of every chapter included, has 90 minutes).
FIRST_BUILD_CEILING_S = 20 * 60


def test_the_measured_first_build_fits_its_ceiling_and_a_rebuild_under_one_minute():
    assert STATS["machine"]["cores"] == 2 and "fresh clone" in STATS["cold"] and "empty" in STATS["cold"]
    assert STATS["first_build_seconds"] < FIRST_BUILD_CEILING_S, STATS["first_build_seconds"]
    assert STATS["rebuild_seconds"] < 60, STATS["rebuild_seconds"]
