"""The book's own consistency: jupytext pairs in sync, chapters complete, launch settings agree."""
import re
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("ch*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


def _cells(path):
    nb = jupytext.read(path)
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def _toc_files():
    files = [TOC["root"]]
    for part in TOC.get("parts", []):
        files += [ch["file"] for ch in part.get("chapters", [])]
    return files


def test_there_are_chapters():
    assert NOTEBOOKS, "no chapter notebooks found in book/"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_jupytext_pair_in_sync(nb):
    md = BOOK / "myst" / (nb.stem + ".md")
    assert md.exists(), f"{nb.name} has no MyST pair {md.relative_to(ROOT)}; run .ci/execute-notebooks {nb.relative_to(ROOT)}"
    assert _cells(nb) == _cells(md), (
        f"{nb.name} and {md.name} are out of sync; run .ci/execute-notebooks {nb.relative_to(ROOT)}")


def test_every_myst_text_has_a_notebook():
    for md in (BOOK / "myst").glob("*.md"):
        assert (BOOK / (md.stem + ".ipynb")).exists(), f"{md.name} has no notebook in book/"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_is_executed_and_complete(nb):
    notebook = jupytext.read(nb)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), f"{nb.name} has unexecuted cells"
    text = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    for heading in ("## Summary", "## Exercises", "## Deviations from the paper"):
        assert heading in text, f"{nb.name} lacks the section '{heading}'"
    assert notebook.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_install_cell_uses_the_configured_repository(nb):
    first_code = next(c for c in jupytext.read(nb).cells if c.cell_type == "code")
    match = re.search(r"git\+(https://\S+?)[\"']", first_code.source)
    assert match, f"the first code cell of {nb.name} must install mambaicl from the repository"
    assert match.group(1).rstrip("/") == CONFIG["repository"]["url"].rstrip("/")


def test_toc_lists_existing_files_and_every_chapter():
    files = _toc_files()
    for f in files:
        assert any((ROOT / (f + ext)).exists() for ext in (".md", ".ipynb")), f"_toc.yml names missing {f}"
    for nb in NOTEBOOKS:
        assert f"book/{nb.stem}" in files, f"{nb.name} is not in _toc.yml"


def test_launch_buttons_are_configured():
    assert CONFIG["launch_buttons"]["colab_url"].startswith("https://colab.research.google.com")
    assert CONFIG["launch_buttons"]["binderhub_url"]
    assert CONFIG["repository"]["url"].startswith("https://github.com/")
