"""Figure 2 on a complete Condition-1 set (mambaicl.experiments.fig2_complete): the tiny preset end to end."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mambaicl.analysis.claims import CLAIMS, ClaimParts, judge_all
from mambaicl.analysis.information import complete_meeting
from mambaicl.data import check_condition_1
from mambaicl.data.task_sets import COMPLETE_SETS, complete_set
from mambaicl.experiments import fig2_complete, names

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return fig2_complete.run(fig2_complete.TINY, seeds=(0, 1), progress=False)


def test_complete_sets_meet_every_pair_and_satisfy_condition_1():
    for name in COMPLETE_SETS:
        t = complete_set(name, 6)
        assert check_condition_1(t, 6) and complete_meeting(t, 6)
    assert complete_set("T18", 6).shape == (18, 2) and complete_set("all 30 tasks", 6).shape == (30, 2)


def test_result_layout_and_claims(tiny):
    d = json.loads(tiny.to_json())
    assert d["task_sets"] == list(COMPLETE_SETS) and "train_seconds" not in d
    for name in COMPLETE_SETS:
        for key in ("mamba", "mamba_merged", "linear_transformer"):
            assert len(d["errors_per_seed"][name][key]["A"]) == 2
    parts = tiny.claims()
    assert set(parts) == {"fig2-mamba-complete", "fig2-lt-complete", "fig2-merged-complete"}
    assert all(isinstance(p, ClaimParts) and p.ours for p in parts.values())
    js = judge_all(parts)
    for key, j in js.items():
        assert len(j.outcomes()) == len(CLAIMS[key].parts)
    # the parts follow the registry's order: set, then rule
    assert parts["fig2-mamba-complete"].parts[3] == tiny.at("all 30 tasks", "mamba", "A", 0.8)


def test_rerun_is_byte_identical(tiny):
    again = fig2_complete.run(fig2_complete.TINY, seeds=(0, 1), progress=False)
    assert again.to_json() == tiny.to_json()


def test_registered_for_the_cli(tmp_path):
    assert "fig2_complete" in names()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "mambaicl", "reproduce", "fig2_complete", "--preset", "tiny", "--out",
                    str(tmp_path), "--seeds", "0", "1", "--quiet"], check=True, env=env, cwd=ROOT)
    assert json.loads((tmp_path / "results.json").read_text())["preset"] == "tiny"
