"""nbval, statistically: the check of a chapter cell whose numbers come from a chaotic training.

The book's stored outputs are validated at two levels (conventions page, "Two levels of
reproducibility"):

* **bit for bit** — every cell by default: nbval compares the fresh output with the stored one as
  text (after ``tests/nbval_sanitize.cfg``). Derivations, data, statistics and one-layer float64
  runs print only what every CPU reproduces (:mod:`mambaicl.reproducible`).
* **statistically** — a cell whose first lines are ``# NBVAL_STATISTICAL`` and a ``# (reason: ...)``
  comment. Its numbers come from trainings whose per-seed results depend on the last bits of the
  CPU's arithmetic (early-stopped deep stacks, SST-2): the cell still runs, its asserts still
  hold, and this plugin compares its fresh outputs with the stored ones by :func:`compare_texts`:

  1. everything that is not a number (labels, verdicts, "holds"/"fails", units) is identical, and
     so is the number of outputs and of numbers in each;
  2. a **measurement with its uncertainty** — ``m ± s`` (``s`` one standard error, the book's
     ``mean_se`` form), ``m [lo, hi]`` (a 95 % interval, or a median and a range) or a registry
     record (JSON with ``mean``, ``low``, ``high``, ``n_seeds``) — is *within tolerance* when the
     fresh ``m`` lies within :data:`K_SE` standard errors of the difference between the two runs,
     ``sqrt(se_stored² + se_fresh²)``, of the stored ``m`` (for an interval, a standard error is its
     half-width / 1.96, the normal quantile: narrower than a t interval's, so stricter), and so does
     each fresh bound of the uncertainty with respect to its stored value, and the fresh standard
     error is at most :data:`SPREAD_GROWTH` times the stored one (so added noise cannot excuse a
     move); the tolerance is never
     below :data:`FLOOR_UNITS` units of the last printed digit (a value printed as 0.000 ± 0.000
     may move to 0.002);
  3. a **count of seeds** written ``k of n`` or ``k/n`` keeps ``n`` and moves ``k`` by at most
     :data:`K_SE` binomial standard deviations ``sqrt(k (n - k) / n)`` (never needing to be closer
     than :data:`FLOOR_UNITS`);
  4. a **bare number** (a mean printed without its uncertainty, a setting, a seed number) moves by
     at most :data:`BARE_REL` of its stored value or one unit of its last printed digit, whichever
     is larger: settings and seed numbers do not move at all, so this only admits
     the small drift of a mean over seeds; a step count that doubles (250 -> 500) does not pass;
  5. a registry record's per-seed ``values`` keep their count; the values themselves are the
     chaotic part and are not compared one by one (their mean and interval are, by rule 2); its
     count of failing seeds follows rule 3; its tail's median and quartiles, quantiles of the same
     per-seed values, follow rule 2 with the record's own standard error, and the tail's
     Clopper-Pearson interval, a function of the failing count, is not compared again; what is derived from the mean and interval alone
     (:data:`DERIVED_KEYS`: how many seeds would decide an undecided part, and whether the part holds, which its
     interval decides against the declared criterion) is not compared again.

  6. **verdict words** a cell derives from its numbers by a fixed threshold ("holds" / "does not hold",
     an interval that "contains" or "excludes" 0) may flip at a knife edge when the numbers move
     within tolerance. A cell lists such alternatives in a comment line ``# (verdict words: A | B;
     C | D)``: the members of a group are read as one word in both texts before rule 1, so only they
     may differ, and the numbers they were derived from are still checked by rules 2-4.

  ``nan`` equals ``nan``. Images and widget views are skipped, as nbval skips them.

The tolerance is declared once, here (:data:`K_SE`, :data:`FLOOR_UNITS`, :data:`BARE_REL`), and stated on the
conventions page. ``tests/test_nbval_statistical.py`` shows that moving a stored measurement
outside it fails the check.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

MARKER = "NBVAL_STATISTICAL"
K_SE = 3.0        # a fresh measurement lies within three standard errors (of the two runs' difference) of the stored
FLOOR_UNITS = 2   # ... and never needs to be closer than two units of its last printed digit
BARE_REL = 0.05   # a bare number of a statistical cell moves by at most 5 % (or one unit of its last digit)
DERIVED_KEYS = ("seeds_to_decide", "holds", "p_fail", "p_holm", "decides_toward", "n_pos", "n_neg")  # record fields computed from the mean and interval: not compared twice
SPREAD_GROWTH = 4.0  # a fresh standard error may not exceed four times the stored one (noise cannot excuse a move)
Z95 = 1.96        # an interval's half-width / Z95 = its standard error (a lower bound for a t interval)
SKIP_MIMES = ("image/", "application/vnd.jupyter.widget-view+json")

_NUM = r"[-+−]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf"
_NUMBER = re.compile(rf"(?<![\w.])(?:{_NUM})(?![\w])")


_WORDS = re.compile(r"^#\s*\(verdict words:\s*(.+)\)\s*$", re.M)


def verdict_words(source: str) -> list[list[str]]:
    """The alternative groups a cell declares (rule 6): ``# (verdict words: A | B; C | D)`` -> ``[[A, B], [C, D]]``."""
    groups = []
    for line in _WORDS.findall(source):
        groups += [[w.strip() for w in g.split("|") if w.strip()] for g in line.split(";")]
    return [g for g in groups if len(g) > 1]


