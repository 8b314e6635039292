"""Figure 2 (§4.1): test error against the outlier fraction alpha, one-layer models, rules A / B / C.

Glossary (code name -> paper symbol):

==================  =====================================================================
``Fig2Preset``      data (§4.1), test shift (Eq. (5), Def. 2), one training config per model
``models``          ``"mamba"`` (Eq. (3)), ``"mamba_merged"`` (one matrix ``W = W_B^T W_C``),
                    ``"linear"`` (``G = 1``, Section 3.4)
``alphas``          test outlier fractions ``alpha``; ``rules`` the labelling rules of §4.1
``n_test``          test prompts per (model, rule, alpha, seed), over all tasks of ``T``
``pattern_seed``    the patterns are drawn once from ``(pattern_seed, "patterns")`` and shared
                    by every seed (see below)
==================  =====================================================================

Streams (:mod:`mambaicl.seeding`): seed ``s`` initialises ``w`` from ``(s, "init")``, trains on
prompts from ``(s, "train")`` and is tested on prompts from ``(s, "test/<rule>/<alpha>")``; every
model of one seed sees the same training and test prompts (paired comparisons). The patterns
are shared: the models, their initialisation and SGD are equivariant under rotations of the
feature space (``W_B^(0) = W_C^(0) = delta I`` and ``w^(0) ~ N(0, I/(d+1))`` are rotation
invariant), so a new draw of the patterns is equivalent to a new draw of ``w^(0)``.

The seeds are trained as one batched computation (:class:`mambaicl.models.OneLayerStack`);
``python -m mambaicl reproduce fig2 --out DIR --seeds 0 1 2 3 4`` writes ``results.json`` and
``artifacts.pt``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..config import ConfigError, TestConfig, check_choice, check_reals, to_dict
from ..data import Patterns, all_tasks, cyclic_distance, test_outliers, test_prompts
from ..evaluate import errors_by_task_group, model_error
from ..analysis.fits import crossing
from ..analysis.lemmas import pattern_attention
from ..analysis.claims import ClaimParts, Measured
from ..analysis import theory
from ..analysis.stats import compare, interval_from_se, lower, upper
from ..recipes.base import Result, internal, resolve_seeds
from ..recipes.fig2 import RESULT_KEYS, Sweep, claim_tasks, members, sweep, trained_models  # noqa: F401 (re-exported)
from ..recipes.stepsize import StepSizeSearch, search_seeds, step_size_search
from ..recipes.validation import validation_hinge
from ..seeding import numpy_streams, substage

__all__ = ["Fig2Preset", "PLAIN", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
           "RESULT_KEYS", "CLAIM_GROUPS", "ETA_GRIDS", "Fig2Result", "Sweep", "patterns", "members", "trained_models",
           "claim_tasks", "sweep", "run", "group_errors", "attention_by_distance", "below_up_to", "eta_table", "eta_test_errors",
           "breakdown_sweep", "Breakdown"]


from ..recipes.presets import (CLAIM_GROUPS, DEFAULT_SEEDS, ETA_GRIDS, FIG2, FIG2_PRESETS, PLAIN, TINY,  # noqa: E402,F401
                     Fig2Preset, patterns)

PRESETS = FIG2_PRESETS  # Figure 2's presets live in mambaicl.recipes.presets (Figure 2's ablations read them too)
DEFAULT_PRESET = "fig2"


@dataclass
class Fig2Result(Result):
    """What ``reproduce fig2`` writes: errors per model / rule / alpha (mean, per seed, SE) and the config."""

    preset: str
    seed: int
    seeds: list
    alphas: list
    rules: list
    n_test: int
    errors: dict  # errors[key][rule][i]: mean over seeds at alphas[i]
    errors_per_seed: dict  # errors_per_seed[key][rule][s][i]
    errors_se: dict  # errors_se[key][rule][i]: standard error (seeds and prompts, analysis.stats)
    final_train_loss: dict  # mean over seeds of the last recorded batch loss
    config: dict
    #: the Mamba models on the tasks of :func:`claim_tasks` (fresh prompts, stream stage ``claim``): ``{"tasks":
    #: [[a, b], ...], "errors"/"errors_per_seed"/"errors_se": {key: {rule: ...}}}`` as for all tasks; ``None`` where
    #: the preset has no such task
    claim: dict = None
    models: dict = internal()  # {kind: OneLayerStack}
    histories: dict = internal()  # {kind: TrainHistory}
    patterns: Patterns = internal()
    spec: Fig2Preset = internal()  # the preset object itself

    # ---------------------------------------------------------------- derived quantities (the rows' parts)

    def _i(self, alpha: float) -> int:
        return [round(a, 6) for a in self.alphas].index(round(alpha, 6))

    def at(self, key: str, rule: str, alpha: float, *, claim: bool = False) -> list:
        """Per-seed errors of model ``key`` under ``rule`` at ``alpha`` (all tasks; ``claim``: the claim tasks)."""
        per_seed = (self.claim["errors_per_seed"] if claim else self.errors_per_seed)[key][rule]
        return [row[self._i(alpha)] for row in per_seed]

    @property
    def n_tasks(self) -> int:
        """The number of tasks of ``T`` (all ordered pairs of distinct relevant patterns)."""
        M1 = self.config["data"]["M1"]
        return M1 * (M1 - 1)

    def up_to_claim(self, key: str = "mamba") -> dict:
        """``{rule: alpha}``: up to which alpha ``key``'s error on the claim tasks is below 0.01 by its 95 % t
        interval (:func:`below_up_to`)."""
        c = self.claim
        return {r: below_up_to(self.alphas, c["errors"][key][r], c["errors_se"][key][r], len(self.seeds))
                for r in self.rules}

    def lt_comparisons(self) -> dict:
        """``{(rule, alpha): Comparison}`` of the linear Transformer minus Mamba (all tasks, paired over seeds) at
        every alpha above 1/2."""
        return {(r, a): compare(self.at("linear_transformer", r, a), self.at("mamba", r, a), n_prompts=self.n_test)
                for r in self.rules for a in self.alphas if a > 0.5}

    def lt_minus_mamba(self) -> list:
        """Per seed, the smallest linear Transformer minus Mamba error over the rules and alphas above 1/2."""
        past = [i for i, a in enumerate(self.alphas) if a > 0.5]
        PS = self.errors_per_seed
        return np.min([np.array(PS["linear_transformer"][r])[:, i] - np.array(PS["mamba"][r])[:, i]
                       for r in self.rules for i in past], axis=0)

    def merged_minus_mamba(self) -> list:
        """Per seed, the merged product's error minus the paper's parametrisation's at alpha = 0, worst rule."""
        PS = self.errors_per_seed
        return np.max([np.array(PS["mamba_merged"][r])[:, 0] - np.array(PS["mamba"][r])[:, 0] for r in self.rules],
                      axis=0)

    def ratio_floor(self) -> float:
        """The smallest, over the rules, of Mamba's mean error over the merged product's at alpha = 0."""
        E = self.errors
        return min(E["mamba"][r][0] / E["mamba_merged"][r][0] for r in self.rules)

    def curves(self) -> dict:
        """``{label: (mean, se)}`` (each ``{rule: [per alpha]}``) of the table of Chapter 7: Mamba and the merged
        product on all tasks and on the claim tasks, the linear Transformer on all tasks."""
        E, SE, c = self.errors, self.errors_se, self.claim
        n, k = self.n_tasks, len(c["tasks"])
        return {f"Mamba, all {n} tasks": (E["mamba"], SE["mamba"]),
                f"Mamba, {k} tasks": (c["errors"]["mamba"], c["errors_se"]["mamba"]),
                f"merged product, all {n}": (E["mamba_merged"], SE["mamba_merged"]),
                f"merged product, {k}": (c["errors"]["mamba_merged"], c["errors_se"]["mamba_merged"]),
                f"linear Transformer, {n}": (E["linear_transformer"], SE["linear_transformer"])}

    def table(self, show=(0.0, 0.5, 0.6, 0.7, 0.8)) -> str:
        """The curves as text at the alphas ``show`` (mean ± SE over seeds), one line per model and rule."""
        lines = [f"{'model':<24} rule " + "".join(f"  alpha = {a:<9}" for a in show)]
        for name, (m, s) in self.curves().items():
            for rule in self.rules:
                lines.append(f"{name:<24}  {rule}  " + "".join(
                    f"  {m[rule][self._i(a)]:.3f} ± {s[rule][self._i(a)]:.3f}" for a in show))
        return "\n".join(lines)

    def floor_low(self) -> float:
        """The smallest lower end of Mamba's 95 % interval (all tasks) over every rule and alpha."""
        E, SE, S = self.errors["mamba"], self.errors_se["mamba"], len(self.seeds)
        return min(lower(E[r][i], SE[r][i], S) for r in self.rules for i in range(len(self.alphas)))

    def lt_exceptions(self) -> list:
        """The (rule, alpha > 1/2) at which the linear Transformer is not above Mamba by the 95 % interval."""
        return [f"rule {r} at alpha = {a} ({c})" for (r, a), c in self.lt_comparisons().items()
                if not (c.significant and c.diff > 0)]

    def checks(self) -> dict:
        """The prose's statements about Figure 2, each ``True`` where the measurement bears it out."""
        E, SE, PS, S = self.errors, self.errors_se, self.errors_per_seed, len(self.seeds)
        lt_vs = self.lt_comparisons()
        merged_vs = [compare(np.array(PS["mamba_merged"][r])[:, 0], np.array(PS["mamba"][r])[:, 0],
                             n_prompts=self.n_test) for r in self.rules]
        all_up = [below_up_to(self.alphas, E["mamba"][r], SE["mamba"][r], S) for r in self.rules]
        return {"Mamba (all tasks): 95 % interval above 0.01 at every alpha and rule":
                self.floor_low() > 0.01 and all(v != v for v in all_up),
                "Mamba (claim tasks): below 0.01 up to alpha = 0.6 at least": min(self.up_to_claim().values()) >= 0.6,
                "merged product below the paper's parametrisation at alpha = 0, every rule":
                all(c.significant and c.diff < 0 for c in merged_vs),
                "the merged product's floor at least 3 times lower": self.ratio_floor() > 3,
                "linear Transformer below 0.01 without outliers": max(
                    upper(E["linear_transformer"][r][0], SE["linear_transformer"][r][0], S) for r in self.rules) < 0.01,
                "linear Transformer above Mamba at every alpha > 1/2 under rule A":
                all(c.significant and c.diff > 0 for (r, _), c in lt_vs.items() if r == "A")}

    def numbers(self) -> dict:
        """``{name: text}``: the numbers Chapter 7's prose quotes about Figure 2 (mean ± SE over seeds), in the order
        the chapter glues them (as ``ch4_<name>``)."""
        E, SE, c, fmt = self.errors, self.errors_se, self.claim, "{:.3f} ± {:.3f}"
        up18, lt_vs = self.up_to_claim(), self.lt_comparisons()
        i6, i7, i8 = self._i(0.6), self._i(0.7), self._i(0.8)
        out = {}
        for r in self.rules:
            out[f"m_{r}_0"] = fmt.format(E["mamba"][r][0], SE["mamba"][r][0])
            out[f"m_{r}_8"] = fmt.format(E["mamba"][r][i8], SE["mamba"][r][i8])
            out[f"m18_{r}_8"] = fmt.format(c["errors"]["mamba"][r][i8], c["errors_se"]["mamba"][r][i8])
            out[f"up18_{r}"] = f"{up18[r]:g}"
            out[f"mg_{r}_0"] = fmt.format(E["mamba_merged"][r][0], SE["mamba_merged"][r][0])
            for name, i in (("0", 0), ("6", i6), ("8", i8)):
                out[f"lt_{r}_{name}"] = fmt.format(E["linear_transformer"][r][i], SE["linear_transformer"][r][i])
        cfg = self.config
        return {**out, "mg_A_6": fmt.format(E["mamba_merged"]["A"][i6], SE["mamba_merged"]["A"][i6]),
                "mg_A_8": fmt.format(E["mamba_merged"]["A"][i8], SE["mamba_merged"]["A"][i8]),
                "up18_min": f"{min(up18.values()):g}",
                "m_A_6": fmt.format(E["mamba"]["A"][i6], SE["mamba"]["A"][i6]),
                "m_A_7": fmt.format(E["mamba"]["A"][i7], SE["mamba"]["A"][i7]),
                "floor_lo": f"{self.floor_low():.3f}", "ratio_floor": f"{self.ratio_floor():.1f}",
                "n_lt_worse": f"{sum(v.significant and v.diff > 0 for v in lt_vs.values())}",
                "n_lt_cmp": f"{len(lt_vs)}",
                "lt_exceptions": "; ".join(self.lt_exceptions()).replace("alpha", "α") or "none",
                "n_test": f"{self.n_test:,}", "n_claim": f"{len(c['tasks'])}", "n_all": f"{self.n_tasks}",
                "bound_2c": f"{theory.alpha_threshold_mamba(cfg['data']['p_a'], cfg['data']['l_tr'], cfg['test']['l_ts']):g}"}

    def claims(self) -> dict:
        """``{key: ClaimParts}`` of the rows ``fig2-mamba`` (all tasks, rules A / B / C at alpha = 0.8),
        ``fig2-mamba-18`` (the diagnostic on the claim tasks), ``fig2-lt`` and ``fig2-merged``
        (:mod:`mambaicl.analysis.claims`): Figure 2 trained on App. 9's cycle."""
        if tuple(self.rules) != ("A", "B", "C") or self.claim is None:
            raise ConfigError(f"claims need rules A, B, C and the claim tasks; got {self.rules}")
        E, SE, S, n, i8 = self.errors, self.errors_se, len(self.seeds), self.n_test, self._i(0.8)
        i6 = self._i(0.6)
        c, up18 = self.claim, self.up_to_claim()
        lt_vs, lt_minus_m = self.lt_comparisons(), self.lt_minus_mamba()
        lt_at0 = np.max([np.array(self.errors_per_seed["linear_transformer"][r])[:, 0] for r in self.rules], axis=0)
        n_worse = sum(cmp.significant and cmp.diff > 0 for cmp in lt_vs.values())
        n_claim = len(c["tasks"])
        lt, mg = E["linear_transformer"], E["mamba_merged"]
        eta = self.config["train"]["mamba_merged"]["lr"]
        return {
            "fig2-mamba": ClaimParts(
                f"{E['mamba']['A'][0]:.3f} ± {SE['mamba']['A'][0]:.3f} at alpha = 0 and {E['mamba']['A'][i8]:.3f} ± "
                f"{SE['mamba']['A'][i8]:.3f} at 0.8 (rule A, all {self.n_tasks} tasks, {S} seeds); B / C at 0.8: "
                f"{E['mamba']['B'][i8]:.3f} / {E['mamba']['C'][i8]:.3f}; never below 0.01",
                parts=[self.at("mamba", r, 0.8) for r in self.rules], n_prompts=n),
            "fig2-mamba-18": ClaimParts(
                "below 0.01 (95 % interval) up to alpha = " + " / ".join(f"{up18[r]:g}" for r in self.rules)
                + f" (rules A / B / C, {n_claim} tasks, {S} seeds); at 0.8: "
                + " / ".join(f"{c['errors']['mamba'][r][i8]:.3f}" for r in self.rules),
                per_seed=Measured.from_se(c["errors"]["mamba"]["A"][i8], c["errors_se"]["mamba"]["A"][i8], S,
                                          self.at("mamba", "A", 0.8, claim=True))),
            "fig2-lt": ClaimParts(
                " / ".join(f"{lt[r][0]:.3f}" for r in self.rules) + " at alpha = 0, "
                + " / ".join(f"{lt[r][i8]:.3f}" for r in self.rules)
                + f" at 0.8 (rules A / B / C); above Mamba in {n_worse} of {len(lt_vs)} (rule, alpha > 1/2) pairs; "
                f"smallest per-seed difference {lt_minus_m.mean():.3f}",
                parts=[lt_minus_m, lt_at0], n_prompts=n),
            "fig2-merged": ClaimParts(
                f"{mg['A'][0]:.3f} ± {SE['mamba_merged']['A'][0]:.3f} at alpha = 0, "
                f"{mg['A'][i6]:.3f} ± {SE['mamba_merged']['A'][i6]:.3f} at 0.6, "
                f"{mg['A'][i8]:.3f} ± {SE['mamba_merged']['A'][i8]:.3f} at 0.8 (rule A, all tasks, "
                f"searched eta = {eta:g}); {self.ratio_floor():.1f}x below the paper's parametrisation",
                per_seed=self.merged_minus_mamba()),
        }

    def artifacts(self) -> dict:
        """Patterns (with the test outliers), trained parameters per model (a list in ``seeds`` order), config."""
        v_test = test_outliers(self.patterns.v, self.spec.test.v_coeffs)
        art = {"patterns": {"mu": self.patterns.mu, "nu": self.patterns.nu, "v": self.patterns.v, "v_test": v_test},
               "config": self.config}
        for kind, stack in self.models.items():
            art[RESULT_KEYS[kind]] = [{name: p[s].detach().clone() for name, p in stack.named_parameters()}
                                      for s in range(stack.n_seeds)]
        return art

    def summary(self) -> str:
        """The errors as text, one line per model and rule (what the CLI prints)."""
        lines = [f"{key:>18} rule {rule}: " + " ".join(f"{e:.3f}" for e in errs)
                 for key, by_rule in self.errors.items() for rule, errs in by_rule.items()]
        return "\n".join(lines + [f"alphas: {self.alphas}; mean over seeds {self.seeds}"])

    def single_seed_artifacts(self) -> dict:
        """The first release's layout for a one-seed run: one parameter dict per model (not a list)."""
        art = self.artifacts()
        for key in RESULT_KEYS.values():
            if key in art:
                art[key] = art[key][0]
        return art


