"""Every numbered exercise of every chapter has a worked solution a reader can open.

A solution is a collapsed dropdown titled "Solution to exercise N" placed after the exercises:
a sphinx-design ``{dropdown}`` (or an ``{admonition}`` with ``:class: dropdown``) for the
derivation or the answer in words, optionally followed by a collapsed code cell (``hide-cell``,
``hide-input`` or ``dropdown`` tag) whose ``mystnb.code_prompt_show`` names the same exercise.
The checks read the executed notebooks, which are what the book builds.
"""
import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("ch*.ipynb")) + sorted(BOOK.glob("learn_*.ipynb")) + sorted(BOOK.glob("appendix*.ipynb"))

COLLAPSED_TAGS = {"hide-cell", "hide-input", "dropdown"}
# ":::{dropdown} Solution to exercise 3" or "```{admonition} Solution to exercise 3" + ":class: dropdown"
DIRECTIVE = re.compile(r"^(?P<fence>:{3,}|`{3,})\{(?P<name>dropdown|admonition)\}\s*Solution to exercise (?P<n>\d+)\s*$"
                       r"(?P<options>(?:\n:[\w-]+:.*)*)", re.M)
EXERCISE = re.compile(r"^(\d+)\. ", re.M)
CODE_PROMPT = re.compile(r"^Solution to exercise (\d+)\b")


def exercises_section(cells):
    """The cells from the '## Exercises' heading to the next '## ' heading, as (type, source, metadata)."""
    out, inside = [], False
    for c in cells:
        src = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
        if c["cell_type"] == "markdown" and re.search(r"^## Exercises\s*$", src, re.M):
            inside = True
            src = src[re.search(r"^## Exercises\s*$", src, re.M).end():]
        elif inside and c["cell_type"] == "markdown" and re.search(r"^## ", src, re.M):
            out.append(("markdown", src[: re.search(r"^## ", src, re.M).start()], {}))
            break
        if inside:
            out.append((c["cell_type"], src, c.get("metadata", {})))
    return out


def solution_problems(cells) -> list:
    """What is missing or misplaced among a chapter's exercise solutions (empty list: all good)."""
    section = exercises_section(cells)
    if not section:
        return ["no '## Exercises' section"]
    problems, numbers, dropdowns, previous = [], [], set(), None
    for kind, src, meta in section:
        if kind == "markdown":
            first = DIRECTIVE.search(src)
            listing = src[: first.start()] if first else src
            if not dropdowns:  # the numbered list comes before every solution
                numbers += [int(n) for n in EXERCISE.findall(listing)]
            for m in DIRECTIVE.finditer(src):
                n = int(m.group("n"))
                if m.group("name") == "admonition" and not re.search(r"^:class:.*\bdropdown\b", m.group("options"), re.M):
                    problems.append(f"the admonition 'Solution to exercise {n}' is not collapsed (:class: dropdown)")
                if n not in numbers:
                    problems.append(f"'Solution to exercise {n}' comes before exercise {n} or solves no exercise")
                dropdowns.add(n)
                previous = n
            if src.strip() and not DIRECTIVE.search(src):
                previous = None  # prose between a dropdown and a code cell breaks "directly under"
        else:
            prompt = meta.get("mystnb", {}).get("code_prompt_show", "")
            m = CODE_PROMPT.match(prompt)
            if not m:
                continue
            n = int(m.group(1))
            if not COLLAPSED_TAGS & set(meta.get("tags", [])):
                problems.append(f"the code of 'Solution to exercise {n}' is not collapsed (tag it hide-cell)")
            if previous != n:
                problems.append(f"the code of 'Solution to exercise {n}' is not directly under its dropdown")
    if not numbers:
        problems.append("no numbered exercise")
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"exercises are not numbered 1..n: {numbers}")
    problems += [f"exercise {n} has no 'Solution to exercise {n}' dropdown" for n in numbers if n not in dropdowns]
    return problems


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_a_collapsed_solution(nb):
    cells = jupytext.read(nb).cells
    assert not solution_problems(cells), f"{nb.name}: " + "; ".join(solution_problems(cells))


def _cell(kind, source, **metadata):
    return {"cell_type": kind, "source": source, "metadata": metadata}


def test_the_check_fails_on_a_missing_or_open_solution():
    head = _cell("markdown", "## Exercises\n\n1. Derive it.\n2. Compute it.\n   Over two lines.\n\n"
                             ":::{dropdown} Solution to exercise 1\nThe derivation.\n:::\n")
    code = _cell("code", "print(1)", mystnb={"code_prompt_show": "Solution to exercise 2 (code)"}, tags=["hide-cell"])
    tail = _cell("markdown", "## Deviations from the paper\n")
    assert solution_problems([head, tail]) == ["exercise 2 has no 'Solution to exercise 2' dropdown"]
    two = _cell("markdown", "```{admonition} Solution to exercise 2\n:class: dropdown\nSee the cell.\n```\n")
    assert solution_problems([head, two, code, tail]) == []
    open_two = _cell("markdown", "```{admonition} Solution to exercise 2\nSee the cell.\n```\n")
    assert solution_problems([head, open_two, code, tail]) == [
        "the admonition 'Solution to exercise 2' is not collapsed (:class: dropdown)"]
    shown = _cell("code", "print(1)", mystnb={"code_prompt_show": "Solution to exercise 2 (code)"})
    assert solution_problems([head, two, shown, tail]) == [
        "the code of 'Solution to exercise 2' is not collapsed (tag it hide-cell)"]
    assert "exercise 1 has no 'Solution to exercise 1' dropdown" in solution_problems(
        [_cell("markdown", "## Exercises\n\n1. Derive it.\n"), tail])
