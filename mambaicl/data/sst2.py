"""SST-2 (GLUE) for the real-data experiment of §4.2: load the two splits, validate every row.

Glossary (code name -> paper / GLUE name):

==================  ===============================================================
``split``           ``"train"`` (67,349 rows) or ``"validation"`` (GLUE's ``dev.tsv``, 872 rows)
``row``             ``(sentence, label)``; ``label`` 1 = positive, 0 = negative sentiment
``path``            a GLUE-format SST-2 directory holding ``train.tsv`` and ``dev.tsv``
``ENV_VAR``         ``MAMBAICL_SST2_DIR``, read when ``path`` is not given
==================  ===============================================================

Where the data comes from, in order: ``path``; the directory named by ``MAMBAICL_SST2_DIR``;
the Hugging Face hub (``datasets.load_dataset("glue", "sst2")``). When none works the error
says exactly how to provide the data. The data set is Socher et al. (2013) as distributed in
GLUE (Wang et al., 2018); the paper cites it as [63] in §4.2. Nothing here copies the data.

GLUE's ``train.tsv`` holds *phrases* of parse trees, not independent sentences: most rows are
word-contiguous pieces of longer rows ("a charming film" inside "it 's a charming film ."). A
split of ``train.tsv`` into training and test sentences is only held out when no test sentence
shares a phrase with a training sentence; :func:`maximal_phrases` and :func:`inside_any` give
what such a split needs.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Tuple

from ..checks import ConfigError

__all__ = ["ENV_VAR", "SPLIT_FILES", "HEADER", "Row", "load_sst2", "read_glue_tsv", "sub_phrases", "maximal_phrases",
           "inside_any"]

ENV_VAR = "MAMBAICL_SST2_DIR"
SPLIT_FILES = {"train": "train.tsv", "validation": "dev.tsv"}  # hub split name -> GLUE file
HEADER = ("sentence", "label")
Row = Tuple[str, int]

_HOW_TO = (
    "Provide SST-2 in one of two ways: (1) download the GLUE SST-2 folder (train.tsv and dev.tsv, "
    "header 'sentence<TAB>label'; e.g. from https://dl.fbaipublicfiles.com/glue/data/SST-2.zip) "
    f"and pass its path to load_sst2(path=...) or set the environment variable {ENV_VAR} to it; "
    "or (2) go online so that `datasets.load_dataset('glue', 'sst2')` can download it "
    "(unset HF_DATASETS_OFFLINE / HF_HUB_OFFLINE)."
)


def read_glue_tsv(file: str | os.PathLike) -> List[Row]:
    """Rows ``(sentence, label)`` of one GLUE SST-2 file; every line is validated.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the header is not ``sentence<TAB>label``, or a row (named by file and line
            number) does not have exactly two tab-separated fields, has an empty sentence, or a
            label other than 0 / 1.
    """
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"SST-2 file not found: {file}. {_HOW_TO}")
    with open(file, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if not lines or tuple(lines[0].rstrip("\r").split("\t")) != HEADER:
        got = lines[0][:80] if lines else "<empty file>"
        raise ConfigError(f"file {file}, line 1: expected the header 'sentence<TAB>label'; got {got!r}")
    return [_parse_row(file, n, line.rstrip("\r")) for n, line in enumerate(lines[1:], start=2)]


def _parse_row(file: Path, n: int, line: str) -> Row:
    """One data line -> ``(sentence, label)``, or a ``ValueError`` naming ``file`` and line ``n``."""
    fields = line.split("\t")
    if len(fields) != 2:
        raise ConfigError(f"file {file}, line {n}: expected 2 tab-separated fields (sentence, label); "
                         f"got {len(fields)}: {line[:80]!r}")
    sentence, label = fields[0].strip(), fields[1].strip()
    if not sentence:
        raise ConfigError(f"file {file}, line {n}: empty sentence")
    if label not in ("0", "1"):
        raise ConfigError(f"file {file}, line {n}: label must be 0 or 1; got {label!r}")
    return sentence, int(label)


def _load_dir(path: Path) -> Dict[str, List[Row]]:
    """Both splits from a GLUE-format directory."""
    if not path.is_dir():
        raise FileNotFoundError(f"SST-2 directory not found: {path}. {_HOW_TO}")
    return {split: read_glue_tsv(path / name) for split, name in SPLIT_FILES.items()}


def _load_hub() -> Dict[str, List[Row]]:
    """Both splits from the Hugging Face hub (``glue``/``sst2``); raises on any failure."""
    from datasets import load_dataset  # imported lazily: slow, and only needed online

    ds = load_dataset("glue", "sst2")
    return {split: [(str(s).strip(), int(y)) for s, y in zip(ds[split]["sentence"], ds[split]["label"])]
            for split in SPLIT_FILES}


def load_sst2(path: str | os.PathLike | None = None) -> Dict[str, List[Row]]:
    """SST-2 as ``{"train": rows, "validation": rows}``, each row ``(sentence, label)``.

    Args:
        path: a GLUE SST-2 directory (``train.tsv``, ``dev.tsv``). Default: the directory in the
            environment variable ``MAMBAICL_SST2_DIR``; when that is unset too, the Hugging Face
            hub. The dataset of §4.2 of Li et al. (2025).

    Raises:
        FileNotFoundError: ``path`` (or ``MAMBAICL_SST2_DIR``) is not a directory or lacks a
            file; or neither a directory nor the hub is available (the message says how to
            provide the data).
        ValueError: a malformed file (see :func:`read_glue_tsv`).
    """
    if path is None and os.environ.get(ENV_VAR):
        path = os.environ[ENV_VAR]
    if path is not None:
        return _load_dir(Path(path).expanduser())
    try:
        return _load_hub()
    except Exception as exc:  # no `datasets`, no network, hub offline: all end here
        raise FileNotFoundError(
            f"SST-2 not found: no path given, {ENV_VAR} is unset, and the Hugging Face hub failed "
            f"({type(exc).__name__}: {str(exc)[:200]}). {_HOW_TO}"
        ) from exc


def _words(sentence: str) -> tuple:
    return tuple(sentence.split())


def sub_phrases(sentence: str, proper: bool = True) -> set:
    """Every word-contiguous piece of ``sentence`` as a tuple of words (without the whole when ``proper``)."""
    w = _words(sentence)
    n = len(w)
    return {w[i:j] for i in range(n) for j in range(i + 1, n + 1) if not (proper and j - i == n)}


def maximal_phrases(sentences) -> list:
    """Indices of the ``sentences`` that are not a proper word-contiguous piece of another one.

    On SST-2's ``train.tsv`` these are (about) the full sentences whose parse-tree phrases make
    up the other rows.
    """
    pieces = _pieces(set(sentences), proper=True)
    return [i for i, s in enumerate(sentences) if _words(s) not in pieces]


def inside_any(sentences, containers) -> list:
    """For each of ``sentences``: is it a word-contiguous piece of (or equal to) one of ``containers``?"""
    pieces = _pieces(set(containers), proper=False)
    return [_words(s) in pieces for s in sentences]


def _pieces(sentences, proper: bool) -> set:
    """The union of :func:`sub_phrases` over ``sentences``, built in one pass."""
    out = set()
    for s in sentences:
        w = _words(s)
        n = len(w)
        out.update(w[i:j] for i in range(n) for j in range(i + 1, n + 1 - (proper and i == 0)))
    return out
