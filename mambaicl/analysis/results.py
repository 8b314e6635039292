"""The rows of "Results at a glance" and ``results.json``, built once for both paths that produce them.

A row is a claim of the registry (:data:`mambaicl.analysis.claims.CLAIMS`: the paper's words, the criterion) with
a measurement, the "ours" text and the verdict. Two paths give those: ``.ci/results_page.py`` reads them from the
executed chapters' glued outputs (``res_<key>_ours``, ``res_<key>_verdict``, ``res_<key>_measured``), and
``python -m mambaicl judge`` computes them from the stored results (``Result.claims()`` →
:func:`~mambaicl.analysis.claims.judge_all`). Both hand them to :func:`rows`, so the same measurement gives the
same bytes of ``results.json`` (:func:`as_json`). ``book/results.yml`` orders the rows and gives the paper's
number as text.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..checks import ConfigError
from .claims import CLAIMS, outcome_of, row_outcomes, verdict_of

__all__ = ["SPEC", "spec_rows", "row_values", "rows", "with_outcomes", "as_json"]

#: the order of the rows and the paper's numbers (book/results.yml, beside the chapters)
SPEC = Path(__file__).resolve().parents[2] / "book" / "results.yml"


def spec_rows(path: Optional[Path] = None) -> list:
    """The rows of ``results.yml`` (``[{key, paper}, ...]``), checked against the registry."""
    import yaml

    path = Path(path) if path is not None else SPEC
    if not path.is_file():
        raise ConfigError(f"no results.yml at {path} (the order of the results rows, book/results.yml)")
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))["rows"]
    keys = [r["key"] for r in spec]
    if sorted(keys) != sorted(CLAIMS):
        raise ConfigError(f"results.yml and the registry differ: only in results.yml {sorted(set(keys) - set(CLAIMS))}"
                          f", only in the registry {sorted(set(CLAIMS) - set(keys))}")
    return spec


def row_values(judgement, ours: str) -> dict:
    """What a chapter glues for one claim (:func:`mambaicl.notebook.glue_judgement`): ``ours``, ``verdict`` and
    ``measured`` (JSON text), the three values both paths hand to :func:`rows`."""
    return {"ours": ours, "verdict": judgement.verdict,
            "measured": json.dumps(judgement.measured_json(), sort_keys=True)}


def _parts(criterion: dict, measured: dict) -> list:
    if criterion["kind"] == "diagnostic":
        return []
    return list(zip(criterion["all"], measured["all"])) if criterion["kind"] == "all" else [(criterion, measured)]


def with_outcomes(criterion: dict, measured: dict) -> dict:
    """``measured`` with each part's ``holds`` (true / false / null) recomputed from the criterion; a stored one that
    differs is an error (the chapter ran an older rule: re-execute it)."""
    measured = json.loads(json.dumps(measured))
    for (p, m), h in zip(_parts(criterion, measured), row_outcomes(criterion, measured)):
        if "holds" in m and m["holds"] != h:
            raise ConfigError(f"part {p['text']!r}: stored holds={m['holds']} but the rule gives {h}: re-execute")
        m["holds"] = h
    return measured


def rows(values: dict, spec: Optional[list] = None, *, where: str = "the measurement", only=None) -> list[dict]:
    """One dict per row of ``results.yml``: the registry's declaration, the measurement, the verdict.

    Args:
        values: ``{key: {"ours", "verdict", "measured"}}`` (:func:`row_values`; glued or judged).
        spec: the rows of results.yml (default :func:`spec_rows`).
        where: names the source in errors (a chapter, the store).
        only: keys to keep (default every row; a key without values is then an error).
    """
    spec = spec_rows() if spec is None else spec
    out = []
    for row in spec:
        claim = CLAIMS[row["key"]]
        if only is not None and claim.key not in only:
            continue
        v = values.get(claim.key)
        if v is None:
            raise ConfigError(f"{where} has no measurement of claim {claim.key}")
        measured = with_outcomes(claim.criterion_json(), json.loads(v["measured"]))
        r = {"key": claim.key, "chapter": claim.chapter, "item": claim.item,
             "paper": {"quote": claim.quote, "section": claim.section, "number": row.get("paper", "")},
             "quantity": claim.quantity, "tasks": claim.tasks, "test": claim.test,
             "criterion": claim.criterion_json(), "measured": measured, "ours": v["ours"]}
        r["outcome"] = outcome_of(r["criterion"], measured)
        r["verdict"] = verdict_of(r)
        if v["verdict"] != r["verdict"]:
            raise ConfigError(f"{where}: verdict {v['verdict']!r} for {claim.key}, but the registry computes "
                              f"{r['verdict']!r} from the measurement: re-execute the chapter")
        out.append(r)
    return out


def as_json(rs: list[dict]) -> str:
    """``results.json``: the rows, the keys in a fixed order (byte-stable)."""
    keep = ("key", "chapter", "item", "paper", "quantity", "tasks", "test", "criterion", "measured", "outcome", "verdict")
    return json.dumps([{k: r[k] for k in keep} for r in rs], indent=1, ensure_ascii=False, sort_keys=False) + "\n"
