"""How a trained Mamba does it (§3.5, §4.1 Fig. 3 and the gate figure, App. 8.1 Figs. 4-5): Corollaries 1-2.

Glossary (code name -> paper symbol):

====================  ===================================================================
``MechanismPreset``   a model (one layer of Eq. (3), or a residual stack), its training, the
                      training ``p_a`` (0.4 in §4.1) and the test ``alpha`` (0.3, gate figure)
``record_steps``      updates after which Corollary 1's two sums are recorded (log-spaced, so
                      that the early dynamics show)
``same``, ``other``   Corollary 1's sums over ``N_1`` and over the other examples, per layer
``gate_outlier``      median gate of outlier / clean examples, per layer (Corollary 2(i))
``rank``              median ``G_{h(j)}``, ``j = 1..J`` (Corollary 2(ii)); ``decay_*`` its fit vs ``2^{-(j-1)}``
``errors_by_group``   ``{model: {task group: [per seed]}}``: test error per task group (training, reversed,
                      distance 2, distance 3); a model that memorised the training tasks fails every
                      reversed task (:mod:`mambaicl.recipes.mechanism`)
``lrs``               step sizes searched on held-out seeds (``n_search`` of them, ``search_steps``
                      updates, scored by the validation loss); ``()``: the preset's ``train.lr``
``val_every``         check the validation loss every ``val_every`` updates and stop when ``patience``
                      checks bring no new minimum (each seed keeps its best check); 0: ``train.steps``
``group_sums``        Corollary 1's sums per task group and layer (where the error comes from)
``placement``         error and gate mass with the outliers far from / random / close to the query
``mechanism_groups``  task groups whose prompts Corollaries 1-2 are measured on (default: all tasks)
====================  ===================================================================

Streams: seed ``s`` initialises from ``(s, "init")``, trains on ``(s, "train")`` and is measured
on ``(s, "test/mechanism")`` (and ``"test/sums"``, ``"test/groups"``, ``"test/placement"``); the patterns are Figure 2's (shared by all seeds, see
:mod:`mambaicl.experiments.fig2`, from ``(0, "patterns")``).

The preset class and the named presets live in :mod:`mambaicl.recipes.presets` (``rmsnorm_causal`` and
``deep_gate_training`` read them too) and are re-exported here under their usual names.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..analysis.corollaries import (decay_summary, group_report, layer_table,  # noqa: F401
                                    mechanism_report, placement_cost)
from ..evaluate import errors_by_task_group
from ..analysis.stats import compare, error_mean_se, mean_se
from ..config import check_choice, to_dict
from ..data import all_tasks, test_prompts
from ..evaluate import predict, zero_one_error
from ..seeding import numpy_stream
from ..recipes.base import Result, internal, resolve_seeds
from ..recipes.presets import (FIG3, FIG3_NONE, MAMBA1, MECHANISM_PRESETS, MECHANISM_SEEDS, ONE_LAYER_MECHANISM,  # noqa: F401
                     MechanismPreset, log_steps)
from ..recipes.mechanism import (SeedRun, build, mechanism_tasks, search, seed_members, seed_runs,  # noqa: F401
                                 setting, token_norms)

__all__ = ["MechanismPreset", "ONE_LAYER", "FIG3", "FIG3_NONE", "MAMBA1", "PRESETS",
           "DEFAULT_PRESET", "DEFAULT_SEEDS", "MechanismResult", "chapter_claims", "SeedRun", "setting", "build", "seed_members",
           "seed_runs", "search", "run", "log_steps", "decay_summary", "mechanism_tasks"]

ONE_LAYER, DEFAULT_SEEDS = ONE_LAYER_MECHANISM, MECHANISM_SEEDS
PRESETS = MECHANISM_PRESETS
DEFAULT_PRESET = "fig3"


@dataclass
class MechanismResult(Result):
    """Corollaries 1-2 per layer, per seed, with means and standard errors over seeds."""

    preset: str
    seeds: list
    config: dict
    test_error: list  # per seed, on n_test prompts at alpha
    test_error_mean: float
    test_error_se: float
    layers: list  # per layer: {"same": [per seed], "other": ..., "gate_outlier": ..., "gate_clean": ...,
    #               "rank": [[J] per seed], "decay_factor": [per seed], "decay_min_ratio", "decay_r2", "decay_constant"}
    sums: dict  # {"steps": [...], "same": [seed][record][layer], "other": ...}
    final_train_loss: list  # per seed: last training batch's loss (fixed-steps training; [] when trained to a plateau)
    errors_by_group: dict  # {model: {task group: [per seed]}} on n_group prompts per group ({} if n_group = 0)
    group_sums: dict  # {task group: {"same": [seed][layer], "other": [seed][layer]}} on the same prompts
    placement: dict  # {"FQ"/"R"/"CQ": {quantity: [per seed]}} ({} if n_placement = 0)
    lr: float = math.nan  # the step size the reported seeds trained with (searched if the preset has lrs)
    search: dict = dataclasses.field(default_factory=dict)  # {"lrs", "seeds", "mean", "per_seed", "best"} or {}
    best_step: list = dataclasses.field(default_factory=list)  # per seed: updates kept (val_every) or []
    stopped: int = -1  # updates run before every seed's validation loss stopped improving (-1: fixed steps)
    val_loss: list = dataclasses.field(default_factory=list)  # per seed: validation loss at the kept check
    diverged: list = dataclasses.field(default_factory=list)  # per seed: training diverged (it keeps its best check)
    token_norms: list = dataclasses.field(default_factory=list)  # per layer {quantity: [per seed]} (n_norms)
    runs: list = internal()  # [SeedRun] in seeds order
    reports: list = internal()  # [[LayerReport per layer] per seed]
    prompts: object = internal()  # the first seed's prompts of the Corollary 1-2 report (for figures)

    def layer_mean_se(self, layer: int, key: str) -> tuple[float, float]:
        """Mean and standard error over seeds of one per-seed quantity of ``layer``."""
        return mean_se(self.layers[layer][key])

    def per_seed(self, layer: int, key: str) -> list:
        """Per-seed values of ``key`` in ``layer``; also the derived ``"other_over_same"``
        (``|other| / same``, Corollary 1) and ``"gate_ratio"`` (median outlier / clean gate, Cor. 2(i))."""
        L = self.layers[layer]
        if key == "other_over_same":
            return [abs(o) / s if s > 0 else math.inf for s, o in zip(L["same"], L["other"])]
        if key == "gate_ratio":
            return [o / c for o, c in zip(L["gate_outlier"], L["gate_clean"])]
        return list(L[key])

    def sum_curve(self, layer: int, which: str) -> tuple[list, list, list]:
        """``(steps, mean, se)`` over seeds of Corollary 1's ``which`` sum (``"same"``/``"other"``) in ``layer``."""
        check_choice("which", which, ("same", "other"))
        per = self.sums[which]  # [seed][record][layer]
        stats = [mean_se([per[s][k][layer] for s in range(len(per))]) for k in range(len(self.sums["steps"]))]
        return list(self.sums["steps"]), [m for m, _ in stats], [0.0 if se != se else se for _, se in stats]

    def peak(self, layer: int, which: str = "same"):
        """Where the mean ``which`` sum of ``layer`` peaks along training, and whether it falls after.

        Returns ``(step, comparison)``: the recorded step at which the mean over seeds is largest,
        and :func:`mambaicl.analysis.stats.compare` of the per-seed values there against the final
        ones (``comparison.verdict == "a > b"``: the sum falls after its peak, by the 95 % t interval).
        """
        steps, mean, _ = self.sum_curve(layer, which)
        k = max(range(len(mean)), key=mean.__getitem__)
        per = self.sums[which]
        return steps[k], compare([p[k][layer] for p in per], [p[-1][layer] for p in per])

    def group_sum(self, group: str, which: str, layer: int = 0) -> list:
        """Per-seed mean over the group's prompts of Corollary 1's ``which`` sum in ``layer``."""
        return [v[layer] for v in self.group_sums[group][which]]

    @property
    def groups(self) -> dict:
        """``{task group: [per seed]}``: the errors by task group of this result's model."""
        return self.errors_by_group.get(self.preset, {})

    def group_error(self, group: str) -> tuple[float, float]:
        """Mean and SE over seeds (seeds and prompts counted) of the test error on one task group."""
        return error_mean_se(self.groups[group], self.config["n_group"])

    def claims(self) -> dict:
        """The rows this run measures alone: ``mamba1-mechanism`` (the MAMBA1 preset: per seed, the reversed-task
        error, beside the training and far tasks'; appendix). Chapter 5's rows compare several runs:
        :func:`chapter_claims`."""
        from ..analysis.claims import ClaimParts
        from ..analysis.text import mean_se_text as mst

        if self.preset != "mamba1":
            return {}
        n_g, n_test = self.config["n_group"], self.config["n_test"]
        rev, tr = self.groups["reversed"], self.groups["training"]
        far = [sum(v) / 2 for v in zip(self.groups["distance 2"], self.groups["distance 3"])]
        return {"mamba1-mechanism": ClaimParts(
            f"training tasks {mst(tr, 3, n_g, seeds=False)}, reversed tasks {mst(rev, 3, n_g, seeds=False)}, "
            f"distance 2-3 {mst(far, 3, n_g, seeds=False)}; test error {mst(self.test_error, 3, n_test, seeds=False)} "
            f"({len(self.seeds)} seeds)", per_seed=rev, n_prompts=n_g)}

    def ratio_by_group(self) -> dict:
        """``{task group: per seed, first layer's other/same sum}`` (Corollary 1, signed)."""
        from ..analysis.text import GROUP_ORDER

        return {g: [o / s for s, o in zip(self.group_sum(g, "same"), self.group_sum(g, "other"))] for g in GROUP_ORDER}

    def cor1_contrasts(self, bound: float) -> dict:
        """``{task group: per seed, the first layer's other − bound·same}`` of the group's two Corollary 1 sums
        (Eq. (6) as a linear contrast, ``bound`` = ε/(1−p_a)); for the distance-3 pairs, which never meet in
        training, ``|other| − bound·same`` (App. 10.2 bounds the absolute value)."""
        from ..analysis.text import GROUP_ORDER

        return {g: [(abs(o) if g == "distance 3" else o) - bound * s
                    for s, o in zip(self.group_sum(g, "same"), self.group_sum(g, "other"))] for g in GROUP_ORDER}

    def same_all(self) -> list:
        """Per seed, the first layer's same-pattern sum averaged over the four task groups."""
        from ..analysis.text import GROUP_ORDER

        return [sum(vals) / len(vals) for vals in zip(*(self.group_sum(g, "same") for g in GROUP_ORDER))]

    def suppressing(self, threshold: float) -> list:
        """``[[seed's median outlier/clean gate < threshold] per seed] per layer``."""
        return [[v < threshold for v in self.per_seed(layer, "gate_ratio")] for layer in range(len(self.layers))]


