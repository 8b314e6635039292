"""Generate the reader notebooks, reader/book/<chapter>.ipynb, from the executed chapters.

A chapter opened outside the book (Colab, Binder, plain Jupyter) shows MyST roles raw. Its reader
notebook is the same executed chapter with

* glued values written into the text (``{glue:text}`name``` -> the stored value),
* cross-references as plain text: ``{numref}`` -> "Figure 3.2", ``{eq}`` -> "(3.1)", ``{ref}`` and
  ``{prf:ref}`` -> the target's title (a chapter once: "Chapter 7, “...”", never "Chapter Chapter"),
  ``{cite}`` -> "(Author Year)",
* ``literalinclude`` listings inlined, ``math`` directives as ``$$ ... $$`` carrying their number
  (``\tag{3.1}``), admonitions and proof blocks as quotes, dropdowns as ``<details>``, ``(label)=``
  targets dropped,
* each figure followed by its caption with its number ("**Figure 3.2.** ..."; the book keeps captions in
  cell metadata, which Colab does not show),
* a first cell written for a reader (what the chapter is, links to the book's repository and the paper,
  run time, no GPU needed) and a setup cell that installs the package at the commit whose outputs the
  notebook holds (``reader/book/pins.json``), with the extras the chapter needs, saying so as it does.

``pins.json`` maps each chapter to the content hash of its executed notebook and the commit that
stored those outputs; a chapter re-executed (new hash) is pinned anew: to the commit that last stored
its notebook when that file is committed unchanged, else to ``HEAD`` (the package it just ran with).

The book's launch buttons (``repository.path_to_book: reader`` in ``_config.yml``) and the notebook
archive of the site (``book/_ext/book_site.py``) point at these files. ``tests/test_reader_notebooks.py``
regenerates them in memory and fails when they are out of date.

    python .ci/reader_notebooks.py           # rewrite reader/book/*.ipynb from book/*.ipynb
    python .ci/reader_notebooks.py --check   # exit 1 if any is out of date
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / ".ci"))
from results_page import glued  # noqa: E402  (every glued text value of an executed notebook)

BOOK = ROOT / "book"
OUT = ROOT / "reader" / "book"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
#: extras of the package each chapter needs beyond ``mambaicl`` itself (pyproject.toml)
EXTRAS = {"ch05_mechanism": ("widgets",), "learn_mechanism": ("widgets",), "ch06_sst2": ("sst2",)}
#: the module each extra provides, checked before installing
EXTRA_MODULES = {"widgets": "ipywidgets", "sst2": "sentence_transformers"}


# ---------------------------------------------------------------- what the book knows about its targets


def chapters() -> list[str]:
    """The toc's chapters built from a notebook, in reading order, e.g. ``["ch01_selective_scan", ...]``."""
    out = []
    for part in TOC.get("parts", []):
        for ch in part.get("chapters", []):
            stem = Path(ch["file"]).name
            if (BOOK / f"{stem}.ipynb").exists():
                out.append(stem)
    return out


def chapter_numbers() -> dict:
    """``{stem: n}`` for every page of a numbered part (numbered across the parts, as the book shows them)."""
    out, n = {}, 0
    for part in TOC.get("parts", []):
        if not part.get("numbered"):
            continue
        for ch in part.get("chapters", []):
            n += 1
            out[Path(ch["file"]).name] = n
    return out


def _sources() -> dict:
    """``{stem: MyST text}`` of every chapter and page of the book."""
    texts = {p.stem: p.read_text(encoding="utf-8") for p in sorted((BOOK / "myst").glob("*.md"))}
    for p in sorted(BOOK.glob("*.md")):
        texts.setdefault(p.stem, p.read_text(encoding="utf-8"))
    return texts


def targets() -> dict:
    """Every label of the book -> how a reader notebook writes a reference to it."""
    numbers = chapter_numbers()
    out: dict = {}
    for stem, text in _sources().items():
        lines = text.splitlines()
        for i, line in enumerate(lines):  # (label)= before a heading: the heading's text
            m = re.match(r"^\((?P<label>[\w-]+)\)=\s*$", line)
            if m:
                heading = next((l for l in lines[i + 1:] if l.startswith("#")), "")
                title = heading.lstrip("#").strip()
                n = numbers.get(stem)
                out[m["label"]] = f"Chapter {n}, “{title}”" if heading.startswith("# ") and n else f"“{title}”"
        n = numbers.get(stem, 0)
        figs = re.findall(r"^\s*(?::name:|name:)\s*(fig-[\w-]+)\s*$", text, re.M)
        for k, name in enumerate(dict.fromkeys(figs), 1):
            out.setdefault("numref:" + name, f"Figure {n}.{k}" if n else "the figure")
        eqs = re.findall(r"```\{math\}\n:label: ([\w-]+)", text)
        for k, name in enumerate(eqs, 1):
            out["eq:" + name] = f"({n}.{k})" if n else f"({name})"
        for m in re.finditer(r"^:::+\{prf:(\w+)\}\s*(.*)\n:label: ([\w-]+)", text, re.M):
            out["prf:" + m[3]] = m[2].strip() or m[1].capitalize()
    return out


