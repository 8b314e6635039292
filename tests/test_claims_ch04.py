"""Chapter 7's rows computed by the package (issue 39): ``Fig2Result.claims()`` (fig2-mamba, fig2-mamba-18, fig2-lt,
fig2-merged: Figure 2 trained on App. 9's cycle) and ``AblationsResult.claims()`` (thm4d, thm4d-theta, thm4d-alpha,
fig2-task-sets), and the derived quantities their criteria read, on small hand-made results whose answers are known;
plus the run that stores the 18-task sweep the chapter used to compute itself."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mambaicl.analysis.claims import ClaimParts, Measured, judge_all
from mambaicl.config import ConfigError
from mambaicl.experiments import fig2, fig2_ablations
from mambaicl.experiments.book import book_run

RULES = ("A", "B", "C")
ALPHAS = [0.0, 0.5, 0.6, 0.7, 0.8]
S, N = 4, 1000


def _curves(level: dict) -> tuple:
    """``(mean, per_seed, se)`` dicts for ``{key: f(rule, alpha, seed)}``."""
    per_seed = {k: {r: [[f(r, a, s) for a in ALPHAS] for s in range(S)] for r in RULES} for k, f in level.items()}
    mean = {k: {r: list(np.mean(v, axis=0)) for r, v in by_r.items()} for k, by_r in per_seed.items()}
    se = {k: {r: [0.001] * len(ALPHAS) for r in RULES} for k in level}
    return mean, per_seed, se


def _fig2_result(lt_past_half=0.5, mamba=0.1, merged=0.01, claim_level=0.001) -> fig2.Fig2Result:
    level = {"mamba": lambda r, a, s: mamba * (1 + 0.1 * s),
             "mamba_merged": lambda r, a, s: merged * (1 + 0.1 * s) + (0.2 * merged if r == "B" else 0.0),
             "linear_transformer": lambda r, a, s: (lt_past_half + 0.01 * s if a > 0.5 else 0.002)}
    mean, per_seed, se = _curves(level)
    cm, cps, cse = _curves({"mamba": lambda r, a, s: claim_level + 0.0001 * s,
                            "mamba_merged": lambda r, a, s: claim_level})
    cfg = fig2.preset_config(fig2.FIG2)
    return fig2.Fig2Result(preset="test", seed=0, seeds=list(range(S)), alphas=ALPHAS, rules=list(RULES), n_test=N,
                           errors=mean, errors_per_seed=per_seed, errors_se=se, final_train_loss={}, config=cfg,
                           claim={"tasks": [[0, 1]] * 18, "errors": cm, "errors_per_seed": cps, "errors_se": cse})


# ---------------------------------------------------------------- Figure 2 (App. 9's cycle)


def test_fig2_derived_quantities_by_hand():
    res = _fig2_result()
    assert res.at("mamba", "B", 0.8) == pytest.approx([0.1, 0.11, 0.12, 0.13])
    assert res.at("mamba", "A", 0.8, claim=True) == pytest.approx([0.001, 0.0011, 0.0012, 0.0013])
    assert res.n_tasks == 30
    # per seed: linear (0.5 + 0.01 s past 1/2) minus Mamba (0.1 + 0.01 s), the smallest over rules and alphas
    np.testing.assert_allclose(res.lt_minus_mamba(), [0.4] * S)
    # per seed: merged minus Mamba at alpha = 0, the worst rule (B: +0.002)
    np.testing.assert_allclose(res.merged_minus_mamba(), [0.012 - 0.1 + 0.001 * s - 0.01 * s for s in range(S)])
    # smallest over rules of Mamba's mean over the merged product's, alpha = 0: rule B's
    assert res.ratio_floor() == pytest.approx(0.115 / 0.0135)
    cmp = res.lt_comparisons()
    assert sorted(cmp) == [(r, a) for r in RULES for a in (0.6, 0.7, 0.8)]
    assert all(c.significant and c.diff == pytest.approx(0.4) for c in cmp.values())
    assert res.up_to_claim() == {r: 0.8 for r in RULES}  # below 0.01 at every alpha of the grid


def test_fig2_claims_parts_and_verdicts():
    res = _fig2_result()
    rows = res.claims()
    assert list(rows) == ["fig2-mamba", "fig2-mamba-18", "fig2-lt", "fig2-merged"]
    assert all(isinstance(p, ClaimParts) for p in rows.values())
    assert [list(p) for p in rows["fig2-mamba"].parts] == [res.at("mamba", r, 0.8) for r in RULES]
    assert rows["fig2-mamba"].n_prompts == N and rows["fig2-lt"].n_prompts == N
    assert isinstance(rows["fig2-mamba-18"].per_seed, Measured)
    assert "all 30 tasks, 4 seeds" in rows["fig2-mamba"].ours and "18 tasks" in rows["fig2-mamba-18"].ours
    assert "above Mamba in 9 of 9 (rule, alpha > 1/2) pairs" in rows["fig2-lt"].ours
    assert "searched eta = 1)" in rows["fig2-merged"].ours
    J = judge_all(rows)
    assert J["fig2-mamba"].verdict == "contradicted"  # 0.1 and more at alpha = 0.8, every seed
    assert J["fig2-lt"].verdict == "reproduced"
    assert J["fig2-mamba-18"].verdict == "diagnostic"


def test_fig2_claims_counterfactuals():
    """Mamba below 0.01 everywhere: the row holds; the linear Transformer below Mamba past 1/2: fig2-lt does not."""
    good = judge_all(_fig2_result(mamba=0.001, merged=0.0001, lt_past_half=0.4).claims())
    assert good["fig2-mamba"].verdict == "reproduced"
    bad = judge_all(_fig2_result(lt_past_half=0.01).claims())
    assert bad["fig2-lt"].verdict != "reproduced"


def test_fig2_claims_need_the_claim_tasks_and_three_rules():
    res = _fig2_result()
    res.claim = None
    with pytest.raises(ConfigError, match="claim tasks"):
        res.claims()


def test_fig2_run_stores_the_claim_sweep_the_chapter_computed():
    """``run`` sweeps the Mamba models on the 18 claim tasks with the stream stage the chapter used ("claim"), so the
    stored numbers are the chapter's."""
    seeds = (0, 1)
    res = fig2.run(fig2.TINY, seeds=seeds, progress=False)
    direct = fig2.sweep({k: res.models[k] for k in ("mamba", "mamba_merged")}, res.patterns, fig2.TINY, seeds,
                        tasks=fig2.claim_tasks(fig2.TINY.data.M1), stage="claim")
    assert res.claim["errors_per_seed"] == direct.per_seed and res.claim["errors"] == direct.mean
    assert len(res.claim["tasks"]) == 18
    assert "claim" in res.to_dict()


