"""Regression with outliers: App. 14's construction and Garg et al.'s linear regression with Park et al.'s outliers.

Glossary (code name -> paper symbol):

==================  ====================================================================
``App14Spec``       App. 14: Figure 2's data model and prompts (outlier examples' labels are
                    random, Definition 1), the squared loss ``(F - z)^2 / 2``, test rule C
                    (outlier outputs random); squared error and 0-1 error against ``alpha``
``LinRegTask``      Garg et al. (2022): ``x ~ N(0, I_d)``, ``y = w^T x``, ``w ~ N(0, I_d)`` per
                    prompt; each example replaced by an outlier with probability ``p_a`` (training)
                    or ``alpha`` (test); prompt lengths drawn in ``[l_min, l_max]`` at every step
``one_layer``       one-layer models of Eq. (3) (``OneLayerStack``, seeds batched)
``deep``            three-layer residual stacks (``build_model(kind, d, n_layers=3, ...)``), one per seed
``lengths``         test prompt lengths of the error-against-``l`` curve (read at ``alpha_lengths``)
``alphas``          test outlier fractions of the error-against-``alpha`` curve (read at ``l_alphas``)
``least squares``   ordinary least squares on the clean examples of each prompt (minimum norm when
                    they are too few): the optimal predictor of this noiseless task that knows which
                    examples are clean (:func:`mambaicl.data.regression.least_squares_clean`)
``predict zero``    the constant prediction 0 (normalised error 1 in expectation): a model above it
                    has learned nothing usable from the prompt
``patience``        three-layer stacks train until their validation loss (Definition-1-like prompts
                    at ``p_a``, stream ``(s, "validation/linreg/<l>")``) has not reached a new low for
                    ``patience`` checks ``check_every`` steps apart, at most ``deep_train.steps``
                    (:mod:`mambaicl.convergence`); 0: a fixed ``deep_train.steps``
==================  ====================================================================

Errors of the linear-regression task are Garg et al.'s normalised squared error
``mean (F - w^T x_query)^2 / d`` (predicting 0 scores 1).

Streams: seed ``s`` initialises from ``(s, "init")`` and trains on ``(s, "train")`` (App. 14:
Figure 2's streams) or ``(s, "train/linreg")``; test prompts ``(s, "test/app14/<alpha>")`` and
``(s, "test/linreg/<l>/<alpha>")``, the same for every model (paired). The training length schedule
(one length per step, shared by all seeds and models) comes from ``(schedule_seed, "lengths")``.

``App14Spec`` lives in :mod:`mambaicl.recipes.presets` (``app14_gates`` reads it too) and is re-exported here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from ..analysis.stats import error_mean_se, mean_se
from ..config import (Config, DeepConfig, RunConfig, TrainConfig, check_choice, check_instance, check_int, check_trains,
                      choice, flag, instance, integer, integers, real, reals, synthetic_trains, to_dict, trains)
from ..data import all_tasks, make_patterns, test_prompts, training_tasks
from ..data.regression import OUTLIER_KINDS, least_squares_clean, regression_prompts, squared_error
from ..evaluate import predict, zero_one_error
from ..seeding import STAGES, numpy_streams, substage, torch_generator
from ..models.deep_stack import StackedDeepModel
from ..train import EarlyStopping, Member, MemberStack, SampledData, SyntheticData, member_model, train
from ..recipes.base import Preset, Result, internal, resolve_device, resolve_seeds
from ..recipes.presets import APP14_KINDS, App14Spec

__all__ = ["App14Spec", "LinRegTask", "RegressionPreset", "REGRESSION", "CONVERGED", "TINY", "PRESETS",
           "DEFAULT_PRESET", "DEFAULT_SEEDS", "RegressionResult", "length_sampler", "linreg_data",
           "linreg_members", "run"]

ONE_LAYER = APP14_KINDS


@dataclass(frozen=True)
class LinRegTask(Config):
    """Garg et al.'s linear regression with outliers: dimension, training lengths and outliers."""

    d: int = integer(4, 1)
    l_min: int = integer(4, 1)
    l_max: int = integer(32, 1)
    p_a: float = real(0.7, 0.0, 1.0, high_open=True)
    kind: str = choice("dummy", OUTLIER_KINDS)
    bias: bool = flag(True)
    schedule_seed: int = integer(0, 0)

    def _check(self) -> None:
        check_int("l_max", self.l_max, self.l_min)

    @property
    def d_model_input(self) -> int:
        """Features per token besides the label: ``d`` (+1 with the constant feature)."""
        return self.d + int(self.bias)


