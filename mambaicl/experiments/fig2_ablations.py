"""Figure 2 ablations (Chapter 4): other Condition-1 training sets, the state size m = l + 1, Theorem 4(d)'s alpha.

Glossary (code name -> paper symbol):

==================  =====================================================================================
``base``            the Figure 2 preset (:data:`mambaicl.experiments.fig2.FIG2`): data, test shift, training
``task_sets``       training-task sets of :mod:`mambaicl.data.task_sets` other than App. 9's cycle (Condition 1)
``large_M1``        a cycle on more relevant patterns, ``M1`` (its own patterns, stream ``(pattern_seed, "patterns")``)
``m_small``         the state size ``m = l + 1`` of §2 (21): ``W_B, W_C`` are ``(m, d+1)`` with ``m < d``, so only
                    their first ``m`` diagonal entries can be ``delta`` (the nearest initialisation to §2's)
``n_task``          test prompts per task and seed at ``alpha = 0`` (every task of ``T``, all models paired)
``alphas_4d``       outlier fractions below 1/2 for Theorem 4(d); ``lengths`` the test lengths ``l_ts``;
                    ``level`` the error ``eps`` whose required length is measured; ``n_4d`` prompts per alpha
==================  =====================================================================================

Streams (:mod:`mambaicl.seeding`): every model trains as Figure 2's (``(s, "init")``, ``(s, "train")``, each
training set its own draws); seed ``s``'s models are tested on task ``(a, b)`` with prompts from
``(s, "ablations/task/<a>-<b>")`` (the same prompts for every model of the seed), at ``alpha`` with
``(s, "ablations/m/<alpha>")`` and, for Theorem 4(d), with ``(s, "ablations/4d/<alpha>")``. All trainings are
members of ONE engine call (:func:`mambaicl.train.train`). ``python -m mambaicl reproduce fig2_ablations``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.claims import ClaimParts
from ..analysis.fits import crossing
from ..analysis import theory
from ..analysis.stats import compare, error_mean_se, interval, lower, mean_se, upper
from ..analysis.thm4d import FORM_LABELS, FORMS, alpha_exponent, fit_form, form
from ..config import choices, instance, integer, integers, real, reals, to_dict
from ..data import all_tasks, make_patterns, test_prompts
from ..data.task_sets import TASK_SETS, task_set, tasks_by_group_for
from ..checks import ConfigError
from ..evaluate import model_error
from ..metric import zero_one_error
from ..seeding import numpy_streams, substage, torch_generator
from ..train import Member, SyntheticData, train
from ..recipes.presets import DEFAULT_SEEDS as FIG2_SEEDS, FIG2, TINY as FIG2_TINY, Fig2Preset, patterns
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["AblationsPreset", "ABLATIONS", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "AblationsResult",
           "run", "error_by_length", "lengths_needed", "alpha_fits", "member_errors", "CYCLE", "M_SMALL"]

CYCLE = "cycle"  # App. 9's training set, Figure 2's
M_SMALL = "m = l + 1"  # label prefix of the models with §2's state size


@dataclass(frozen=True)
class AblationsPreset(Preset):
    """Figure 2 retrained on other training sets and at ``m = l + 1``; Theorem 4(d)'s examples against alpha."""

    base: Fig2Preset = instance(Fig2Preset, factory=lambda: FIG2)
    task_sets: tuple = choices(("cycle+reversed", "reversal pairs", "two 3-cycles"), TASK_SETS[1:])
    large_M1: int = integer(8, 4)
    m_small: int = integer(21, 1)
    n_task: int = integer(400, 1)
    m_alphas: tuple = reals((0.0, 0.6, 0.8), 0.0, 1.0, high_open=True, distinct=True)
    n_m: int = integer(2000, 1)
    alphas_4d: tuple = reals((0.2, 0.25, 0.3, 0.35, 0.4, 0.45), 0.0, 0.5, low_open=True, high_open=True,
                             min_len=2, distinct=True, increasing=True)
    lengths: tuple = integers(tuple(sorted({round(2 ** (k / 2)) for k in range(2, 21)})), 1, min_len=2,
                              distinct=True, increasing=True)
    level: float = real(0.1, 0.0, 0.5, low_open=True, high_open=True)
    n_4d: int = integer(1000, 1)

    def _check(self) -> None:
        steps = {(tr.steps, tr.batch_size, tr.optimizer, tr.loss) for tr in self.base.train.values()}
        if len(steps) != 1:
            raise ConfigError(f"base.train must share steps, batch_size, optimizer and loss (one engine call); got {steps}")
        for kind in ("mamba", "linear"):
            if kind not in self.base.train:
                raise ConfigError(f"base.train must hold {kind!r}; got {sorted(self.base.train)}")
        if self.m_small >= self.base.data.d:
            raise ConfigError(f"m_small must be below d = {self.base.data.d} (the point of the check); got {self.m_small}")
        if self.large_M1 + self.base.data.M2 + self.base.data.V > self.base.data.d:
            raise ConfigError(f"large_M1 + M2 + V must be at most d = {self.base.data.d}; got large_M1 = {self.large_M1}")
        for name in self.task_sets:
            task_set(name, self.base.data.M1)  # raises if the construction does not exist or breaks Condition 1


