"""Multi-class in-context classification with outliers (App. 13): C = 2, 4, 8 classes from H = 1, 2, 3 levels.

Glossary (code name -> paper symbol):

=====================  =================================================================
``MulticlassPreset``   Figure 2's data, test shift and step sizes; ``H`` the largest number of levels
``levels``             the class counts reported, as numbers of levels ``H'`` (``C = 2^H'``)
``models``             one-layer kinds; an ``H``-head model has one ``(W_B,h, W_C,h, w_h)`` per level
                       (App. 13, Eq. (36)), stored as a :class:`OneLayerStack` of ``S H`` members
``errors_all``         fraction of test prompts with *any* level wrong (the multi-class error)
``errors_level``       each level's own 0-1 error
=====================  =================================================================

**Why one training run covers C = 2, 4 and 8.** The loss is App. 13's hinge loss summed over the
levels, ``sum_h max(0, 1 - z_h F_h)``: head ``h`` reads only block ``P_h`` and enters only the term
``h``, so its gradient involves level ``h`` alone. With the level streams of
:mod:`mambaicl.data.multiclass` (level ``h`` of seed ``s`` always draws from the same stream) the
first ``H'`` heads of the ``H``-level model *are* the ``H'``-level model: training it separately gives
the same parameters (tested), and the ``C = 2`` model is Figure 2's binary model. So the preset trains
``H = 3`` once per model kind and reads ``C = 2, 4, 8`` from its first 1, 2, 3 heads, tested on the
same prompts (paired).

Streams: head ``h`` of seed ``s`` initialises from ``(s, "init")`` (``h = 0``) or
``(s, "init/level<h>")``; training prompts from ``(s, "train[/level<h>]")`` (:func:`heads_members`, one engine member per head);
test prompts ``(s, "test/multiclass/<alpha>[/level<h>]")``. Patterns: Figure 2's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..analysis.stats import error_mean_se
from ..config import (ONE_LAYER_KINDS, SYNTHETIC_DATA, SYNTHETIC_TEST, ConfigError, DataConfig, TestConfig,
                      check_choice, check_int, check_trains, choices, instance, integer, integers, reals,
                      synthetic_trains, to_dict, trains)
from ..data import all_tasks, make_patterns, training_tasks
from ..data.multiclass import all_levels_error, level_errors, level_stage, multiclass_test_prompts
from ..evaluate import predict
from ..members import Member, SyntheticData
from ..seeding import substage, torch_generator
from ..train import train
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds

__all__ = ["MulticlassPreset", "APP13", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
           "MulticlassResult", "heads_members", "run"]



@dataclass(frozen=True)
class MulticlassPreset(Preset):
    """A multi-class experiment: Figure 2's binary problem stacked ``H`` times (App. 13)."""

    classes: tuple = integers((2, 4, 8), 2, 64, distinct=True)
    models: tuple = choices(("mamba", "mamba_merged", "linear"), ONE_LAYER_KINDS)
    data: DataConfig = instance(DataConfig, factory=lambda: SYNTHETIC_DATA)
    test: TestConfig = instance(TestConfig, factory=lambda: dataclasses.replace(SYNTHETIC_TEST, rule="A"))
    train: dict = trains(synthetic_trains)
    alphas: tuple = reals((0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8), 0.0, 1.0, high_open=True)
    n_test: int = integer(1000, 1)  # test prompts per (model, C, alpha, seed)
    pattern_seed: int = integer(0, 0)

    def _check(self) -> None:
        for i, C in enumerate(self.classes):
            if C & (C - 1):
                raise ConfigError(f"classes[{i}] must be a power of 2 (C = 2^H classes from H binary levels, "
                                  f"App. 13); got {C}")
        check_trains("train", {k: self.train.get(k) for k in self.models}, self.models)

    @property
    def levels(self) -> tuple:
        """``H' = log2 C`` for each class count."""
        return tuple(C.bit_length() - 1 for C in self.classes)

    @property
    def H(self) -> int:
        """Levels of the model that is trained: the largest ``H'``."""
        return max(self.levels)


