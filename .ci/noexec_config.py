"""Write a copy of _config.yml with notebook execution turned off.

CI runs `pytest --nbval` first, which executes every chapter and checks that the stored
outputs are what the code produces; the book is then rendered from those validated outputs
instead of executing every chapter a second time. Paths of local Sphinx extensions, which are
resolved relative to the config file, are made absolute.
"""
import sys
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
text = src.read_text()
if "execute_notebooks: cache" not in text:
    sys.exit("_config.yml no longer says 'execute_notebooks: cache'; update .ci/noexec_config.py")
dst.parent.mkdir(parents=True, exist_ok=True)
text = text.replace("execute_notebooks: cache", 'execute_notebooks: "off"')
# local extensions are found relative to the config file: point them at the repository's folder
for ext in ("book_site", "book_execute"):
    text = text.replace(f"{ext}: book/_ext/", f"{ext}: {src.resolve().parent / 'book' / '_ext'}/")
dst.write_text(text)
