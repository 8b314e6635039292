"""Fail when a build log reports a failed notebook or a built page shows a traceback.

    python .ci/check_build.py _build/ci-build.log _build/html

Jupyter Book can print "build succeeded" while a chapter failed to execute (with errors allowed,
the page then shows the traceback where its results should be). The book's own configuration
makes such a build fail (``execute.raise_on_error``), and CI checks it independently here: the
log must not mention a failed execution, and no page of the site may contain a Python traceback
or an error output of a notebook cell.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

LOG_PATTERNS = [
    re.compile(r"Executing notebook failed", re.I),
    re.compile(r"execution failed", re.I),
    re.compile(r"\[book_execute\] FAILED"),
    re.compile(r"CellTimeoutError|CellExecutionError|DeadKernelError"),
]
PAGE_PATTERNS = [
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"<span class=\"ansi-red-fg\">-{10,}"),  # ipython's coloured traceback header
    re.compile(r"class=\"output traceback"),
    re.compile(r"\b(KeyboardInterrupt|CellTimeoutError)\b"),
]


def problems(log: Path, html: Path) -> list[str]:
    """Every line of ``log`` and every page of ``html`` that shows a failed chapter."""
    found = []
    for n, line in enumerate(log.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if any(p.search(line) for p in LOG_PATTERNS):
            found.append(f"{log}:{n}: {line.strip()[:200]}")
    for page in sorted(html.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        for p in PAGE_PATTERNS:
            m = p.search(text)
            if m:
                found.append(f"{page}: contains {m.group(0)[:60]!r}")
                break
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    log, html = Path(argv[0]), Path(argv[1])
    if not log.is_file() or not html.is_dir():
        print(f"check_build: need a log file and a built site; got {log} and {html}", file=sys.stderr)
        return 2
    found = problems(log, html)
    for f in found:
        print(f"check_build: {f}", file=sys.stderr)
    pages = len(list(html.rglob("*.html")))
    print(f"check_build: {pages} pages, {'no failed chapter and no traceback' if not found else f'{len(found)} problem(s)'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