#: the chapter's preset: three other training sets on Figure 2's six patterns, a cycle of eight, m = 21
ABLATIONS = AblationsPreset(name="fig2")
#: a seconds-long smoke test of the pipeline (CLI tests); not a result of the book
TINY = AblationsPreset(name="tiny", base=FIG2_TINY, task_sets=("cycle+reversed", "two 3-cycles"), n_task=40,
                       m_alphas=(0.0, 0.8), n_m=100, alphas_4d=(0.2, 0.3, 0.4), lengths=(2, 4, 8, 16, 32, 64),
                       n_4d=100)
PRESETS = {"fig2": ABLATIONS, "tiny": TINY}
DEFAULT_PRESET = "fig2"
DEFAULT_SEEDS = FIG2_SEEDS


def _large_data(preset: AblationsPreset):
    return dataclasses.replace(preset.base.data, M1=preset.large_M1)


def member_errors(models, pat, test, tasks, n: int, seeds, stage: str) -> list:
    """0-1 error of every member of each ``(model, member_seed)`` of ``models`` on ``n`` Definition 2 prompts of
    ``tasks`` per seed, drawn ONCE from the streams ``(seed, stage)``: member ``k`` of a model reads seed
    ``seeds[member_seed[k]]``'s prompts (paired across members and models). Returns one list per model."""
    pr = test_prompts(pat, test, tasks, n, numpy_streams(seeds, stage))
    out = []
    for model, member_seed in models:
        idx = torch.as_tensor(member_seed)
        out.append(model_error(model, pr[idx], pr.z[idx]))
    return out


def _per_task(models, pat, base, seeds, n: int) -> list:
    """For each ``(model, member_seed)``, ``[member][task]`` errors at ``alpha = 0`` on every task of
    ``all_tasks(M1)`` (``n`` prompts each, one draw per task shared by the models)."""
    test = dataclasses.replace(base.test, alpha=0.0)
    tasks = all_tasks(pat.mu.shape[0])
    cols = [member_errors(models, pat, test, tasks[t:t + 1], n, seeds, substage("ablations", "task", f"{a}-{b}"))
            for t, (a, b) in enumerate(tasks.tolist())]  # [task][model][member]
    return [[[col[i][k] for col in cols] for k in range(len(ms))] for i, (_, ms) in enumerate(models)]


def _member_seeds(models: dict, stack) -> list:
    """``member_seed`` of ``stack``: the seed index of each of its slots, from the labels that live in it."""
    member_seed = [0] * stack.n_seeds
    for st, slots in models.values():
        if st is stack:
            for s, k in enumerate(slots):
                member_seed[k] = s
    return member_seed


@torch.no_grad()
def error_by_length(stack, pat, test, tasks, n: int, lengths, streams, chunk: int = 500) -> list:
    """Error of an ungated (linear Transformer) stack at every test length in ``lengths``, ``[length][seed]``.

    With ``G = 1`` the output ``F = sum_i y_i p_i^T W_B^T W_C p_query`` (Eq. (3)) is a sum over the examples,
    and Definition 2's examples are i.i.d. (outliers at random positions), so the first ``L`` examples of a
    prompt of ``max(lengths)`` examples form a prompt of ``L``: one draw gives every length by a cumulative
    sum. ``n`` prompts per seed, one NumPy stream per seed."""
    if getattr(stack, "gated", True):
        raise ConfigError("error_by_length needs an ungated model (the linear Transformer): F is then a sum")
    lengths = [int(L) for L in lengths]
    if lengths != sorted(set(lengths)) or lengths[0] < 1:
        raise ConfigError(f"lengths must be increasing positive integers; got {lengths}")
    test = dataclasses.replace(test, l_ts=lengths[-1])
    idx = torch.tensor([L - 1 for L in lengths])
    F = []
    for start in range(0, n, chunk):
        pr = test_prompts(pat, test, tasks, min(chunk, n - start), streams)
        votes = (pr.y * stack.attention(pr))[..., :-1].cumsum(-1)  # (S, b, l): F after the first L examples
        F.append((votes.index_select(-1, idx), pr.z))
    Fl, z = torch.cat([f for f, _ in F], dim=1), torch.cat([zz for _, zz in F], dim=1)  # (S, n, len), (S, n)
    return [[zero_one_error(Fl[s, :, i], z[s]) for s in range(Fl.shape[0])] for i in range(len(lengths))]


def lengths_needed(lengths, errors, level: float) -> list:
    """Per seed, the test length at which the error (``errors[length][seed]``) first falls to ``level``
    (log-log interpolation, :func:`mambaicl.analysis.fits.crossing`); ``inf`` if it never does."""
    return [crossing(lengths, [row[s] for row in errors], level, rising=False, interpolate="loglog", never=math.inf)
            for s in range(len(errors[0]))]