@dataclass(frozen=True)
class RegressionPreset(Preset):
    """Both regression experiments: App. 14 (optional) and the linear-regression task, one and three layers."""

    app14: App14Spec | None = instance(App14Spec, factory=App14Spec, optional=True)
    task: LinRegTask = instance(LinRegTask, factory=LinRegTask)
    one_layer: dict = trains(lambda: {k: RunConfig(lr=0.01, batch_size=64, steps=1000, m=6, optimizer="adam",
                                                     loss="squared") for k in ONE_LAYER}, ONE_LAYER, loss="squared")
    deep: dict = field(default_factory=lambda: {k: DeepConfig(kind=k, n_layers=3, d_model=16, d_state=16, norm="rms")
                                                for k in ONE_LAYER})
    deep_train: RunConfig = instance(RunConfig, factory=lambda: RunConfig(lr=0.003, batch_size=32, steps=500,
                                                                              optimizer="adam", loss="squared"))
    lengths: tuple = integers((4, 8, 12, 16, 24, 32), 1)
    alpha_lengths: float = real(0.7, 0.0, 1.0, high_open=True)
    alphas: tuple = reals((0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9), 0.0, 1.0, high_open=True)
    l_alphas: int = integer(32, 1)  # context length of the alpha sweep
    n_test: int = integer(1000, 1)  # test prompts per point and seed
    patience: int = integer(0, 0)  # 0: fixed steps; else early stopping of the three-layer stacks
    check_every: int = integer(200, 1)
    n_val: int = integer(256, 1)  # validation prompts per length and seed

    def _check(self) -> None:
        check_trains("one_layer", self.one_layer, ONE_LAYER, min_m=self.task.d_model_input, loss="squared")
        check_instance("deep", self.deep, dict)
        for k, dc in self.deep.items():
            check_choice("deep's kinds", k, ONE_LAYER)
            check_choice(f"deep[{k!r}].kind", check_instance(f"deep[{k!r}]", dc, DeepConfig).kind, (k,))
        check_choice("deep_train.loss", self.deep_train.loss, ("squared",))


#: "regression" (the chapter's): App. 14 with Figure 2's step sizes (SGD on the squared loss); linear regression
#: in d = 4 (+ a constant feature), Park et al.'s dummy outliers (1, 1) with p_a = 0.7 in training, lengths
#: 4..32; one-layer models with Adam (eta = 0.01, 1000 steps). No three-layer stacks: trained to convergence
#: they cost several CPU minutes (preset "converged"), beyond the chapter's budget
REGRESSION = RegressionPreset(name="regression", deep={})
#: "converged": the linear-regression task only, one-layer models as above and three-layer stacks (d_model 16,
#: RMSNorm, Adam eta = 0.003, batch 32) trained until the validation loss stops improving (patience 5 checks
#: of 200 steps, at most 8000 steps); run it with 5 or more seeds
CONVERGED = RegressionPreset(name="converged", app14=None, patience=5, check_every=200,
                             deep_train=RunConfig(lr=0.003, batch_size=32, steps=8000, optimizer="adam",
                                                    loss="squared"))
