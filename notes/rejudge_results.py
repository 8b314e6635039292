"""Re-judge every row of book/results.json under the registry's current rule and criteria, without executing a chapter.

For each stored row: the criterion now declared in ``CLAIMS`` (rows whose parts changed take the stored measurement
of the parts they keep; the new ``*-theta`` rows take the measurement of the row they split from), the stored
measurement (mean, interval, n_seeds, per-seed values), and the rule of :mod:`mambaicl.analysis.outcomes` (Holm
across a row's parts, one-sided sufficient conditions, exact sign tests). Prints old -> new verdict (and, for a row
of ours, old -> new outcome) and every part whose outcome changed, with its p-values.

    cd /work/wt-verdicts && PYTHONPATH=. python notes/rejudge_results.py [book/results.json]
"""
import json
import sys

from mambaicl.analysis.claims import CLAIMS
from mambaicl.analysis.outcomes import annotate, outcome_of, verdict_of

#: new row -> (stored row, indices of the stored parts it reads); rows whose parts changed
SOURCES = {
    "ch3-theorem1-theta": ("ch3-theorem1", None),
    "ch3-theorem3-theta": ("ch3-theorem3", [0, 1, 2, 3, 4, 5]),
    "beta-scaled-theta": ("beta-scaled", None),
    "thm4d-theta": ("thm4d", None),
}


def parts(c, m):
    if c["kind"] == "diagnostic":
        return []
    return list(zip(c["all"], m["all"])) if c["kind"] == "all" else [(c, m)]


def main(path="book/results.json"):
    stored = {r["key"]: r for r in json.load(open(path, encoding="utf-8"))}
    keys = list(stored) + [k for k in SOURCES if k not in stored]
    changed = []
    for key in keys:
        if key not in CLAIMS:
            print(f"{key}: no longer declared")
            continue
        src, idx = SOURCES.get(key, (key, None))
        old = stored.get(key)
        m = json.loads(json.dumps(stored[src]["measured"]))
        if idx is not None:
            m["all"] = [m["all"][i] for i in idx]
        c = CLAIMS[key].criterion_json()
        if c["kind"] == "all" and len(c["all"]) != len(m["all"]):
            print(f"{key}: {len(c['all'])} parts declared, {len(m['all'])} stored: not re-judged")
            continue
        new_m = annotate(c, m)
        row = {"criterion": c, "measured": new_m}
        new_v, new_o = verdict_of(row), outcome_of(c, new_m)
        old_v, old_o = (old["verdict"], old["outcome"]) if old else ("(new row)", "(new row)")
        lines = []
        old_parts = parts(old["criterion"], old["measured"]) if old and key == src and idx is None else [None] * len(parts(c, new_m))
        if old and key == src and idx is not None:
            op = parts(old["criterion"], old["measured"])
            old_parts = [op[i] for i in idx]
        for k, ((p, mm), o) in enumerate(zip(parts(c, new_m), old_parts)):
            was = o[1].get("holds") if o else "—"
            now = mm.get("holds")
            text_changed = o is not None and (o[0]["text"] != p["text"] or o[0].get("side") != p.get("side"))
            if was != now or text_changed or o is None:
                extra = f"p_fail {mm.get('p_fail')}, Holm {mm.get('p_holm')}"
                if mm.get("n_pos") is not None:
                    extra += f", sign test {mm['n_pos']}+ / {mm['n_neg']}−"
                if mm.get("seeds_to_decide"):
                    extra += f", toward {mm['decides_toward']} with about {mm['seeds_to_decide']} seeds"
                lines.append(f"    [{k + 1}] {p['text'][:90]}: {was} -> {now} (mean {mm['mean']} "
                             f"[{mm['low']}, {mm['high']}]; {extra})")
        if old_v != new_v or old_o != new_o or lines:
            changed.append(key)
            print(f"{key}: verdict {old_v} -> {new_v}" + (f"; outcome {old_o} -> {new_o}" if old_o != new_o else ""))
            print("\n".join(lines))
        # direction of every undecided part that did not change outcome (item 4 of the brief)
    print(f"\n{len(changed)} rows change: {', '.join(changed)}")
    missing = [r["key"] for r in stored.values() for p, mm in parts(r["criterion"], r["measured"])
               if len(mm.get("values") or ()) != mm.get("n_seeds")]
    print("rows with a part whose per-seed values are not all stored (a sign test cannot be recomputed there): "
          + ", ".join(sorted(set(missing))))


if __name__ == "__main__" and "--directions" not in sys.argv:
    main(*sys.argv[1:])


def directions(path="book/results.json"):
    """Every undecided part of the stored rows under the current rule: toward which side more seeds would decide it."""
    stored = json.load(open(path, encoding="utf-8"))
    for r in stored:
        key = r["key"]
        if key not in CLAIMS or key in SOURCES:
            continue
        c = CLAIMS[key].criterion_json()
        m = annotate(c, r["measured"])
        for k, (p, mm) in enumerate(parts(c, m)):
            if mm.get("holds") is None and p["kind"] != "diagnostic":
                how = (f"toward {mm['decides_toward']} with about {mm['seeds_to_decide']} seeds"
                       if mm.get("seeds_to_decide") else "more seeds cannot decide it (nothing printed)")
                print(f"  {key} [{k + 1}]: {how}")


if __name__ == "__main__" and "--directions" in sys.argv:
    directions()