def _step_size(preset: MechanismPreset, seeds, device) -> tuple:
    """Step 1: the step size of the reported seeds and how it was chosen: the preset's recorded choice when its
    search seeds are not reported, else a new search (:func:`search`), else the preset's ``train.lr``.
    Returns ``(lr, search)``, ``search`` the result's ``search`` field."""
    rec = preset.recorded_step
    if rec is not None and rec.usable_for(seeds):  # searched once on the seeds after DEFAULT_SEEDS
        return rec.lr, {"lrs": list(rec.lrs), "seeds": list(rec.seeds), "best": rec.lr, "recorded": True}
    found = search(preset, seeds, device=device)
    if found is None:
        return preset.train.lr, {}
    return found.best, {"lrs": found.lrs, "seeds": found.seeds, "mean": found.mean, "per_seed": found.per_seed,
                        "best": found.best}


def _measure_seed(preset: MechanismPreset, s: int, r: SeedRun, test, tasks) -> dict:
    """Step 3, one seed: its test error on prompts of all tasks, the Corollary 1-2 report of every layer (and its
    prompts), its errors and sums per task group, its token norms per layer and its cost of locality; each on its
    own stream ``(s, "test/...")``. Quantities the preset leaves out are absent."""
    pr = test_prompts(r.patterns, test, tasks, preset.n_test, numpy_stream(s, "test/mechanism"))
    out = {"error": zero_one_error(predict(r.model, pr), pr.z)}
    if preset.mechanism_groups:  # Corollaries 1-2 on prompts of the chosen task groups only
        pr = test_prompts(r.patterns, test, mechanism_tasks(preset), preset.n_test,
                          numpy_stream(s, "test/mechanism/groups"))
    out["prompts"], out["report"] = pr, mechanism_report(r.model, pr, J=preset.J)
    if preset.n_group and preset.group_sums:
        out["groups"] = group_report(r.model, r.patterns, test, preset.n_group, s, "test/groups")
    elif preset.n_group:  # the same draws as group_report, errors only
        out["groups"] = {g: {"error": v} for g, v in
                         errors_by_task_group(r.model, r.patterns, test, preset.n_group, s, "test/groups").items()}
    if preset.n_norms:
        pr_n = test_prompts(r.patterns, test, tasks, preset.n_norms, numpy_stream(s, "test/norms"))
        out["norms"] = token_norms(r.model, pr_n)
    if preset.n_placement:
        out["placement"] = placement_cost(r.model, r.patterns, test, tasks, preset.n_placement, seed=s)
    return out