def alpha_fits(alphas, needed) -> dict:
    """Per seed (``needed[alpha][seed]``): the power of alpha (:func:`mambaicl.analysis.thm4d.alpha_exponent`) and,
    for each form of :data:`mambaicl.analysis.thm4d.FORMS`, the fitted constant and rms log residual; ``nan``
    for a seed whose length is not reached at some alpha."""
    S = len(needed[0])
    out = {"exponent": [], **{f: {"C": [], "rms": []} for f in FORMS}}
    for s in range(S):
        ls = [needed[i][s] for i in range(len(alphas))]
        ok = all(math.isfinite(v) for v in ls)
        out["exponent"].append(alpha_exponent(alphas, ls) if ok else math.nan)
        for f in FORMS:
            C, rms = fit_form(f, alphas, ls) if ok else (math.nan, math.nan)
            out[f]["C"].append(C)
            out[f]["rms"].append(rms)
    return out


@dataclass
class AblationsResult(Result):
    """What ``reproduce fig2_ablations`` writes (per-seed lists in ``seeds`` order)."""

    preset: str
    seeds: list
    task_sets: dict  # {name: training tasks}
    all_task: dict  # {model label: [error at alpha = 0, all tasks, per seed]}
    groups: dict  # {model label: {group: [error per seed]}} at alpha = 0
    group_sizes: dict  # {model label: {group: number of tasks}}
    n_task: int
    m_alphas: list
    m_errors: dict  # {model label: [[error of seed s] per alpha]}, rule A, all tasks
    thm4d: dict  # alphas, lengths, level, errors [alpha][length][seed], needed [alpha][seed], fits
    final_train_loss: dict  # {model label: mean over seeds of the last recorded batch loss}
    config: dict
    models: dict = internal()  # {model label: (stack, slots)}

    # ---------------------------------------------------------------- derived quantities (the rows' parts)

    def sets(self) -> tuple:
        """The labels of the Mamba models trained on Condition-1 sets: App. 9's cycle first, then the preset's
        other sets and the cycle on ``large_M1`` patterns."""
        return (CYCLE, *self.config["task_sets"], f"cycle, M1 = {self.config['large_M1']}")

    def n_all(self, label: str) -> int:
        """Test prompts per seed over all tasks of model ``label``'s patterns (``n_task`` per task)."""
        return self.n_task * sum(self.group_sizes[label].values())

    def group_stats(self) -> dict:
        """``{(label, group): (mean, SE)}`` of every model's error on each task group at alpha = 0, the group's
        prompts counted."""
        return {(k, g): error_mean_se(v, self.n_task * self.group_sizes[k][g])
                for k in self.groups for g, v in self.groups[k].items()}

    def all_task_stats(self) -> dict:
        """``{label: (mean, SE)}`` of the all-task error at alpha = 0 of each Condition-1 set's Mamba."""
        return {k: error_mean_se(self.all_task[k], self.n_all(k)) for k in self.sets()}

    def thm4d_stats(self) -> dict:
        """Theorem 4(d)'s derived numbers: ``len_stats`` (alpha -> [(mean, SE) per length]), ``needed`` (alpha ->
        per-seed length needed for the error level), ``ratio`` (per seed, needed at 0.4 over needed at 0.3),
        ``predicted`` / ``predicted_proof`` (that ratio by the statement's alpha/(1/2-alpha)^2 and by the proof's
        alpha^-1 (1/2-alpha)^-2), ``L_mid`` (the grid length nearest 320) and ``rms`` (form -> (mean, SE) of the
        rms log residual of its fit)."""
        T4, n4 = self.thm4d, self.config["n_4d"]
        lengths = T4["lengths"]
        return {"len_stats": {a: [error_mean_se(e, n4) for e in rows] for a, rows in zip(T4["alphas"], T4["errors"])},
                "needed": dict(zip(T4["alphas"], T4["needed"])),
                "ratio": [c4 / c3 for c3, c4 in zip(*(T4["needed"][T4["alphas"].index(a)] for a in (0.3, 0.4)))],
                "predicted": (0.4 / 0.1 ** 2) / (0.3 / 0.2 ** 2), "predicted_proof": (0.3 * 0.2 ** 2) / (0.4 * 0.1 ** 2),
                "L_mid": min(lengths, key=lambda L: abs(L - 320)),
                "rms": {f: mean_se(T4["fits"][f]["rms"]) for f in FORMS}}

    def thm4d_report(self) -> tuple:
        """Theorem 4(d) in Chapter 7: ``(text, checks, numbers)``: the errors at growing ``l_ts`` and the examples
        needed (text), the prose's statements (``{statement: bool}``) and the numbers it quotes (``{name: text}``, glued
        as ``ch4_<name>`` in this order)."""
        T4, t, S, fmt = self.thm4d, self.thm4d_stats(), len(self.seeds), "{:.3f} ± {:.3f}"
        lengths, eps, M1 = T4["lengths"], T4["level"], self.config["base"]["data"]["M1"]
        stats, cross, ratio = t["len_stats"], t["needed"], t["ratio"]
        pred, proof, L_mid = t["predicted"], t["predicted_proof"], t["L_mid"]
        r_len, r_iv, i_mid = mean_se(ratio), interval(ratio), lengths.index(L_mid)
        lines = [f"alpha = {a:<5} Thm 4(d) order {theory.l_ts_lower_lt(a, M1):6.0f}: " + "  ".join(
            f"l_ts = {L}: {fmt.format(*st)}" for L, st in zip(lengths, stats[a]) if L in (2, 8, 32, 128, 512, lengths[-1]))
            for a in (0.3, 0.4, 0.45)]
        lines.append(f"examples needed for error {eps}: alpha = 0.3: {mean_se(cross[0.3])[0]:.1f}; "
                     f"alpha = 0.4: {mean_se(cross[0.4])[0]:.1f}; ratio {fmt.format(*r_len)} (Theorem 4(d): {pred:.1f})")
        e3, e45 = stats[0.3], stats[0.45]
        checks = {"enough examples make alpha = 0.3 harmless": upper(*e3[-1], S) < lower(*e3[0], S) / 4,
                  "... not alpha = 0.45": lower(*e45[i_mid], S) > upper(*e3[i_mid], S),
                  "alpha = 0.4 needs more examples than 0.3": lower(*r_len, S) > 1}
        closer = "the proof's" if abs(math.log(r_len[0] / proof)) < abs(math.log(r_len[0] / pred)) else "the statement's"
        numbers = {
            "len_03": f"{e3[0][0]:.3f} at l_ts = {lengths[0]} to {e3[i_mid][0]:.3f} at {L_mid} and {e3[-1][0]:.3f} at "
                      f"{lengths[-1]}",
            "len_045": fmt.format(*e45[i_mid]), "len_045_max": fmt.format(*e45[-1]), "len_mid": f"{L_mid}",
            "len_max": f"{lengths[-1]:,}", "len_ratio": fmt.format(*r_len), "len_pred": f"{pred:.1f}",
            "len_c3": f"{mean_se(cross[0.3])[0]:.0f}", "len_c4": f"{mean_se(cross[0.4])[0]:.0f}",
            "len_ratio_ci": f"[{r_iv.low:.2f}, {r_iv.high:.2f}]",
            "len_pred_in": "inside" if r_iv.low <= pred <= r_iv.high else "outside",
            "len_proof_in": "inside" if r_iv.low <= proof <= r_iv.high else "outside", "len_closer": closer}
        return "\n".join(lines), checks, numbers

    def alpha_report(self, verdict: str = "") -> tuple:
        """Theorem 4(d)'s alpha-dependence in Chapter 7: ``(text, numbers)``, the fits of the three forms (text) and
        the numbers the prose quotes, ``verdict`` (row ``thm4d-alpha``'s) among them in the chapter's order."""
        T4, t, fmt = self.thm4d, self.thm4d_stats(), "{:.3f} ± {:.3f}"
        fits, a4, cross = T4["fits"], T4["alphas"], t["needed"]
        if not all(math.isfinite(v) for v in fits["exponent"]):
            raise ConfigError("a seed does not reach the error level at every alpha of the grid")
        lines = [f"lengths needed for error {T4['level']} (mean ± SE over seeds): " + "; ".join(
            "alpha = {}: {:.1f} ± {:.1f}".format(a, *mean_se(cross[a])) for a in a4)]
        rows = {f: (mean_se(fits[f]["C"]), t["rms"][f]) for f in FORMS}
        lines += [f"{FORM_LABELS[f]:<34} C = {c:7.3f} ± {c_se:.3f}   rms log residual {r:.3f} ± {r_se:.3f}"
                  for f, ((c, c_se), (r, r_se)) in rows.items()]
        expo = fits["exponent"]
        x_iv = interval(expo)
        lines.append(f"power of alpha: {fmt.format(*mean_se(expo))}, 95 % [{x_iv.low:.2f}, {x_iv.high:.2f}]")
        best = min(FORMS, key=lambda f: rows[f][1][0])
        vs_best = {f: compare(fits[f]["rms"], fits[best]["rms"]) for f in FORMS if f != best}
        lines += [f"rms of {f} minus rms of {best}: {c}" for f, c in vs_best.items()]
        numbers = {"t4a_expo": fmt.format(*mean_se(expo)),
                   "t4a_clt_power": f"{alpha_exponent(a4, [form('clt', a) for a in a4]):+.2f}",
                   "t4a_ci": f"[{x_iv.low:.2f}, {x_iv.high:.2f}]", "t4a_verdict": verdict, "t4a_best": FORM_LABELS[best],
                   "t4a_rms": "; ".join(f"{FORM_LABELS[f]}: {fmt.format(*rows[f][1])}" for f in FORMS),
                   "t4a_vs": "; ".join(f"{FORM_LABELS[f]} by {c.diff:.3f} ± {c.se:.3f} ("
                                       + ("distinguishable" if c.significant else "not distinguishable at this scale")
                                       + ")" for f, c in vs_best.items()),
                   "t4a_l45": "{:.0f} ± {:.0f}".format(*mean_se(cross[0.45])),
                   "t4a_l20": "{:.1f} ± {:.1f}".format(*mean_se(cross[0.2]))}
        return "\n".join(lines), numbers

    def floor_prediction(self) -> dict:
        """The diagnosis's prediction on each Condition-1 set (a floor above 0.01 on every distance-2 group, none
        elsewhere: below 0.01 by the 95 % interval), checked: ``pred`` (``{set: (floor, clean)}``, each ``{group:
        bool}``), ``d2_share`` (share of the all-task error on the distance-2 tasks), ``fails`` (groups against
        it), ``n_d2_sets``, ``n_d2_floor``, ``n_clean``, ``n_clean_ok``."""
        S, g, rows, fmt = len(self.seeds), self.group_stats(), self.all_task_stats(), "{:.3f} ± {:.3f}"
        sets = self.sets()
        pred = {k: ({n: lower(*g[k, n], S) > 0.01 for n in self.groups[k] if n == "distance 2"},
                    {n: upper(*g[k, n], S) < 0.01 for n in self.groups[k] if n != "distance 2"}) for k in sets}
        d2_share = {k: self.group_sizes[k]["distance 2"] * g[k, "distance 2"][0]
                    / (sum(self.group_sizes[k].values()) * rows[k][0]) for k in sets if "distance 2" in self.groups[k]}
        fails = [f"{k}: {n} {fmt.format(*g[k, n])}" for k in sets for n, ok in pred[k][1].items() if not ok]
        fails += [f"{k}: distance 2 {fmt.format(*g[k, 'distance 2'])} (no floor)" for k in sets
                  for n, ok in pred[k][0].items() if not ok]
        return {"pred": pred, "d2_share": d2_share, "fails": fails, "n_d2_sets": sum(1 for k in sets if pred[k][0]),
                "n_d2_floor": sum(1 for k in sets if pred[k][0] and all(pred[k][0].values())),
                "n_clean": sum(len(pred[k][1]) for k in sets), "n_clean_ok": sum(sum(pred[k][1].values()) for k in sets)}

    def task_set_report(self, judgement=None) -> tuple:
        """The other training sets in Chapter 7: ``(text, numbers)``, each set's all-task and group errors without
        outliers and the diagnosis's prediction checked (text), and the numbers the prose quotes (``judgement``: row
        ``fig2-task-sets``'s, for its verdict and failing parts; ``None``: the text alone is meant)."""
        g, rows, p, fmt = self.group_stats(), self.all_task_stats(), self.floor_prediction(), "{:.3f} ± {:.3f}"
        sets = self.sets()
        lines = [f"{k:<16} all tasks {fmt.format(*rows[k])}; " + "; ".join(
            f"{n} ({self.group_sizes[k][n]}) {fmt.format(*g[k, n])}" for n in self.groups[k]) for k in sets]
        lines.append("share of the all-task error on the distance-2 tasks: "
                     + str({k: f"{v:.0%}" for k, v in p["d2_share"].items()}))
        lines.append(f"floor on distance 2: {p['n_d2_floor']} of {p['n_d2_sets']} sets; other groups below 0.01: "
                     f"{p['n_clean_ok']} of {p['n_clean']}")
        numbers = {}
        for k, key in zip(sets, ("cyc", "rev", "pairs", "tri", "m8")):
            numbers[f"ts_{key}"] = fmt.format(*rows[k])
            for n in self.groups[k]:
                numbers[f"ts_{key}_{n.replace(' ', '')}"] = fmt.format(*g[k, n])
        verdict, failing = (judgement.verdict, judgement.parts_failing()) if judgement is not None else ("", [])
        numbers.update({"ts_verdict": verdict, "ts_failing": "; ".join(failing) or "none",
                        "ts_d2_floor": f"{p['n_d2_floor']} of {p['n_d2_sets']}",
                        "ts_clean": f"{p['n_clean_ok']} of {p['n_clean']}",
                        "ts_exceptions": "; ".join(p["fails"]) or "none",
                        "ts_share": ", ".join(f"{v:.0%} ({k})" for k, v in p["d2_share"].items())})
        return "\n".join(lines), numbers

    def floor_reading(self) -> tuple:
        """Does the floor follow the meeting graph? The sets without distance-2 pairs against App. 9's cycle (all
        tasks, paired over seeds) and the diagnosis's prediction (:meth:`floor_prediction`). Returns ``(text,
        reading)``: the comparisons and the sentence Chapter 7 quotes."""
        no_d2 = [k for k in self.sets() if "distance 2" not in self.groups[k]]
        lower_than_cycle = {k: compare(self.all_task[k], self.all_task[CYCLE], n_prompts=self.n_all(k)) for k in no_d2}
        text = "\n".join(f"{k} minus App. 9's cycle, all tasks: {c}" for k, c in lower_than_cycle.items())
        fp = self.floor_prediction()
        follows = fp["n_d2_floor"] == fp["n_d2_sets"] and all(c.significant and c.diff < 0
                                                              for c in lower_than_cycle.values())
        reading = (
            "The floor follows the meeting graph, as the diagnosis predicts: it appears in every training set with "
            "patterns two steps apart, on those tasks, and the sets without such pairs (" + ", ".join(no_d2) + ") err "
            "distinguishably less than the cycle on all tasks. Condition 1 does not prevent it: it balances the labels "
            "of each pattern, not which patterns meet") if follows else (
            "The floor does not follow the meeting graph as the diagnosis predicts (see the exceptions above and the "
            "comparisons with the cycle: " + "; ".join(f"{k} {c}" for k, c in lower_than_cycle.items()) + ")")
        return text, reading

    def m_small_report(self) -> tuple:
        """Figure 2 at §2's state size ``m = l + 1`` beside ``m = d + 1`` in Chapter 7: ``(text, numbers)``, the
        errors and paired differences (text) and the numbers the prose quotes."""
        S, g, fmt, n_m = len(self.seeds), self.group_stats(), "{:.3f} ± {:.3f}", self.config["n_m"]
        small = f"{M_SMALL} = {self.config['m_small']}"
        lab = {"mamba": (CYCLE, small), "linear": ("linear", f"linear, {small}")}
        words = {True: "distinguishable", False: "not distinguishable at this scale"}
        E = self.m_errors
        cmp, lines = {}, []
        for kind, (big, sm) in lab.items():
            for i, a in enumerate(self.m_alphas):
                c = cmp[kind, a] = compare(list(E[sm][i][:S]), list(E[big][i][:S]), n_prompts=n_m)
                lines.append(f"{kind:<7} alpha = {a}: m = 31 {fmt.format(*error_mean_se(E[big][i], n_m))}, "
                             f"m = 21 {fmt.format(*error_mean_se(E[sm][i], n_m))}; m = 21 minus m = 31: {c}")
            lines += [f"{kind:<7} alpha = 0, {n:<10}: m = 31 {fmt.format(*g[big, n])}, m = 21 {fmt.format(*g[sm, n])}"
                      for n in self.groups[sm]]
        d2 = compare(self.groups[small]["distance 2"], self.groups[CYCLE]["distance 2"],
                     n_prompts=self.n_task * self.group_sizes[CYCLE]["distance 2"])
        numbers = {f"m21_{kind}_{i}": f"{fmt.format(*error_mean_se(E[sm][i], n_m))} (m = 31: "
                   f"{fmt.format(*error_mean_se(E[big][i], n_m))}; difference {cmp[kind, a].diff:+.3f} ± "
                   f"{cmp[kind, a].se:.3f}, {words[cmp[kind, a].significant]})"
                   for kind, (big, sm) in lab.items() for i, a in enumerate(self.m_alphas)}
        others = max(g[small, n][0] for n in self.groups[small] if n != "distance 2")
        d2_lo = lower(*g[small, "distance 2"], S)
        numbers.update({
            "m21_alphas": " / ".join(f"{a:g}" for a in self.m_alphas),
            "m21_d2": f"{fmt.format(*g[small, 'distance 2'])} (m = 31: {fmt.format(*g[CYCLE, 'distance 2'])}; "
                      f"{words[d2.significant]})",
            "m21_others": f"{others:.3f}",
            "m21_lt_clean": "below" if upper(*error_mean_se(E[lab['linear'][1]][0], n_m), S) < 0.01 else "not below",
            "m21_reading": "The floor survives at m = 21, on the same tasks: the product of two learned matrices "
                           "couples patterns two steps apart whatever their shape, so the deviation m = d + 1 does not "
                           "cause it" if d2_lo > 0.01 and others < 0.01 else
                           "At m = 21 the floor is not where it is at m = 31 (distance-2 tasks above 0.01 by the 95 % "
                           f"interval: {d2_lo > 0.01}; largest other group {others:.3f}): the deviation m = d + 1 "
                           "matters for it",
            "m21_nsig": f"{sum(c.significant for c in cmp.values())} of {len(cmp)}"})
        return "\n".join(lines), numbers

    def claims(self) -> dict:
        """``{key: ClaimParts}`` of the rows ``thm4d``, ``thm4d-theta``, ``thm4d-alpha`` and ``fig2-task-sets``
        (:mod:`mambaicl.analysis.claims`)."""
        T4, S = self.thm4d, len(self.seeds)
        if not all(a in T4["alphas"] for a in (0.3, 0.4, 0.45)):
            raise ConfigError(f"claims need Theorem 4(d) at alpha 0.3, 0.4 and 0.45; got {T4['alphas']}")
        t = self.thm4d_stats()
        lengths, ratio, L_mid = T4["lengths"], t["ratio"], t["L_mid"]
        e3, e45, i_mid = t["len_stats"][0.3], t["len_stats"][0.45], lengths.index(L_mid)
        r_m, r_se = mean_se(ratio)
        r_iv = interval(ratio)
        expo = T4["fits"]["exponent"]
        (x_m, x_se), x_iv, rms = mean_se(expo), interval(expo), t["rms"]
        fmt = "{:.3f} ± {:.3f}"
        rows = self.all_task_stats()
        others = [k for k in self.sets() if k != CYCLE]
        M1 = self.config["base"]["data"]["M1"]
        return {
            "thm4d": ClaimParts(
                f"error at alpha = 0.3 falls {e3[0][0]:.3f} -> {e3[-1][0]:.3f} (l_ts {lengths[0]} -> {lengths[-1]}), "
                f"{e45[i_mid][0]:.3f} at alpha = 0.45 and l_ts = {L_mid}; examples needed for error 0.1, alpha 0.4 / "
                f"0.3: {r_m:.1f} ± {r_se:.1f}, 95 % [{r_iv.low:.2f}, {r_iv.high:.2f}] (predicted {t['predicted']:.2f})",
                per_seed=ratio),
            "thm4d-theta": ClaimParts(f"Θ reading: ratio {np.mean(ratio):.2f}", per_seed=ratio),
            "thm4d-alpha": ClaimParts(
                f"power of alpha {x_m:.2f} ± {x_se:.2f}, 95 % [{x_iv.low:.2f}, {x_iv.high:.2f}] (statement 1, proof -1); "
                f"rms log residual: statement {rms['statement'][0]:.3f}, proof {rms['proof'][0]:.3f}, central limit "
                f"{rms['clt'][0]:.3f} ({len(T4['alphas'])} alphas in [0.2, 0.45], error 0.1, {S} seeds)",
                per_seed=expo),
            "fig2-task-sets": ClaimParts(
                "all-task error at alpha = 0: " + "; ".join(f"{k} {fmt.format(*rows[k])}" for k in others)
                + f" (App. 9's cycle: {fmt.format(*rows[CYCLE])}; {S} seeds)",
                parts=[self.all_task[k] for k in others], n_prompts=self.n_task * M1 * (M1 - 1)),
        }

    def summary(self) -> str:
        lines = [f"{k:>24}: all tasks {sum(v) / len(v):.3f}; " + "; ".join(
            f"{g} {sum(e) / len(e):.3f}" for g, e in self.groups[k].items()) for k, v in self.all_task.items()]
        ex = [v for v in self.thm4d["fits"]["exponent"] if v == v]
        return "\n".join(lines + [f"Theorem 4(d): power of alpha {sum(ex) / max(len(ex), 1):.2f} (mean over seeds)"])


