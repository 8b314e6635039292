#!/usr/bin/env python
"""Compare the verdicts of two ``results.json`` files: the book's and one recomputed elsewhere.

    python .ci/compare_verdicts.py book/results.json _build/avx2/results.json [--label "AVX2 code path"]

CI recomputes every run of the book under a second arithmetic code path of the machine
(``MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2``, ``python -m mambaicl reproduce --all``: no result store is read) and
judges it as the book does; this script prints, for every row, both verdicts, and exits 1 when a verdict differs
(or a row is missing from either file). A row the registry marks knife-edge (``"knife_edge"`` in its row: the
reason) is reported with both paths' intervals but does not fail the check; the results page shows it so.
Timing rows (their measurement differs on every run) are compared by verdict as every other row.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _rows(path: Path) -> dict:
    try:
        rows = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"compare_verdicts: no file {path}")
    except ValueError as exc:
        raise SystemExit(f"compare_verdicts: {path} is not JSON ({exc})")
    return {r["key"]: r for r in rows}


def _intervals(row: dict) -> str:
    m = row.get("measured") or {}
    parts = m.get("all") if isinstance(m, dict) and "all" in m else [m]
    out = []
    for p in parts:
        if isinstance(p, dict) and "low" in p and "high" in p:
            out.append(f"[{p['low']:.4g}, {p['high']:.4g}]")
    return " ".join(out) or "-"


def compare(book: dict, other: dict) -> tuple[list, list]:
    """``(differing, knife_edge)``: rows ``(key, book verdict, other verdict)``."""
    differ, knife = [], []
    for key in sorted(set(book) | set(other)):
        a = book.get(key, {}).get("verdict", "(missing)")
        b = other.get(key, {}).get("verdict", "(missing)")
        if a == b:
            continue
        if book.get(key, {}).get("knife_edge"):
            knife.append((key, a, b))
        else:
            differ.append((key, a, b))
    return differ, knife


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("book", type=Path)
    ap.add_argument("other", type=Path)
    ap.add_argument("--label", default="the other code path")
    args = ap.parse_args(argv)
    book, other = _rows(args.book), _rows(args.other)
    differ, knife = compare(book, other)
    same = len(set(book) & set(other)) - len(differ) - len(knife)
    print(f"compare_verdicts: {same} of {len(book)} rows have the same verdict in {args.book} and under {args.label}")
    for key, a, b in knife:
        print(f"  knife-edge {key}: {a!r} here, {b!r} under {args.label} "
              f"(intervals {_intervals(book[key])} vs {_intervals(other[key])}): {book[key]['knife_edge']}")
    for key, a, b in differ:
        print(f"  DIFFERS {key}: {a!r} in {args.book}, {b!r} under {args.label}"
              + (f" (intervals {_intervals(book[key])} vs {_intervals(other[key])})" if key in book and key in other else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
