"""Sphinx extension of the book: the site behaves offline, offers its downloads, and reads in both colour modes.

* MathJax is included on *every* page (``html assets policy = always``), so math in generated
  pages (e.g. sphinx-proof's index of theorems) is typeset too.
* The theme's colour mode defaults to ``light`` (otherwise pydata-sphinx-theme logs "Got invalid
  theme mode" on a reader's first visit).
* Script tags added twice are dropped (sphinx-thebe adds its configuration script on two paths,
  which redeclares ``const THEBE_JS_URL`` and raises a JavaScript error on every page).
* Downloads (written into ``_downloads/`` of the HTML output when the build finishes):
  every chapter's MyST text (``book/myst/<chapter>.md``, its jupytext pair) next to the
  ``.ipynb`` the theme already offers, in each chapter's download menu; one archive of all
  notebooks (:data:`ARCHIVE`, with a README giving the ``pip install`` line for ``mambaicl``);
  and the PDF of the whole book (:data:`PDF`, printed by ``.ci/build-pdf``), linked from the
  navigation bar of every page and from the intro.
* ``book_site.css``: the book's figures and tables keep a light card in dark mode.
* The role ``{verdict}`key``` writes the verdict of row ``key`` of ``book/results.json`` (in italics), so that
  the prose pages (the intro, the conclusion) state a verdict only as the registry computed it; an unknown key
  stops the build (``tests/test_prose_verdicts.py`` checks the pages' sources too).
"""
from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from docutils import nodes

#: Where the downloads live in the HTML output (links from every page are relative to its root).
DOWNLOADS = "_downloads"
PDF = f"{DOWNLOADS}/book.pdf"
ARCHIVE = f"{DOWNLOADS}/mambaicl-notebooks.zip"
MYST = f"{DOWNLOADS}/myst"
#: Where ``.ci/build-pdf`` writes the PDF (relative to the book's root); copied into the site.
PDF_BUILD = Path("_build") / "pdf" / "book.pdf"
_STATIC = Path(__file__).resolve().parent / "static"


#: The rows whose verdicts the ``verdict`` role writes (relative to the book's root)
RESULTS = Path("book") / "results.json"


def _verdicts(app) -> dict:
    cached = getattr(app, "_book_verdicts", None)
    if cached is None:
        rows = json.loads((Path(app.srcdir) / RESULTS).read_text("utf-8"))
        cached = app._book_verdicts = {r["key"]: r["verdict"] for r in rows}
    return cached