def _labels(preset: AblationsPreset) -> list:
    return [CYCLE, *preset.task_sets, f"cycle, M1 = {preset.large_M1}", f"{M_SMALL} = {preset.m_small}",
            f"linear, {M_SMALL} = {preset.m_small}", "linear"]


def _spec(preset: AblationsPreset, pat, pat_l) -> dict:
    """``label -> (kind, patterns, data config, training tasks, m)`` of every model of the ablations."""
    base, labels, M1 = preset.base, _labels(preset), preset.base.data.M1
    m_mamba = base.train["mamba"].m
    return {CYCLE: ("mamba", pat, base.data, task_set(CYCLE, M1), m_mamba),
            **{n: ("mamba", pat, base.data, task_set(n, M1), m_mamba) for n in preset.task_sets},
            labels[-4]: ("mamba", pat_l, _large_data(preset), task_set(CYCLE, preset.large_M1), m_mamba),
            labels[-3]: ("mamba", pat, base.data, task_set(CYCLE, M1), preset.m_small),
            labels[-2]: ("linear", pat, base.data, task_set(CYCLE, M1), preset.m_small),
            "linear": ("linear", pat, base.data, task_set(CYCLE, M1), base.train["linear"].m)}


def _trained_models(preset: AblationsPreset, spec: dict, reused: dict, seeds, device, progress) -> tuple:
    """Every model not ``reused`` trained as members of one engine call. Returns ``(models, final)``:
    ``label -> (stack, slots of the seeds)`` and ``label -> mean last batch loss``."""
    base = preset.base
    members, owner, data_of = [], [], {}
    for lab, (kind, p, dcfg, tasks, m) in spec.items():
        if reused.get(lab) is not None:
            continue
        data = data_of.setdefault((id(p), lab), SyntheticData(p, dcfg, tasks))
        tr = base.train[kind]
        members += [Member(s, kind, data, tr.lr, m=m, delta=tr.delta, dtype=p.mu.dtype) for s in seeds]
        owner += [(lab, i) for i in range(len(seeds))]
    trained = train(members, base.train["mamba"], device=resolve_device(device), progress=progress)
    models, final = {}, {}
    for lab in spec:
        if reused.get(lab) is not None:
            models[lab] = (reused[lab], list(range(len(seeds))))
            continue
        idx = [i for i, (o, _) in enumerate(owner) if o == lab]
        models[lab] = (trained.model(idx[0]), [trained.slot(i) for i in idx])
        final[lab] = sum(trained.losses(i)[-1] for i in idx) / len(idx)
    return models, final


