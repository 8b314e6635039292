"""Chapter 6 (``ch03_training_dynamics``) measured by the package: the rows its results measure
(``DynamicsResult.claims``, ``ChecksResult.claims``, ``dynamics_checks.beta_scaled_claims``), their parts as the
chapter derived them before (issue 39), the book's runs that ``judge`` reads, and the reports whose numbers the
chapter's prose cites."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from mambaicl.analysis.claims import CLAIMS, ClaimParts, judge_all
from mambaicl.analysis.stats import compare, mean_se
from mambaicl.experiments import dynamics as D
from mambaicl.experiments import dynamics_checks as X
from mambaicl.recipes.dynamics import Report

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "myst" / "ch03_training_dynamics.md"
SEEDS = (0, 1, 2)
DYN_ROWS = {"ch3-lemma3", "ch3-lemma45", "ch3-lemma6", "ch3-theorem1", "ch3-theorem1-theta", "ch3-theorem3",
            "ch3-theorem3-theta", "thm3-epsilon"}


@pytest.fixture(scope="module")
def runs():
    """The tiny presets on three seeds (seconds): the dynamics sweeps and the checks that reuse their base point."""
    dyn = D.run(D.TINY, seeds=SEEDS, progress=False)
    return dyn, X.run(X.TINY, seeds=SEEDS, progress=False, reuse=dyn)


def test_report_keeps_the_order_of_prints_and_glues_and_asserts_its_checks():
    r = Report()
    r.print("a", 1)
    r.glue("x", "1.0")
    r.print("b", end="")
    r.check("fine", True)
    assert r.items == ["a 1\n", ("x", "1.0"), "b"] and r.text == "a 1\nb" and r.values == {"x": "1.0"}
    shown = []
    r.show(lambda name, value: shown.append((name, value)))
    assert shown == [("x", "1.0")]
    r.check("wrong", 0)
    assert r.failed == ["wrong"]
    with pytest.raises(AssertionError, match="wrong"):
        r.show(lambda *a: None)


def test_the_rows_of_chapter_6_are_the_registrys(runs):
    """The three sources together measure exactly the registry's rows of the chapter, each once."""
    dyn, chk = runs
    keys = set(dyn.claims()) | set(chk.claims()) | set(X.beta_scaled_claims(dyn, chk))
    assert keys == {k for k, c in CLAIMS.items() if c.chapter == "ch03_training_dynamics"}
    assert set(dyn.claims()) == DYN_ROWS and set(chk.claims()) == {"lemma4-early"}
    assert all(isinstance(p, ClaimParts) for p in dyn.claims().values())


def test_the_parts_are_the_measurements_the_chapter_read(runs):
    """Each row's parts, derived as the chapter derived them before the move (issue 39)."""
    dyn, chk = runs
    c, rates, ex = dyn.claims(), dyn.lemma_rates, dyn.exponents
    wb = {k: dyn.base["mamba"][f"WB_dist{k}"] for k in range(3)}
    assert c["ch3-lemma3"].parts == [[f - i for f, i in zip(wb[0]["final"], wb[0]["initial"])], wb[1]["final"],
                                     wb[2]["final"], rates["lemma3"]["lr"]["fit"], rates["lemma3"]["M1"]["fit"]]
    assert c["ch3-lemma45"].parts == ([rates[n][f]["fit"] for n in ("lemma4_v", "lemma4_mu", "lemma4_ratio")
                                       for f in D.FACTORS]
                                      + [dyn.base["mamba"]["wp_outlier_end"], dyn.base["mamba"]["wp_clean_end"]])
    assert c["ch3-lemma6"].per_seed is rates["lemma6"]["l_tr"]["fit"]
    assert c["ch3-theorem1"].parts == c["ch3-theorem1-theta"].parts == [ex["mamba"][f] for f in D.FACTORS]
    lt_end = dyn.curves["linear"][1]["loss"][-1].tolist()
    assert c["ch3-theorem3"].parts == [ex["linear"][f] for f in D.FACTORS] + [dyn.ratio_exponent["per_seed"], lt_end]
    assert c["ch3-theorem3-theta"].parts == [ex["linear"][f] for f in D.FACTORS] + [dyn.ratio_exponent["per_seed"]]
    m_end = dyn.curves["mamba"][1]["loss"][-1].tolist()
    assert c["thm3-epsilon"].parts[:2] == [m_end, lt_end]
    assert chk.claims()["lemma4-early"].parts == [chk.early[n][f]["fit"] for n in ("lemma4_v", "lemma4_mu",
                                                                                     "lemma4_ratio")
                                                  for f in X.EARLY_FACTORS]
    b = X.beta_scaled_claims(dyn, chk)
    assert b["beta-scaled"].parts == b["beta-scaled-theta"].parts == [chk.scaled[k]["exponent"] for k in D.KINDS]