def _canonical(text: str, groups) -> str:
    """``text`` with every member of a declared group replaced by the group's one token (longest members first)."""
    for i, group in enumerate(groups):
        for word in sorted(group, key=len, reverse=True):
            text = text.replace(word, f"\x00verdict{i}\x00")
    return text


class StatisticalMismatch(AssertionError):
    """A statistically checked output moved beyond its declared tolerance (the message says where)."""


@dataclass
class _Num:
    text: str

    @property
    def value(self) -> float:
        return float(self.text.replace("−", "-").replace(",", ""))

    @property
    def unit(self) -> float:
        """One unit of the last printed digit."""
        mant = self.text.replace("−", "-").replace(",", "").lower().lstrip("+-")
        exp = 0
        if "e" in mant:
            mant, e = mant.split("e")
            exp = int(e)
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        return 10.0 ** (exp - decimals)


def is_statistical(source: str) -> bool:
    """True when a cell's source carries the ``# NBVAL_STATISTICAL`` marker (a comment line of its own)."""
    return any(line.strip().lstrip("#").strip() == MARKER for line in source.splitlines()
               if line.strip().startswith("#"))


def _split(text: str) -> tuple[list[str], list[_Num]]:
    """The text around the numbers (len = numbers + 1) and the numbers."""
    parts, nums, last = [], [], 0
    for m in _NUMBER.finditer(text):
        parts.append(text[last:m.start()])
        nums.append(_Num(m.group()))
        last = m.end()
    parts.append(text[last:])
    return parts, nums


def _roles(parts: list[str], nums_text: list[str]) -> list[tuple]:
    """Group the numbers: ``("pm", m, s)`` for m ± s, ``("ci", m, lo, hi)`` for m [lo, hi], ``("iv", lo, hi)``
    for an interval [lo, hi] alone, ``("count", k, n)`` for "k of n" or "k/n" seeds, else ``("bare", i)``.
    ``parts[i]`` is the text before number ``i``."""
    n = len(nums_text)

    def between(i):  # the text between number i and number i + 1 (or after the last)
        return parts[i + 1] if i + 1 < len(parts) else ""

    def _is_count(i, j):  # "k of n" / "k/n": two plain integers, k <= n
        a, b = nums_text[i], nums_text[j]
        return a.isdigit() and b.isdigit() and int(a) <= int(b)

    def interval_at(i):  # numbers i, i + 1 written as "[lo, hi]"
        return (i + 1 < n and parts[i].rstrip().endswith("[") and between(i).strip() == ","
                and between(i + 1).lstrip().startswith("]"))

    roles, i = [], 0
    while i < n:
        if i + 1 < n and between(i).strip() in ("of", "/") and _is_count(i, i + 1):
            roles.append(("count", i, i + 1))
            i += 2
        elif i + 1 < n and between(i).strip() in ("±", "+/-", "+-"):
            roles.append(("pm", i, i + 1))
            i += 2
        elif i + 2 < n and between(i).strip() == "[" and interval_at(i + 1):
            roles.append(("ci", i, i + 1, i + 2))
            i += 3
        elif interval_at(i):
            roles.append(("iv", i, i + 1))
            i += 2
        else:
            roles.append(("bare", i))
            i += 1
    return roles


def _close(fresh: float, stored: float, se: float, unit: float) -> bool:
    if math.isnan(stored) or math.isnan(fresh):
        return math.isnan(stored) and math.isnan(fresh)
    if math.isinf(stored) or math.isinf(fresh):
        return fresh == stored
    tol = max(K_SE * se, FLOOR_UNITS * unit)
    return abs(fresh - stored) <= tol * (1 + 1e-9) + 1e-300


