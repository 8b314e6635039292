"""Figure 2's seed tail: which training seeds of Mamba fail at alpha = 0.8, and Figure 2 against its reader bound.

Glossary (code name -> paper symbol):

===================  ==================================================================================
``predictor``        ``kappa_a' max_s v'_s^T w``: the gate logit an outlier adds to the least-suppressed
                     test outlier ``v'_s`` (§4.1's combinations of ``v*_s``), from the trained ``w`` alone
``test_logits``      ``kappa_a' v'_s^T w`` for each ``s`` (the predictor is their maximum)
``train_proj``       ``v*_s^T w`` for each training outlier (Lemma 4 drives all of them down alike)
``claim_error``      test error on the 18 tasks of :data:`mambaicl.experiments.fig2.CLAIM_GROUPS`
``all_error``        test error over all 30 tasks (groups weighted by their number of tasks)
``bound``            :func:`mambaicl.analysis.information.information_bound_all_tasks`
===================  ==================================================================================

**Declared before the run** (with the registry rows ``fig2-seed-tail`` and ``fig2-information-bound`` of
:mod:`mambaicl.analysis.claims_open`): the predictor above, the error it should predict (rule A,
``alpha = 0.8``, the 18 claim tasks), the test (Spearman's rho over seeds with a Fisher-z interval), and a
seed *fails* when that error exceeds :data:`FAIL_LEVEL` (the AUC of the predictor for failing seeds is
reported beside rho, with Hanley and McNeil's interval). No other predictor is tried.

Streams: the seeds train exactly as in Figure 2 (:func:`mambaicl.experiments.fig2.trained_models`) and are
tested on prompts from ``(seed, "seed-tail/<rule>/group=<g>")``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import binomtest, rankdata

from ..config import RULES, ConfigError, check_choice, choices, instance, integer, real
from ..data import test_outliers
from ..evaluate import errors_by_task_group
from ..analysis.information import information_bound_all_tasks, information_bound_by_group
from ..seeding import substage
from ..recipes import fig2
from ..recipes import presets
from ..recipes.presets import CLAIM_GROUPS, TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["SeedTailPreset", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "FAIL_LEVEL",
           "SeedTailResult", "BOUND_GROUPS", "predictor", "spearman", "auc", "run", "group_sweep", "failing_interval", "T18",
           "bound_report", "bound_judged_report", "complete_set_report", "tail_report", "split_report"]

#: the task groups of App. 9's cycle, in the order of the row ``fig2-information-bound``'s parts
BOUND_GROUPS = ("training", "reversed", "distance 2", "distance 3")

#: a seed fails when its rule-A error at alpha = 0.8 on the 18 claim tasks exceeds this (typical seeds: about 0.01)
FAIL_LEVEL = 0.05


@dataclass(frozen=True)
class SeedTailPreset(Preset):
    """Figure 2's Mamba (``fig2``'s settings) tested at one ``alpha`` on every task group, each rule."""

    fig2: Fig2Preset = instance(Fig2Preset, factory=lambda: presets.FIG2)
    alpha: float = real(0.8, 0.0, 1.0, high_open=True)
    rules: tuple = choices(RULES, RULES)
    n_test: int = integer(4000, 1)  # prompts per (seed, rule, task group)


FIG2 = SeedTailPreset(name="fig2")
#: a seconds-long smoke test (tests); not a result of the book
TINY = SeedTailPreset(name="tiny", fig2=FIG2_TINY, n_test=300)
PRESETS = {"fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = tuple(range(60))


def predictor(w: torch.Tensor, v: torch.Tensor, test) -> tuple:
    """The declared predictor and its parts, from the gate vectors ``w`` ``(S, d+1)`` alone.

    Returns:
        ``(predictor (S,), test_logits (S, V'), train_proj (S, V))``: ``kappa_a' max_s v'_s^T w``,
        ``kappa_a' v'_s^T w`` and ``v*_s^T w``.
    """
    d = v.shape[1]
    wx = w[:, :d].detach().to(v.dtype)  # (S, d)
    v_test = test_outliers(v, test.v_coeffs)  # (V', d)
    logits = test.kappa_a_prime * wx @ v_test.T  # (S, V')
    return logits.max(dim=1).values, logits, wx @ v.T


def spearman(x, y) -> dict:
    """Spearman's rho of ``x`` and ``y`` (average ranks for ties) and its 95 % interval by Fisher's z with
    standard error ``sqrt(1.06 / (n - 3))`` (Fieller, Hartley & Pearson 1957)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.size < 4:
        raise ConfigError(f"x and y must be two aligned samples of at least 4 values (spearman); got shapes {x.shape}, {y.shape}")
    rho = float(np.corrcoef(rankdata(x), rankdata(y))[0, 1])
    z, half = math.atanh(max(min(rho, 1 - 1e-12), -1 + 1e-12)), 1.959963984540054 * math.sqrt(1.06 / (x.size - 3))
    return {"rho": rho, "low": math.tanh(z - half), "high": math.tanh(z + half), "n": int(x.size)}


def auc(score, positive) -> dict:
    """Area under the ROC curve of ``score`` for the ``positive`` cases (the Mann-Whitney form, ties count
    1/2) with Hanley and McNeil's (1982) standard error and a normal 95 % interval clipped to [0, 1];
    ``nan`` when either class is empty."""
    s, pos = np.asarray(score, float), np.asarray(positive, bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return {"auc": math.nan, "low": math.nan, "high": math.nan, "n_pos": n1, "n_neg": n0}
    a = float(np.mean((s[pos][:, None] > s[~pos][None, :]) + 0.5 * (s[pos][:, None] == s[~pos][None, :])))
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    se = math.sqrt(max(a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a), 0.0) / (n1 * n0))
    return {"auc": a, "low": max(0.0, a - 1.959963984540054 * se), "high": min(1.0, a + 1.959963984540054 * se),
            "n_pos": n1, "n_neg": n0}


@dataclass
class SeedTailResult(Result):
    """Per-seed errors by rule and task group at ``alpha``, the predictor and its parts, rho and the AUC."""

    preset: str
    seeds: list
    alpha: float
    n_test: int
    group_errors: dict  # [rule][group][s]
    all_error: dict  # [rule][s]
    claim_error: dict  # [rule][s]
    predictor: list  # [s]
    test_logits: list  # [s][s']
    train_proj: list  # [s][s']
    bound_all: float
    bound_by_group: dict  # group -> (bound, number of tasks)
    fail_level: float
    failing: list  # seeds whose rule-A claim-task error exceeds fail_level
    spearman: dict
    auc: dict
    stack: object = internal()
    spec: SeedTailPreset = internal()

    def summary(self) -> str:
        """The errors by rule and task group (mean over seeds) at ``alpha``, with the sweep's prompt counts."""
        lines = [f"{len(self.seeds)} seeds; {self.n_test:,} prompts per (seed, rule, task group) at alpha = "
                 f"{self.alpha}; 1,000 per (seed, group, alpha) in the sweep"]
        for rule in self.spec.rules:
            lines.append(f"rule {rule}: " + "; ".join(f"{g} {np.mean(v):.4f}" for g, v in self.group_errors[rule].items())
                         + f"; all tasks {np.mean(self.all_error[rule]):.4f}")
        return "\n".join(lines)

    def claims(self) -> dict:
        """The rows this result measures (:class:`~mambaicl.analysis.claims.ClaimParts`), Chapter 12:
        ``fig2-information-bound`` (per rule and task group, each seed's error at ``alpha`` minus the group's reader
        bound; ``n_test`` prompts behind each) and ``fig2-seed-tail`` (Spearman's rho of the declared predictor and
        the claim-task error, with its Fisher-z interval, handed over as one Measured whose values are the
        predictor; and the per-seed claim-task errors, so that rho can be recomputed from the stored values)."""
        from ..analysis.claims import OUTCOME, ClaimParts, Measured
        from ..analysis.information import bayes_error
        from ..analysis.stats import error_mean_se

        S, rho = len(self.seeds), self.spearman
        bound = {g: b for g, (b, _) in self.bound_by_group.items()}
        l_ts = self.spec.fig2.test.l_ts
        gm = {g: error_mean_se(self.group_errors["A"][g], self.n_test)[0] for g in BOUND_GROUPS}
        return {
            "fig2-information-bound": ClaimParts(
                f"rule A error at α = 0.8 ({S} seeds) against the reader bound: "
                + ", ".join(f"{g} {gm[g]:.4f} ({bound[g]:.4f})" for g in BOUND_GROUPS)
                + f"; Bayes error {bayes_error(self.alpha, l_ts):.1e}; outcome: {OUTCOME}",
                parts=[[e - bound[g] for e in self.group_errors[rule][g]] for rule in ("A", "B", "C")
                       for g in BOUND_GROUPS], n_prompts=self.n_test),
            "fig2-seed-tail": ClaimParts(
                f"ρ = {rho['rho']:.2f} [{rho['low']:.2f}, {rho['high']:.2f}] over {S} seeds (a correlation over "
                f"seeds); {len(self.failing)} failing seed(s); outcome: {OUTCOME}",
                parts=[Measured(rho["rho"], rho["low"], rho["high"], S, tuple(self.predictor)),
                       list(self.claim_error["A"])]),
        }


def run(preset: SeedTailPreset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> SeedTailResult:
    """Train Figure 2's Mamba for every seed (one batched run), test it at ``preset.alpha`` on every task group
    and rule, and compute the declared predictor, Spearman's rho and the AUC (rule A, 18 claim tasks)."""
    seeds = resolve_seeds(seeds)
    f2 = preset.fig2
    check_choice("rules", "A", preset.rules)  # the declared test reads rule A
    pat = patterns(f2)
    stack, _ = fig2.trained_models(f2, pat, seeds, kinds=("mamba",), device=resolve_device(device),
                                   progress=progress)["mamba"]
    by_group = information_bound_by_group(preset.alpha, f2.test.l_ts, f2.data.M1)
    n_tasks = sum(n for _, n in by_group.values())
    groups, all_err, claim_err = {}, {}, {}
    for rule in preset.rules:
        test = dataclasses.replace(f2.test, rule=rule, alpha=preset.alpha)
        g = errors_by_task_group(stack, pat, test, preset.n_test, seeds, substage("seed-tail", rule))
        groups[rule] = g
        all_err[rule] = [sum(g[k][s] * by_group[k][1] for k in g) / n_tasks for s in range(len(seeds))]
        claim = [k for k in g if k in CLAIM_GROUPS]  # equal numbers of tasks (M1 each)
        claim_err[rule] = [sum(g[k][s] for k in claim) / len(claim) for s in range(len(seeds))]
    pred, logits, proj = predictor(stack.w, pat.v, f2.test)
    fail = [e > FAIL_LEVEL for e in claim_err["A"]]
    return SeedTailResult(preset=preset.name, seeds=list(seeds), alpha=preset.alpha, n_test=preset.n_test,
                          group_errors=groups, all_error=all_err, claim_error=claim_err, predictor=pred.tolist(),
                          test_logits=logits.tolist(), train_proj=proj.tolist(),
                          bound_all=information_bound_all_tasks(preset.alpha, f2.test.l_ts, f2.data.M1),
                          bound_by_group={k: list(v) for k, v in by_group.items()}, fail_level=FAIL_LEVEL,
                          failing=[s for s, f in zip(seeds, fail) if f],
                          spearman=spearman(pred.tolist(), claim_err["A"]), auc=auc(pred.tolist(), fail),
                          stack=stack, spec=preset)


def group_sweep(res: SeedTailResult, alphas, *, n: int = 1000, rule: str = "A") -> dict:
    """The trained seeds of ``res`` on every task group at each ``alpha`` (rule ``rule``, ``n`` prompts per
    seed and group, streams ``(seed, "seed-tail/sweep/<rule>/<alpha>/group=<g>")``).

    Returns:
        ``{group: [[error of seed s at alphas[i]] for s]}`` and ``"all"`` (groups weighted by their tasks).
    """
    f2 = res.spec.fig2
    pat = patterns(f2)
    n_by = {k: v[1] for k, v in res.bound_by_group.items()}
    out = {}
    for a in alphas:
        test = dataclasses.replace(f2.test, rule=rule, alpha=float(a))
        g = errors_by_task_group(res.stack, pat, test, n, res.seeds, substage("seed-tail", "sweep", rule, float(a)))
        g["all"] = [sum(g[k][s] * n_by[k] for k in n_by) / sum(n_by.values()) for s in range(len(res.seeds))]
        for k, v in g.items():
            out.setdefault(k, []).append(v)
    return {k: [list(col) for col in zip(*rows)] for k, rows in out.items()}  # [group][seed][alpha]


def failing_interval(k: int, n: int) -> tuple:
    """Clopper-Pearson (exact) 95 % interval of a failure rate of ``k`` failing seeds out of ``n``."""
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


# --- Chapter 12's derived numbers (printed lines and glued values), so that the chapter only narrates ---------

#: a Condition-1 training set whose meeting graph is complete (M1 = 6): 18 tasks, an orientation of the 15 pairs
#: with out-degrees 3, 3, 3, 2, 2, 2, plus three reversed tasks that balance the labels
T18 = ((1, 0), (2, 0), (3, 0), (0, 4), (0, 5), (2, 1), (3, 1), (4, 1), (1, 5), (3, 2), (4, 2), (5, 2),
       (4, 3), (5, 3), (5, 4), (0, 3), (1, 4), (2, 5))


def bound_report(alpha: float, l_ts: int, M1: int) -> tuple:
    """``(text, glued)``: the reader bound of every task group at ``alpha``, ``l_ts`` on App. 9's cycle, and the
    glued values ``ch8_bound_met`` / ``ch8_bound_never`` / ``ch8_bound_all`` the chapter's prose cites."""
    by_group = information_bound_by_group(alpha, l_ts, M1)
    bound_all = information_bound_all_tasks(alpha, l_ts, M1)
    lines = [f"{g:<11} {n:>2} tasks: bound {b:.4f}" for g, (b, n) in by_group.items()]
    lines.append(f"all tasks      : bound {bound_all:.4f} at alpha = {alpha}, l_ts = {l_ts}")
    assert by_group["training"][0] < 0.01 < by_group["distance 2"][0] and bound_all > 0.01
    return "\n".join(lines), {"ch8_bound_met": f"{by_group['training'][0]:.4f}",
                              "ch8_bound_never": f"{by_group['distance 2'][0]:.3f}",
                              "ch8_bound_all": f"{bound_all:.3f}"}



def bound_judged_report(res: SeedTailResult, judged) -> tuple:
    """``(text, glued)`` of the row ``fig2-information-bound`` (``judged``: its Judgement): Mamba's errors by
    group against the reader bound, the Bayes error beside it, the parts' outcomes in words, and the checks the
    chapter's prose states (distance 2 above the bound, distance 3 below it)."""
    from ..analysis.information import bayes_error
    from ..analysis.stats import error_mean_se, interval

    by_group = {k: tuple(v) for k, v in res.bound_by_group.items()}
    m_a, s_a = error_mean_se(res.all_error["A"], 4 * res.n_test)  # n_test prompts per task group, four groups
    text = f"{judged.verdict} / {judged.outcome} " + str([f"{m.mean:+.3f} [{m.low:+.3f}, {m.high:+.3f}]"
                                                          for m in judged.measured])
    gm = {g: error_mean_se(v, res.n_test) for g, v in res.group_errors["A"].items()}
    glued = {"ch8_err_all": f"{m_a:.3f} ± {s_a:.3f}"}
    for g, key in (("training", "tr"), ("reversed", "rev"), ("distance 2", "d2"), ("distance 3", "d3")):
        glued[f"ch8_err_{key}"] = f"{gm[g][0]:.4f} ± {gm[g][1]:.4f}"
    below_d3 = interval(res.group_errors["A"]["distance 3"], res.n_test).high < by_group["distance 3"][0]
    above_d2 = interval(res.group_errors["A"]["distance 2"], res.n_test).low > by_group["distance 2"][0]
    assert above_d2 and below_d3  # the prose states both
    glued["ch8_ratio_met"] = f"{(gm['training'][0] + gm['reversed'][0]) / 2 / by_group['training'][0]:.1f}"
    glued["ch8_bayes"] = f"{bayes_error(res.alpha, res.spec.fig2.test.l_ts):.4f}"
    words = {True: "holds", False: "fails", None: "is undecided"}
    by_outcome = {}  # outcome -> {group: [rules]}, in the parts' order
    for part, o in zip(judged.claim.parts, judged.outcomes()):
        rule, group = part.text.split(":")[0].removeprefix("rule ").split(", ")
        group = {"distance 2": "distance-2 tasks", "distance 3": "distance-3 tasks"}.get(group, group)
        by_outcome.setdefault(o, {}).setdefault(group, []).append(rule)
    glued["ch8_bound_parts"] = "; ".join(
        f"{words[o]} on the {' and the '.join(groups)} (rules {', '.join(next(iter(groups.values())))})"
        if len({tuple(r) for r in groups.values()}) == 1 else
        f"{words[o]} on " + ", ".join(f"{g} (rules {', '.join(r)})" for g, r in groups.items())
        for o, groups in by_outcome.items())
    return text, glued


def complete_set_report(alpha: float, l_ts: int, M1: int) -> tuple:
    """``(text, glued)``: the reader bound with :data:`T18` (a complete meeting graph, Condition 1 checked), and
    how far App. 9's cycle allows "< 0.01": the largest alpha at ``l_ts``, the smallest ``l_ts`` at ``alpha``."""
    from ..analysis import information
    from ..data import all_tasks, check_condition_1, training_tasks

    t18 = torch.tensor(T18)
    assert check_condition_1(t18, M1) and information.complete_meeting(t18, M1)
    assert check_condition_1(all_tasks(M1), M1) and information.complete_meeting(all_tasks(M1), M1)
    assert not information.complete_meeting(training_tasks(M1), M1)
    b18 = information.information_bound_all_tasks(alpha, l_ts, M1, t18)
    grid = np.arange(0, 1.0, 0.001)
    a_cyc = max(a for a in grid if information.information_bound_all_tasks(a, l_ts, M1) < 0.01)
    l_cyc = next(l for l in range(1, 500) if information.information_bound_all_tasks(alpha, l, M1) < 0.01)
    a_full = max(a for a in grid if information.information_bound(a, l_ts, "training") < 0.01)
    text = (f"18-task complete set: all-task bound {b18:.4f} at alpha = {alpha}; cycle: bound < 0.01 up to alpha = "
            f"{a_cyc:.3f} (l_ts = {l_ts}) or from l_ts = {l_cyc} (alpha = {alpha}); complete sets: up to alpha = "
            f"{a_full:.3f}")
    return text, {"ch8_b18": f"{b18:.4f}", "ch8_a_cyc": f"{a_cyc:.2f}", "ch8_l_cyc": f"{l_cyc}",
                  "ch8_a_full": f"{a_full:.2f}"}


def tail_report(res: SeedTailResult) -> tuple:
    """``(text, glued)`` of the row ``fig2-seed-tail``: rho, the failing seeds with their Clopper-Pearson
    interval, the AUC, the predictor's spread and the failing seeds' ranks by the predictor."""
    rho, k_fail, S = res.spearman, len(res.failing), len(res.seeds)
    cp = failing_interval(k_fail, S)
    err, pred = np.array(res.claim_error["A"]), np.array(res.predictor)
    text = (f"Spearman rho {rho['rho']:.3f} [{rho['low']:.3f}, {rho['high']:.3f}]; failing seeds {res.failing} "
            f"({k_fail}/{S}, Clopper-Pearson [{cp[0]:.3f}, {cp[1]:.3f}]); AUC {res.auc}\n"
            f"median error {np.median(err):.4f}; predictor median {np.median(pred):.2f}, "
            f"range [{pred.min():.2f}, {pred.max():.2f}]")
    assert rho["low"] > 0  # the prose states that the predictor ranks the seeds by their error
    rank_of_fail = [int((pred > pred[res.seeds.index(s)]).sum()) + 1 for s in res.failing]  # 1 = highest predictor
    return text, {"ch8_rho": f"{rho['rho']:.2f} [{rho['low']:.2f}, {rho['high']:.2f}]",
                  "ch8_k_fail": f"{k_fail} of {S}", "ch8_cp": f"[{cp[0]:.3f}, {cp[1]:.3f}]",
                  "ch8_err_median": f"{np.median(err):.4f}", "ch8_n_test": f"{res.n_test:,}",
                  "ch8_fail_rank": ", ".join(str(r) for r in rank_of_fail) or "none",
                  "ch8_auc": "undefined (no failing seed)" if not k_fail else f"{res.auc['auc']:.2f}"}


def split_report(res: SeedTailResult) -> tuple:
    """``(text, glued)``: each seed's predictor split into the balanced part ``kappa_a' (sum lambda) p_bar`` (what
    a training outlier adds) and the imbalance Theorem 2's argument sets to zero, each with its rho against the
    error; a reading of the declared predictor, not a second predictor."""
    f2 = res.spec.fig2
    err, pred = np.array(res.claim_error["A"]), np.array(res.predictor)
    proj = np.array(res.train_proj)  # (S, V): v*_s^T w
    lam = np.array(f2.test.v_coeffs)  # (V', V)
    logits = np.array(res.test_logits)  # (S, V')
    arg = logits.argmax(1)
    balanced = f2.test.kappa_a_prime * lam.sum(1)[arg] * proj.mean(1)  # kappa_a' (sum lambda) p_bar
    imbalance = pred - balanced
    rs_bal, rs_imb = spearman(balanced, err), spearman(imbalance, err)
    lines = ["least-suppressed test outlier: " + ", ".join(f"v'_{i + 1}: {int((arg == i).sum())} seeds"
                                                           for i in range(lam.shape[0])),
             f"balanced part kappa_a' L p_bar: median {np.median(balanced):+.2f}; rho with the error "
             f"{rs_bal['rho']:+.2f} [{rs_bal['low']:+.2f}, {rs_bal['high']:+.2f}]",
             f"imbalance part: median {np.median(imbalance):+.2f}, range [{imbalance.min():+.2f}, "
             f"{imbalance.max():+.2f}]; rho with the error {rs_imb['rho']:+.2f} [{rs_imb['low']:+.2f}, "
             f"{rs_imb['high']:+.2f}]"]
    for s in res.failing:
        i = res.seeds.index(s)
        lines.append(f"failing seed {s}: v*^T w = {np.round(proj[i], 2)}, test-outlier logits "
                     f"{np.round(logits[i], 2)}, balanced {balanced[i]:+.2f}, imbalance {imbalance[i]:+.2f}")
    assert rs_imb["low"] > 0 and rs_bal["low"] <= 0  # the prose: only the imbalance part is distinguishable from 0
    return "\n".join(lines), {
        "ch8_rho_bal": f"{rs_bal['rho']:+.2f} [{rs_bal['low']:+.2f}, {rs_bal['high']:+.2f}]",
        "ch8_rho_imb": f"{rs_imb['rho']:+.2f} [{rs_imb['low']:+.2f}, {rs_imb['high']:+.2f}]"}