#: "app13": C = 2, 4, 8 (H = 3), Mamba (both parametrisations) and the linear Transformer, Figure 2's
#: data, test shift (rule A: outlier examples' labels flipped, in their own level) and step sizes
APP13 = MulticlassPreset(name="app13")
#: "tiny": a seconds-long smoke test (CLI tests); not a result of the book
TINY = dataclasses.replace(APP13, name="tiny", classes=(2, 4), models=("mamba", "linear"),
                           train=synthetic_trains(steps=40),
                           alphas=(0.0, 0.8), n_test=300)
PRESETS = {"app13": APP13, "tiny": TINY}
DEFAULT_PRESET = "app13"
DEFAULT_SEEDS = tuple(range(20))


def heads_members(preset: MulticlassPreset, kind: str, pat, seeds, H: int | None = None) -> list:
    """The ``H``-head model of ``kind`` for every seed as :class:`mambaicl.train.Member` objects, seed-major
    (member ``s H + h`` is head ``h`` of seed ``s``): initial values from ``(s, "init[/level<h>]")``,
    Definition 1 prompts from ``(s, "train[/level<h>]")`` (:func:`mambaicl.data.multiclass.level_stage`).

    App. 13's loss (Eq. (36)) is the sum of the heads' hinge losses and the heads share no parameter, so
    training the heads as members of one engine run is training the ``H``-head model."""
    H = preset.H if H is None else check_int("H", H, 1)
    tr = preset.train[check_choice("kind", kind, preset.models)]
    data = SyntheticData(pat, preset.data, training_tasks(preset.data.M1))
    return [Member(s, kind, data, tr.lr, m=tr.m, delta=tr.delta, dtype=pat.mu.dtype, init=level_stage("init", h),
                   stage=level_stage("train", h)) for s in resolve_seeds(seeds) for h in range(H)]