#: "tiny": a seconds-long smoke test (CLI tests); not a result of the book
TINY = RegressionPreset(
    name="tiny",
    app14=App14Spec(train={k: v for k, v in synthetic_trains(loss="squared", steps=30).items() if k in ONE_LAYER},
                    alphas=(0.0, 0.8), n_test=200),
    one_layer={k: RunConfig(lr=0.01, batch_size=32, steps=30, m=6, optimizer="adam", loss="squared")
               for k in ONE_LAYER},
    deep={"mamba": DeepConfig(kind="mamba", n_layers=2, d_model=8, d_state=4)},
    deep_train=RunConfig(lr=0.003, batch_size=16, steps=40, optimizer="adam", loss="squared"),
    lengths=(4, 16), alphas=(0.0, 0.8), l_alphas=16, n_test=200, patience=2, check_every=10, n_val=64)
PRESETS = {"regression": REGRESSION, "converged": CONVERGED, "tiny": TINY}
DEFAULT_PRESET = "regression"
DEFAULT_SEEDS = tuple(range(20))


def length_sampler(task: LinRegTask):
    """The sample function of :func:`linreg_data`: at every call a length ``l`` in ``[l_min, l_max]`` from the
    schedule stream ``(schedule_seed, "lengths")`` (the same sequence for every model and seed), then one
    batch per prompt stream; returns ``(P, z)`` (stacked ``(S, batch, ...)`` for a list of streams)."""
    sched = torch_generator(task.schedule_seed, "lengths")

    def sample(batch: int, stream):
        l = int(torch.randint(task.l_min, task.l_max + 1, (1,), generator=sched))
        pr = regression_prompts(batch, l, task.d, task.p_a, stream, kind=task.kind, bias=task.bias)
        return pr.P, pr.z

    return sample


def linreg_data(task: LinRegTask) -> SampledData:
    """The linear-regression task as a member's data (:class:`mambaicl.train.SampledData`), with its own fresh
    length schedule (:func:`length_sampler`): one per trained group, so every model sees the same lengths."""
    fn = length_sampler(task)
    return SampledData(fn, task.d_model_input, key=("linreg", task, id(fn)))


def linreg_members(preset: RegressionPreset, seeds) -> dict:
    """``{"one_layer/<kind>" or "deep/<kind>": (members, TrainConfig)}``: one :class:`mambaicl.train.Member` per
    seed of every linear-regression model, each model on its own :func:`linreg_data`."""
    seeds, task = resolve_seeds(seeds), preset.task
    out = {f"one_layer/{kind}": ([Member(s, kind, data, tr.lr, m=tr.m, delta=tr.delta) for s in seeds], tr)
           for kind, tr in preset.one_layer.items() for data in [linreg_data(task)]}
    for kind, dc in preset.deep.items():
        kw, data = dc.model_kwargs(), linreg_data(task)
        n_layers, delta = kw.pop("n_layers"), kw.pop("delta", None)
        out[f"deep/{kind}"] = ([Member(s, kind, data, preset.deep_train.lr, n_layers=n_layers, delta=delta,
                                       options=kw) for s in seeds], preset.deep_train)
    return out


def _trained(members: list, cfg: TrainConfig, stage: str, device, progress: bool, **stop):
    """The engine's stacked model of ``members`` (all of one group); a deep stack as its list of per-seed models.
    With ``stop`` (``stop=`` and ``validate=`` of :func:`mambaicl.train.train`): ``(models, per-member records)``."""
    trained = train(members, cfg, stage=stage, device=resolve_device(device), progress=progress, **stop)
    model = trained.model(0)
    deep = isinstance(model, (MemberStack, StackedDeepModel))
    models = [member_model(model, k) for k in range(len(members))] if deep else model
    return (models, [trained.stopping(i) for i in range(len(members))]) if stop else models


@torch.no_grad()
def _outputs(model, P: torch.Tensor) -> torch.Tensor:
    """``F`` ``(S, n)`` of a stack, or of a list of per-seed models on their seed's prompts."""
    if isinstance(model, list):
        return torch.stack([predict(m, P[s].to(torch.get_default_dtype())).double() for s, m in enumerate(model)])
    return predict(model, P)


