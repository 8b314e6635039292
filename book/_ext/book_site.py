"""Sphinx extension of the book: the site behaves offline and without console errors.

* MathJax is included on *every* page (``html assets policy = always``), so math in generated
  pages (e.g. sphinx-proof's index of theorems) is typeset too.
* The theme's colour mode defaults to ``light`` (otherwise pydata-sphinx-theme logs "Got invalid
  theme mode" on a reader's first visit).
* Script tags added twice are dropped (sphinx-thebe adds its configuration script on two paths,
  which redeclares ``const THEBE_JS_URL`` and raises a JavaScript error on every page).
"""
from __future__ import annotations


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


def setup(app):
    app.set_html_assets_policy("always")
    app.connect("html-page-context", _theme_defaults)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
