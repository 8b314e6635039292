"""The Figure 2 experiment end to end: patterns -> both models trained -> alpha sweeps.

Glossary: ``seed`` fixes every generator below; ``preset`` is a :class:`mambaicl.config.Preset`.
Generators are derived from the seed by fixed offsets so that each stage is reproducible on its
own: patterns (+0), Mamba initialisation (+1), test prompts (+4); the training prompts of Mamba
and of the linear Transformer are drawn by :func:`mambaicl.fit.fit` seeded with ``seed + 2`` and
``seed + 3``.
"""
from __future__ import annotations

import dataclasses

import torch

from .config import Preset, TrainConfig, to_dict
from .data import Patterns, all_tasks, make_patterns, test_outliers, training_prompts, training_tasks
from .evaluate import alpha_sweep, zero_one_error
from .train import hinge_loss, make_model, train

__all__ = ["MODELS", "generators", "train_seed", "train_one", "train_models", "fig2_errors", "run_fig2", "eta_search", "preset_config"]

MODELS = ("mamba", "linear_transformer")


def generators(seed: int) -> dict:
    """One ``torch.Generator`` per stage, seeded ``seed + offset`` (see the module docstring)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    names = ("patterns", "init", "train_mamba", "train_linear_transformer", "test")
    return {k: torch.Generator().manual_seed(seed + i) for i, k in enumerate(names)}


def train_seed(seed: int, kind: str) -> int:
    """Seed of the training prompts of model ``kind`` (see the module docstring)."""
    return seed + 2 + MODELS.index(kind)


def train_one(kind: str, preset: Preset, pat: Patterns, seed: int, progress: bool = True, probes=None,
              record_every: int = 1, freeze: tuple = ()) -> tuple:
    """Train one model of the preset; returns ``(model, history)``.

    Args:
        freeze: names of parameters kept at their initial value (e.g. ``("W_B",)``), for diagnostics.
    """
    if kind not in MODELS:
        raise ValueError(f"kind must be one of {MODELS}; got {kind!r}")
    tr = preset.train_mamba if kind == "mamba" else preset.train_lt
    model = make_model(kind, preset.data, tr, generators(seed)["init"])
    params = dict(model.named_parameters())
    for name in freeze:
        if name not in params:
            raise ValueError(f"freeze names a parameter of the model, one of {sorted(params)}; got {name!r}")
        params[name].requires_grad_(False)
    hist = train(model, pat, preset.data, tr, training_tasks(preset.data.M1), train_seed(seed, kind),
                 probes=probes, record_every=record_every, progress=progress)
    return model, hist


def train_models(preset: Preset, pat: Patterns, seed: int, progress: bool = True, probes=None,
                 record_every: int = 1) -> dict:
    """Train the one-layer Mamba and the linear Transformer with the preset; ``{kind: (model, history)}``."""
    return {kind: train_one(kind, preset, pat, seed, progress, probes, record_every) for kind in MODELS}


def fig2_errors(models: dict, preset: Preset, pat: Patterns, gen: torch.Generator, tasks=None) -> dict:
    """``{model: {rule: [error at each alpha]}}`` on ``preset.n_test`` prompts per point."""
    tasks = all_tasks(preset.data.M1) if tasks is None else tasks
    errors = {}
    for kind, model in models.items():
        errors[kind] = {}
        for rule in preset.rules:
            test = dataclasses.replace(preset.test, rule=rule)
            errors[kind][rule] = alpha_sweep(model, pat, test, tasks, preset.alphas, preset.n_test, gen)
    return errors


def preset_config(preset: Preset) -> dict:
    """The preset as a JSON-ready dict, with the test task set spelled out."""
    cfg = to_dict(preset)
    cfg["test_tasks"] = "all ordered pairs (a, b) of distinct relevant patterns (0-based), M1 (M1 - 1) tasks"
    cfg["training_tasks"] = "cyclic construction of App. 9: (j, j+1 mod M1), 0-based"
    return cfg


def run_fig2(preset: Preset, seed: int = 0, progress: bool = True) -> tuple[dict, dict]:
    """Train both models and sweep alpha for every rule. Returns ``(results, artifacts)``.

    ``results`` holds ``errors[model][rule]`` aligned with ``alphas``, the full config and the seed;
    ``artifacts`` the patterns, the trained parameters and the config (for ``torch.save``).
    """
    gens = generators(seed)
    pat = make_patterns(preset.data, gens["patterns"])
    trained = train_models(preset, pat, seed, progress=progress)
    models = {k: m for k, (m, _) in trained.items()}
    errors = fig2_errors(models, preset, pat, gens["test"])
    config = preset_config(preset)
    results = {"preset": preset.name, "seed": seed, "alphas": list(preset.alphas), "n_test": preset.n_test,
               "errors": errors, "final_train_loss": {k: h.loss[-1] for k, (_, h) in trained.items()}, "config": config}
    m, lt = models["mamba"], models["linear_transformer"]
    artifacts = {
        "patterns": {"mu": pat.mu, "nu": pat.nu, "v": pat.v, "v_test": test_outliers(pat.v, preset.test.v_coeffs)},
        "mamba": {"W_B": m.W_B.detach().clone(), "W_C": m.W_C.detach().clone(), "w": m.w.detach().clone()},
        "linear_transformer": {"W_B": lt.W_B.detach().clone(), "W_C": lt.W_C.detach().clone()},
        "config": config,
    }
    return results, artifacts


def eta_search(preset: Preset, kind: str, etas, seed: int = 0, n_val: int = 4000) -> dict:
    """Validation hinge loss and 0-1 error on Definition 1 prompts (training tasks) for each step size.

    The selection criterion uses the *training* distribution only, never the test prompts.
    Returns ``{eta: (hinge, error)}``; a diverged run gets ``(inf, 1.0)``.
    """
    gens = generators(seed)
    pat = make_patterns(preset.data, gens["patterns"])
    tasks = training_tasks(preset.data.M1)
    val = training_prompts(pat, preset.data, tasks, n_val, torch.Generator().manual_seed(seed + 100))
    base = preset.train_mamba if kind == "mamba" else preset.train_lt
    out = {}
    for eta in etas:
        tr: TrainConfig = dataclasses.replace(base, eta=eta)
        model = make_model(kind, preset.data, tr, generators(seed)["init"])
        try:
            train(model, pat, preset.data, tr, tasks, train_seed(seed, kind), progress=False)
        except FloatingPointError:
            out[eta] = (float("inf"), 1.0)
            continue
        with torch.no_grad():
            F = model(val.P)
        out[eta] = (float(hinge_loss(F, val.z)), float(zero_one_error(F, val.z).mean()))
    return out
