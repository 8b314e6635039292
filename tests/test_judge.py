"""Measurements -> parts -> verdicts in the package: ``ClaimParts`` and ``judge_all`` (the registry's inputs and its one
judging call), ``notebook.glue_claims`` (what a chapter glues), ``analysis.results.rows`` (the rows the results page and
``python -m mambaicl judge`` share), the ``judge`` command's errors, ``reproduce --all`` on a tiny preset, and the
share of code in the chapters' MyST sources."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mambaicl.analysis.claims import CLAIMS, OUTCOME, ClaimParts, Measured, judge_all, ours_text
from mambaicl.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
MYST = ROOT / "book" / "myst"


# ---------------------------------------------------------------- ClaimParts and judge_all


def test_claim_parts_holds_exactly_the_inputs_of_claim_judge_and_ours():
    import inspect

    from mambaicl.analysis.claims import Claim

    fields = [f.name for f in dataclasses.fields(ClaimParts)]
    judge = [p for p in inspect.signature(Claim.judge).parameters if p != "self"]
    assert fields == ["ours"] + judge == ["ours", "per_seed", "parts", "n_prompts", "value"]
    p = ClaimParts("x", per_seed=[1.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.ours = "y"
    with pytest.raises(ConfigError, match="ours must be a str"):
        ClaimParts(1.5)


@pytest.mark.parametrize("key, kwargs", [
    ("kappa-lower-bound", {"per_seed": [0.5, 1.0, 1.5, 2.0]}),  # one criterion, per-seed values
    ("fig2-lt", {"parts": [[0.2, 0.3, 0.25], [0.001, 0.002, 0.0]], "n_prompts": 1000}),  # an 'all' criterion
    ("eq3-closed-form", {"value": 1e-15}),  # an identity
    ("fig2-seed-tail", {"parts": [Measured(0.5, 0.2, 0.7, 20, tuple(range(20))),  # a Measured handed over
                                  [0.01] * 19 + [0.2]]}),
])
def test_judge_all_gives_the_registry_verdict_of_each_claim(key, kwargs):
    judged = judge_all({key: ClaimParts("ours", **kwargs)})
    direct = CLAIMS[key].judge(kwargs.get("per_seed"), parts=kwargs.get("parts"), n_prompts=kwargs.get("n_prompts"),
                               value=kwargs.get("value"))
    assert list(judged) == [key]
    assert judged[key].verdict == direct.verdict and judged[key].measured_json() == direct.measured_json()


def test_judge_all_refuses_an_unknown_key_and_a_bare_value():
    with pytest.raises(ConfigError, match="not in the registry"):
        judge_all({"no-such-claim": ClaimParts("x", per_seed=[1.0, 2.0])})
    with pytest.raises(ConfigError, match="must be a ClaimParts"):
        judge_all({"kappa-lower-bound": [1.0, 2.0]})
    with pytest.raises(ConfigError, match="parts must hold"):
        judge_all({"fig2-lt": ClaimParts("x", per_seed=[1.0, 2.0])})


def test_ours_text_fills_in_the_outcome():
    parts = ClaimParts(f"rho 0.5; outcome: {OUTCOME}", per_seed=[1.0, 2.0, 3.0])
    j = judge_all({"kappa-lower-bound": parts})["kappa-lower-bound"]
    assert ours_text(parts, j) == f"rho 0.5; outcome: {j.outcome}"
    assert ours_text(ClaimParts("plain", per_seed=[1.0]), j) == "plain"


def test_glue_claims_glues_what_judgement_glue_glued(monkeypatch):
    """The three glued values of a row, names and formats as ``Judgement.glue`` gave them."""
    from mambaicl import notebook

    parts = {"kappa-lower-bound": ClaimParts("ours text", per_seed=[0.5, 1.0, 1.5]),
             "fig2-lt": ClaimParts(f"x; {OUTCOME}", parts=[[0.2, 0.3, 0.25], [0.001, 0.002, 0.0]], n_prompts=1000)}
    monkeypatch.setattr(notebook, "GLUED", {})
    judged = notebook.glue_claims(parts)
    new = dict(notebook.GLUED)
    monkeypatch.setattr(notebook, "GLUED", {})
    for key, j in judged.items():
        if hasattr(j, "glue"):  # the old path, while Part I and Chapters 3-4 still use it
            j.glue(ours_text(parts[key], j))
    if notebook.GLUED:
        assert new == notebook.GLUED
    assert new["res_kappa_lower_bound_ours"] == "ours text" and new["res_fig2_lt_ours"] == f"x; {judged['fig2-lt'].outcome}"
    assert new["res_fig2_lt_verdict"] == judged["fig2-lt"].verdict
    assert json.loads(new["res_fig2_lt_measured"]) == judged["fig2-lt"].measured_json()


# ---------------------------------------------------------------- the rows: results page and judge


def _results_page():
    import importlib.util

    spec = importlib.util.spec_from_file_location("results_page", ROOT / ".ci" / "results_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rows_rebuild_results_json_from_the_glued_values():
    """The one rows function (mambaicl.analysis.results) on the chapters' glued values gives book/results.json."""
    from mambaicl.analysis import results

    rp = _results_page()
    assert results.as_json(results.rows(rp.glued_values())) == (ROOT / "book" / "results.json").read_text("utf-8")


