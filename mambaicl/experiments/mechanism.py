"""How a trained Mamba does it (§3.5, §4.1 Fig. 3 and the gate figure, App. 8.1 Figs. 4-5): Corollaries 1-2.

Glossary (code name -> paper symbol):

====================  ===================================================================
``MechanismPreset``   a model (one layer of Eq. (3), or a residual stack), its training, the
                      training ``p_a`` (0.4 in §4.1) and the test ``alpha`` (0.3, gate figure)
``record_steps``      updates after which Corollary 1's two sums are recorded (log-spaced, so
                      that the early dynamics show)
``same``, ``other``   Corollary 1's sums over ``N_1`` and over the other examples, per layer
``gate_outlier``      median gate of outlier / clean examples, per layer (Corollary 2(i))
``rank``              median ``G_{h(j)}``, ``j = 1..J`` (Corollary 2(ii))
====================  ===================================================================

Streams: seed ``s`` initialises from ``(s, "init")``, trains on ``(s, "train")`` and is measured
on ``(s, "test/mechanism")``; the patterns are Figure 2's (shared by all seeds, see
:mod:`mambaicl.experiments.fig2`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

import torch

from ..analysis.corollaries import SumRecorder, mechanism_report
from ..analysis.stats import error_mean_se, mean_se
from ..config import DataConfig, DeepConfig, TestConfig, TrainConfig, check_int, check_real, to_dict
from ..data import Patterns, all_tasks, test_prompts, training_tasks
from ..evaluate import predict, zero_one_error
from ..models import build_model
from ..seeding import torch_generator
from ..train import fit, fit_kwargs, synthetic_sampler
from . import fig2
from .base import Result, internal, resolve_device, resolve_seeds

__all__ = ["NAME", "DESCRIPTION", "MechanismPreset", "ONE_LAYER", "FIG3", "FIG3_RMS", "MAMBA1", "PRESETS",
           "DEFAULT_PRESET", "DEFAULT_SEEDS", "MechanismResult", "SeedRun", "setting", "build", "train_one_seed",
           "run", "log_steps"]

NAME = "mechanism"
DESCRIPTION = "§3.5/§4.1: Corollary 1 (attention sums, Fig. 3) and Corollary 2 (gates), one and three layers"
DEFAULT_SEEDS = (0, 1, 2, 3, 4)


def log_steps(steps: int, n: int = 24) -> tuple:
    """About ``n`` distinct update counts from 1 to ``steps``, log-spaced (and ``steps`` itself)."""
    check_int("steps", steps, 1)
    pts = {max(1, round(math.exp(math.log(steps) * i / (n - 1)))) for i in range(n)}
    return tuple(sorted(pts | {steps}))


@dataclass(frozen=True)
class MechanismPreset:
    """One mechanism experiment: the model (``None``: one-layer Mamba of Eq. (3)), its training and the test."""

    name: str
    model: Optional[DeepConfig] = None
    train: TrainConfig = field(default_factory=lambda: TrainConfig(lr=0.3))
    p_a: float = 0.4  # §4.1: "p_a = 0.4"
    alpha: float = 0.3  # the gate figure: "alpha = 0.3"
    n_test: int = 512
    J: int = 8
    record_steps: tuple = ()

    def __post_init__(self) -> None:
        if self.model is not None and not isinstance(self.model, DeepConfig):
            raise ValueError(f"model must be None (one layer) or a DeepConfig; got {self.model!r}")
        check_real("p_a", self.p_a, 0.0, 1.0, high_open=True)
        check_real("alpha", self.alpha, 0.0, 1.0, high_open=True)
        check_int("n_test", self.n_test, 1)
        check_int("J", self.J, 1)
        for i, s in enumerate(self.record_steps):
            check_int(f"record_steps[{i}]", s, 1, self.train.steps)

    @property
    def steps_to_record(self) -> tuple:
        return self.record_steps or log_steps(self.train.steps)


#: the one-layer Mamba of Eq. (3) with Figure 2's step size, at p_a = 0.4 (§4.1)
ONE_LAYER = MechanismPreset(name="one_layer", train=TrainConfig(lr=0.3, batch_size=64, steps=1000))
#: Figures 3-5: the paper's three-layer Mamba (§4.1), single head, p_a = 0.4. Residual layers without
#: normalisation: with pre-norm RMSNorm the first-layer gate does not learn to suppress outliers
#: within our budget (FIG3_RMS, Chapter 5).
FIG3 = MechanismPreset(name="fig3", model=DeepConfig(kind="mamba", n_layers=3, d_model=64, norm="none"),
                       train=TrainConfig(lr=3e-4, batch_size=64, steps=600, optimizer="adam"))
FIG3_RMS = dataclasses.replace(FIG3, name="fig3_rms", model=dataclasses.replace(FIG3.model, norm="rms"))
#: the same question for three standard Mamba-1 blocks (Gu & Dao 2023), smaller to fit the CPU budget
MAMBA1 = MechanismPreset(name="mamba1", model=DeepConfig(kind="mamba1", n_layers=3, d_model=32),
                         train=TrainConfig(lr=1e-3, batch_size=32, steps=150, optimizer="adam"), n_test=256, J=6)
PRESETS = {p.name: p for p in (ONE_LAYER, FIG3, FIG3_RMS, MAMBA1)}
DEFAULT_PRESET = "fig3"


def setting(preset: MechanismPreset) -> tuple[DataConfig, TestConfig]:
    """Figure 2's data with ``p_a`` of the preset, and its test shift with ``alpha`` of the preset."""
    return (dataclasses.replace(fig2.FIG2.data, p_a=preset.p_a),
            dataclasses.replace(fig2.FIG2.test, alpha=preset.alpha))