def _per_seed_tables(measured: list) -> dict:
    """Step 4: the seeds' measurements as per-seed lists: ``groups`` ``{group: [error per seed]}``, ``group_sums``
    ``{group: {"same"/"other": [per seed]}}``, ``norms`` ``[per layer {quantity: [per seed]}]`` and ``placement``
    ``{placement: {quantity: [per seed]}}``."""
    groups, group_sums, norms, placement = {}, {}, [], {}
    for m in measured:
        for g, v in m.get("groups", {}).items():
            groups.setdefault(g, []).append(v["error"])
            for k in ("same", "other"):
                if k in v:
                    group_sums.setdefault(g, {}).setdefault(k, []).append(v[k])
        for i, row in enumerate(m.get("norms", [])):
            if len(norms) <= i:
                norms.append({})
            for k, v in row.items():
                norms[i].setdefault(k, []).append(v)
        for pl, vals in m.get("placement", {}).items():
            for k, v in vals.items():
                placement.setdefault(pl, {}).setdefault(k, []).append(v)
    return {"groups": groups, "group_sums": group_sums, "norms": norms, "placement": placement}


def _training_fields(preset: MechanismPreset, runs: list) -> dict:
    """Step 6: how the seeds trained: the last batch loss (fixed steps), or the early stopping's kept update count,
    stopping point, validation loss and divergence (``val_every``)."""
    if not preset.val_every:
        return {"final_train_loss": [r.history.loss_of(i)[-1] for i, r in enumerate(runs)]}
    return {"final_train_loss": [], "best_step": [r.best_step for r in runs], "stopped": runs[0].stopped,
            "val_loss": [r.val_loss for r in runs], "diverged": [r.diverged for r in runs]}


