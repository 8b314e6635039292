"""The prose pages state verdicts only as ``book/results.json`` holds them (issue 41, "Prose in sync").

* The intro and the conclusion write a verdict only through the ``{verdict}`key``` role (``book/_ext/book_site.py``),
  which reads ``book/results.json`` at build time: no verdict word is typed by hand outside it, and every key it
  names is a row.
* The conclusion sorts its bullets under headings that name a verdict; the *first* row a bullet cites
  (``{ref}`res-<key>``` or ``{verdict}`<key>```) must carry a verdict of its heading, so a verdict that moves
  moves its bullet.
* The README states verdicts only in the table ``.ci/results_page.py`` generates (checked by ``--check``).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROWS = {r["key"]: r["verdict"] for r in json.loads((ROOT / "book" / "results.json").read_text("utf-8"))}
PAGES = ("book/intro.md", "book/conclusion.md")
#: verdict words that only the role may write (the verb "reproduces" and "reproduce" stay free prose)
TYPED = re.compile(r"\b(contradicted|undecided|partly reproduced|not reproduced|identit(?:y|ies) verified)\b"
                   r"|\*reproduced\*", re.I)
ROLE = re.compile(r"\{verdict\}`([^`]+)`")
CITE = re.compile(r"\{ref\}`res-([^`]+)`|\{verdict\}`([^`]+)`")
#: the conclusion's headings and the verdicts a bullet's first cited row may have under each
SECTIONS = {
    "Checked to rounding": {"identity verified"},
    "What reproduces": {"reproduced"},
    "In part": {"partly reproduced", "undecided", "diagnostic"},
    "What does not, and why": {"contradicted", "not reproduced"},
    "What the book found beyond the paper": {"beyond the paper", "diagnostic"},
}


def _without_roles(text: str) -> str:
    return ROLE.sub("", text)


@pytest.mark.parametrize("page", PAGES)
def test_no_verdict_is_typed_by_hand(page):
    text = _without_roles((ROOT / page).read_text("utf-8"))
    text = re.sub(r"<!-- verdict-counts:begin.*?verdict-counts:end -->", "", text, flags=re.S)  # generated
    typed = [(text[:m.start()].count("\n") + 1, m.group(0)) for m in TYPED.finditer(text)]
    assert not typed, f"{page}: verdict words typed by hand (write {{verdict}}`key` instead): {typed}"


@pytest.mark.parametrize("page", PAGES)
def test_every_verdict_role_names_a_row(page):
    keys = ROLE.findall((ROOT / page).read_text("utf-8"))
    assert set(keys) <= set(ROWS), f"{page}: unknown rows {sorted(set(keys) - set(ROWS))}"


def _bullets(text: str):
    """``(heading, bullet text)`` of every top-level bullet under a ``##`` heading."""
    heading, bullet = None, None
    for line in text.splitlines() + [""]:
        if line.startswith("## "):
            if bullet is not None:
                yield heading, bullet
            heading, bullet = line[3:].strip(), None
        elif line.startswith("- "):
            if bullet is not None:
                yield heading, bullet
            bullet = line
        elif bullet is not None and (line.startswith("  ") or not line.strip()):
            if not line.strip():
                yield heading, bullet
                bullet = None
            else:
                bullet += " " + line.strip()


def test_each_conclusion_bullet_sits_under_its_first_rows_verdict():
    text = (ROOT / "book" / "conclusion.md").read_text("utf-8")
    wrong, checked = [], 0
    for heading, bullet in _bullets(text):
        if heading not in SECTIONS:
            continue
        cites = [a or b for a, b in CITE.findall(bullet)]
        assert cites, f"conclusion, {heading!r}: a bullet cites no row: {bullet[:80]}"
        first = cites[0]
        assert first in ROWS, f"conclusion: no row {first!r}"
        checked += 1
        if ROWS[first] not in SECTIONS[heading]:
            wrong.append((heading, first, ROWS[first], bullet[:70]))
    assert checked >= 10
    assert not wrong, "conclusion bullets under a heading their first row's verdict contradicts: " + repr(wrong)


def test_the_readme_states_verdicts_only_in_its_generated_table():
    text = (ROOT / "README.md").read_text("utf-8")
    text = re.sub(r"<!-- results:begin.*?<!-- results:end -->", "", text, flags=re.S)
    typed = [m.group(0) for m in TYPED.finditer(text)]
    assert not typed, f"README: verdict words outside the generated table: {typed}"