def citations() -> dict:
    """``{key: "Author et al. Year"}`` from book/references.bib (first author's last name)."""
    bib = (BOOK / "references.bib").read_text(encoding="utf-8")
    out = {}
    for m in re.finditer(r"@\w+\{([^,]+),(.*?)\n\}", bib, re.S):
        body = m[2]
        author = re.search(r"author\s*=\s*[{\"](.+?)[}\"],?\s*\n", body, re.S)
        year = re.search(r"year\s*=\s*[{\"]?(\d{4})", body)
        names = [a.strip() for a in re.sub(r"[{}]", "", author[1]).split(" and ")] if author else ["?"]
        last = names[0].split(",")[0].strip() if "," in names[0] else names[0].split()[-1]
        etal = " et al." if len(names) > 2 else (f" and {names[1].split(',')[0].split()[-1]}" if len(names) == 2 else "")
        out[m[1].strip()] = f"{last}{etal} {year[1] if year else ''}".strip()
    return out


# ---------------------------------------------------------------- text rewriting


def _pyobject(path: Path, name: str) -> str:
    """The source of the top-level function or class ``name`` of a Python file."""
    source = path.read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if getattr(node, "name", None) == name:
            start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
            return "\n".join(source.splitlines()[start - 1: node.end_lineno])
    raise SystemExit(f"literalinclude: no {name} in {path}")


def _directive(name: str, title: str, options: dict, body: str, refs: dict) -> str:
    if name == "math":
        number = refs.get("eq:" + options.get("label", ""), "")
        tag = f" \\tag{{{number.strip('()')}}}" if re.fullmatch(r"\(\d+\.\d+\)", number) else ""
        return f"$$\n{body.strip()}{tag}\n$$"
    if name == "literalinclude":
        path = (BOOK / title).resolve()  # relative to the chapter's notebook in book/
        code = _pyobject(path, options["pyobject"]) if "pyobject" in options else path.read_text(encoding="utf-8")
        return f"```python\n{code}\n```"
    if name == "figure":
        return f"*{body.strip()}*"
    if name == "dropdown" or options.get("class", "") == "dropdown":
        return f"<details>\n<summary>{title}</summary>\n\n{body.strip()}\n\n</details>"
    heading = title or name.split(":")[-1].capitalize()
    quoted = "\n".join("> " + l if l else ">" for l in body.strip().splitlines())
    return f"> **{heading}**\n>\n{quoted}"


_FENCE = re.compile(r"^(?P<fence>:{3,}|`{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<title>[^\n]*)\n(?P<rest>.*?)^(?P=fence)[ \t]*$",
                    re.M | re.S)


def _directives(text: str, refs: dict) -> str:
    def sub(m):
        lines = m["rest"].splitlines()
        options = {}
        while lines and re.match(r"^:[\w-]+:", lines[0]):
            key, _, value = lines.pop(0)[1:].partition(":")
            options[key] = value.strip()
        body = _directives("\n".join(lines), refs)  # nested directives first
        return _directive(m["name"], m["title"].strip(), options, body, refs)

    previous = None
    while previous != text:
        previous, text = text, _FENCE.sub(sub, text)
    return text


def rewrite(text: str, values: dict, refs: dict, cites: dict) -> str:
    """One markdown cell of a chapter as a reader sees it: no MyST role or directive left."""
    text = re.sub(r"^\([\w-]+\)=[ \t]*\n", "", text, flags=re.M)
    text = _directives(text, refs)

    def role(m):
        kind, arg = m["role"], m["arg"]
        if kind.startswith("glue"):
            key = arg.split(":")[0]
            if key not in values:
                raise SystemExit(f"no glued value {key!r}")
            return values[key]
        if kind == "numref":
            return refs.get("numref:" + arg, arg)
        if kind == "eq":
            return refs.get("eq:" + arg, f"({arg})")
        if kind == "ref":
            return refs.get(arg, arg)
        if kind == "prf:ref":
            return refs.get("prf:" + arg, arg)
        if kind == "cite":
            return "(" + "; ".join(cites.get(k.strip(), k.strip()) for k in arg.split(",")) + ")"
        return arg

    pattern = r"\{(?P<role>[\w:-]+)\}`(?P<arg>[^`]*)`"
    text = re.sub(pattern, role, re.sub(pattern, role, text))  # twice: a target's title may hold a role
    return re.sub(r"\b(Chapter|chapter) Chapter (\d)", r"\1 \2", text)  # "Chapter {ref}`ch-x`": one "Chapter"