def preset_config(preset: Fig2Preset) -> dict:
    """The preset as a JSON-ready dict, with the task sets spelled out."""
    cfg = to_dict(preset)
    cfg["test_tasks"] = "all ordered pairs (a, b) of distinct relevant patterns (0-based), M1 (M1 - 1) tasks"
    cfg["training_tasks"] = "cyclic construction of App. 9: (j, j+1 mod M1), 0-based"
    return cfg


def run(preset: Fig2Preset = FIG2, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> Fig2Result:
    """Train every model of ``preset`` for every seed and sweep alpha for every rule.

    Every model of a seed is tested on the same prompts (stream ``(seed, "test/<rule>/<alpha>")``).
    """
    seeds = resolve_seeds(seeds)
    pat = patterns(preset)
    trained = trained_models(preset, pat, seeds, device=device, progress=progress)
    sw = sweep({k: s for k, (s, _) in trained.items()}, pat, preset, seeds)
    final = {RESULT_KEYS[k]: sum(h.loss[-1]) / len(h.loss[-1]) for k, (_, h) in trained.items()}
    tasks, kinds = claim_tasks(preset.data.M1), [k for k in ("mamba", "mamba_merged") if k in trained]
    claim = None
    if len(tasks) and kinds:  # the same models on the claim tasks, fresh prompts (stream stage "claim")
        cs = sweep({k: trained[k][0] for k in kinds}, pat, preset, seeds, tasks=tasks, stage="claim")
        claim = {"tasks": tasks.tolist(), "errors": cs.mean, "errors_per_seed": cs.per_seed, "errors_se": cs.se}
    return Fig2Result(preset=preset.name, seed=seeds[0], seeds=list(seeds), alphas=list(preset.alphas),
                      rules=list(preset.rules), n_test=preset.n_test, errors=sw.mean, errors_per_seed=sw.per_seed,
                      errors_se=sw.se, final_train_loss=final, config=preset_config(preset), claim=claim,
                      models={k: s for k, (s, _) in trained.items()},
                      histories={k: h for k, (_, h) in trained.items()}, patterns=pat, spec=preset)


def group_errors(stack, pat: Patterns, test: TestConfig, seeds, n: int, stage: str) -> dict:
    """Error of each seed of ``stack`` on each task group of :func:`mambaicl.data.task_groups`.

    Returns ``{group: [error of seed s]}``, ``n`` prompts per group and seed, from the streams ``(s, stage)``.
    """
    return errors_by_task_group(stack, pat, test, n, resolve_seeds(seeds), stage)


def attention_by_distance(stack, mu: torch.Tensor) -> torch.Tensor:
    """Mean pattern attention (:func:`mambaicl.analysis.lemmas.pattern_attention`) over the pattern pairs
    ``k`` steps apart on the training cycle, ``k = 0..M1//2``, for every seed: ``(S, M1//2 + 1)``."""
    with torch.no_grad():
        A = pattern_attention(stack.bilinear(mu.dtype), mu)  # (S, M1, M1)
    dist = cyclic_distance(mu.shape[0])
    return torch.stack([A[:, dist == k].mean(-1) for k in range(int(dist.max()) + 1)], dim=-1)


def below_up_to(alphas, mean, se, n_seeds: int, level: float = 0.01) -> float:
    """The largest ``alpha`` up to which *every* error is below ``level`` by the book's rule (the 95 % t
    interval over ``n_seeds`` seeds, ``mean + t_{S-1} SE < level``, at each ``alpha`` from the first);
    ``nan`` if the first is not. With ``se`` = 0 this compares the means."""
    if not (len(alphas) == len(mean) == len(se)) or not len(alphas):
        raise ConfigError("alphas, mean and se must be non-empty and aligned; "
                         f"got {len(alphas)}, {len(mean)}, {len(se)}")
    high = [interval_from_se(m, s, n_seeds).high for m, s in zip(mean, se)]
    return crossing(alphas, high, level, interpolate="before", never=float(alphas[-1]))


def eta_table(preset: Fig2Preset, kind: str, lrs, seeds=None, n_val: int = 4000) -> StepSizeSearch:
    """The step-size table of Chapter 4: the book's one search (:func:`mambaicl.recipes.stepsize.step_size_search`)
    of ``kind`` over ``lrs``, scored by the validation hinge loss on Definition 1 prompts
    (:func:`mambaicl.recipes.validation.validation_hinge`: training tasks, stream ``(seed, "validation")``, the same
    prompts for every step size) after ``preset.train[kind].steps`` steps, with each step size's 0-1 error on those
    prompts (1 where a seed diverges). The default seeds are the first five not in :data:`DEFAULT_SEEDS` (5-9), so
    that the figure's runs play no part in choosing their step size."""
    lrs = check_reals("lrs", lrs, 0.0, 1.0, low_open=True)
    check_choice("kind", kind, preset.models)
    seeds = search_seeds(DEFAULT_SEEDS) if seeds is None else resolve_seeds(seeds)
    pat = patterns(preset)
    S = len(seeds)
    hinge = validation_hinge(pat, preset.data, seeds, n_val)
    vals = hinge.prompts(len(lrs) * S)
    search = step_size_search(members(preset, pat, seeds[:1], kind)[0], lrs, preset.train[kind], hinge, seeds=seeds,
                              reported=DEFAULT_SEEDS)
    stack = search.trained.models[0]
    e = model_error(stack, vals, vals.z)
    error = [1.0 if any(search.diverged[k]) else sum(e[k * S:(k + 1) * S]) / S for k in range(len(lrs))]
    return dataclasses.replace(search, kind=kind, error=error, steps=preset.train[kind].steps)


def eta_test_errors(search: StepSizeSearch, preset: Fig2Preset, alphas, *, rule: str = "A", n: int = 2000,
                    tasks=None) -> dict:
    """A diagnostic *after* the search: test error (Definition 2, ``preset.test``) of every step size's
    models, ``{lr: [[error of seed s at alphas[i]]]}``; seed ``s`` is tested on prompts from the streams
    ``(s, "eta-test/<rule>/<alpha>")``, the same for every step size. Needs a batched search."""
    if search.trained is None:
        raise ConfigError("search must hold the trained stack of a batched search (eta_table); search.trained is None")
    pat = patterns(preset)
    S, K = len(search.seeds), len(search.lrs)
    member_seed = torch.arange(S).repeat(K)
    tasks = all_tasks(preset.data.M1) if tasks is None else tasks
    out = {lr: [[0.0] * len(alphas) for _ in range(S)] for lr in search.lrs}
    for i, a in enumerate(alphas):
        test = dataclasses.replace(preset.test, rule=rule, alpha=float(a))
        pr = test_prompts(pat, test, tasks, n, numpy_streams(search.seeds, substage("eta-test", rule, float(a))))
        errs = model_error(search.trained.models[0], pr[member_seed], pr.z[member_seed])
        for k, lr in enumerate(search.lrs):
            for s in range(S):
                out[lr][s][i] = errs[k * S + s]
    return out


@dataclass
class Breakdown:
    """Where each model breaks down (Theorems 2(c) and 4(c)): per (p_a, l_ts), the first alpha whose error
    exceeds the error at ``alpha = 0`` by more than ``jump`` (:func:`mambaicl.analysis.fits.crossing`),
    per seed; ``1.0`` stands for "not on the grid"."""

    p_as: list
    l_tss: list
    alphas: list
    jump: float
    n: int
    per_seed: dict  # per_seed[key][(p_a, l_ts)] = [breakdown alpha of seed s]
    errors: dict  # errors[key][(p_a, l_ts)] = [[error of seed s at alphas[i]]]
    bound_mamba: dict  # (p_a, l_ts) -> min(1, p_a l_tr / l_ts)


def breakdown_sweep(preset: Fig2Preset, pat: Patterns, seeds, *, p_as=(0.3, 0.6), l_tss=(10, 20, 40),
                    kinds=("mamba", "mamba_merged", "linear"), trained: dict | None = None, n: int = 2000,
                    jump: float = 0.1, rule: str = "A") -> Breakdown:
    """Train each kind at each ``p_a`` (reusing ``trained[p_a] = {kind: stack}`` where given) and find each
    seed's break-down ``alpha`` for each test length ``l_ts`` (rule ``rule``, all tasks, ``n`` prompts,
    streams ``(s, "breakdown/<p_a>/<l_ts>/<alpha>")``)."""
    seeds = resolve_seeds(seeds)
    trained = dict(trained or {})
    alphas = list(preset.alphas)
    per_seed = {RESULT_KEYS[k]: {} for k in kinds}
    errors = {RESULT_KEYS[k]: {} for k in kinds}
    bound = {}
    for p_a in p_as:
        pre = dataclasses.replace(preset, data=dataclasses.replace(preset.data, p_a=p_a))
        have = trained.get(p_a, {})
        missing = tuple(k for k in kinds if k not in have)
        stacks = dict(have)
        if missing:
            stacks.update({k: s for k, (s, _) in trained_models(pre, pat, seeds, kinds=missing).items()})
        for l_ts in l_tss:
            bound[(p_a, l_ts)] = min(1.0, p_a * preset.data.l_tr / l_ts)
            test = dataclasses.replace(preset.test, l_ts=l_ts)
            sw = sweep({k: stacks[k] for k in kinds}, pat, pre, seeds, stage=substage("breakdown", p_a, l_ts), n=n,
                       rules=[rule], test=test)
            for k in kinds:
                key = RESULT_KEYS[k]
                rows = sw.per_seed[key][rule]
                errors[key][(p_a, l_ts)] = rows
                bd = [crossing(alphas, r, r[0] + jump, strict=True, interpolate="none") for r in rows]
                per_seed[key][(p_a, l_ts)] = [1.0 if b != b else b for b in bd]
    return Breakdown(p_as=list(p_as), l_tss=list(l_tss), alphas=alphas, jump=jump, n=n, per_seed=per_seed,
                     errors=errors, bound_mamba=bound)


def sensitivity_report(res: Fig2Result, preset: Fig2Preset, seeds, *, kappas=(2.0, 4.0, None, 10.0, 20.0),
                       K_primes=(1.5, 3.0), n: int = 2000) -> tuple:
    """Chapter 7's test-time sensitivity of ``res``'s Figure 2 models: ``kappa_a'`` on the claim tasks (Mamba, rule A,
    alpha 0.5 / 0.6 / 0.8; ``None`` in ``kappas``: the preset's own) and ``K'`` on all tasks (both Mamba models,
    alpha = 0), ``n`` prompts per seed. Returns ``(text, checks, numbers)``: what the chapter prints, its statements
    (``{statement: bool}``) and the numbers its prose quotes (``{name: text}``, glued as ``ch4_<name>``)."""
    fmt, S, k_fig = "{:.3f} ± {:.3f}", len(seeds), preset.test.kappa_a_prime
    kappas = tuple(k_fig if k is None else k for k in kappas)
    tasks = claim_tasks(preset.data.M1)
    sens_k = {k: sweep({"mamba": res.models["mamba"]}, res.patterns, preset, seeds, tasks=tasks, stage=f"kappa/{k}",
                       n=n, alphas=(0.5, 0.6, 0.8), rules=["A"],
                       test=dataclasses.replace(preset.test, kappa_a_prime=k)) for k in kappas}
    lines = [f"kappa_a' = {k:5.2f}, 18 tasks: " + "; ".join(
        f"alpha = {a}: {fmt.format(m, s)}" for a, m, s in zip(sw.alphas, sw.mean["mamba"]["A"], sw.se["mamba"]["A"]))
        for k, sw in sens_k.items()]
    sens_K = {K: sweep({"mamba": res.models["mamba"], "mamba_merged": res.models["mamba_merged"]}, res.patterns, preset,
                       seeds, stage=f"Kprime/{K}", n=n, alphas=(0.0,), rules=["A"],
                       test=dataclasses.replace(preset.test, K_prime=K)) for K in K_primes}
    lines += [f"K' = {K}: all tasks, alpha = 0: Mamba {fmt.format(sw.mean['mamba']['A'][0], sw.se['mamba']['A'][0])}, "
              f"merged {fmt.format(sw.mean['mamba_merged']['A'][0], sw.se['mamba_merged']['A'][0])}"
              for K, sw in sens_K.items()]
    low = sens_k[2.0].mean["mamba"]["A"], sens_k[2.0].se["mamba"]["A"]
    ours = sens_k[k_fig].mean["mamba"]["A"], sens_k[k_fig].se["mamba"]["A"]
    K_cmp = compare(*([row[0] for row in sens_K[K].per_seed["mamba_merged"]["A"]] for K in (3.0, 1.5)), n_prompts=n)
    lines.append(f"merged product, K' = 3 minus K' = 1.5: {K_cmp}")
    k_hi = compare(np.array(sens_k[20.0].per_seed["mamba"]["A"])[:, 2], np.array(sens_k[k_fig].per_seed["mamba"]["A"])[:, 2],
                   n)
    checks = {"alpha = 0.6: kappa_a' = kappa_a fails on the claim tasks, kappa_a / L does not":
              lower(low[0][1], low[1][1], S) > 0.01 and upper(ours[0][1], ours[1][1], S) < 0.01}
    by_iv = ", by the 95 % interval of the difference"
    numbers = {"sens_k2_5": fmt.format(low[0][0], low[1][0]), "sens_k2_6": fmt.format(low[0][1], low[1][1]),
               "sens_kfig_6": fmt.format(ours[0][1], ours[1][1]),
               "sens_k20": f"{k_hi.diff:+.3f} ± {k_hi.se:.3f} "
                           f"({k_hi.verdict.replace('a > b', 'higher').replace('a < b', 'lower')})",
               "sens_K3": fmt.format(sens_K[3.0].mean["mamba_merged"]["A"][0], sens_K[3.0].se["mamba_merged"]["A"][0]),
               "sens_K15": fmt.format(sens_K[1.5].mean["mamba_merged"]["A"][0], sens_K[1.5].se["mamba_merged"]["A"][0]),
               "sens_K_verdict": K_cmp.verdict.replace("a > b", "higher" + by_iv).replace("a < b", "lower" + by_iv)}
    return "\n".join(lines), checks, numbers


def outlier_norm_errors(res: Fig2Result, preset: Fig2Preset, seeds, norms=(1.5, 6.0), n: int = 2000) -> dict:
    """``{norm: (mean, SE)}`` of Mamba's all-task error without outliers (rule A, ``n`` prompts per seed), retrained
    with training outliers of each norm in ``norms`` (stream stage ``norm/<norm>``); the preset's own norm is
    ``res``'s Figure 2 error."""
    out = {preset.data.outlier_norm: (res.errors["mamba"]["A"][0], res.errors_se["mamba"]["A"][0])}
    variants = {norm: dataclasses.replace(preset, data=dataclasses.replace(preset.data, outlier_norm=norm))
                for norm in norms}
    for norm, pre in variants.items():
        p = patterns(pre)
        model = trained_models(pre, p, seeds, kinds=("mamba",))["mamba"][0]
        sw = sweep({"mamba": model}, p, pre, seeds, stage=f"norm/{norm}", n=n, alphas=(0.0,), rules=["A"])
        out[norm] = (sw.mean["mamba"]["A"][0], sw.se["mamba"]["A"][0])
    return out