def test_fig2_and_its_ablations_are_book_runs():
    assert book_run("fig2").reuse is None and book_run("fig2_ablations").reuse == "fig2"


# ---------------------------------------------------------------- the ablations (Theorem 4(d), other training sets)


def _ablations_result(expo=0.2) -> fig2_ablations.AblationsResult:
    alphas4 = [0.2, 0.25, 0.3, 0.35, 0.4, 0.45]
    lengths = [2, 4, 8, 16, 32, 64, 128, 256, 362, 512, 1024]
    needed = [[10.0 * (1 + a) * (1 + 0.1 * s) for s in range(S)] for a in alphas4]
    needed[alphas4.index(0.4)] = [4.0 * v for v in needed[alphas4.index(0.3)]]  # a ratio of exactly 4
    errors = [[[0.3 / (1 + i) + 0.001 * s for s in range(S)] for i in range(len(lengths))] for _ in alphas4]
    fits = {"exponent": [expo + 0.01 * s for s in range(S)],
            **{f: {"C": [1.0] * S, "rms": [0.1 * (k + 1)] * S} for k, f in enumerate(("statement", "proof", "clt"))}}
    cfg = dict(fig2_ablations.to_dict(fig2_ablations.ABLATIONS))
    labels = ["cycle", "cycle+reversed", "reversal pairs", "two 3-cycles", "cycle, M1 = 8"]
    sizes = {k: {"training": 6, "never met": 24} if k != "cycle, M1 = 8" else {"training": 8, "distance 2": 48}
             for k in labels}
    all_task = {k: [0.07 if "cycle" in k else 0.005] * S for k in labels}
    groups = {k: {g: [0.01] * S for g in sizes[k]} for k in labels}
    return fig2_ablations.AblationsResult(
        preset="test", seeds=list(range(S)), task_sets={}, all_task=all_task, groups=groups, group_sizes=sizes,
        n_task=400, m_alphas=[0.0], m_errors={}, final_train_loss={}, config=cfg,
        thm4d={"alphas": alphas4, "lengths": lengths, "level": 0.1, "errors": errors, "needed": needed, "fits": fits})