# ---------------------------------------------------------------- the notebook


PINS = OUT / "pins.json"


def _git(*args: str) -> str:
    import subprocess

    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _load_pins() -> dict:
    import json

    return json.loads(PINS.read_text(encoding="utf-8")) if PINS.exists() else {}


def pin(stem: str, digest: str, pins: dict | None = None) -> str:
    """The commit whose outputs ``book/<stem>.ipynb`` (content hash ``digest``) holds: the stored pin when the
    hash matches, else the commit that last stored the notebook (if it is committed unchanged), else ``HEAD``."""
    pins = _load_pins() if pins is None else pins
    if pins.get(stem, {}).get("sha256") == digest:
        return pins[stem]["commit"]
    rel = f"book/{stem}.ipynb"
    if _git("status", "--porcelain", "--", rel) == "":
        return _git("log", "-1", "--format=%H", "--", rel) or _git("rev-parse", "HEAD")
    if _git("status", "--porcelain", "--", "mambaicl", "pyproject.toml"):
        print(f"warning: {rel} is pinned to HEAD, but the package has uncommitted changes: commit them first, "
              f"then drop {stem} from {PINS.relative_to(ROOT)} and regenerate", file=sys.stderr)
    return _git("rev-parse", "HEAD")


def _install_cell(stem: str, commit: str) -> str:
    repo = CONFIG["repository"]["url"].rstrip("/")
    extras = EXTRAS.get(stem, ())
    name = f"mambaicl[{','.join(extras)}]" if extras else "mambaicl"
    spec = f"{name} @ git+{repo}@{commit}" if commit else f"{name} @ git+{repo}"
    needed = ["mambaicl", *(EXTRA_MODULES[e] for e in extras)]
    what = "the book's package `mambaicl`" + (f" with its {', '.join(extras)} extra" if extras else "")
    return "\n".join([
        f"# Setup: installs {what} at commit {commit[:12] or 'main'}, the code that produced the outputs",
        "# stored below, when it is missing (Colab, Binder, a fresh environment). It brings PyTorch (CPU),",
        "# NumPy, Numba and Matplotlib if they are not there: about half a minute on Colab, a few minutes",
        "# in a bare environment. Run it once; nothing is installed when the package is already present.",
        "import importlib.util",
        "import subprocess",
        "import sys",
        "",
        f"NEEDED = {needed!r}  # modules this chapter imports beyond the standard scientific stack",
        "if any(importlib.util.find_spec(m) is None for m in NEEDED):",
        f"    print('Installing {name} (commit {commit[:12] or 'main'}) ...', flush=True)",
        f"    subprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", {spec!r}])",
        "    print('done.')",
    ])


def _opening(stem: str) -> dict:
    """``{"run": ..., "gpu": ...}`` from the chapter's opening admonition (its "Run time" sentence)."""
    text = _sources().get(stem, "")
    m = re.search(r"\*\*Run time\*\*\s+(.*?)(?:\n\s*\n|\n:{3,})", text, re.S)
    run = " ".join(m[1].split()) if m else ""
    return {"run": run, "gpu": bool(re.search(r"\bGPU\b", run))}


def _paper_url() -> str:
    bib = (BOOK / "references.bib").read_text(encoding="utf-8")
    m = re.search(r"@\w+\{li2025mamba,.*?arXiv:(\d{4}\.\d{4,5})", bib, re.S)
    return f"https://arxiv.org/abs/{m[1]}" if m else ""