def _task_errors(preset: AblationsPreset, spec: dict, models: dict, seeds) -> tuple:
    """At alpha = 0, every task, every model (each distinct stack tested once on its patterns): per label, the
    all-task error per seed, the errors per task group of its own training set, and the groups' sizes."""
    stacks = {}  # id(patterns) -> distinct stacks tested on them
    for lab, (stack, _) in models.items():
        group = stacks.setdefault(id(spec[lab][1]), (spec[lab][1], []))[1]
        if all(st is not stack for st in group):
            group.append(stack)
    per_task = {}  # id(stack) -> [member][task]
    for p, group in stacks.values():
        for st, errs in zip(group, _per_task([(st, _member_seeds(models, st)) for st in group], p, preset.base, seeds,
                                             preset.n_task)):
            per_task[id(st)] = errs
    all_task, groups, sizes = {}, {}, {}
    for lab, (stack, slots) in models.items():
        errs = [per_task[id(stack)][k] for k in slots]  # [seed][task]
        all_task[lab] = [sum(e) / len(e) for e in errs]
        by_group = tasks_by_group_for(spec[lab][3], spec[lab][1].mu.shape[0])
        groups[lab] = {g: [sum(e[t] for t in ts) / len(ts) for e in errs] for g, ts in by_group.items()}
        sizes[lab] = {g: len(ts) for g, ts in by_group.items()}
    return all_task, groups, sizes


