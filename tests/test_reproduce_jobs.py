"""``python -m mambaicl reproduce --all --jobs N``: the book's runs in ``N`` processes write the same bytes as one.

CI's second arithmetic code path recomputes every run this way (``.ci/run``) and compares its verdicts with the
book's (``.ci/compare_verdicts.py``)."""
from __future__ import annotations

import pytest

from mambaicl import __main__ as cli
from mambaicl.experiments import book


@pytest.mark.slow
def test_reproduce_all_in_two_processes_writes_the_same_bytes_as_in_one(tmp_path, monkeypatch):
    runs = (book.BookRun("identities", function="definitions"), book.BookRun("app14_gates"),
            book.BookRun("dynamics"), book.BookRun("dynamics_checks", reuse="dynamics"),
            book.BookRun("gates"), book.BookRun("fig2"), book.BookRun("fig2_ablations", reuse="fig2"))
    monkeypatch.setattr(book, "BOOK_RUNS", runs)
    outs = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        assert cli.main(["reproduce", "--all", "--out", str(out), "--preset", "tiny", "--quiet",
                         "--jobs", str(jobs)]) == 0
        outs[jobs] = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.json"))}
    assert set(outs[1]) == {"results.json", "identities.definitions/results.json", "app14_gates/results.json", "gates/results.json",
                            "dynamics/results.json", "dynamics_checks/results.json", "fig2/results.json",
                            "fig2_ablations/results.json"}
    assert outs[1] == outs[2]


@pytest.mark.slow
def test_python_dash_m_with_two_jobs_runs_in_spawned_workers(tmp_path):
    """As CI runs it (``python -m mambaicl reproduce --all --jobs 2``): the workers are spawned processes, which
    must find what they run in an importable module, not in ``__main__``."""
    import subprocess
    import sys

    code = ("import runpy, sys\n"
            "from mambaicl.experiments import book\n"
            "book.BOOK_RUNS = (book.BookRun('app14_gates'), book.BookRun('gates'))\n"
            f"sys.argv = ['mambaicl', 'reproduce', '--all', '--out', {str(tmp_path / 'out')!r}, '--preset', 'tiny', "
            "'--quiet', '--jobs', '2']\n"
            "runpy.run_module('mambaicl', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "out" / "results.json").is_file() and (tmp_path / "out" / "gates" / "result.pt").is_file()


def test_jobs_is_checked(tmp_path, capsys):
    assert cli.main(["reproduce", "--all", "--out", str(tmp_path / "x"), "--jobs", "0"]) == 2
    assert "--jobs must be an integer in [1, inf]" in capsys.readouterr().err