def test_ablations_derived_quantities_by_hand():
    abl = _ablations_result()
    assert abl.sets() == ("cycle", "cycle+reversed", "reversal pairs", "two 3-cycles", "cycle, M1 = 8")
    assert abl.n_all("cycle") == 400 * 30 and abl.n_all("cycle, M1 = 8") == 400 * 56
    t = abl.thm4d_stats()
    assert t["ratio"] == pytest.approx([4.0] * S)
    assert t["predicted"] == pytest.approx(16 / 3) and t["predicted_proof"] == pytest.approx(3.0)
    assert t["L_mid"] == 362  # the grid length nearest 320
    assert t["rms"]["proof"] == pytest.approx((0.2, 0.0))
    assert t["len_stats"][0.3][0][0] == pytest.approx(0.3015)
    g = abl.group_stats()
    assert g["cycle, M1 = 8", "distance 2"][0] == pytest.approx(0.01)
    assert abl.all_task_stats()["reversal pairs"][0] == pytest.approx(0.005)


def test_ablations_claims_parts_and_verdicts():
    abl = _ablations_result()
    rows = abl.claims()
    assert list(rows) == ["thm4d", "thm4d-theta", "thm4d-alpha", "fig2-task-sets"]
    assert rows["thm4d"].per_seed == pytest.approx([4.0] * S) and rows["thm4d-theta"].per_seed == rows["thm4d"].per_seed
    ts = rows["fig2-task-sets"]
    assert ts.n_prompts == 400 * 30 and [list(p) for p in ts.parts] == [abl.all_task[k] for k in abl.sets()[1:]]
    assert ts.ours.startswith("all-task error at alpha = 0: cycle+reversed 0.070 ± ")
    assert "(predicted 5.33)" in rows["thm4d"].ours and "Θ reading: ratio 4.00" == rows["thm4d-theta"].ours
    J = judge_all(rows)
    assert J["thm4d-alpha"].verdict == "contradicted"  # a power of about 0.2, the statement's 1
    assert judge_all(_ablations_result(expo=1.0).claims())["thm4d-alpha"].verdict != "contradicted"
    assert J["fig2-task-sets"].verdict in ("partly reproduced", "not reproduced", "contradicted")


def test_ablations_claims_need_theorem_4d_alphas():
    abl = _ablations_result()
    abl.thm4d = dict(abl.thm4d, alphas=[0.2, 0.25, 0.3, 0.35, 0.41, 0.45])
    with pytest.raises(ConfigError, match="Theorem 4"):
        abl.claims()
    assert math.isclose(_ablations_result().thm4d_stats()["predicted"], 5.333333333333333)


def test_thm4d_report_quotes_the_derived_numbers():
    text, checks, numbers = _ablations_result().thm4d_report()
    assert text.count("\n") == 3 and "ratio 4.000 ± 0.000 (Theorem 4(d): 5.3)" in text
    assert numbers["len_ratio"] == "4.000 ± 0.000" and numbers["len_pred"] == "5.3" and numbers["len_mid"] == "362"
    assert numbers["len_pred_in"] == "outside" and numbers["len_closer"] == "the proof's"  # 4 is nearer 3 than 5.33
    assert checks["alpha = 0.4 needs more examples than 0.3"]


def test_judge_on_the_stored_chapter_runs_gives_the_book_rows():
    """Where the result store holds this source's fig2, fig2_ablations and fig2_complete runs (Chapter 7 executed),
    ``judge`` computes Chapter 7's rows from them alone, identical to book/results.json; skipped otherwise."""
    import json
    from pathlib import Path

    import torch

    from mambaicl.experiments.book import BOOK_RUNS, book_call, judge_results
    from mambaicl.experiments.store import _file

    results = {}
    for run in BOOK_RUNS:
        if run.label in ("fig2", "fig2_ablations", "fig2_complete"):
            fn, args, kwargs = book_call(run)
            file = _file(fn, args, run.key_kwargs(kwargs), None)
            if not file.is_file():
                pytest.skip(f"the store holds no {run.label} run of this source")
            results[run.label] = torch.load(file, map_location="cpu", weights_only=False)
    rows = json.loads(judge_results(results, only_measured=True))
    book = {r["key"]: r for r in json.loads((Path(__file__).resolve().parents[1] / "book" / "results.json")
                                            .read_text("utf-8"))}
    assert len(rows) == 11 and all(book[r["key"]] == r for r in rows), [r["key"] for r in rows if book[r["key"]] != r]