def _thm4d(preset: AblationsPreset, models: dict, pat, seeds) -> dict:
    """Theorem 4(d): the Figure 2 linear Transformer's error at growing ``l_ts``, alphas below 1/2, and the
    lengths it needs to reach ``preset.level``."""
    base = preset.base
    lin, slots = models["linear"]
    if slots != list(range(lin.n_seeds)):
        raise RuntimeError("the linear Transformer's stack must hold exactly the seeds, in order")
    err4 = [error_by_length(lin, pat, dataclasses.replace(base.test, rule="A", alpha=float(a)), all_tasks(base.data.M1),
                            preset.n_4d, preset.lengths, numpy_streams(seeds, substage("ablations", "4d", float(a))))
            for a in preset.alphas_4d]
    needed = [lengths_needed(preset.lengths, e, preset.level) for e in err4]
    return {"alphas": list(preset.alphas_4d), "lengths": list(preset.lengths), "level": preset.level,
            "errors": err4, "needed": needed, "fits": alpha_fits(preset.alphas_4d, needed)}


def run(preset: AblationsPreset = ABLATIONS, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True,
        reuse: dict | None = None) -> AblationsResult:
    """Train every model of the ablations as members of one engine call and measure them.

    Args:
        reuse: ``{"mamba": stack, "linear": stack}`` of Figure 2's models for ``seeds`` (e.g. ``fig2.run``'s
            ``models``), used instead of retraining the cycle's Mamba and linear Transformer (the chapter).
    """
    seeds = resolve_seeds(seeds)
    reuse = dict(getattr(reuse, "models", reuse) or {})  # a Fig2Result (reproduce --all hands one) or its models
    base = preset.base
    pat = patterns(base)
    pat_l = make_patterns(_large_data(preset), torch_generator(base.pattern_seed, "patterns"), dtype=pat.mu.dtype)
    labels = _labels(preset)
    spec = _spec(preset, pat, pat_l)
    reused = {CYCLE: reuse.get("mamba"), "linear": reuse.get("linear")}
    models, final = _trained_models(preset, spec, reused, seeds, device, progress)
    all_task, groups, sizes = _task_errors(preset, spec, models, seeds)
    # Figure 2 at m = l + 1 beside m = d + 1: rule A, all tasks, one draw per alpha for the four models
    m_labs = (CYCLE, labels[-3], "linear", labels[-2])
    pairs = [(models[lab][0], _member_seeds(models, models[lab][0])) for lab in m_labs]
    rows = [member_errors(pairs, pat, dataclasses.replace(base.test, rule="A", alpha=float(a)), all_tasks(base.data.M1),
                          preset.n_m, seeds, substage("ablations", "m", float(a))) for a in preset.m_alphas]  # [alpha][model][member]
    m_errors = {lab: [[row[i][k] for k in models[lab][1]] for row in rows] for i, lab in enumerate(m_labs)}
    cfg = to_dict(preset)
    cfg["task_set_tasks"] = {n: task_set(n, base.data.M1).tolist() for n in (CYCLE, *preset.task_sets)}
    return AblationsResult(preset=preset.name, seeds=list(seeds), task_sets=cfg["task_set_tasks"], all_task=all_task,
                           groups=groups, group_sizes=sizes, n_task=preset.n_task, m_alphas=list(preset.m_alphas),
                           m_errors=m_errors, thm4d=_thm4d(preset, models, pat, seeds), final_train_loss=final,
                           config=cfg, models=models)