def test_the_epsilon_ratio_counts_a_run_that_never_arrives_at_the_run_length(runs):
    dyn, _ = runs
    E = dyn.epsilon_counts()
    k = {kind: dyn.epsilon[kind]["lr"]["values"].index(dyn.spec.lr[kind]) for kind in D.KINDS}
    T = {kind: [dyn.spec.steps if math.isnan(t) else t for t in dyn.epsilon[kind]["lr"]["T"][k[kind]]]
         for kind in D.KINDS}
    assert E["ratio"] == [m / l for m, l in zip(T["mamba"], T["linear"])]
    assert dyn.claims()["thm3-epsilon"].parts[2] == E["ratio"]


def test_the_count_of_holding_exponents_is_the_registrys(runs):
    """The 'k of 5 hold' of rows ch3-theorem1 and ch3-theorem3: outcomes of those rows' own judgements."""
    dyn, _ = runs
    c = dyn.claims()
    judged = judge_all({k: c[k] for k in ("ch3-theorem1", "ch3-theorem3")})
    n1 = sum(o is True for o in judged["ch3-theorem1"].outcomes())
    n3 = sum(o is True for o in judged["ch3-theorem3"].outcomes()[:len(D.FACTORS)])
    assert dyn.n_hold() == {"mamba": n1, "linear": n3}
    assert c["ch3-theorem1"].ours.endswith(f"({len(SEEDS)} seeds); {n1} of 5 hold")
    assert f"; {n3} of 5 hold; final training loss" in c["ch3-theorem3"].ours
    assert "\x00" not in "".join(p.ours for p in c.values())


def test_lemma3_comparisons_and_ratios(runs):
    dyn, _ = runs
    L = dyn.lemma3()
    wb = L["wb"]
    zeros = [0.0] * len(SEEDS)
    assert L["partners"] == compare(wb[1]["final"], zeros) and L["never"] == compare(wb[2]["final"], zeros)
    assert L["wb_ratio"] == mean_se([a / b for a, b in zip(wb[2]["final"], wb[0]["final"])])


def test_the_reports_glue_every_number_the_prose_cites(runs):
    """Every ``{glue:text}`ch3_...``` of the chapter is glued by a report of the package (or the chapter's timing
    cell); the small-initialisation sweeps, absent from the tiny preset, are covered by their report's names."""
    dyn, chk = runs
    reports = [D.setup_report(dyn.spec, SEEDS, 0.3), chk.sizes_report(), dyn.run_report(), dyn.lemma3_report(),
               dyn.lemma4_report(), dyn.rates_report(), dyn.init_report(), chk.early_report(), dyn.lemma5_report(),
               dyn.lemma6_report(), dyn.lemma6_late_report(), dyn.excess_report(), dyn.table_report(),
               dyn.holds_report(), dyn.epsilon_report(), X.beta_report(dyn, chk)]
    glued = {k for r in reports for k in r.values}
    small = {f"ch3_{p}_{f}" for p in ("small", "corr") for f in D.FACTORS} | {
        "ch3_m0_big", "ch3_m0_small", "ch3_small_delta", "ch3_small_L0", "ch3_n_small", "ch3_lt_err_end",
        "ch3_lt_capacity", "ch3_n_corr", "ch3_corr_list", "ch3_corr_out"}
    cited = set(re.findall(r"\{glue:text\}`(ch3_\w+)`", CHAPTER.read_text(encoding="utf-8")))
    assert cited - glued - small - {"ch3_cpu_min"} == set()
    assert all(isinstance(t, str) for r in reports for t in r.items if not isinstance(t, tuple))
    assert dyn.error_count_text().startswith("the same count on the population 0-1 error")


def test_the_book_runs_and_judge_read_the_chapters_results():
    from mambaicl.experiments.book import BOOK_RUNS, JOINT_CLAIMS, book_run

    assert book_run("dynamics").preset is None
    assert book_run("dynamics_checks").reuse == "dynamics"
    labels = [r.label for r in BOOK_RUNS]
    assert labels.index("dynamics") < labels.index("dynamics_checks")  # reproduce --all hands the first to the second
    assert (("dynamics", "dynamics_checks"), "dynamics_checks", "beta_scaled_claims") in JOINT_CLAIMS


def test_claims_of_the_two_results_judges_every_row_of_the_chapter(runs):
    from mambaicl.experiments.book import claims_of

    dyn, chk = runs
    skipped = []
    parts = claims_of({"dynamics": dyn, "dynamics_checks": chk}, skipped)
    assert skipped == [] and set(parts) == DYN_ROWS | {"lemma4-early", "beta-scaled", "beta-scaled-theta"}
    judged = judge_all(parts)
    assert all(j.verdict for j in judged.values())


def test_the_chapter_glues_through_the_package():
    text = CHAPTER.read_text(encoding="utf-8")
    assert ".judge(" not in text and "CLAIMS[" not in text
    assert text.count("glue_claims(") == 8  # one call per section's rows
