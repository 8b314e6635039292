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
from dataclasses import dataclass, field

import torch

from ..config import (RULES, DataConfig, TestConfig, TrainConfig, check_choice, check_int, check_reals,
                      to_dict)
from ..data import Patterns, all_tasks, make_patterns, test_outliers, training_prompts, training_tasks
from ..evaluate import model_error, test_error
from ..analysis.stats import error_mean_se
from ..models import ONE_LAYER_KINDS, build_model
from ..seeding import torch_generator, torch_generators
from ..train import fit, fit_kwargs, loss_per_model, synthetic_sampler
from .base import Result, internal, resolve_device, resolve_seeds

__all__ = ["NAME", "DESCRIPTION", "Fig2Preset", "PLAIN", "FIG2", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
           "RESULT_KEYS", "Fig2Result", "patterns", "train_models", "run", "eta_search", "EtaSearch"]

NAME = "fig2"
DESCRIPTION = "Figure 2 (§4.1): one-layer Mamba (both parametrisations) vs linear Transformer, error against alpha"
DEFAULT_SEEDS = (0, 1, 2, 3, 4)

#: key of each model kind in results.json and artifacts.pt (the file layout of the first release)
RESULT_KEYS = {"mamba": "mamba", "linear": "linear_transformer", "mamba_merged": "mamba_merged"}
_ALPHAS = tuple(round(0.1 * i, 1) for i in range(10))


@dataclass(frozen=True)
class Fig2Preset:
    """A named, complete Figure 2 experiment: data, test shift, and one training config per model."""

    name: str
    data: DataConfig = field(default_factory=DataConfig)
    test: TestConfig = field(default_factory=TestConfig)
    train: dict = field(default_factory=lambda: {k: TrainConfig() for k in ("mamba", "mamba_merged", "linear")})
    alphas: tuple = _ALPHAS
    rules: tuple = RULES
    n_test: int = 4000
    pattern_seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.train, dict) or not self.train:
            raise ValueError(f"train must map model kinds to TrainConfig; got {self.train!r}")
        for kind, tr in self.train.items():
            check_choice("train model kind", kind, ONE_LAYER_KINDS)
            if not isinstance(tr, TrainConfig):
                raise ValueError(f"train[{kind!r}] must be a TrainConfig; got {tr!r}")
            if tr.m < self.data.d:
                raise ValueError(f"train[{kind!r}].m must be >= data.d = {self.data.d} so that the first d "
                                 f"diagonal entries of W_B and W_C can be delta (Section 2); got m = {tr.m}")
        if len(self.test.v_coeffs[0]) != self.data.V:
            raise ValueError(f"test.v_coeffs rows must have V = {self.data.V} entries; got {len(self.test.v_coeffs[0])}")
        check_reals("alphas", self.alphas, 0.0, 1.0, high_open=True)
        if not self.rules or any(r not in RULES for r in self.rules):
            raise ValueError(f"rules must be a non-empty tuple drawn from {RULES}; got {self.rules!r}")
        check_int("n_test", self.n_test, 1)
        check_int("pattern_seed", self.pattern_seed, 0)

    @property
    def models(self) -> tuple:
        return tuple(self.train)


def _trains(mamba: float, merged: float, linear: float, **kw) -> dict:
    return {"mamba": TrainConfig(lr=mamba, **kw), "mamba_merged": TrainConfig(lr=merged, **kw),
            "linear": TrainConfig(lr=linear, **kw)}


#: "plain": the first honest attempt. One step size for every model; test outliers exactly as strong
#: as the training ones (kappa_a' = kappa_a, the lower end of Theorem 2(b)); K' = 1.5.
PLAIN = Fig2Preset(name="plain", train=_trains(0.1, 0.1, 0.1), test=TestConfig(kappa_a_prime=2.0, K_prime=1.5))
#: "fig2": step sizes from the search of Chapter 4 (lowest validation hinge loss on Definition 1
#: prompts, i.e. on the *training* distribution, per model), and kappa_a' = kappa_a / L: the
#: weakest test outlier (coefficients summing to L) then projects on the training outliers as
#: strongly as a training outlier does (Theorem 2(a)-(b)).
FIG2 = Fig2Preset(name="fig2", train=_trains(0.3, 0.1, 0.01), test=TestConfig(kappa_a_prime=round(2.0 / 0.3, 2)))
#: "tiny": a seconds-long smoke test of the pipeline (CLI tests); not a result of the book.
TINY = dataclasses.replace(FIG2, name="tiny", train={k: dataclasses.replace(v, steps=60) for k, v in FIG2.train.items()},
                           alphas=(0.0, 0.5, 0.8), n_test=400)
PRESETS = {"plain": PLAIN, "fig2": FIG2, "tiny": TINY}
DEFAULT_PRESET = "fig2"


def patterns(preset: Fig2Preset, dtype=torch.float64) -> Patterns:
    """The preset's patterns, drawn from the stream ``(pattern_seed, "patterns")``."""
    return make_patterns(preset.data, torch_generator(preset.pattern_seed, "patterns"), dtype=dtype)