def test_rows_refuse_a_verdict_the_registry_does_not_give():
    from mambaicl.analysis import results

    rp = _results_page()
    values = rp.glued_values()
    key = next(iter(values))
    bad = dict(values, **{key: dict(values[key], verdict="contradicted" if values[key]["verdict"] != "contradicted"
                                    else "reproduced")})
    with pytest.raises(ConfigError, match=f"for {key}, but the registry computes"):
        results.rows(bad)


def test_judge_on_the_result_store_gives_the_chapters_rows():
    """Where a build left the book's runs in the result store (same source), ``judge`` gives, row for row, what the
    chapters glued (book/results.json); skipped when the store does not hold them."""
    from mambaicl.experiments.book import judge_results, read_results

    try:
        stored = read_results(None)
    except ConfigError as exc:
        pytest.skip(f"no result store of this source: {exc}")
    judged = {r["key"]: r for r in json.loads(judge_results(stored, only_measured=True))}
    book = {r["key"]: r for r in json.loads((ROOT / "book" / "results.json").read_text("utf-8"))}
    timing = {k for k, r in book.items() if r["criterion"]["kind"] == "diagnostic" and "timing" in r["criterion"]["text"]}
    same = {k: judged[k] == book[k] if k not in timing else  # a timing differs on every execution: its declaration
            all(judged[k][f] == book[k][f] for f in ("criterion", "verdict", "paper"))  # and verdict must agree
            for k in judged}
    assert judged and all(same.values()), [k for k, ok in same.items() if not ok]


# ---------------------------------------------------------------- the command


def _env(**extra):
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


def _cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "mambaicl", *args], env=_env(**env), cwd=ROOT, capture_output=True,
                          text=True)


def _one_line(r, message):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("python -m mambaicl: error: ") and message in lines[0], lines


def test_judge_on_a_missing_store_is_one_line(tmp_path):
    _one_line(_cli("judge", "--store", str(tmp_path / "nope")), "no result store at")


def test_judge_on_a_foreign_store_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("not a result")
    (tmp_path / "other-0123.pt").write_bytes(b"x")
    _one_line(_cli("judge", "--store", str(tmp_path)), "holds no result of the book's runs")


def test_judge_on_a_truncated_result_is_one_line(tmp_path):
    from mambaicl.experiments.book import BOOK_RUNS, book_call
    from mambaicl.experiments.store import _file

    run = BOOK_RUNS[0]
    fn, args, kwargs = book_call(run)
    (tmp_path / _file(fn, args, run.key_kwargs(kwargs), None).name).write_bytes(b"PK\x03\x04truncated")
    _one_line(_cli("judge", "--store", str(tmp_path)), "is unreadable")


def test_reproduce_all_checks_its_arguments_first(tmp_path):
    _one_line(_cli("reproduce", "--all"), "--out DIR is required")
    _one_line(_cli("reproduce", "--all", "fig2", "--out", str(tmp_path)), "give no name")
    _one_line(_cli("reproduce", "nope"), "unknown experiment 'nope'")  # the name before a missing --out