def _first_cell(stem: str, number, title: str, commit: str) -> str:
    repo = CONFIG["repository"]["url"].rstrip("/")
    chapter = f"Chapter {number}, *{title}*" if number else f"*{title}*"
    opening = _opening(stem)
    run = opening["run"] or "see the chapter's opening box"
    paper = _paper_url()
    lines = [
        f"# {chapter}",
        "",
        f"A chapter of the book *{CONFIG['title']}* ([repository and rendered book]({repo})), which teaches and "
        f"reproduces the paper *Can Mamba Learn In Context with Outliers? A Theoretical Generalization Analysis* "
        f"(Li et al. 2025{', [arXiv](' + paper + ')' if paper else ''}).",
        "",
        f"**Run time:** {run[0].lower() + run[1:] if run else run} A free CPU runtime is enough"
        + ("." if opening["gpu"] else "; no GPU is needed."),
        "",
        "**How to use this notebook.** Run the setup cell first: it installs the book's package at the commit "
        f"(`{commit[:12]}`) that produced the outputs stored here. Then run the cells in order. The numbers in "
        "the text are those of the stored run; running the cells recomputes the outputs. Figures are followed "
        "by their captions; references to other chapters name them (the rendered book has the links).",
    ]
    return "\n".join(lines)


def render(stem: str, refs: dict | None = None, cites: dict | None = None, pins: dict | None = None) -> str:
    """The reader notebook of chapter ``stem`` as JSON text (what is written to reader/book)."""
    refs = targets() if refs is None else refs
    cites = citations() if cites is None else cites
    path = BOOK / f"{stem}.ipynb"
    raw = path.read_bytes()
    nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    values = glued(path)
    digest = hashlib.sha256(raw).hexdigest()[:12]
    commit = pin(stem, digest, pins)
    cells = []
    installed = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(rewrite(cell.source, values, refs, cites)))
        elif not installed and "pip" in cell.source and "install" in cell.source:
            installed = True  # the chapter's own install cell: replaced by the setup cell at the top
        else:
            outputs = [o for o in cell.get("outputs", []) if "scrapbook" not in o.get("metadata", {})]  # glue records
            new = nbformat.v4.new_code_cell(cell.source, outputs=outputs,
                                            execution_count=cell.get("execution_count"))
            tags = cell.metadata.get("tags", [])
            if tags:
                new.metadata["tags"] = list(tags)
            cells.append(new)
            figure = cell.metadata.get("mystnb", {}).get("figure", {})
            if figure.get("caption"):
                label = refs.get("numref:" + figure.get("name", ""), "Figure")
                caption = rewrite(" ".join(str(figure["caption"]).split()), values, refs, cites)
                cells.append(nbformat.v4.new_markdown_cell(f"**{label}.** {caption}"))
    number = chapter_numbers().get(stem)
    title = next((l.lstrip("# ").strip() for c in nb.cells if c.cell_type == "markdown"
                  for l in c.source.splitlines() if l.startswith("# ")), stem)
    first = nbformat.v4.new_markdown_cell(_first_cell(stem, number, title, commit))
    setup = nbformat.v4.new_code_cell(_install_cell(stem, commit))
    out = nbformat.v4.new_notebook(cells=[first, setup, *cells], metadata={
        "kernelspec": nb.metadata.get("kernelspec", {"display_name": "Python 3", "language": "python",
                                                      "name": "python3"}),
        "language_info": {"name": "python"},
        "mambaicl": {"source": f"book/{stem}.ipynb", "sha256": digest, "commit": commit,
                     "generator": ".ci/reader_notebooks.py"}})
    for i, c in enumerate(out.cells):
        c["id"] = f"{stem[:40]}-{i}"
    return nbformat.writes(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a reader notebook is out of date")
    args = parser.parse_args(argv)
    import json

    refs, cites, pins = targets(), citations(), _load_pins()
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    new_pins = {}
    for stem in chapters():
        digest = hashlib.sha256((BOOK / f"{stem}.ipynb").read_bytes()).hexdigest()[:12]
        new_pins[stem] = {"sha256": digest, "commit": pin(stem, digest, pins)}
        text = render(stem, refs, cites, new_pins)
        target = OUT / f"{stem}.ipynb"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(target.relative_to(ROOT))
            if not args.check:
                target.write_text(text, encoding="utf-8")
    pins_text = json.dumps(new_pins, indent=1, sort_keys=True) + "\n"
    if not PINS.exists() or PINS.read_text(encoding="utf-8") != pins_text:
        stale.append(PINS.relative_to(ROOT))
        if not args.check:
            PINS.write_text(pins_text, encoding="utf-8")
    if args.check and stale:
        print("out of date (run python .ci/reader_notebooks.py):", *map(str, stale), sep="\n  ")
        return 1
    if not args.check:
        print(f"wrote {len(stale)} of {len(chapters())} reader notebooks to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
