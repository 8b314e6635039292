"""The reader notebooks (reader/book/*.ipynb) are generated from the executed chapters and kept in sync.

They are what the launch buttons (Colab, Binder) open and what the notebook archive ships: no MyST role
or directive may be left in their text. Regenerate them with ``python .ci/reader_notebooks.py``.
"""
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reader_notebooks", ROOT / ".ci" / "reader_notebooks.py")
reader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reader)
CHAPTERS = reader.chapters()


def test_every_chapter_has_a_reader_notebook_and_no_other():
    assert CHAPTERS, "no chapters found in _toc.yml"
    on_disk = {p.stem for p in reader.OUT.glob("*.ipynb")}
    assert on_disk == set(CHAPTERS), f"reader/book differs from the toc's chapters: {on_disk ^ set(CHAPTERS)}"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_reader_notebook_is_up_to_date(stem):
    path = reader.OUT / f"{stem}.ipynb"
    assert path.read_text(encoding="utf-8") == reader.render(stem), (
        f"{path.relative_to(ROOT)} is out of date: run python .ci/reader_notebooks.py")


@pytest.mark.parametrize("stem", CHAPTERS)
def test_reader_notebook_reads_without_myst(stem):
    nb = nbformat.read(reader.OUT / f"{stem}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "{glue" not in text and "literalinclude" not in text
    leftover = re.findall(r"\{[\w:-]+\}`[^`]*`", text)
    assert not leftover, f"{stem}: MyST roles left: {leftover[:5]}"
    assert not re.search(r"^(:{3,}|`{3,})\{", text, re.M), f"{stem}: a MyST directive is left"
    assert nb.metadata["mambaicl"]["source"] == f"book/{stem}.ipynb"
    setup = nb.cells[1].source if nb.cells[1].cell_type == "code" else ""
    assert "pip" in setup and "install" in setup, f"{stem}: the first code cell must install what it needs"


def test_setup_cells_install_the_extras_a_chapter_imports():
    """A chapter that imports the SST-2 encoder or widgets installs that extra (pyproject.toml)."""
    extras = {"sentence_transformers": "sst2", "mambaicl.data.sst2": "sst2", "make_explorer": "widgets", "make_vote_explorer": "widgets",
              "ipywidgets": "widgets"}
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for stem in CHAPTERS:
        source = "\n".join(c.source for c in nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4).cells
                           if c.cell_type == "code")
        setup = nbformat.read(reader.OUT / f"{stem}.ipynb", as_version=4).cells[1].source
        for needle, extra in extras.items():
            if needle in source:
                assert re.search(rf"mambaicl\[[^\]]*\b{extra}\b", setup), f"{stem} uses {needle}: install [{extra}]"
                assert f"\n{extra} = " in pyproject


def test_launch_buttons_open_the_reader_notebooks():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert (ROOT / config["repository"]["path_to_book"]) / "book" == reader.OUT


def _markdown(stem: str) -> str:
    nb = nbformat.read(reader.OUT / f"{stem}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("stem", CHAPTERS)
def test_reader_notebook_keeps_captions_chapters_and_equation_numbers(stem):
    """Every figure is followed by its numbered caption, a chapter is named once ("Chapter 7, ..."), and every
    equation number the text cites is displayed (\\tag) in the notebook of the chapter that holds it."""
    book = nbformat.read(ROOT / "book" / f"{stem}.ipynb", as_version=4)
    figures = [c.metadata["mystnb"]["figure"] for c in book.cells
               if c.metadata.get("mystnb", {}).get("figure", {}).get("caption")]
    text = _markdown(stem)
    captions = re.findall(r"^\*\*Figure \d+\.\d+\.\*\* ", text, re.M)
    assert len(captions) == len(figures), f"{stem}: {len(captions)} captions for {len(figures)} figures"
    assert "Chapter Chapter" not in text and "chapter Chapter" not in text
    refs = reader.targets()
    numbers = reader.chapter_numbers()
    stems = {n: s for s, n in numbers.items()}
    source = (ROOT / "book" / "myst" / f"{stem}.md").read_text(encoding="utf-8")
    for label in set(re.findall(r"\{eq\}`([\w-]+)`", source)):
        number = refs.get("eq:" + label, "")
        m = re.fullmatch(r"\((\d+)\.(\d+)\)", number)
        assert m, f"{stem} cites {label}, which has no number"
        holder = stems[int(m[1])]
        assert f"\\tag{{{m[1]}.{m[2]}}}" in _markdown(holder), f"{stem} cites {number}, not displayed in {holder}"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_reader_notebook_opens_for_a_reader_and_pins_its_install(stem):
    import json

    nb = nbformat.read(reader.OUT / f"{stem}.ipynb", as_version=4)
    first, setup = nb.cells[0].source, nb.cells[1].source
    assert "Run time" in first and "GPU" in first and "arxiv.org" in first and "github.com" in first
    assert "content hash" not in first and ".ci/" not in first, f"{stem}: the first cell speaks to maintainers"
    pins = json.loads((reader.OUT / "pins.json").read_text(encoding="utf-8"))
    commit = pins[stem]["commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit), pins[stem]
    assert f"@{commit}'" in setup and "print(" in setup, f"{stem}: the install is not pinned to {commit} or silent"
    assert nb.metadata["mambaicl"]["commit"] == commit


def test_part_one_reader_notebooks_inline_the_listings():
    assert "def mamba_output(" in _markdown("ch01_selective_scan")
    assert "def hinge_loss(" in _markdown("learn_dynamics") and "def sgd_step(" in _markdown("learn_dynamics")
