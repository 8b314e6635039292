"""``.ci/compare_verdicts.py``: CI's check that the verdicts do not depend on the CPU code path."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_verdicts", ROOT / ".ci" / "compare_verdicts.py")
cv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cv)


def _write(path: Path, rows: list) -> Path:
    path.write_text(json.dumps(rows))
    return path


def _row(key, verdict, **kw):
    return {"key": key, "verdict": verdict, "measured": {"low": 0.1, "high": 0.2}, **kw}


def test_the_same_verdicts_pass(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [_row("x", "reproduced"), _row("y", "undecided")])
    b = _write(tmp_path / "b.json", [_row("x", "reproduced"), _row("y", "undecided")])
    assert cv.main([str(a), str(b)]) == 0
    assert "2 of 2 rows have the same verdict" in capsys.readouterr().out


def test_a_differing_verdict_or_a_missing_row_fails(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [_row("x", "reproduced"), _row("y", "undecided")])
    b = _write(tmp_path / "b.json", [_row("x", "partly reproduced")])
    assert cv.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS x: 'reproduced'" in out and "DIFFERS y: 'undecided' in" in out and "'(missing)'" in out


def test_a_knife_edge_row_is_reported_not_failed(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [_row("x", "reproduced", knife_edge="one seed's sum sits at 0")])
    b = _write(tmp_path / "b.json", [_row("x", "undecided")])
    assert cv.main([str(a), str(b)]) == 0
    assert "knife-edge x" in capsys.readouterr().out