@pytest.mark.slow
def test_reproduce_all_on_a_tiny_preset_writes_results_json(tmp_path, monkeypatch, capsys):
    """``reproduce --all --preset tiny`` (about 10 s here: the book's runs cut to one cheap experiment): each run's
    folder and DIR/results.json with the rows a tiny run can measure, judged as ``judge`` judges."""
    from mambaicl import __main__ as cli
    from mambaicl.experiments import book

    monkeypatch.setattr(book, "BOOK_RUNS", (book.BookRun("app14_gates"),))
    out = tmp_path / "all"
    assert cli.main(["reproduce", "--all", "--out", str(out), "--preset", "tiny", "--quiet"]) == 0
    rows = json.loads((out / "results.json").read_text("utf-8"))
    assert [r["key"] for r in rows] == ["app14-gates"] and rows[0]["verdict"] in ("beyond the paper",)
    assert json.loads((out / "app14_gates" / "results.json").read_text("utf-8"))["preset"] == "tiny"
    # the folder is a store judge reads
    assert cli.main(["judge", "--store", str(out), "--out", str(tmp_path / "j.json"), "--measured-only"]) == 0
    assert (tmp_path / "j.json").read_text("utf-8") == (out / "results.json").read_text("utf-8")


# ---------------------------------------------------------------- the chapters narrate


PART_II_III = ("ch03_training_dynamics", "ch04_robustness", "ch05_mechanism", "ch06_sst2", "ch07_beyond",
               "ch08_open_questions", "appendix_mamba1")
#: chapters whose rows the package computes (Result.claims); the others still derive theirs in the chapter
MIGRATED = ("ch01_selective_scan", "ch02_data_model", "ch03_training_dynamics", "ch04_robustness", "ch05_mechanism",
            "ch06_sst2", "ch07_beyond", "ch08_open_questions", "appendix_mamba1")
#: the issue's goal for Part II/III; the chapters above it today (measured by code_share)
CODE_SHARE_GOAL = 0.40


def code_share(path: Path) -> float:
    """The share of a MyST chapter's non-blank lines inside code cells (fences and cell options counted as code)."""
    code = total = 0
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s.startswith("```{code-cell}") or (inside and s == "```"):
            inside = s != "```"
            code, total = code + 1, total + 1
            continue
        if s:
            total += 1
            code += inside
    return code / total


@pytest.mark.parametrize("stem", PART_II_III)
def test_code_share_of_part_ii_iii_chapters(stem):
    share = code_share(MYST / f"{stem}.md")
    print(f"{stem}: code {100 * share:.1f} % of non-blank MyST lines")
    if share > CODE_SHARE_GOAL:
        pytest.xfail(f"{stem}: code is {100 * share:.1f} % of the MyST lines (goal {100 * CODE_SHARE_GOAL:.0f} %): "
                     "its plumbing has not all moved into the package yet (issue 39)")


@pytest.mark.parametrize("stem", MIGRATED)
def test_migrated_chapters_call_no_judge(stem):
    text = (MYST / f"{stem}.md").read_text(encoding="utf-8")
    assert not re.search(r"\.judge\(", text), f"{stem} derives a verdict itself (use notebook.glue_claims)"


def test_no_two_standard_error_wording_in_the_book():
    words = re.compile(r"two standard|2 standard|two-standard", re.IGNORECASE)
    short = re.compile(r"\b2[ -]SE\b|\btwo SE\b")  # case-sensitive: "fig2-seed-tail" is a row's key
    bad = [f"{p.name}:{i}" for p in sorted(MYST.glob("*.md")) + sorted((ROOT / "book").glob("*.md"))
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if words.search(line) or short.search(line)]
    assert bad == []



@pytest.mark.slow
def test_reproduce_all_on_a_tiny_preset_skips_a_claim_its_cells_cannot_measure(tmp_path, monkeypatch, capsys):
    """The boundary experiment's tiny preset has fewer cells than the ``breakdown`` row's criterion has parts:
    ``reproduce --all --preset tiny`` says the row is not measured and judges the others (it ended with exit 2)."""
    from mambaicl import __main__ as cli
    from mambaicl.experiments import book

    monkeypatch.setattr(book, "BOOK_RUNS", (book.BookRun("boundary"),))
    out = tmp_path / "all"
    assert cli.main(["reproduce", "--all", "--out", str(out), "--preset", "tiny", "--quiet"]) == 0
    assert "breakdown: its rows are not measured on preset 'tiny'" in capsys.readouterr().out
    keys = [r["key"] for r in json.loads((out / "results.json").read_text("utf-8"))]
    assert "breakdown" not in keys and keys
