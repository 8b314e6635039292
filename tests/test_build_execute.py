"""The book's first build: chapters executed in parallel before Sphinx reads them; a failure is loud.

A tiny Jupyter Book (two notebooks) with the book's own extension ``book/_ext/book_execute.py``
and the book's execution settings is built with the README's command, ``jupyter-book build DIR``:

* both notebooks are executed by the extension (not by MyST-NB while reading), cached, and a
  rebuild executes nothing;
* a cell that raises makes the command exit non-zero with a message naming the chapter, the cell
  and what to do; no page is written for it; after the fix the next build executes it again;
* a cell over the timeout fails the build the same way (the failure of the newcomer's Chapter 6);
* a build interrupted while chapters execute (Ctrl-C or SIGTERM to its process group, SIGTERM to the build alone, or
  the build killed outright) leaves no process behind, caches nothing and, when it could, says so on stderr.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("jupyter-book") is None, reason="jupyter-book is not installed")


def _notebook(path: Path, title: str, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}")] + [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)


def _book(tmp: Path, timeout: int = 60, prelude: dict | None = None, **sphinx_config) -> Path:
    """A two-chapter book using the book's extension and its `execute:` settings (timeout changed)."""
    book = tmp / "tiny"
    (book / "_ext").mkdir(parents=True)
    shutil.copy(ROOT / "book" / "_ext" / "book_execute.py", book / "_ext" / "book_execute.py")
    real = yaml.safe_load((ROOT / "_config.yml").read_text())
    execute = dict(real["execute"], timeout=timeout)
    config = {"title": "tiny", "only_build_toc_files": True, "execute": execute,
              "sphinx": {"local_extensions": {"book_execute": "_ext/"},
                         "config": {"book_execute_prelude": prelude or {}, **sphinx_config}}}
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    (book / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "intro",
                                                   "chapters": [{"file": "one"}, {"file": "two"}]}))
    (book / "intro.md").write_text("# Intro\n")
    _notebook(book / "one.ipynb", "One", "x = 21\nprint(2 * x)")
    _notebook(book / "two.ipynb", "Two", "import os\nprint('build env:', os.environ.get('MAMBAICL_BOOK_BUILD'))")
    return book


def _build(book: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["jupyter-book", "build", str(book)], capture_output=True, text=True, timeout=600)


def _page(book: Path, name: str) -> str:
    return (book / "_build" / "html" / f"{name}.html").read_text()


def test_chapters_execute_in_parallel_before_reading_and_a_rebuild_executes_nothing(tmp_path):
    book = _book(tmp_path)
    first = _build(book)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    log = first.stdout + first.stderr
    assert "[book_execute] executing 2 chapter(s)" in log
    assert "executed one.ipynb" in log and "executed two.ipynb" in log
    assert "Executing notebook using" not in log  # MyST-NB found both in the cache
    assert "42" in _page(book, "one")
    assert "build env: 1" in _page(book, "two")  # the kernel saw MAMBAICL_BOOK_BUILD=1
    again = _build(book)
    assert again.returncode == 0
    assert "nothing to execute" in again.stdout + again.stderr


def test_a_failing_cell_fails_the_build_naming_the_chapter_and_the_next_build_executes_it_again(tmp_path):
    book = _book(tmp_path)
    _notebook(book / "two.ipynb", "Two", "y = 1", "raise RuntimeError('the data folder is missing')")
    failed = _build(book)
    log = failed.stdout + failed.stderr
    assert failed.returncode != 0, log[-3000:]
    assert "chapter two.ipynb failed to execute" in log
    assert "RuntimeError" in log and "cell 2" in log and "What to do" in log
    assert not (book / "_build" / "html" / "two.html").exists()  # no page with a traceback
    _notebook(book / "two.ipynb", "Two", "y = 1", "print('fixed', y)")
    fixed = _build(book)
    log = fixed.stdout + fixed.stderr
    assert fixed.returncode == 0, log[-3000:]
    assert "executed two.ipynb" in log and "executed one.ipynb" not in log  # one.ipynb stayed cached
    assert "fixed 1" in _page(book, "two")


def test_a_chapter_waits_for_the_chapters_it_reads_after(tmp_path):
    """book_execute_after (the Mamba-1 appendix waits for the mechanism chapter, whose stored run it reads):
    the waiting chapter starts only after the other one has finished, even with a free core."""
    book = _book(tmp_path, book_execute_after={"one": ["two"]}, book_execute_workers=2)
    stamp = tmp_path / "stamps"
    stamp.mkdir()
    _notebook(book / "two.ipynb", "Two", f"import time, pathlib\ntime.sleep(3)\n"
                                        f"pathlib.Path({str(stamp)!r}, 'two').write_text(str(time.time()))")
    _notebook(book / "one.ipynb", "One", f"import time, pathlib\n"
                                        f"pathlib.Path({str(stamp)!r}, 'one').write_text(str(time.time()))\n"
                                        f"print(pathlib.Path({str(stamp)!r}, 'two').exists())")
    done = _build(book)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert float((stamp / "one").read_text()) > float((stamp / "two").read_text())
    assert "True" in _page(book, "one")