def _record_se(rec: dict) -> float:
    """A registry record's standard error: its interval's half-width / 1.96 (0 for one value)."""
    low, high = rec.get("low"), rec.get("high")
    if (rec.get("n_seeds") or 1) > 1 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high)):
        return (high - low) / (2 * Z95)
    return 0.0


def _is_tail(rec: dict) -> bool:
    """A record's tail (:func:`mambaicl.analysis.verdicts.tail`): failing seeds ``k`` of ``n``, their
    Clopper-Pearson interval (``low``, ``high``), and the median and quartiles of the per-seed values."""
    return "failing" in rec and "n" in rec and "mean" not in rec


def _compare_record(fresh: dict, stored: dict, where: str, parent_se: float = 0.0) -> list[str]:
    errors = []
    if set(fresh) != set(stored):
        return [f"{where}: record keys differ ({sorted(set(fresh) ^ set(stored))})"]
    se_s, se_f = _record_se(stored), _record_se(fresh)
    if se_f > SPREAD_GROWTH * se_s and se_f > 0 and "mean" in stored:
        return [f"{where}: the fresh standard error ({se_f:.3g}) is over {SPREAD_GROWTH:g} times the stored ({se_s:.3g})"]
    tail = _is_tail(stored)
    # the SE of the difference between the two runs; a tail has none of its own: its quantiles are of the
    # parent record's per-seed values, whose standard error they take (rule 5)
    se = parent_se if tail else math.hypot(se_s, se_f)
    for key in stored:
        a, b = fresh[key], stored[key]
        if key in DERIVED_KEYS:  # a function of the mean and the interval, which are compared
            continue
        if tail and key in ("low", "high"):  # the Clopper-Pearson interval of the failing count, compared below
            continue
        if key == "failing" and isinstance(a, int) and isinstance(b, int) and isinstance(stored.get("n"), int):
            errors += compare_texts(f"{a} of {fresh.get('n')}", f"{b} of {stored['n']}", f"{where}.failing")
            continue
        if key == "values":
            if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
                errors.append(f"{where}: per-seed values changed in number")
        elif key in ("mean", "low", "high", "median", "q1", "q3") and isinstance(b, (int, float)) and isinstance(
                a, (int, float)) and not isinstance(b, bool):
            if not _close(float(a), float(b), se, abs(float(b)) * 1e-6):
                errors.append(f"{where}: {key} {a!r} is beyond {K_SE:g} standard errors ({se:.3g}) of the stored {b!r}")
        elif isinstance(b, dict) and isinstance(a, dict):
            errors += _compare_record(a, b, f"{where}.{key}", se)
        elif isinstance(b, list) and isinstance(a, list) and len(a) == len(b) and all(isinstance(x, dict) for x in b):
            for idx, (x, y) in enumerate(zip(a, b)):
                errors += _compare_record(x, y, f"{where}.{key}[{idx}]")
        elif a != b and not (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
            errors.append(f"{where}: {key} {a!r} differs from the stored {b!r}")
    return errors


def _as_record(text: str):
    """A registry record (a JSON object, possibly inside a Python string repr), else None."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        t = t[1:-1]
    if not t.startswith("{"):
        return None
    try:
        obj = json.loads(t.replace("\\'", "'"))
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def compare_texts(fresh: str, stored: str, where: str = "output", words=()) -> list[str]:
    """The reasons ``fresh`` is not within tolerance of ``stored`` (empty when it is); rules in the module docstring;
    ``words``: the cell's declared verdict-word groups (rule 6)."""
    rf, rs = _as_record(fresh), _as_record(stored)
    if rf is not None and rs is not None:
        return _compare_record(rf, rs, where)
    fresh, stored = _canonical(fresh, words), _canonical(stored, words)
    pf, nf = _split(fresh)
    ps, ns = _split(stored)
    if len(nf) != len(ns) or pf != ps:
        diff = next((f"{a!r} / {b!r}" for a, b in zip(pf, ps) if a != b), f"{len(nf)} / {len(ns)} numbers")
        return [f"{where}: the text around the numbers differs (fresh / stored: {diff})"]
    errors = []
    for role in _roles(ps, [x.text for x in ns]):
        kind, idx = role[0], role[1:]
        if kind == "bare":
            a, b = nf[idx[0]], ns[idx[0]]
            if a.text != b.text and not _close(a.value, b.value, BARE_REL * abs(b.value) / K_SE, b.unit / FLOOR_UNITS):
                errors.append(f"{where}: the bare number {a.text} is beyond {BARE_REL:.0%} of the stored {b.text}")
            continue
        if kind == "count":  # k of n: k moves within K_SE binomial standard deviations, n is exact
            (ka, na), (kb, nb) = (int(nf[j].text) for j in idx), (int(ns[j].text) for j in idx)
            sd = math.sqrt(kb * (nb - kb) / nb) if nb else 0.0
            if na != nb or abs(ka - kb) > max(K_SE * sd, FLOOR_UNITS):
                errors.append(f"{where}: the count {ka} of {na} is beyond {K_SE:g} binomial standard deviations "
                              f"({sd:.2g}) of the stored {kb} of {nb}")
            continue
        if kind == "pm":
            se_s, se_f = abs(ns[idx[1]].value), abs(nf[idx[1]].value)
        else:  # an interval's half-width / 1.96, for both runs
            se_s, se_f = ((x[idx[-1]].value - x[idx[-2]].value) / (2 * Z95) for x in (ns, nf))
        if se_f > SPREAD_GROWTH * max(se_s, ns[idx[-1]].unit):
            errors.append(f"{where}: the fresh uncertainty ({se_f:.3g}) is over {SPREAD_GROWTH:g} times the stored "
                          f"({se_s:.3g}) (in {stored.strip()[:80]!r})")
            continue
        se = math.hypot(se_s, se_f)
        for j in idx:
            a, b = nf[j], ns[j]
            if not _close(a.value, b.value, abs(se), b.unit):
                errors.append(f"{where}: {a.text} is beyond {K_SE:g} standard errors ({abs(se):.3g}) of the stored "
                              f"{b.text} (in {stored.strip()[:80]!r})")
    return errors


def _texts(outputs) -> list[tuple[str, str]]:
    """(kind, text) of every textual output, in order; images and widget views skipped."""
    out = []
    for o in outputs:
        otype = o.get("output_type")
        if otype == "stream":
            out.append((f"stream:{o.get('name')}", o.get("text", "")))
        elif otype in ("display_data", "execute_result"):
            for mime, val in sorted(o.get("data", {}).items()):
                if mime.startswith(SKIP_MIMES):
                    continue
                out.append((mime, val if isinstance(val, str) else json.dumps(val, sort_keys=True)))
        elif otype == "error":
            out.append(("error", o.get("ename", "")))
    return out


def _by_kind(outputs, sanitize) -> dict:
    """kind -> the texts of that kind, in order; every stream of one name merged into one text, as nbval
    does (stdout and displayed values arrive in an order that depends on timing, so only the order within
    one kind is compared, as nbval compares)."""
    grouped = {}
    for kind, text in _texts(outputs):
        if kind.startswith("stream:") and kind in grouped:
            grouped[kind][0] += text
        else:
            grouped.setdefault(kind, []).append(text)
    return {k: [sanitize(t) for t in v] for k, v in grouped.items()}


def compare_outputs(fresh_outputs, stored_outputs, sanitize=lambda s: s, words=()) -> list[str]:
    """The reasons a statistically checked cell's fresh outputs are not within tolerance of the stored ones
    (``words``: the cell's declared verdict-word groups, rule 6)."""
    tf, ts = _by_kind(fresh_outputs, sanitize), _by_kind(stored_outputs, sanitize)
    shape_f, shape_s = {k: len(v) for k, v in tf.items()}, {k: len(v) for k, v in ts.items()}
    if shape_f != shape_s:
        return [f"the outputs differ in kind or number: fresh {shape_f}, stored {shape_s}"]
    errors = []
    for kind in ts:
        for n, (a, b) in enumerate(zip(tf[kind], ts[kind])):
            errors += compare_texts(a, b, f"{kind} output {n}", words)
    return errors


# ------------------------------------------------------------------------------ the pytest plugin

def _statistical_runtest(item):
    original = item.runtest

    def runtest():
        original()  # executes the cell (asserts run); nbval's strict comparison is off for this cell
        if item.cell.execution_count is None:
            return
        errors = compare_outputs(item.test_outputs or [], item.cell.outputs, sanitize=item.sanitize,
                                 words=verdict_words(item.cell.source))
        if errors:
            item.raise_cell_error("Cell outputs moved beyond the statistical tolerance "
                                  "(tests/nbval_statistical.py)", "\n".join(errors))

    return runtest


def pytest_collection_modifyitems(config, items):
    """Switch nbval's strict comparison to :func:`compare_outputs` for every ``# NBVAL_STATISTICAL`` cell."""
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is None or not hasattr(item, "options") or not is_statistical(cell.source):
            continue
        item.options["check"] = False
        item.runtest = _statistical_runtest(item)