def verdict_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{verdict}`fig2-mamba``` -> *contradicted*: the row's verdict, read from ``book/results.json``."""
    env = inliner.document.settings.env
    key = text.strip()
    verdicts = _verdicts(env.app)
    env.note_dependency(str(Path(env.app.srcdir) / RESULTS))
    if key not in verdicts:
        msg = inliner.reporter.error(f"verdict: no row {key!r} in {RESULTS}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    return [nodes.emphasis(rawtext, verdicts[key], classes=["verdict"])], []


def _theme_defaults(app, pagename, templatename, context, doctree) -> None:
    if not context.get("default_mode"):
        context["default_mode"] = "light"


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for s in scripts:
        # an inline script is registered once with filename None and once with "": the same script
        key = (getattr(s, "filename", str(s)) or "", tuple(sorted((getattr(s, "attributes", {}) or {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(s)
    context["script_files"] = unique


def _myst_pair(app, docname: str) -> Path | None:
    """``book/myst/<stem>.md`` when ``docname`` is a notebook with a jupytext MyST pair."""
    source = Path(app.env.doc2path(docname))
    if source.suffix != ".ipynb":
        return None
    pair = source.parent / "myst" / f"{source.stem}.md"
    return pair if pair.exists() else None


def _download_buttons(app, pagename, templatename, context, doctree) -> None:
    """Add the chapter's ``.md`` to its download menu, and the whole book's PDF and notebooks."""
    buttons = context.get("header_buttons")
    if buttons is None or app.builder.name != "html":
        return
    pathto = context["pathto"]
    group = next((b for b in buttons if b.get("label") == "download-buttons"), None)
    if group is not None:
        items = group["buttons"]
        pair = _myst_pair(app, pagename) if pagename in app.env.all_docs else None
        if pair is not None:
            at = 1 + max((i for i, b in enumerate(items) if b.get("text") == ".ipynb"), default=-1)
            items.insert(at, {"type": "link", "url": pathto(f"{MYST}/{pair.name}", 1), "text": ".md",
                              "tooltip": "Download the chapter's MyST Markdown (its jupytext pair)",
                              "icon": "fas fa-file-lines", "label": "download-myst-button"})
        items += [
            {"type": "link", "url": pathto(PDF, 1), "text": "book (.pdf)", "tooltip": "The whole book as one PDF",
             "icon": "fas fa-book", "label": "download-book-pdf-button"},
            {"type": "link", "url": pathto(ARCHIVE, 1), "text": "notebooks (.zip)",
             "tooltip": "All chapters' notebooks in one archive", "icon": "fas fa-file-zipper",
             "label": "download-notebooks-button"},
        ]
    # the whole book's PDF, one click from the navigation bar of every page
    at = buttons.index(group) if group is not None else len(buttons)
    buttons.insert(at, {"type": "link", "url": pathto(PDF, 1), "tooltip": "The whole book as a PDF",
                        "icon": "fas fa-file-pdf", "label": "book-pdf-button"})


def _readme(app, notebooks: list[Path]) -> str:
    repo = (app.config.html_theme_options or {}).get("repository_url") or "https://github.com/mambaicl/mambaicl"
    pkg = f"git+{repo.rstrip('/')}"  # as the chapters' own install cell says
    lines = [
        f"# The notebooks of \"{app.config.html_title or app.config.project}\"",
        "",
        "Every chapter of the book as a Jupyter notebook, with the outputs the book shows: the reader's",
        "copy, whose text has the computed numbers written in and references as plain text",
        "(`myst/` holds the chapters' MyST Markdown sources, their jupytext pairs).",
        "",
        "## Install",
        "",
        "The notebooks call the `mambaicl` package. Install it, with the live explorer's widgets",
        "and Jupyter, then open a notebook:",
        "",
        "```bash",
        f'pip install "mambaicl[widgets] @ {pkg}" jupyterlab',
        "jupyter lab",
        "```",
        "",
        "Chapter 6 (SST-2) also needs the sentence encoder and the data loader:",
        "",
        "```bash",
        f'pip install "mambaicl[sst2,widgets] @ {pkg}"',
        "```",
        "",
        "The first code cell of every notebook installs `mambaicl` by itself when it is missing",
        "(e.g. on Colab). A CPU is enough; a GPU is used when present.",
        "",
        "## Contents",
        "",
        *[f"- `{nb.name}`" for nb in notebooks],
        "",
    ]
    return "\n".join(lines)


def _write_downloads(app, exception) -> None:
    if exception is not None or app.builder.name != "html":
        return
    out = Path(app.outdir)
    # Sphinx 7.4 does not overwrite a static file already in the output: keep the style current
    for css in _STATIC.glob("*.css"):
        shutil.copyfile(css, out / "_static" / css.name)
    docs = [d for d in app.env.found_docs if Path(app.env.doc2path(d)).suffix == ".ipynb"]
    notebooks = sorted(Path(app.env.doc2path(d)) for d in docs)
    pairs = {d: _myst_pair(app, d) for d in docs}
    (out / MYST).mkdir(parents=True, exist_ok=True)
    for pair in filter(None, pairs.values()):
        shutil.copyfile(pair, out / MYST / pair.name)
    # a deterministic archive: fixed order and dates, so a rebuild writes the same bytes
    folder = "mambaicl-notebooks"
    with zipfile.ZipFile(out / ARCHIVE, "w", compression=zipfile.ZIP_DEFLATED) as z:
        def add(name: str, data: bytes) -> None:
            info = zipfile.ZipInfo(f"{folder}/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            z.writestr(info, data)

        add("README.md", _readme(app, notebooks).encode())
        # each chapter's reader notebook (.ci/reader_notebooks.py) where the launch buttons find it,
        # <path_to_book>/<docname>.ipynb; the executed chapter itself otherwise
        reader = (app.config.html_theme_options or {}).get("path_to_docs", "").strip("/")
        for d, nb in zip(sorted(docs, key=lambda d: Path(app.env.doc2path(d))), notebooks):
            copy = Path(app.srcdir) / reader / f"{d}.ipynb"
            add(nb.name, (copy if reader and copy.is_file() else nb).read_bytes())
        for pair in sorted(filter(None, pairs.values())):
            add(f"myst/{pair.name}", pair.read_bytes())
    pdf = Path(app.srcdir) / PDF_BUILD
    if pdf.exists():  # printed by .ci/build-pdf; a rebuild of the HTML keeps it linked
        shutil.copyfile(pdf, out / PDF)


def _static_path(app, config) -> None:
    config.html_static_path = [*config.html_static_path, str(_STATIC)]


def setup(app):
    app.set_html_assets_policy("always")
    app.add_role("verdict", verdict_role)
    app.connect("config-inited", _static_path)
    app.add_css_file("book_site.css")
    app.connect("html-page-context", _theme_defaults)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _download_buttons, priority=600)  # after sphinx-book-theme's (501)
    app.connect("build-finished", _write_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