def train_models(preset: Fig2Preset, pat: Patterns, seeds, *, kinds=None, device=None, progress: bool = False,
                 freeze: tuple = (), probes=None, record_every: int = 10) -> dict:
    """Train every model of the preset (or ``kinds``) for all ``seeds`` at once (Algorithm 1).

    Returns:
        ``{kind: (stack, history)}`` with a :class:`mambaicl.models.OneLayerStack` per kind.

    Args:
        freeze: parameter names kept at their initial value (e.g. ``("W_B",)``), a diagnostic.
    """
    seeds = resolve_seeds(seeds)
    tasks = training_tasks(preset.data.M1)
    out = {}
    for kind in kinds or preset.models:
        tr = preset.train[check_choice("kind", kind, preset.models)]
        stack = build_model(kind, preset.data.d, m=tr.m, delta=tr.delta, generators=torch_generators(seeds, "init"),
                            dtype=pat.mu.dtype, device=resolve_device(device))
        params = dict(stack.named_parameters())
        for name in freeze:
            if name not in params:
                raise ValueError(f"freeze names a parameter of the model, one of {sorted(params)}; got {name!r}")
            params[name].requires_grad_(False)
        hist = fit(stack, synthetic_sampler(pat, preset.data, tasks), seed=list(seeds), progress=progress,
                   probes=probes, record_every=record_every, **fit_kwargs(tr))
        out[kind] = (stack, hist)
    return out


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
    models: dict = internal()  # {kind: OneLayerStack}
    histories: dict = internal()  # {kind: TrainHistory}
    patterns: Patterns = internal()
    spec: Fig2Preset = internal()  # the preset object itself

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
    trained = train_models(preset, pat, seeds, device=device, progress=progress)
    tasks = all_tasks(preset.data.M1)
    errors, per_seed, ses = {}, {}, {}
    for kind, (stack, _) in trained.items():
        key = RESULT_KEYS[kind]
        errors[key], per_seed[key], ses[key] = {}, {}, {}
        for rule in preset.rules:
            rows = []  # [alpha][seed]
            for a in preset.alphas:
                test = dataclasses.replace(preset.test, rule=rule, alpha=float(a))
                rows.append(test_error(stack, pat, test, tasks, preset.n_test,
                                       torch_generators(seeds, f"test/{rule}/{float(a)}")))
            stats = [error_mean_se(r, preset.n_test) for r in rows]
            errors[key][rule] = [m for m, _ in stats]
            ses[key][rule] = [se for _, se in stats]
            per_seed[key][rule] = [[rows[i][s] for i in range(len(rows))] for s in range(len(seeds))]
    final = {RESULT_KEYS[k]: sum(h.loss[-1]) / len(h.loss[-1]) for k, (_, h) in trained.items()}
    return Fig2Result(preset=preset.name, seed=seeds[0], seeds=list(seeds), alphas=list(preset.alphas),
                      rules=list(preset.rules), n_test=preset.n_test, errors=errors, errors_per_seed=per_seed,
                      errors_se=ses, final_train_loss=final, config=preset_config(preset),
                      models={k: s for k, (s, _) in trained.items()},
                      histories={k: h for k, (_, h) in trained.items()}, patterns=pat, spec=preset)


@dataclass
class EtaSearch(Result):
    """Validation hinge loss and 0-1 error (mean over seeds) of each step size, per model."""

    kind: str
    lrs: list
    seeds: list
    hinge: list  # mean over seeds; inf where a seed diverged
    error: list
    best: float


def eta_search(preset: Fig2Preset, kind: str, lrs, seeds=(0, 1, 2), n_val: int = 4000) -> EtaSearch:
    """Step-size search on the *training* distribution: validation hinge loss on Definition 1 prompts
    (training tasks, stream ``(seed, "validation")``) after training with each ``lr``; the best is
    the lowest mean hinge loss. A step size at which any seed diverges scores ``inf``."""
    seeds = resolve_seeds(seeds)
    lrs = check_reals("lrs", lrs, 0.0, 1.0, low_open=True)
    pat = patterns(preset)
    val = training_prompts(pat, preset.data, training_tasks(preset.data.M1), n_val,
                           torch_generators(seeds, "validation"))
    hinge, error = [], []
    for lr in lrs:
        pre = dataclasses.replace(preset, train={kind: dataclasses.replace(preset.train[kind], lr=lr)})
        try:
            stack, _ = train_models(pre, pat, seeds)[kind]
        except FloatingPointError:
            hinge.append(float("inf"))
            error.append(1.0)
            continue
        with torch.no_grad():
            hinge.append(float(loss_per_model("hinge", stack(val), val.z).mean()))
        error.append(sum(model_error(stack, val, val.z)) / len(seeds))
    best = lrs[min(range(len(lrs)), key=lambda i: hinge[i])]
    return EtaSearch(kind=kind, lrs=list(lrs), seeds=list(seeds), hinge=hinge, error=error, best=best)