def _validator(preset: RegressionPreset, seeds):
    """``validate(model, k)``: seed ``k``'s mean normalised squared error on validation prompts of the training
    distribution (``p_a``; lengths ``l_min``, the middle and ``l_max``; streams ``(s, "validation/linreg/<l>")``)."""
    task = preset.task
    lengths = sorted({task.l_min, (task.l_min + task.l_max) // 2, task.l_max})
    vals = [regression_prompts(preset.n_val, l, task.d, task.p_a,
                               numpy_streams(seeds, substage(STAGES["validation"], "linreg", l)),
                               kind=task.kind, bias=task.bias) for l in lengths]

    def validate(model, k: int) -> float:
        return sum(squared_error(predict(model, v.P[k].to(torch.get_default_dtype())).double(), v.z[k], task.d)
                   for v in vals) / len(vals)

    return validate


def _summary(per_seed: list) -> dict:
    m, se = mean_se(per_seed)
    return {"per_seed": per_seed, "mean": m, "se": 0.0 if se != se else se}


@dataclass
class RegressionResult(Result):
    """Squared errors (per seed, mean, SE) of every model and of least squares, against ``l`` and ``alpha``."""

    preset: str
    seeds: list
    lengths: list
    alphas: list
    alpha_lengths: float
    l_alphas: int
    n_test: int
    linreg_vs_length: dict  # [model][k] -> {"per_seed", "mean", "se"}; models and "least_squares"
    linreg_vs_alpha: dict  # [model][i] -> {...}
    app14: dict  # {"alphas", "squared": [model][i] -> {...}, "zero_one": [model][i] -> {... mean, se (prompts too)}}
    deep_steps: dict  # early stopping (patience > 0): [model] -> {"best_step", "stopped", "converged": per seed, ...}
    config: dict
    models: dict = internal()
    spec: RegressionPreset = internal()

    def claims(self) -> dict:
        """The row ``regression`` (Chapter 7, App. 14): per seed, Mamba's minus the linear Transformer's squared
        error at alpha = 0.8 in App. 14's setting (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        from ..analysis.claims import ClaimParts
        from ..analysis.stats import compare

        lin, sq, P = self.linreg_vs_alpha, self.app14["squared"], self.spec
        i8, i9 = self.app14["alphas"].index(0.8), self.alphas.index(0.9)
        c9 = compare(lin["one_layer/mamba"][i9]["per_seed"], lin["one_layer/linear"][i9]["per_seed"])
        return {"regression": ClaimParts(
            f"App. 14 squared error at alpha = 0.8: Mamba {sq['mamba'][i8]['mean']:.2f} vs linear "
            f"{sq['linear'][i8]['mean']:.2f} ({len(self.seeds)} seeds); linear regression (d = {P.task.d}, Park et "
            f"al.'s dummy outliers, p_a = {P.task.p_a:g}, l = {self.l_alphas}), one layer: at alpha = 0.9 Mamba - "
            f"linear = {c9.diff:+.2f} ± {c9.se:.2f}, least squares {lin['least_squares'][i9]['mean']:.2f}, predicting "
            f"0 {lin['predict_zero'][i9]['mean']:.2f}; three-layer models not judged (preset converged)",
            per_seed=[m - l for m, l in zip(sq["mamba"][i8]["per_seed"], sq["linear"][i8]["per_seed"])])}


def _linreg_curves(preset: RegressionPreset, models: dict, seeds) -> tuple:
    task = preset.task
    points = [("length", l, preset.alpha_lengths) for l in preset.lengths] + \
             [("alpha", preset.l_alphas, a) for a in preset.alphas]
    by_len = {k: [] for k in [*models, "least_squares", "predict_zero"]}
    by_alpha = {k: [] for k in [*models, "least_squares", "predict_zero"]}
    for which, l, a in points:
        pr = regression_prompts(preset.n_test, int(l), task.d, float(a),
                                numpy_streams(seeds, substage("test", "linreg", int(l), float(a))), kind=task.kind,
                                bias=task.bias)
        outs = {name: _outputs(m, pr.P) for name, m in models.items()}
        outs["least_squares"] = least_squares_clean(pr.P, pr.outlier, d=task.d)
        outs["predict_zero"] = torch.zeros_like(pr.z)
        dest = by_len if which == "length" else by_alpha
        for name, F in outs.items():
            dest[name].append(_summary([squared_error(F[s], pr.z[s], task.d) for s in range(len(seeds))]))
    return by_len, by_alpha


def _app14(spec: App14Spec, seeds, device, progress) -> tuple:
    pat = make_patterns(spec.data, torch_generator(0, "patterns"))  # Figure 2's (pattern seed 0)
    tasks = all_tasks(spec.data.M1)
    data = SyntheticData(pat, spec.data, training_tasks(spec.data.M1))
    stacks = {kind: _trained([Member(s, kind, data, tr.lr, m=tr.m, delta=tr.delta, dtype=pat.mu.dtype) for s in seeds],
                             tr, "train", device, progress) for kind, tr in spec.train.items()}
    sq = {k: [] for k in [*stacks, "least_squares"]}
    zo = {k: [] for k in [*stacks, "least_squares"]}
    for a in spec.alphas:
        pr = test_prompts(pat, dataclasses.replace(spec.test, alpha=float(a)), tasks, spec.n_test,
                          numpy_streams(seeds, substage("test", "app14", float(a))))
        outs = {k: predict(st, pr) for k, st in stacks.items()}
        outs["least_squares"] = least_squares_clean(pr.P, pr.outlier)
        for name, F in outs.items():
            sq[name].append(_summary([squared_error(F[s], pr.z[s]) for s in range(len(seeds))]))
            per = [zero_one_error(F[s], pr.z[s]) for s in range(len(seeds))]
            m, se = error_mean_se(per, spec.n_test)
            zo[name].append({"per_seed": per, "mean": m, "se": se})
    return {"alphas": list(spec.alphas), "squared": sq, "zero_one": zo}, stacks


def run(preset: RegressionPreset = REGRESSION, *, seeds=DEFAULT_SEEDS, device=None,
        progress: bool = True) -> RegressionResult:
    """App. 14 (if the preset has it) and the linear-regression task, every model and least squares."""
    seeds = resolve_seeds(seeds)
    app14, app14_models = ({}, {}) if preset.app14 is None else _app14(preset.app14, seeds, device, progress)
    models, deep_steps = {}, {}
    for name, (ms, cfg) in linreg_members(preset, seeds).items():
        if name.startswith("deep/") and preset.patience > 0:
            models[name], recs = _trained(ms, cfg, "train/linreg", device, progress, record_every=[0],
                                          stop=EarlyStopping(every=preset.check_every, patience=preset.patience),
                                          validate=_validator(preset, seeds))
            deep_steps[name] = {"best_step": [r.best_step for r in recs], "stopped": [r.stopped_at for r in recs],
                                "converged": [not r.capped for r in recs], "checks": [r.steps for r in recs],
                                "val_loss": [r.loss for r in recs]}
        else:
            models[name] = _trained(ms, cfg, "train/linreg", device, progress)
    by_len, by_alpha = _linreg_curves(preset, models, seeds)
    return RegressionResult(preset=preset.name, seeds=list(seeds), lengths=list(preset.lengths),
                            alphas=list(preset.alphas), alpha_lengths=preset.alpha_lengths, l_alphas=preset.l_alphas,
                            n_test=preset.n_test, linreg_vs_length=by_len, linreg_vs_alpha=by_alpha, app14=app14,
                            deep_steps=deep_steps,
                            config=to_dict(preset), models={**models, **{f"app14/{k}": v for k, v in
                                                                          app14_models.items()}}, spec=preset)


# ------------------------------------------------------------------------------- Chapter 10's numbers

def chapter_numbers(R: RegressionResult) -> dict:
    """The one-layer comparison of Park et al. per alpha, each model against predicting 0 and least squares, and
    App. 14's squared errors: prints what the chapter shows, checks its statements, returns ``{glue name: text}``."""
    from ..analysis.stats import compare

    lin, app, out = R.linreg_vs_alpha, R.app14, {}
    ia = {a: R.alphas.index(a) for a in (0.0, 0.7, 0.9)}
    park = {a: compare(lin["one_layer/mamba"][i]["per_seed"], lin["one_layer/linear"][i]["per_seed"])
            for a, i in ia.items()}
    for a, c in park.items():
        out[f"ch7_park_one_layer_{int(a * 10)}"] = f"{c.diff:+.3f} ± {c.se:.3f}"
        print(f"one layer, alpha = {a}: Mamba - linear = {c}")
    for name in lin:
        out[f"ch7_lr9_{name.replace('/', '_')}"] = f"{lin[name][ia[0.9]]['mean']:.2f}"
        out[f"ch7_lr0_{name.replace('/', '_')}"] = f"{lin[name][ia[0.0]]['mean']:.2f}"
    # each one-layer model against predicting 0 (paired over seeds: the same test prompts)
    vs_zero = {}
    for kind, label in (("mamba", "Mamba"), ("linear", "the linear Transformer")):
        better, worse = [], []
        for i, a in enumerate(R.alphas):
            c = compare(lin[f"one_layer/{kind}"][i]["per_seed"], lin["predict_zero"][i]["per_seed"])
            vs_zero[(kind, a)] = c
            (better if c.significant and c.diff < 0 else worse if c.significant else []).append(f"{a:g}")
        out[f"ch7_zero_better_{kind}"] = f"at α = {', '.join(better)}" if better else "at no α of the grid"
        out[f"ch7_zero_worse_{kind}"] = f"at α = {', '.join(worse)}" if worse else "at no α of the grid"
        print(f"{label}: below predicting 0 at alpha = {better}; above it at {worse}")
    c0 = vs_zero[("mamba", 0.0)]
    out["ch7_zero_mamba_0"] = f"{c0.diff:+.3f} ± {c0.se:.3f}"
    out["ch7_zero_mamba_0_words"] = ("distinguishably worse than" if c0.significant and c0.diff > 0 else
                                     "distinguishably better than" if c0.significant else "not distinguishable from")
    out["ch7_lower0_n"] = f"{sum(m < l for m, l in zip(lin['one_layer/mamba'][ia[0.0]]['per_seed'], lin['one_layer/linear'][ia[0.0]]['per_seed']))}"
    # every model stays far above least squares where least squares is nearly exact
    ls7 = lin["least_squares"][ia[0.7]]["mean"]
    models_lin = [n for n in lin if n not in ("least_squares", "predict_zero")]
    assert all(lin[n][ia[0.7]]["mean"] > ls7 + 0.3 for n in models_lin)
    out["ch7_ls7"] = f"{ls7:.3f}"
    out["ch7_lr7_min"] = f"{min(lin[n][ia[0.7]]['mean'] for n in models_lin):.2f}"
    # App. 14: Mamba's squared error stays flat while the linear Transformer's grows with alpha
    ia14 = {a: app["alphas"].index(a) for a in (0.0, 0.8)}
    app_cmp = compare(app["squared"]["mamba"][ia14[0.8]]["per_seed"], app["squared"]["linear"][ia14[0.8]]["per_seed"])
    rise_m = compare(app["squared"]["mamba"][ia14[0.8]]["per_seed"], app["squared"]["mamba"][ia14[0.0]]["per_seed"])
    out["ch7_app14_cmp"] = f"{app_cmp.diff:+.2f} ± {app_cmp.se:.2f}"
    out["ch7_app14_rise"] = f"{rise_m.diff:+.3f} ± {rise_m.se:.3f}"
    for name in app["squared"]:
        out[f"ch7_app14_{name}_8"] = f"{app['squared'][name][ia14[0.8]]['mean']:.2f}"
        out[f"ch7_app14_{name}_01_8"] = f"{app['zero_one'][name][ia14[0.8]]['mean']:.3f}"
    assert app_cmp.significant and app_cmp.diff < 0
    c9 = park[0.9]
    out["ch7_park_verdict"] = ("holds" if c9.diff < 0 else "is reversed") if c9.significant else "is not distinguishable"
    return out
