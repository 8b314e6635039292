"""The built site as a reader meets it: every page opened in headless Chromium with the network blocked.

For each HTML page of ``_build/html`` the test fails when the page logs a JavaScript error, shows
raw TeX delimiters outside code (math not typeset: ``\\(``, ``\\[``, ``$$``), has an image that
fails to load, has an image in a chapter that is not in a numbered, captioned figure, or links to a
page or anchor of the site that does not exist. It saves a screenshot of each page under
``_build/screenshots/``.

It needs the built site (``jupyter-book build .``; CI builds it before running the tests), the
Python package ``playwright`` and a Chromium (the system one: ``apt-get install chromium``; or set
``MAMBAICL_CHROMIUM``); it is skipped, saying which is missing, otherwise. The browser is driven
through Playwright with the system executable: nothing is downloaded.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                  "--no-first-run", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-extensions"]


def _chromium() -> str | None:
    for candidate in (os.environ.get("MAMBAICL_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      shutil.which("google-chrome")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _pages() -> list[Path]:
    skip = {"genindex.html", "search.html"}
    return sorted(p for p in SITE.rglob("*.html")
                  if "_static" not in p.parts and "_sources" not in p.parts and p.name not in skip)


@functools.lru_cache(maxsize=None)
def _ids(page: Path) -> frozenset:
    return frozenset(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8", errors="replace")))


@pytest.fixture(scope="module")
def server():
    if not (SITE / "index.html").exists():
        pytest.skip("no built site in _build/html: run `jupyter-book build .` first (CI builds it before the tests)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api", reason="the Python package playwright is not installed "
                                     "(pip install -r requirements.txt)")
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium found: install the system package (apt-get install chromium) or set MAMBAICL_CHROMIUM")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield b
        b.close()


RAW_TEX_JS = r"""() => {
  const root = document.querySelector('main') || document.body;
  const clone = root.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container, .highlight, textarea, .MathJax')
       .forEach(e => e.remove());
  const text = clone.textContent;
  const found = [];
  for (const d of ['\\(', '\\[', '$$']) { const i = text.indexOf(d); if (i >= 0) found.push(text.slice(Math.max(0, i - 30), i + 40)); }
  return found;
}"""

MATH_JS = r"""() => {
  const nodes = Array.from(document.querySelectorAll('span.math, div.math'));
  const bad = nodes.filter(n => !n.querySelector('mjx-container')).map(n => n.textContent.slice(0, 60));
  return {total: nodes.length, untypeset: bad};
}"""

IMAGES_JS = r"""() => Array.from(document.querySelectorAll('article img')).map(img => ({
  src: img.getAttribute('src'),
  ok: img.complete && img.naturalWidth > 0,
  captioned: !!(img.closest('figure') && img.closest('figure').querySelector('figcaption .caption-number')),
}))"""


def _redirect_target(page_path: Path) -> str | None:
    m = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', page_path.read_text(encoding="utf-8"), re.I)
    return m.group(1) if m else None


def _check_page(browser, server: str, page_path: Path) -> list[str]:
    rel = page_path.relative_to(SITE).as_posix()
    target = _redirect_target(page_path)
    if target is not None:  # the root index.html only redirects to the intro page
        return _check_link(rel, page_path, target)
    url = urljoin(server, rel)
    problems, blocked = [], []
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(r):
        if r.request.url.startswith(server) or r.request.url.startswith(("data:", "blob:")):
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda msg: msg.type == "error" and problems.append(f"{rel}: console error: {msg.text}"))
    page.on("pageerror", lambda exc: problems.append(f"{rel}: JavaScript error: {exc}"))
    page.goto(url, wait_until="load")
    page.wait_for_function("() => !window.MathJax || (window.MathJax.startup && window.MathJax.startup.promise)",
                           timeout=30_000)
    page.evaluate("() => window.MathJax ? window.MathJax.startup.promise : null")
    math = page.evaluate(MATH_JS)
    if math["untypeset"]:
        problems.append(f"{rel}: {len(math['untypeset'])} of {math['total']} math elements not typeset, "
                        f"e.g. {math['untypeset'][0]!r}")
    for snippet in page.evaluate(RAW_TEX_JS):
        problems.append(f"{rel}: raw TeX delimiter outside code: ...{snippet}...")
    chapter = rel.startswith("book/") and (Path(rel).stem.startswith(("ch", "appendix")))
    for img in page.evaluate(IMAGES_JS):
        if not img["ok"]:
            problems.append(f"{rel}: image does not load: {img['src']}")
        if chapter and not img["captioned"]:
            problems.append(f"{rel}: image not in a numbered, captioned figure: {img['src'][:80]}")
    for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))"):
        problems += _check_link(rel, page_path, href)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / (rel.replace("/", "__").replace(".html", ".png"))))
    context.close()
    return problems


def _check_link(rel: str, page_path: Path, href: str) -> list[str]:
    parsed = urlparse(href)
    if parsed.scheme in ("http", "https", "mailto", "javascript", "data") or href.startswith("//") or not href:
        return []
    target = page_path if not parsed.path else (page_path.parent / unquote(parsed.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    if not target.exists():
        return [f"{rel}: link to a missing page: {href}"]
    if parsed.fragment and target.suffix == ".html" and unquote(parsed.fragment) not in _ids(target):
        return [f"{rel}: link to a missing anchor: {href}"]
    return []


def test_every_page_renders_offline(browser, server):
    pages = _pages()
    assert any(p.name == "intro.html" for p in pages), "the site has no intro page"
    problems = []
    for page_path in pages:
        problems += _check_page(browser, server, page_path)
    assert not problems, "\n".join(problems)
    rendered = [p for p in pages if _redirect_target(p) is None]  # redirects are followed, not shot
    shots = {p.name for p in SHOTS.glob("*.png")}
    missing = [p for p in rendered if p.relative_to(SITE).as_posix().replace("/", "__").replace(".html", ".png")
               not in shots]
    assert not missing, f"no screenshot of {missing}"