@dataclass
class MulticlassResult(Result):
    """Multi-class error (all levels right) and per-level errors against alpha, per model and class count."""

    preset: str
    seeds: list
    classes: list  # C for each entry of levels
    levels: list
    alphas: list
    n_test: int
    errors_all: dict  # errors_all[model][C][i]: mean over seeds
    errors_all_per_seed: dict  # [model][C][s][i]
    errors_all_se: dict
    errors_level: dict  # errors_level[model][h][i]: level h+1's error, mean over seeds
    errors_level_per_seed: dict  # [model][h][s][i]
    independent_prediction: dict  # [model][C][i]: 1 - prod_h (1 - e_h), mean over seeds of the per-seed value
    final_train_loss: dict  # final_train_loss[model]: training loss (Eq. 36) at the last recorded step, mean over seeds
    config: dict  # the preset, as written by mambaicl.config.to_dict
    models: dict = internal()  # models[model]: the trained H-head seed-stacked model
    spec: MulticlassPreset = internal()

    def claims(self) -> dict:
        """The row ``multiclass`` (Chapter 7, App. 13): per seed, Mamba's minus the linear Transformer's error at
        C = 8, alpha = 0.6 (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        from ..analysis.claims import ClaimParts

        ps, E = self.errors_all_per_seed, self.errors_all
        i0, i6 = self.alphas.index(0.0), self.alphas.index(0.6)
        at6 = lambda k: " / ".join(f"{E[k][c][i6]:.2f}" for c in ("2", "4", "8"))  # noqa: E731
        return {"multiclass": ClaimParts(
            f"C = 2 / 4 / 8 at alpha = 0.6: Mamba {at6('mamba')}, merged {at6('mamba_merged')}, linear Transformer "
            f"{at6('linear')}; at alpha = 0, C = 8: Mamba {E['mamba']['8'][i0]:.2f} vs linear "
            f"{E['linear']['8'][i0]:.2f} ({len(self.seeds)} seeds)",
            per_seed=[ps["mamba"]["8"][s][i6] - ps["linear"]["8"][s][i6] for s in range(len(self.seeds))])}


def run(preset: MulticlassPreset = APP13, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> MulticlassResult:
    """Train the ``H``-head models once per kind and test C = 2^H' for every ``H'`` of ``preset.levels``."""
    seeds = resolve_seeds(seeds)
    S, H = len(seeds), preset.H
    pat = make_patterns(preset.data, torch_generator(preset.pattern_seed, "patterns"))
    tasks = all_tasks(preset.data.M1)
    prompts = [multiclass_test_prompts(pat, dataclasses.replace(preset.test, alpha=float(a)), tasks, preset.n_test,
                                       seeds, substage("test", "multiclass", float(a)), H) for a in preset.alphas]
    e_all, e_all_ps, e_all_se, e_lvl, e_lvl_ps, indep, final, models = ({} for _ in range(8))
    for kind in preset.models:
        trained = train(heads_members(preset, kind, pat, seeds), preset.train[kind], device=resolve_device(device),
                        progress=progress)
        stack = trained.models[0]  # one stack: every head of every seed, in member order
        models[kind] = stack
        final[kind] = sum(trained.losses(i)[-1] for i in range(S * H)) / (S * H)
        all_ps = {C: [[0.0] * len(preset.alphas) for _ in range(S)] for C in preset.classes}
        ind_ps = {C: [[0.0] * len(preset.alphas) for _ in range(S)] for C in preset.classes}
        lvl_ps = [[[0.0] * len(preset.alphas) for _ in range(S)] for _ in range(H)]
        for i, pr in enumerate(prompts):
            F = predict(stack, pr).view(S, H, -1)  # (S, H, n)
            z = pr.z.view(S, H, -1)
            for s in range(S):
                per_level = level_errors(F[s], z[s])
                for h in range(H):
                    lvl_ps[h][s][i] = per_level[h]
                for h_used, C in zip(preset.levels, preset.classes):
                    all_ps[C][s][i] = all_levels_error(F[s, :h_used], z[s, :h_used])
                    keep = 1.0
                    for e in per_level[:h_used]:
                        keep *= 1.0 - e
                    ind_ps[C][s][i] = 1.0 - keep
        e_all_ps[kind] = {str(C): v for C, v in all_ps.items()}
        e_all[kind], e_all_se[kind], indep[kind] = {}, {}, {}
        for C, rows in all_ps.items():
            stats = [error_mean_se([rows[s][i] for s in range(S)], preset.n_test) for i in range(len(preset.alphas))]
            e_all[kind][str(C)] = [m for m, _ in stats]
            e_all_se[kind][str(C)] = [se for _, se in stats]
            indep[kind][str(C)] = [sum(ind_ps[C][s][i] for s in range(S)) / S for i in range(len(preset.alphas))]
        e_lvl_ps[kind] = lvl_ps
        e_lvl[kind] = [[sum(lvl_ps[h][s][i] for s in range(S)) / S for i in range(len(preset.alphas))]
                       for h in range(H)]
    return MulticlassResult(preset=preset.name, seeds=list(seeds), classes=list(preset.classes),
                            levels=list(preset.levels), alphas=list(preset.alphas), n_test=preset.n_test,
                            errors_all=e_all, errors_all_per_seed=e_all_ps, errors_all_se=e_all_se, errors_level=e_lvl,
                            errors_level_per_seed=e_lvl_ps, independent_prediction=indep, final_train_loss=final,
                            config=to_dict(preset), models=models, spec=preset)


# ------------------------------------------------------------------------------- Chapter 10's numbers

def chapter_numbers(MC: MulticlassResult) -> dict:
    """Mamba against the linear Transformer per C at alpha = 0 and 0.6, the compounding floor and the check of the
    independent-levels prediction: checks the section's statements, returns ``{glue name: text}``."""
    import math

    from ..analysis.stats import compare

    mc_ps, out, cmp, S = MC.errors_all_per_seed, {}, {}, range(len(MC.seeds))
    ia = {a: MC.alphas.index(a) for a in (0.0, 0.6)}
    for C in MC.classes:
        for a, i in ia.items():
            cmp[(C, a)] = compare([mc_ps["mamba"][str(C)][s][i] for s in S],
                                  [mc_ps["linear"][str(C)][s][i] for s in S], MC.n_test)
            cmp[("merged", C, a)] = compare([mc_ps["mamba_merged"][str(C)][s][i] for s in S],
                                            [mc_ps["linear"][str(C)][s][i] for s in S], MC.n_test)
        for kind in ("mamba", "mamba_merged", "linear"):
            out[f"ch7_mc_{kind}_{C}_0"] = f"{MC.errors_all[kind][str(C)][ia[0.0]]:.3f}"
            out[f"ch7_mc_{kind}_{C}_6"] = f"{MC.errors_all[kind][str(C)][ia[0.6]]:.3f}"
    # at alpha = 0.6 (flipped majority) the paper's Mamba beats the linear Transformer, for every C
    for C in MC.classes:
        assert cmp[(C, 0.6)].significant and cmp[(C, 0.6)].diff < 0
    # the merged product: reported per C, whichever way each comparison goes
    merged_better = [C for C in MC.classes if cmp[("merged", C, 0.6)].significant and cmp[("merged", C, 0.6)].diff < 0]
    merged_other = [C for C in MC.classes if C not in merged_better]
    out["ch7_mc_merged_words"] = (
        "so does the merged product, for every $C$" if not merged_other else
        "the merged product does so for $C \\in \\{" + ", ".join(map(str, merged_better)) + "\\}$ and is not "
        "distinguishable from it (or worse) for $C \\in \\{" + ", ".join(map(str, merged_other)) + "\\}$"
        + "".join(f"; $C = {C}$: {cmp[('merged', C, 0.6)]}" for C in merged_other))
    # without outliers the paper's Mamba pays its per-level floor H times: worse than the linear Transformer
    assert cmp[(8, 0.0)].significant and cmp[(8, 0.0)].diff > 0
    floor_mc = [MC.errors_level["mamba"][h][i] for h in range(3) for i, a in enumerate(MC.alphas) if a <= 0.5]
    out["ch7_floor_mc_lo"], out["ch7_floor_mc_hi"] = f"{min(floor_mc):.3f}", f"{max(floor_mc):.3f}"
    grow = MC.errors_all["mamba"]["8"][ia[0.0]] / MC.errors_all["mamba"]["2"][ia[0.0]]
    out["ch7_mc_grow"] = f"{grow:.1f}"
    # independent levels: the 8-class error is 1 - prod_h (1 - e_h) of the measured level errors, up to prompt noise
    # (a bug that shared outliers across levels or scored a prompt right with a wrong level would break it)
    obs8, pred8 = MC.errors_all["mamba"]["8"][ia[0.0]], MC.independent_prediction["mamba"]["8"][ia[0.0]]
    assert abs(obs8 - pred8) < 4 * math.sqrt(obs8 * (1 - obs8) / (MC.n_test * len(MC.seeds)))
    gap = max(abs(MC.errors_all[k][str(C)][i] - MC.independent_prediction[k][str(C)][i])
              for k in MC.spec.models for C in MC.classes for i in range(len(MC.alphas)))
    out["ch7_mc_indep_gap"] = f"{gap:.3f}"  # close by construction (independent levels): reported, not asserted
    out["ch7_mc_cmp8_0"] = f"{cmp[(8, 0.0)].diff:+.3f} ± {cmp[(8, 0.0)].se:.3f}"
    out["ch7_mc_cmp8_6"] = f"{cmp[(8, 0.6)].diff:+.3f} ± {cmp[(8, 0.6)].se:.3f}"
    return out
