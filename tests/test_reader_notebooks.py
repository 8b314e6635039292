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
    assert "Reader's copy" in nb.cells[0].source and f"book/{stem}.ipynb" in nb.cells[0].source
    setup = nb.cells[1].source if nb.cells[1].cell_type == "code" else ""
    assert "pip" in setup and "install" in setup, f"{stem}: the first code cell must install what it needs"


def test_setup_cells_install_the_extras_a_chapter_imports():
    """A chapter that imports the SST-2 encoder or widgets installs that extra (pyproject.toml)."""
    extras = {"sentence_transformers": "sst2", "mambaicl.data.sst2": "sst2", "make_explorer": "widgets",
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