def test_a_cell_over_the_timeout_fails_the_build(tmp_path):
    book = _book(tmp_path, timeout=3)
    _notebook(book / "one.ipynb", "One", "import time\ntime.sleep(30)")
    failed = _build(book)
    log = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "chapter one.ipynb failed to execute" in log and "CellTimeoutError" in log


def test_check_build_flags_a_page_with_a_traceback(tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    (html / "ok.html").write_text("<p>fine</p>")
    log = tmp_path / "build.log"
    log.write_text("build succeeded\n")
    run = [sys.executable, str(ROOT / ".ci" / "check_build.py"), str(log), str(html)]
    assert subprocess.run(run, capture_output=True).returncode == 0
    (html / "ch06.html").write_text("<pre>Traceback (most recent call last):\n KeyboardInterrupt</pre>")
    bad = subprocess.run(run, capture_output=True, text=True)
    assert bad.returncode == 1 and "ch06.html" in bad.stderr


def test_a_prelude_runs_before_its_chapter_only_when_it_is_executed_and_its_failure_stops_the_build(tmp_path):
    """The book fills Chapter 6's embedding cache this way (book_execute_prelude in _config.yml)."""
    book = _book(tmp_path, prelude={"two": "python -c \"print('filled the cache')\""})
    first = _build(book)
    log = first.stdout + first.stderr
    assert first.returncode == 0, log[-3000:]
    assert "filled the cache" in log and log.index("filled the cache") < log.index("executed two.ipynb")
    again = _build(book)
    assert "filled the cache" not in again.stdout + again.stderr  # nothing to execute: no prelude
    failing = _book(tmp_path / "f", prelude={"one": "python -c \"import sys; sys.exit(3)\""})
    failed = _build(failing)
    assert failed.returncode != 0 and "needed by one" in failed.stdout + failed.stderr


def _processes_with(token: str) -> list[int]:
    """The live processes whose environment holds ``token`` (a build's workers and kernels inherit it)."""
    out = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and token.encode() in Path(f"/proc/{name}/environ").read_bytes():
                out.append(int(name))
        except OSError:  # gone, or not ours
            pass
    return out


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads the process table from /proc")
@pytest.mark.parametrize("sig,whom", [("SIGINT", "group"), ("SIGTERM", "group"), ("SIGTERM", "build"),
                                      ("SIGKILL", "build")])
def test_an_interrupted_build_leaves_no_process_and_caches_nothing(tmp_path, sig, whom):
    """Ctrl-C is SIGINT to the build's process group; ``timeout`` and CI limits send SIGTERM; a build can be killed."""
    book = _book(tmp_path, timeout=300, book_execute_workers=2)
    marks = tmp_path / "started"
    marks.mkdir()
    for name in ("one", "two"):  # each kernel says it started, then sleeps far longer than the test waits
        _notebook(book / f"{name}.ipynb", name, f"import os, time\nopen({str(marks / name)!r}, 'w').write('x')\n"
                  "time.sleep(300)")
    token = f"book-build-test-{uuid.uuid4()}"
    logs = [open(tmp_path / n, "w+") for n in ("out", "err")]
    build = subprocess.Popen(["jupyter-book", "build", str(book)], stdout=logs[0], stderr=logs[1],
                             env=dict(os.environ, BOOK_BUILD_TEST_TOKEN=token), start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(marks.iterdir())) < 2:  # both chapters executing, in two kernels
            assert build.poll() is None and time.monotonic() < deadline, (tmp_path / "err").read_text()[-3000:]
            time.sleep(0.2)
        assert len(_processes_with(token)) >= 5  # the build, two workers, two kernels
        t0 = time.monotonic()
        (os.killpg if whom == "group" else os.kill)(build.pid, getattr(signal, sig))
        build.wait(timeout=30)
        while _processes_with(token) and time.monotonic() - t0 < 15:
            time.sleep(0.1)
        left = _processes_with(token)
        survivors = [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")[:200] for p in left]
        stopped = time.monotonic() - t0
    finally:
        for pid in _processes_with(token):  # never leave a failed test's processes running
            os.kill(pid, signal.SIGKILL)
    err = (tmp_path / "err").read_text()
    assert not left, f"{len(left)} process(es) of the build survived {sig} to the {whom}: {survivors}"
    assert stopped < 10, stopped
    assert build.returncode == -getattr(signal, sig)  # it ends by the signal, as an interrupted program does
    if sig != "SIGKILL":
        assert f"[book_execute] interrupted by {sig}: stopped 2 worker(s)" in err, err[-3000:]
        assert "0 chapter(s) executed and cached, 2 not cached" in err
    from jupyter_cache import get_cache

    assert get_cache(str(book / "_build" / ".jupyter_cache")).list_cache_records() == []  # nothing half-done