def run(preset: MechanismPreset = FIG3, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> MechanismResult:
    """Train the preset's model for every seed and measure Corollaries 1-2 on Definition 2 prompts.

    The steps: (1) the step size (:func:`_step_size`); (2) every seed trained in one call of the engine
    (:func:`seed_runs`); (3) per seed, the measurements (:func:`_measure_seed`): the test error on ``n_test``
    prompts of all tasks (stream ``(s, "test/mechanism")``), the Corollary 1-2 report of every layer on the same
    prompts (or, with ``mechanism_groups``, on ``n_test`` prompts of those groups' tasks,
    ``(s, "test/mechanism/groups")``), the error and Corollary 1's sums per task group (``(s, "test/groups")``),
    the token norms and, if ``n_placement``, the cost of locality (:func:`mambaicl.analysis.corollaries.placement_cost`,
    ``(s, "test/placement")``); (4-6) the per-seed tables, the layer table
    (:func:`mambaicl.analysis.corollaries.layer_table`) and the training fields.
    """
    seeds = resolve_seeds(seeds)
    data, test = setting(preset)
    lr, found = _step_size(preset, seeds, device)
    runs = seed_runs(preset, seeds, lr=lr, device=device, progress=progress)
    tasks = all_tasks(data.M1)
    measured = [_measure_seed(preset, s, r, test, tasks) for s, r in zip(seeds, runs)]
    tables = _per_seed_tables(measured)
    reports, errors = [m["report"] for m in measured], [m["error"] for m in measured]
    sums = {"steps": runs[0].recorder.steps, "same": [r.recorder.same for r in runs],
            "other": [r.recorder.other for r in runs]}
    m, se = error_mean_se(errors, preset.n_test)
    cfg = to_dict(preset)
    cfg["record_steps"] = list(preset.steps_to_record)
    return MechanismResult(preset=preset.name, seeds=list(seeds), config=cfg, test_error=errors, test_error_mean=m,
                           test_error_se=se, layers=layer_table(reports), sums=sums,
                           errors_by_group={preset.name: tables["groups"]} if tables["groups"] else {},
                           group_sums=tables["group_sums"], placement=tables["placement"], lr=float(lr), search=found,
                           token_norms=tables["norms"], runs=runs, reports=reports, prompts=measured[0]["prompts"],
                           **_training_fields(preset, runs))


def chapter_claims(one: MechanismResult, deep: MechanismResult, none: MechanismResult, m1: MechanismResult) -> dict:
    """Chapter 5's rows, from its four runs (presets ``one_layer``, ``fig3``, ``fig3_none``, ``mamba1``):
    Corollaries 1 and 2 on the one-layer model, Figure 3 and App. Figures 4-5 on the three-layer stack, whether each
    deep stack learns in context, what RMSNorm does to the gates, and where the outliers sit (§4.2).

    Corollary 1 (``cor1``, ``fig3``) is judged on linear contrasts per seed and task group
    (:meth:`MechanismResult.cor1_contrasts`), ``rmsnorm`` on the per-seed log ratio of the two stacks' gate ratios
    (exact sign test), ``locality`` on the three-layer stack (the one-layer model's is the diagnostic
    ``locality-one-layer``).

    Returns:
        ``{claim key: ClaimParts}`` (:class:`~mambaicl.analysis.claims.ClaimParts`).
    """
    import numpy as np

    from ..analysis.claims import CLAIMS, COR1_BOUND, ClaimParts
    from ..analysis.text import GROUP_ORDER, mean_se_text as mst

    n, n_g, S = deep.config["n_test"], deep.config["n_group"], len(deep.seeds)
    n_pd, n_pl = deep.config["n_placement"], one.config["n_placement"]
    suppress = CLAIMS["cor2i"].criterion.threshold  # Cor. 2(i): outlier/clean median gate below 1/M1
    gate_ratio, L0, L1 = one.per_seed(0, "gate_ratio"), one.layers[0], deep.layers[0]
    same_0 = [s[0][0] for s in one.sums["same"]]  # at initialisation, per seed
    con = {"one": one.cor1_contrasts(COR1_BOUND), "deep": deep.cor1_contrasts(COR1_BOUND)}
    contrasts = lambda k: ", ".join(f"{g} {np.mean(con[k][g]):+.2f}" for g in GROUP_ORDER)  # noqa: E731
    gap_T = [s - o for s, o in zip(L1["same"], L1["other"])]
    gap_0 = [s[0][0] - o[0][0] for s, o in zip(deep.sums["same"], deep.sums["other"])]
    gap_l = {layer: [s - o for s, o in zip(deep.layers[layer]["same"], deep.layers[layer]["other"])] for layer in (1, 2)}
    deep_runs = {"three layers, RMSNorm": deep, "three layers, no normalisation": none, "three Mamba-1 blocks": m1}
    rev = {name: res.groups["reversed"] for name, res in deep_runs.items()}
    sup = {"rms": deep.suppressing(suppress), "none": none.suppressing(suppress)}
    log_ratio = [[math.log10(r) - math.log10(q) for r, q in zip(deep.per_seed(layer, "gate_ratio"),
                                                                none.per_seed(layer, "gate_ratio"))] for layer in range(3)]
    pl, pd_ = one.placement, deep.placement
    cq_minus_fq = lambda p: [c - f for c, f in zip(p["CQ"]["error"], p["FQ"]["error"])]  # noqa: E731
    return {
        "cor2i": ClaimParts(f"median outlier/clean gate {mst(gate_ratio, 1, seeds=False, fmt='e')} "
                            f"({len(one.seeds)} seeds, one layer)", per_seed=gate_ratio),
        "cor2ii": ClaimParts(
            f"clean gates fall by {mst(L0['decay_factor'], 2, seeds=False)} per clean example (1/2 in the bound's "
            f"proof; R^2 >= {min(L0['decay_r2']):.3f}) ({len(one.seeds)} seeds, one layer)", per_seed=L0["decay_factor"]),
        "three-layer-error": ClaimParts(
            f"test error {mst(deep.test_error, 3, n, seeds=False)} (one layer {mst(one.test_error, 3, n, seeds=False)}"
            f"; no normalisation {mst(none.test_error, 3, n, seeds=False)}), {S} seeds, step size searched, "
            "trained to a validation plateau", per_seed=deep.test_error, n_prompts=n),
        "deep-icl": ClaimParts("; ".join(f"{name}: reversed-task error {mst(v, 3, n_g, seeds=False)}"
                                         for name, v in rev.items()) + f" ({S} seeds)",
                               parts=list(rev.values()), n_prompts=n_g),
        "cor1": ClaimParts(
            f"same-pattern sum {mst(L0['same'], 1, seeds=False)} (from {mst(same_0, 2, seeds=False)}); other − "
            f"ε/(1−p_a)·same by group (|other| at distance 3): {contrasts('one')} ({len(one.seeds)} seeds, one layer)",
            parts=[one.same_all()] + [con["one"][g] for g in GROUP_ORDER]),
        "fig3": ClaimParts(
            f"layer 1: same - other grows from {mst(gap_0, 2, seeds=False)} to {mst(gap_T, 2, seeds=False)}; other − "
            f"ε/(1−p_a)·same by group (|other| at distance 3): {contrasts('deep')} ({S} seeds)",
            parts=[[t - z for t, z in zip(gap_T, gap_0)], deep.same_all()] + [con["deep"][g] for g in GROUP_ORDER]),
        "gate-figure": ClaimParts(
            f"layer 1: median outlier/clean gate {mst(deep.per_seed(0, 'gate_ratio'), 2, seeds=False)}; clean gates "
            f"fall by {mst(L1['decay_factor'], 2, seeds=False)} per clean example ({S} seeds)",
            parts=[deep.per_seed(0, "gate_ratio"), L1["decay_factor"]]),
        "app-figs45": ClaimParts(
            "; ".join(f"layer {layer + 1}: |other|/same {r[0]:.2f} ± {r[1]:.2f}, outlier/clean gate {g[0]:.2f} ± "
                      f"{g[1]:.2f}" for layer, r, g in ((layer, mean_se(deep.per_seed(layer, "other_over_same")),
                                                         mean_se(deep.per_seed(layer, "gate_ratio"))) for layer in (1, 2)))
            + f" ({S} seeds)",
            parts=[gap_l[1], deep.per_seed(1, "gate_ratio"), gap_l[2], deep.per_seed(2, "gate_ratio")]),
        "rmsnorm": ClaimParts(
            "log10(gate ratio with RMSNorm / without), per layer: " + "; ".join(
                f"layer {layer + 1}: {mst(log_ratio[layer], 2, seeds=False)}, positive in "
                f"{sum(v > 0 for v in log_ratio[layer])} of {S} seeds" for layer in range(3))
            + "; seeds whose gate suppresses outliers (ratio < 1/M1): " + "; ".join(
                f"layer {layer + 1}: {sum(sup['rms'][layer])} of {S} with RMSNorm, {sum(sup['none'][layer])} of "
                f"{S} without" for layer in range(3)) + f"; test error {mst(deep.test_error, 3, n, seeds=False)} "
            f"vs {mst(none.test_error, 3, n, seeds=False)}",
            parts=log_ratio),
        "locality": ClaimParts(
            f"test error FQ {mst(pd_['FQ']['error'], 3, n_pd, seeds=False)}, CQ "
            f"{mst(pd_['CQ']['error'], 3, n_pd, seeds=False)} (three layers, {S} seeds)", per_seed=cq_minus_fq(pd_)),
        "locality-one-layer": ClaimParts(
            f"test error FQ {mst(pl['FQ']['error'], 3, n_pl, seeds=False)}, CQ "
            f"{mst(pl['CQ']['error'], 3, n_pl, seeds=False)} (one layer, {len(one.seeds)} seeds)",
            per_seed=cq_minus_fq(pl)),
    }


# ------------------------------------------------------------------------------------ Chapter 8's numbers
# Every number Chapter 8 (book/myst/ch05_mechanism.md) glues into its prose, derived here from the stored runs: each
# function returns ``{glue name: text}`` in the order the chapter glues them, and raises where a sentence of the
# chapter's prose would no longer be true of the measurement (the chapter's checks, kept beside the numbers).

def _require(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)


def setting_numbers(preset: MechanismPreset = FIG3, seeds=DEFAULT_SEEDS) -> dict:
    """The setting's numbers: seeds, test prompts per seed, the test outlier magnitude and its ratio to ``kappa_a``."""
    data, test = setting(preset)
    return {"ch5_n_seeds": str(len(seeds)), "ch5_n_test": f"{preset.n_test}",
            "ch5_kappa_prime": f"{test.kappa_a_prime:g}", "ch5_kappa_ratio": f"{test.kappa_a_prime / data.kappa_a:.1f}"}


def one_layer_numbers(one: MechanismResult) -> dict:
    """The one-layer run's training (steps, step size) and its test error."""
    from ..analysis.text import mean_se_text as mst

    train = PRESETS[one.preset].train
    return {"ch5_one_steps": str(train.steps), "ch5_one_lr": f"{train.lr:g}",
            "ch5_one_err": mst(one.test_error, 3, one.config["n_test"], seeds=False)}


def cor1_numbers(one: MechanismResult) -> dict:
    """Corollary 1 along training, one layer: the sums at initialisation and at the end, the pooled |other|/same,
    the step by which half the rise is done. Checks: the same-pattern sum grew, the other sum is negative in every
    seed, and the same-pattern curve does not fall distinguishably after its peak."""
    from ..analysis.text import mean_se_text as mst

    same_T, other_T = one.layers[0]["same"], one.layers[0]["other"]
    same_0 = [s[0][0] for s in one.sums["same"]]  # at initialisation, per seed
    r_m, r_se = mean_se(one.per_seed(0, "other_over_same"))
    grew = compare(same_T, same_0)
    steps, curve, _ = one.sum_curve(0, "same")
    rise = next(st for st, v in zip(steps, curve) if v >= curve[0] + 0.5 * (curve[-1] - curve[0]))
    _, fall = one.peak(0, "same")
    _require(grew.significant and grew.diff > 0, "Corollary 1: the same-pattern sum did not grow")
    _require(max(other_T) < 0, "the other-pattern sum is not negative in every seed")
    _require(fall.verdict != "a > b", "the same-pattern sum falls after its peak")
    from ..analysis.claims import COR1_BOUND

    return {"ch5_cor1_bound": f"{COR1_BOUND:.3g}",
            "ch5_one_same_0": mst(same_0, 2, seeds=False), "ch5_one_same_T": mst(same_T, 1, seeds=False),
            "ch5_one_other_T": mst(other_T, 1, seeds=False), "ch5_one_ratio": f"{r_m:.2f} ± {r_se:.2f}",
            "ch5_one_rise": str(rise)}


def cor2_numbers(one: MechanismResult) -> dict:
    """Corollary 2, one layer: median outlier and clean gates, their ratio, the clean gates' decay factor against
    1/2 and its fit. Checks: the ratio's interval is below 1/M1, the factor above 1/2, R^2 > 0.95 in every seed."""
    from ..analysis.claims import CLAIMS
    from ..analysis.stats import interval
    from ..analysis.text import mean_se_text as mst

    suppress = CLAIMS["cor2i"].criterion.threshold
    L = one.layers[0]
    gate_ratio, factor, r2 = one.per_seed(0, "gate_ratio"), L["decay_factor"], L["decay_r2"]
    vs_half = compare(factor, [0.5] * len(factor))
    _require(interval(gate_ratio).high < suppress, "Corollary 2(i): outlier gates are not below 1/M1 of clean gates")
    _require(vs_half.verdict == "a > b", "Corollary 2(ii): clean gates decay faster than 1/2 per clean example")
    _require(min(r2) > 0.95, "the clean gates' decay is not close to exponential in every seed")
    return {"ch5_suppress": f"{suppress:.3g}",
            "ch5_one_gate_out": mst(L["gate_outlier"], 1, seeds=False, fmt="e"),
            "ch5_one_gate_clean": mst(L["gate_clean"], 1, seeds=False, fmt="e"),
            "ch5_one_gate_ratio": mst(gate_ratio, 1, seeds=False, fmt="e"),
            "ch5_one_decay": mst(factor, 2, seeds=False), "ch5_one_decay_vs_half": str(vs_half),
            "ch5_one_r2": f"{min(r2):.3f}"}


def one_locality_numbers(one: MechanismResult) -> dict:
    """The cost of locality in one layer: the closest clean example's distance and gate, FQ against CQ. Checks: CQ
    and FQ errors equal within 2 points (the whole 95 % interval), the closest clean gate lower under CQ in every
    seed."""
    from ..analysis.text import mean_se_text as mst

    pl, n_pl = one.placement, one.config["n_placement"]
    cq_vs_fq = compare(pl["CQ"]["error"], pl["FQ"]["error"], n_pl)
    _require(-0.02 < cq_vs_fq.low and cq_vs_fq.high < 0.02, "one layer: CQ and FQ differ by more than 2 points")
    _require(max(c - f for c, f in zip(pl["CQ"]["first_clean_gate"], pl["FQ"]["first_clean_gate"])) < 0,
             "one layer: the closest clean gate is not lower under CQ in every seed")
    return {"ch5_one_cq_dist": mst(pl["CQ"]["first_clean_distance"], 1, seeds=False),
            "ch5_one_fq_g1": mst(pl["FQ"]["first_clean_gate"], 3, seeds=False),
            "ch5_one_cq_g1": mst(pl["CQ"]["first_clean_gate"], 3, seeds=False),
            "ch5_one_fq_err": mst(pl["FQ"]["error"], 3, n_pl, seeds=False),
            "ch5_one_cq_err": mst(pl["CQ"]["error"], 3, n_pl, seeds=False), "ch5_one_cq_vs_fq": str(cq_vs_fq)}


def deep_fit_numbers(one: MechanismResult, deep: MechanismResult, none: MechanismResult, m1: MechanismResult) -> dict:
    """How each deep model was fitted (step size searched, early stopping), and the three-layer error against the
    one-layer model's (comparable: not distinguishable, or below 0.1)."""
    from ..analysis.text import mean_se_text as mst, median_range_text as mrt

    n = deep.config["n_test"]
    out = {"ch5_search_seeds": ", ".join(str(s) for s in deep.search["seeds"]),
           "ch5_val_every": str(PRESETS[deep.preset].val_every), "ch5_patience": str(PRESETS[deep.preset].patience)}
    for key, res in (("deep", deep), ("none", none), ("m1", m1)):
        div = sum(res.diverged)
        out[f"ch5_{key}_fitted"] = (
            f"step size {res.lr:g} (of {', '.join(f'{v:g}' for v in res.search['lrs'])}); each seed stopped "
            f"after {PRESETS[res.preset].patience} checks without a new best and kept its best, at "
            f"{mrt(res.best_step, 'g')} updates (median [min, max] over seeds; validation hinge "
            f"loss {mst(res.val_loss, 3, seeds=False)})"
            + (f"; {div} of {len(res.diverged)} seeds diverged at this step size and keep their best check before "
               "that" if div else "; no seed diverged"))
    vs_one = compare(deep.test_error, one.test_error, n, paired=False)
    comparable = (not vs_one.significant) or deep.test_error_mean < 0.1
    out.update({"ch5_deep_lr": f"{deep.lr:g}", "ch5_deep_steps": mrt(deep.best_step, "g"),
                "ch5_deep_err": mst(deep.test_error, 3, n, seeds=False),
                "ch5_none_err": mst(none.test_error, 3, n, seeds=False),
                "ch5_m1_err": mst(m1.test_error, 3, m1.config["n_test"], seeds=False),
                "ch5_deep_vs_one": str(vs_one),
                "ch5_deep_comparable": "comparable to" if comparable else "not comparable to"})
    return out


#: the chapter's names of the three deep runs, with their glue keys
DEEP_NAMES = (("deep", "three layers, RMSNorm"), ("none", "three layers, no normalisation"),
              ("m1", "three Mamba-1 blocks"))


def deep_icl_numbers(deep_runs: dict, judgement) -> dict:
    """Row ``deep-icl`` in words: each deep model's reversed- and training-task errors, which learn in context
    (``judgement``: the row's :class:`~mambaicl.analysis.claims.Judgement`, one part per model)."""
    from ..analysis.text import mean_se_text as mst

    learns = {name: o is True for name, o in zip(deep_runs, judgement.outcomes())}
    out = {}
    for key, name in DEEP_NAMES:
        res = deep_runs[name]
        n_g = res.config["n_group"]
        out[f"ch5_rev_{key}"] = mst(res.groups["reversed"], 3, n_g, seeds=False)
        out[f"ch5_tr_{key}"] = mst(res.groups["training"], 3, n_g, seeds=False)
        out[f"ch5_icl_{key}"] = "learns in context" if learns[name] else "is not shown to learn in context"
    yes = [name for name in deep_runs if learns[name]]
    out["ch5_icl_words"] = ("every deep model learns in context" if len(yes) == len(deep_runs) else
                            "no deep model is shown to learn in context" if not yes else
                            "only " + " and ".join(yes) + " learn" + ("s" if len(yes) == 1 else "") + " in context")
    out["ch5_mech_basis"] = (
        "It learns in context, so its mechanism is read below, on prompts of all 30 tasks."
        if learns["three layers, RMSNorm"] else
        "It is not shown to learn in context, so what follows describes its layers without reading them as the "
        "mechanism of in-context learning.")
    out["ch5_none_basis"] = (
        "The stack without normalisation learns in context too, so its gates can be compared."
        if learns["three layers, no normalisation"] else
        "The stack without normalisation is not shown to learn in context, so its gates are described, not read "
        "as a mechanism of in-context learning.")
    return out


def near_error_at_training_magnitude(none: MechanismResult) -> list:
    """Per seed, the error of the unnormalised stack on the training and reversed tasks (mean of the two groups)
    with the test outliers at the training magnitude ``kappa_a`` (the same draws as its groups' errors)."""
    preset = PRESETS[none.preset]
    data, test = setting(preset)
    small = dataclasses.replace(test, kappa_a_prime=data.kappa_a)
    return [sum(errors_by_task_group(r.model, r.patterns, small, preset.n_group, s, "test/groups")[g]
                for g in ("training", "reversed")) / 2 for s, r in zip(none.seeds, none.runs)]


def error_source_numbers(one: MechanismResult, deep: MechanismResult, none: MechanismResult, cor1) -> dict:
    """Where the three-layer error comes from: errors and first-layer other/same ratios by task group for one and
    three layers; the unnormalised stack on the training and reversed tasks at the test and the training outlier
    magnitude (:func:`near_error_at_training_magnitude`); row ``cor1``'s verdict (``cor1``: its judgement)."""
    from ..analysis.text import mean_se_text as mst

    n, n_g, n_one = deep.config["n_test"], deep.config["n_group"], one.config["n_group"]
    rbg = {"one": one.ratio_by_group(), "deep": deep.ratio_by_group()}
    flip = compare(rbg["one"]["distance 2"], rbg["one"]["training"])
    near_small = near_error_at_training_magnitude(none)
    near_big = [(a + b) / 2 for a, b in zip(none.groups["training"], none.groups["reversed"])]
    near_deep = [(a + b) / 2 for a, b in zip(deep.groups["training"], deep.groups["reversed"])]
    big_vs_small = compare(near_big, near_small, 2 * n_g)
    out = {}
    for name, g in (("dis2", "distance 2"), ("dis3", "distance 3")):
        out[f"ch5_deep_{name}"] = mst(deep.groups[g], 3, n_g, seeds=False)
        out[f"ch5_one_{name}"] = mst(one.groups[g], 3, n_one, seeds=False)
        out[f"ch5_one_ratio_{name}"] = mst(rbg["one"][g], 2, seeds=False)
        out[f"ch5_deep_ratio_{name}"] = mst(rbg["deep"][g], 2, seeds=False)
    none_vs_deep = compare(none.test_error, deep.test_error, n, paired=False)
    out.update({
        "ch5_one_ratio_tr": mst(rbg["one"]["training"], 2, seeds=False),
        "ch5_deep_ratio_tr": mst(rbg["deep"]["training"], 2, seeds=False),
        "ch5_deep_near": mst(near_deep, 3, 2 * n_g, seeds=False),
        "ch5_none_near_big": mst(near_big, 3, 2 * n_g, seeds=False),
        "ch5_none_near_small": mst(near_small, 3, 2 * n_g, seeds=False),
        "ch5_none_big_vs_small": str(big_vs_small),
        "ch5_one_flip": ("turns positive" if flip.verdict == "a > b" and min(rbg["one"]["distance 2"]) > 0
                         else "does not turn positive in every seed"),
        "ch5_cor1_verdict": cor1.verdict, "ch5_cor1_fails": "; ".join(cor1.parts_failing()) or "none",
        "ch5_none_magnitude": (
            "The larger test outliers cost the unnormalised stack accuracy on these tasks."
            if big_vs_small.verdict == "a > b" else
            "That difference is not distinguishable at this scale, so the larger magnitude of the test outliers does "
            "not explain the unnormalised stack's error by itself."),
        "ch5_none_vs_deep": str(none_vs_deep),
        "ch5_none_vs_deep_words": ("higher" if none_vs_deep.diff > 0 else "lower") + (
            ", and distinguishably so (the 95 % t interval of the difference excludes 0)" if none_vs_deep.significant
            else ", but not distinguishably at this scale")})
    return out


def fig3_numbers(deep: MechanismResult, fig3) -> dict:
    """Figure 3 in numbers: the first layer's same − other gap at initialisation and at the end, the two sums, the
    pooled |other|/same, and the parts of row ``fig3`` (``fig3``: its judgement) that do not hold."""
    from ..analysis.text import mean_se_text as mst

    L1 = deep.layers[0]
    gap_T = [s - o for s, o in zip(L1["same"], L1["other"])]
    gap_0 = [s[0][0] - o[0][0] for s, o in zip(deep.sums["same"], deep.sums["other"])]
    gap_grew = compare(gap_T, gap_0)
    rd_m, rd_se = mean_se(deep.per_seed(0, "other_over_same"))
    return {"ch5_deep_same_T": mst(L1["same"], 2, seeds=False), "ch5_deep_other_T": mst(L1["other"], 2, seeds=False),
            "ch5_deep_gap_0": mst(gap_0, 2, seeds=False), "ch5_deep_gap_T": mst(gap_T, 2, seeds=False),
            "ch5_deep_ratio": f"{rd_m:.2f} ± {rd_se:.2f}",
            "ch5_gap_grew": "grows" if gap_grew.verdict == "a > b" else "does not grow distinguishably",
            "ch5_gap_seeds": f"positive in {sum(g > 0 for g in gap_T)} of {len(deep.seeds)} seeds",
            "ch5_fig3_fails": "; ".join(fig3.parts_failing()) or "none"}


def gate_figure_numbers(deep: MechanismResult, gate) -> dict:
    """The gate figure in numbers: the first layer's outlier/clean gate ratio and clean-gate decay, and row
    ``gate-figure``'s verdict (``gate``: its judgement)."""
    from ..analysis.claims import CLAIMS
    from ..analysis.stats import interval
    from ..analysis.text import mean_se_text as mst

    suppress = CLAIMS["cor2i"].criterion.threshold
    gr, fac = deep.per_seed(0, "gate_ratio"), deep.layers[0]["decay_factor"]
    return {"ch5_deep_gate_ratio": mst(gr, 2, seeds=False), "ch5_deep_decay": mst(fac, 2, seeds=False),
            "ch5_deep_decay_vs_half": str(compare(fac, [0.5] * len(fac))), "ch5_gate_verdict": gate.verdict,
            "ch5_gate_sup_words": ("suppresses outliers" if interval(gr).high < suppress else
                                   "does not suppress outliers (the interval of the ratio is not below "
                                   + f"{suppress:.3g})"),
            "ch5_gate_r2": f"{min(deep.layers[0]['decay_r2']):.2f}"}


def app45_numbers(deep: MechanismResult, app45) -> dict:
    """App. Figures 4-5 in numbers: layers 2 and 3's |other|/same, gate ratio, decay, the seeds whose same-pattern
    sum exceeds the other, whether both same-pattern curves rise and stay up; row ``app-figs45``
    (``app45``: its judgement)."""
    from ..analysis.text import mean_se_text as mst

    out, peaks = {}, []
    for layer in (1, 2):
        gaps = [s - o for s, o in zip(deep.layers[layer]["same"], deep.layers[layer]["other"])]
        peaks.append(deep.peak(layer, "same"))
        out[f"ch5_l{layer + 1}_ratio"] = mst(deep.per_seed(layer, "other_over_same"), 2, seeds=False)
        out[f"ch5_l{layer + 1}_gate_ratio"] = mst(deep.per_seed(layer, "gate_ratio"), 2, seeds=False)
        out[f"ch5_l{layer + 1}_decay"] = mst(deep.layers[layer]["decay_factor"], 2, seeds=False)
        out[f"ch5_l{layer + 1}_gap_seeds"] = f"{sum(g > 0 for g in gaps)} of {len(deep.seeds)}"
    monotone = all(p[1].verdict != "a > b" for p in peaks)
    out["ch5_deep_monotone"] = ("rise and stay up (neither falls distinguishably after its peak)" if monotone else
                                "do not both rise and stay up")
    out["ch5_app45_verdict"] = app45.verdict
    out["ch5_app45_fails"] = "; ".join(app45.parts_failing()) or "none"
    return out


def rmsnorm_numbers(deep: MechanismResult, none: MechanismResult, rms) -> dict:
    """RMSNorm and the gate: per layer, the seeds whose gate suppresses outliers with and without RMSNorm, the
    per-seed log10 ratio of the two stacks' gate ratios that row ``rmsnorm`` judges, the row in words (``rms``: its
    judgement), and the outlier/clean token norms before each gate."""
    from ..analysis.claims import CLAIMS
    from ..analysis.text import mean_se_text as mst

    suppress, S = CLAIMS["cor2i"].criterion.threshold, len(deep.seeds)
    sup = {"rms": deep.suppressing(suppress), "none": none.suppressing(suppress)}
    per_layer = {layer: compare([float(v) for v in sup["none"][layer]], [float(v) for v in sup["rms"][layer]],
                                paired=False) for layer in range(3)}
    fails = "; ".join(rms.parts_failing()) or "none"
    norms = {name: [mean_se(res.token_norms[layer][k])[0] for layer in range(3)]
             for name, res, k in (("rms_u", deep, "u_ratio"), ("rms_x", deep, "x_ratio"), ("none_u", none, "u_ratio"))}
    hidden = all(abs(v - 1) < 0.1 for v in norms["rms_u"])
    visible = all(v > 1.5 for v in norms["none_u"])
    return {
        "ch5_sup_table": "; ".join(f"layer {layer + 1}: {sum(sup['rms'][layer])} of {S} with RMSNorm, "
                                   f"{sum(sup['none'][layer])} of {S} without" for layer in range(3)),
        "ch5_sup_layers": ", ".join(f"layer {layer + 1} {per_layer[layer]}" for layer in range(3)),
        "ch5_rms_log": "; ".join(
            f"layer {layer + 1}: {mst(v, 2, seeds=False)}, positive in {sum(x > 0 for x in v)} of {S} seeds"
            for layer, v in enumerate(rms.measured[k].values for k in range(3))),
        "ch5_rms_fails": fails,
        "ch5_rms_verdict_words": (
            "in every layer the gate separates outliers more strongly without normalisation than with it, in "
            "significantly more seeds than the other way round (exact sign test)"
            if rms.outcome == "reproduced" else
            "the claim that normalisation switches the gate off is not established in every layer (not holding: "
            + fails + ")"),
        "ch5_norm_rms": ", ".join(f"{v:.2f}" for v in norms["rms_u"]),
        "ch5_norm_rms_x": ", ".join(f"{v:.2f}" for v in norms["rms_x"]),
        "ch5_norm_none": ", ".join(f"{v:.2f}" for v in norms["none_u"]),
        "ch5_norm_words": (
            ("RMSNorm does remove the length an outlier adds: the gates of the normalised stack read outlier and clean "
             "tokens of nearly equal norm, while the unnormalised gates read outlier tokens that are much longer")
            if hidden and visible else
            ("the measurement does not support the explanation as stated: the outlier/clean norm ratio before the "
             "gates is not near 1 with RMSNorm and well above 1 without it in every layer"))}


def deep_locality_numbers(deep: MechanismResult, locality) -> dict:
    """The cost of locality in three layers: FQ and CQ errors, the first-layer gate mass on clean and outlier
    examples, and row ``locality``'s verdict (``locality``: its judgement)."""
    from ..analysis.text import mean_se_text as mst

    pd_, n_pd = deep.placement, deep.config["n_placement"]
    d_cq_vs_fq = compare(pd_["CQ"]["error"], pd_["FQ"]["error"], n_pd)
    return {"ch5_deep_fq_err": mst(pd_["FQ"]["error"], 3, n_pd, seeds=False),
            "ch5_deep_cq_err": mst(pd_["CQ"]["error"], 3, n_pd, seeds=False),
            "ch5_deep_cq_vs_fq": str(d_cq_vs_fq),
            "ch5_deep_fq_mass": mst(pd_["FQ"]["clean_mass"], 2, seeds=False),
            "ch5_deep_cq_mass": mst(pd_["CQ"]["clean_mass"], 2, seeds=False),
            "ch5_deep_cq_out_mass": mst(pd_["CQ"]["outlier_mass"], 2, seeds=False),
            "ch5_loc_verdict": locality.verdict,
            "ch5_deep_cq_words": "rises" if d_cq_vs_fq.verdict == "a > b" else "does not rise distinguishably"}


def gate_mass(one: MechanismResult, alphas=(0.3, 0.6), n: int = 1000) -> dict:
    """Exercise 1 of Chapter 8: ``{alpha: (gate mass on clean, gate mass on outlier examples, clean examples per
    prompt)}`` of the first seed's one-layer model, on ``n`` test prompts of all tasks at each ``alpha`` (stream
    ``(0, "test/exercise")``)."""
    from ..analysis.corollaries import query_terms

    data, test = setting(PRESETS[one.preset])
    run0 = one.runs[0]
    mass = {}
    for alpha in alphas:
        pr = test_prompts(run0.patterns, dataclasses.replace(test, alpha=alpha), all_tasks(data.M1), n,
                          numpy_stream(0, "test/exercise"))
        G = query_terms(run0.model, pr.P)[0][1][:, :-1]  # (prompts, l): the gates of the context examples
        clean = ~pr.outlier
        mass[alpha] = (float((G * clean).sum(1).mean()), float((G * pr.outlier).sum(1).mean()),
                       float(clean.sum(1).double().mean()))
    return mass


def exercise1_numbers(one: MechanismResult, mass: dict) -> dict:
    """Exercise 1's numbers from :func:`gate_mass` at alpha = 0.3 and 0.6. Check: at alpha = 0.6 an outlier
    example's mean gate stays below 1/M1 of a clean one's (Corollary 2(i))."""
    data, test = setting(PRESETS[one.preset])
    out_each = mass[0.6][1] / (test.l_ts - mass[0.6][2])  # mean gate of one outlier example at alpha = 0.6
    clean_each = mass[0.6][0] / mass[0.6][2]  # and of one clean example
    _require(out_each < clean_each / data.M1, "outlier gates at alpha = 0.6 are not below 1/M1 of a clean one's")
    return {"ch5_ex1_mass": f"{mass[0.3][0]:.2f} to {mass[0.6][0]:.2f}",
            "ch5_ex1_clean": f"{mass[0.3][2]:.1f} to {mass[0.6][2]:.1f}", "ch5_ex1_out": f"{mass[0.6][1]:.3f}"}


def gate_mass_text(one: MechanismResult, mass: dict) -> str:
    """Exercise 1's printout: the gate mass on clean and outlier examples at each alpha, and Theorem 2(c)'s bound."""
    data, test = setting(PRESETS[one.preset])
    lines = [f"alpha = {alpha}: gate mass {m[0]:.3f} on clean, {m[1]:.4f} on outlier examples; "
             f"{m[2]:.1f} clean examples per prompt" for alpha, m in mass.items()]
    lines.append(f"Theorem 2(c): alpha < p_a l_tr / l_ts = {data.p_a * data.l_tr / test.l_ts:.2f}")
    return "\n".join(lines)
