"""Part I (Learn) keeps the shape a learner needs (issue 29): three parts in the toc; each Learn chapter
opens with what you will learn, carries Key ideas, at most one collapsed Reproduction status, ends with
Summary and Exercises, stays readable in source (<= 600 MyST lines, <= 40 glue references) and glues
numbers and short labels only; the six pictures of the Learn path exist under their names."""
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
MAX_LINES, MAX_GLUE, MAX_GLUED_TEXT = 600, 40, 40
FIGURES = {"fig-attention-map": "ch01_selective_scan", "fig-skip-erase": "ch01_selective_scan",
           "fig-training-graph": "ch02_data_model", "fig-votes": "learn_mechanism",
           "fig-gate-training": "learn_dynamics"}


def _results_page():
    spec = importlib.util.spec_from_file_location("results_page", ROOT / ".ci" / "results_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _part(word):
    parts = [p for p in TOC["parts"] if word in p.get("caption", "")]
    assert len(parts) == 1, f"_toc.yml needs exactly one part whose caption names {word!r}"
    return [Path(ch["file"]).name for ch in parts[0]["chapters"]]


LEARN = _part("Learn")


def test_three_parts():
    assert len(LEARN) >= 5
    assert {"ch03_training_dynamics", "ch04_robustness", "ch05_mechanism", "ch06_sst2"} <= set(_part("Reproduce"))
    assert "ch07_beyond" in _part("Beyond the paper")
    assert "appendix_mamba1" in _part("Reproduce")


def _myst(stem):
    return (BOOK / "myst" / f"{stem}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("stem", LEARN)
def test_learn_chapter_is_short_and_readable(stem):
    text = _myst(stem)
    assert len(text.splitlines()) <= MAX_LINES, f"{stem}: {len(text.splitlines())} MyST lines > {MAX_LINES}"
    roles = len(re.findall(r"\{glue(?::\w+)?\}`", text))
    assert roles <= MAX_GLUE, f"{stem}: {roles} glue references > {MAX_GLUE}"


@pytest.mark.parametrize("stem", LEARN)
def test_learn_chapter_opens_teaches_and_ends_with_exercises(stem):
    text = _myst(stem)
    title = re.search(r"^# .+$", text, re.M)
    opening = re.search(r"^(:{3,})\{admonition\} In this chapter\n(.*?)^\1\s*$", text, re.M | re.S)
    assert title and opening, f"{stem}: no 'In this chapter' admonition"
    assert not re.search(r"^## ", text[title.end():opening.start()], re.M), f"{stem}: the admonition must open the chapter"
    for words in ("You will learn", "You need", "Reading time", "Run time"):
        assert words in opening[2], f"{stem}: the opening admonition does not say {words!r}"
    assert text.count("{admonition} Key idea") >= 1, f"{stem}: no 'Key idea' admonition"
    status = re.findall(r"\{admonition\} Reproduction status\n:class: (\w+)", text)
    assert len(status) <= 1 and all(s == "dropdown" for s in status), f"{stem}: at most one collapsed Reproduction status"
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[-2:] == ["Summary", "Exercises"], f"{stem}: must end with Summary and Exercises, has {headings[-3:]}"
    assert "Deviations from the paper" not in headings


@pytest.mark.parametrize("stem", LEARN)
def test_no_two_standard_error_rule(stem):
    assert not re.search(r"two standard errors|2-SE|2 SE\b", _myst(stem))


@pytest.mark.parametrize("stem", LEARN)
def test_glued_text_is_a_number_or_short_label(stem):
    """Every glued value the chapter's prose uses is at most 40 characters (never a clause)."""
    values = _results_page().glued(BOOK / f"{stem}.ipynb")
    used = set(re.findall(r"\{glue(?::\w+)?\}`([\w-]+)", _myst(stem)))
    assert used <= set(values), f"{stem}: glued names not in the executed notebook: {used - set(values)}"
    long = {k: values[k] for k in used if len(values[k]) > MAX_GLUED_TEXT}
    assert not long, f"{stem}: glued text longer than {MAX_GLUED_TEXT} characters: {long}"


def test_the_learn_figures_exist_under_their_names():
    for name, stem in FIGURES.items():
        nb = nbformat.read(BOOK / f"{stem}.ipynb", as_version=4)
        cells = [c for c in nb.cells if c.metadata.get("mystnb", {}).get("figure", {}).get("name") == name]
        assert len(cells) == 1, f"{stem} has no figure named {name}"
        fig = cells[0].metadata["mystnb"]["figure"]
        assert fig.get("caption"), f"{name} has no caption"
        assert any("image/png" in o.get("data", {}) for o in cells[0].get("outputs", [])), f"{name} is not drawn"
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    m = re.search(r":::\{figure\} (\S+)\n:name: fig-intro-summary\n", intro)
    assert m and (BOOK / m[1]).is_file(), "the introduction has no figure fig-intro-summary"


def test_intro_has_a_reading_guide():
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    assert "learner's path" in intro and "referee's path" in intro
    assert "{ref}`results`" in intro