def build(preset: MechanismPreset, d: int, seed: int, device=None) -> torch.nn.Module:
    """The untrained model of ``preset`` for seed ``seed`` (initial values from ``(seed, "init")``)."""
    g = torch_generator(seed, "init")
    if preset.model is None:
        return build_model("mamba", d, m=preset.train.m, delta=preset.train.delta, generator=g, device=device)
    return build_model(preset.model.kind, d, generator=g, device=device, **preset.model.model_kwargs())


@dataclass
class SeedRun:
    """One seed's trained model, its training history and Corollary 1's sums along training."""

    model: torch.nn.Module
    history: object
    recorder: SumRecorder
    patterns: Patterns


def train_one_seed(preset: MechanismPreset, seed: int, *, device=None, progress: bool = False,
                   record_every: int = 50) -> SeedRun:
    """Train the preset's model for one seed, recording Corollary 1's sums at ``preset.steps_to_record``."""
    data, test = setting(preset)
    dtype = torch.float64 if preset.model is None else torch.get_default_dtype()
    pat = fig2.patterns(fig2.FIG2, dtype=dtype)
    pr = test_prompts(pat, test, all_tasks(data.M1), min(preset.n_test, 256), torch_generator(seed, "test/sums"))
    device = resolve_device(device)
    model = build(preset, data.d, seed, device)
    rec = SumRecorder(pr, steps=preset.steps_to_record)
    rec.record(0, model)
    hist = fit(model, synthetic_sampler(pat, data, training_tasks(data.M1)), seed=seed, device=device,
               record_every=record_every, progress=progress, callback=rec.callback, **fit_kwargs(preset.train))
    return SeedRun(model=model.eval(), history=hist, recorder=rec, patterns=pat)


@dataclass
class MechanismResult(Result):
    """Corollaries 1-2 per layer, per seed, with means and standard errors over seeds."""

    preset: str
    seeds: list
    config: dict
    test_error: list  # per seed, on n_test prompts at alpha
    test_error_mean: float
    test_error_se: float
    layers: list  # per layer: {"same": [per seed], "other": ..., "gate_outlier": ..., "gate_clean": ..., "rank": [[J] per seed]}
    sums: dict  # {"steps": [...], "same": [seed][record][layer], "other": ...}
    final_train_loss: list  # per seed
    runs: list = internal()  # [SeedRun] in seeds order
    reports: list = internal()  # [[LayerReport per layer] per seed]
    prompts: object = internal()  # the test prompts of the first seed (for figures)

    def layer_mean_se(self, layer: int, key: str) -> tuple[float, float]:
        """Mean and standard error over seeds of one per-seed quantity of ``layer``."""
        return mean_se(self.layers[layer][key])


def run(preset: MechanismPreset = FIG3, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> MechanismResult:
    """Train the preset's model for every seed and measure Corollaries 1-2 on Definition 2 prompts."""
    seeds = resolve_seeds(seeds)
    data, test = setting(preset)
    runs, reports, errors, first_pr = [], [], [], None
    for s in seeds:
        r = train_one_seed(preset, s, device=device, progress=progress)
        pr = test_prompts(r.patterns, test, all_tasks(data.M1), preset.n_test, torch_generator(s, "test/mechanism"))
        first_pr = first_pr or pr
        errors.append(zero_one_error(predict(r.model, pr), pr.z))
        reports.append(mechanism_report(r.model, pr, J=preset.J))
        runs.append(r)
    n_layers = len(reports[0])

    def per_seed(layer: int, attr: str):
        return [getattr(rep[layer], attr) for rep in reports]

    layers = [{"same": per_seed(i, "same"), "other": per_seed(i, "other"),
               "gate_outlier": per_seed(i, "gate_outlier"), "gate_clean": per_seed(i, "gate_clean"),
               "rank": [list(x) for x in per_seed(i, "rank")]} for i in range(n_layers)]
    sums = {"steps": runs[0].recorder.steps, "same": [r.recorder.same for r in runs],
            "other": [r.recorder.other for r in runs]}
    m, se = error_mean_se(errors, preset.n_test)
    cfg = to_dict(preset)
    cfg["record_steps"] = list(preset.steps_to_record)
    return MechanismResult(preset=preset.name, seeds=list(seeds), config=cfg, test_error=errors, test_error_mean=m,
                           test_error_se=se, layers=layers, sums=sums,
                           final_train_loss=[r.history.loss[-1] for r in runs], runs=runs, reports=reports,
                           prompts=first_pr)
