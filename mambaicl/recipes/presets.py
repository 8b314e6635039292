"""Presets shared by several experiments and the recipes that train them (:mod:`mambaicl.recipes`), so that no
experiment imports another experiment's presets. Each owning experiment re-exports its own under its usual names.

* Figure 2's setting (:class:`Fig2Preset` and its named presets, the step-size grids, the reported seeds, the
  claim's task groups and the patterns): :mod:`~mambaicl.experiments.fig2`, read by its ablations, the batch-size,
  context-length, kappa, seed-tail and App. 14 gate experiments;
* the mechanism chapter's :class:`MechanismPreset` and presets (``ONE_LAYER_MECHANISM``, ``FIG3``, ``FIG3_NONE``,
  ``MAMBA1``, seeds ``MECHANISM_SEEDS``): :mod:`~mambaicl.experiments.mechanism`, read by ``rmsnorm_causal`` and
  ``deep_gate_training``;
* Chapter 3's :class:`DynamicsPreset`, :class:`Setting` and presets (``DYNAMICS``, ``DYNAMICS_TINY``, seeds
  ``DYNAMICS_SEEDS``): :mod:`~mambaicl.experiments.dynamics`, read by ``dynamics_checks``;
* App. 14's :class:`App14Spec`: :mod:`~mambaicl.experiments.regression`, read by ``app14_gates``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

import torch

from .stepsize import RecordedStep, search_seeds
from ..analysis.verdicts import FIG2_EPSILON
from ..config import (RULES, SYNTHETIC_DATA, SYNTHETIC_TEST, Config, ConfigError, DataConfig, DeepConfig, RunConfig,
                      TestConfig, check_choice, check_int, check_ints, check_real, check_reals, check_trains, choices,
                      flag, instance, integer, integers, real, reals, synthetic_trains, trains)
from ..data import Patterns, all_tasks, make_patterns, task_groups
from ..models import ONE_LAYER_KINDS
from ..seeding import torch_generator
from .base import Preset

__all__ = ["Fig2Preset", "PLAIN", "FIG2", "TINY", "FIG2_PRESETS", "ETA_GRIDS", "DEFAULT_SEEDS", "CLAIM_GROUPS", "patterns",
           "log_steps", "MechanismPreset", "ONE_LAYER_MECHANISM", "FIG3", "FIG3_NONE", "FIG3_TINY", "MAMBA1", "MECHANISM_PRESETS",
           "MECHANISM_SEEDS", "DYNAMICS_SEEDS", "DYNAMICS_KINDS", "DynamicsPreset", "Setting", "sweep_settings",
           "DYNAMICS", "DYNAMICS_TINY", "APP14_KINDS", "App14Spec"]

_ALPHAS = tuple(round(0.1 * i, 1) for i in range(10))
#: task groups (:func:`mambaicl.data.task_groups`) on which the paper's "< 0.01" holds for Mamba (Chapter 4)
CLAIM_GROUPS = ("training", "reversed", "distance 3")


@dataclass(frozen=True)
class Fig2Preset(Preset):
    """A named, complete Figure 2 experiment: data, test shift, and one training config per model."""

    data: DataConfig = instance(DataConfig, factory=DataConfig)
    test: TestConfig = instance(TestConfig, factory=TestConfig)
    train: dict = trains(lambda: {k: RunConfig() for k in ("mamba", "mamba_merged", "linear")})
    alphas: tuple = reals(_ALPHAS, 0.0, 1.0, high_open=True)
    rules: tuple = choices(RULES, RULES)
    n_test: int = integer(4000, 1)
    pattern_seed: int = integer(0, 0)

    def _check(self) -> None:
        for kind in self.train:
            check_choice("train model kind", kind, ONE_LAYER_KINDS)
        check_trains("train", self.train, min_m=self.data.d)
        if len(self.test.v_coeffs[0]) != self.data.V:
            raise ConfigError(f"test.v_coeffs rows must have V = {self.data.V} entries; got {len(self.test.v_coeffs[0])}")

    @property
    def models(self) -> tuple:
        return tuple(self.train)


#: "plain": the first honest attempt. One step size for every model; test outliers exactly as strong
#: as the training ones (kappa_a' = kappa_a, the lower end of Theorem 2(b)); K' = 1.5.
PLAIN = Fig2Preset(name="plain", train=synthetic_trains(lr=0.1), test=TestConfig(kappa_a_prime=2.0, K_prime=1.5))
#: "fig2": step sizes from the search of Chapter 4 (:func:`mambaicl.experiments.fig2.eta_table`: lowest mean validation hinge loss on
#: Definition 1 prompts, i.e. on the *training* distribution, 5 seeds that are not Figure 2's; grids
#: :data:`ETA_GRIDS`): 1.0 for both Mamba parametrisations (the largest step Theorems 1 and 3 allow, eta <= 1)
#: and 0.01 for the linear Transformer; and kappa_a' = kappa_a / L: the weakest test outlier (coefficients
#: summing to L) then projects on the training outliers as strongly as a training outlier does (a value
#: inside Theorem 2(b)'s range [kappa_a, Theta(L^-1 ...)], chosen from the theorem's quantities).
FIG2 = Fig2Preset(name="fig2", data=SYNTHETIC_DATA, train=synthetic_trains(), test=SYNTHETIC_TEST)
#: the step-size grids of the search (Chapter 4); the Mamba grids end at eta = 1, Theorems 1 and 3's limit
ETA_GRIDS = {"mamba": (0.01, 0.03, 0.1, 0.3, 1.0), "mamba_merged": (0.01, 0.03, 0.1, 0.3, 1.0),
             "linear": (0.001, 0.003, 0.01, 0.03, 0.1)}
#: "tiny": a seconds-long smoke test of the pipeline (CLI tests); not a result of the book.
TINY = dataclasses.replace(FIG2, name="tiny", train={k: dataclasses.replace(v, steps=60) for k, v in FIG2.train.items()},
                           alphas=(0.0, 0.5, 0.8), n_test=400)
FIG2_PRESETS = {"plain": PLAIN, "fig2": FIG2, "tiny": TINY}
DEFAULT_SEEDS = tuple(range(20))


def patterns(preset: Fig2Preset, dtype=torch.float64) -> Patterns:
    """The preset's patterns, drawn from the stream ``(pattern_seed, "patterns")``."""
    return make_patterns(preset.data, torch_generator(preset.pattern_seed, "patterns"), dtype=dtype)


# ---------------------------------------------------------------- the mechanism chapter (Chapter 5, Appendix Mamba-1)
# read by mechanism, rmsnorm_causal and deep_gate_training


def log_steps(steps: int, n: int = 24) -> tuple:
    """About ``n`` distinct update counts from 1 to ``steps``, log-spaced (and ``steps`` itself)."""
    check_int("steps", steps, 1)
    pts = {max(1, round(math.exp(math.log(steps) * i / (n - 1)))) for i in range(n)}
    return tuple(sorted(pts | {steps}))


@dataclass(frozen=True)
class MechanismPreset(Preset):
    """One mechanism experiment: the model (``None``: one-layer Mamba of Eq. (3)), its training and the test."""

    model: Optional[DeepConfig] = instance(DeepConfig, optional=True)
    train: RunConfig = instance(RunConfig, factory=lambda: RunConfig(lr=0.3))
    p_a: float = real(0.4, 0.0, 1.0, high_open=True)  # §4.1: "p_a = 0.4"
    alpha: float = real(0.3, 0.0, 1.0, high_open=True)  # the gate figure: "alpha = 0.3"
    n_test: int = integer(512, 1)
    J: int = integer(8, 2)
    record_steps: tuple = integers((), 1, min_len=0)
    n_sums: int = integer(256, 1)  # test prompts on which Corollary 1's sums are recorded along training
    n_group: int = integer(256, 0)  # test prompts per task group (errors by task group); 0: skip
    n_placement: int = integer(0, 0)  # test prompts per placement (FQ / R / CQ, the cost of locality); 0: skip
    # task groups the Corollary 1-2 prompts come from; () = all tasks
    mechanism_groups: tuple = choices((), sorted(set(task_groups(all_tasks(SYNTHETIC_DATA.M1), SYNTHETIC_DATA.M1))),
                                      min_len=0)
    group_sums: bool = flag(True)  # also Corollary 1's sums per task group (False: errors only)
    lrs: tuple = reals((), 0.0, low_open=True, min_len=0, distinct=True)  # step sizes searched; (): train.lr
    # the step size the search over ``lrs`` chose for the reported seeds MECHANISM_SEEDS (on the n_search seeds
    # after them), recorded so that the chapters do not repeat it; 0: search on every run. tests/test_deep_icl.py
    # runs the search again and checks that it chooses this value. A run whose reported seeds include those
    # search seeds (e.g. --seeds 0 ... 9) searches again on seeds disjoint from its own (run reports which).
    searched_lr: float = real(0.0, 0.0)
    n_search: int = integer(3, 1)  # search seeds, disjoint from the reported ones
    search_steps: int = integer(100, 1)  # updates of each search run
    val_every: int = integer(0, 0)  # 0: train.steps updates; else check the validation loss this often
    patience: int = integer(4, 1)  # checks without a new minimum before stopping
    n_val: int = integer(256, 1)  # validation prompts per seed (training tasks, stream (s, "val"))
    n_norms: int = integer(0, 0)  # test prompts of the token-norm check (deep stacks); 0: skip

    def _check(self) -> None:
        check_ints("record_steps", self.record_steps, 1, self.train.steps, min_len=0)
        if self.searched_lr and self.searched_lr not in self.lrs:
            raise ConfigError(f"searched_lr must be one of lrs {self.lrs} (the search's choice) or 0; "
                              f"got {self.searched_lr!r}")
        if self.n_norms and self.model is None:
            raise ConfigError("n_norms must be 0 for the one-layer model (token norms are read in deep stacks)")

    @property
    def recorded_step(self) -> Optional[RecordedStep]:
        """``searched_lr`` as the book's one kind of record (:class:`mambaicl.recipes.stepsize.RecordedStep`):
        chosen over ``lrs`` on the ``n_search`` seeds after :data:`MECHANISM_SEEDS`; ``None`` when nothing is recorded."""
        if not self.searched_lr:
            return None
        return RecordedStep(self.searched_lr, self.lrs, search_seeds(MECHANISM_SEEDS, self.n_search),
                            f"validation hinge loss after {self.search_steps} updates ({self.train.optimizer})")

    @property
    def steps_to_record(self) -> tuple:
        return self.record_steps or log_steps(self.train.steps)


#: the one-layer Mamba of Eq. (3) at p_a = 0.4 (§4.1), step size 0.3 (Figure 2's preset trains at p_a = 0.6 with 1.0)
ONE_LAYER_MECHANISM = MechanismPreset(name="one_layer", train=RunConfig(lr=0.3, batch_size=64, steps=1000), n_placement=1000)
#: Figures 3-5: the paper's three-layer Mamba (§4.1), single head, p_a = 0.4: residual layers of the paper's
#: selective scan with pre-norm RMSNorm, trained with Algorithm 1 (SGD, hinge loss). The step size is searched
#: over 0.1, 0.03, 0.01 on held-out seeds (validation hinge loss after 100 updates); each seed then trains until
#: its validation loss (training tasks, fresh prompts) has not improved for 3 checks 25 updates apart (at most
#: 1000 updates) and keeps its best check. Corollaries 1-2 are measured on prompts of all tasks.
FIG3 = MechanismPreset(name="fig3", model=DeepConfig(kind="mamba", n_layers=3, d_model=64, norm="rms"),
                       train=RunConfig(lr=0.03, batch_size=64, steps=1000, optimizer="sgd", loss="hinge"),
                       n_placement=500, lrs=(0.1, 0.03, 0.01), n_search=2, search_steps=100, val_every=25,
                       patience=3, n_norms=256, searched_lr=0.03)
#: FIG3 without normalisation (its own step-size search and stopping)
FIG3_NONE = dataclasses.replace(FIG3, name="fig3_none", model=dataclasses.replace(FIG3.model, norm="none"),
                                n_placement=0, searched_lr=0.03)
#: the same question for three standard Mamba-1 blocks (Gu & Dao 2023), smaller to fit the CPU budget, Adam with
#: the step size searched over 3e-3, 1e-3, 3e-4; errors by task group only (its Corollary 1 probe materialises an
#: (L, L, E, N) gate); the sums are recorded at step 600 only (so at initialisation only when training stops
#: earlier)
MAMBA1 = MechanismPreset(name="mamba1", model=DeepConfig(kind="mamba1", n_layers=3, d_model=32),
                         train=RunConfig(lr=1e-3, batch_size=32, steps=600, optimizer="adam"), n_test=256, J=6,
                         n_group=256, group_sums=False, record_steps=(600,), n_sums=64, lrs=(3e-3, 1e-3, 3e-4),
                         n_search=2, search_steps=60, val_every=25, patience=3, n_val=128, n_norms=128,
                         searched_lr=3e-3)
#: "tiny": FIG3's model and training, stopped early within seconds (validation every 5 updates, patience 2, at most 100
#: updates, no search), few test prompts: the smoke test of both kernel paths (tests/test_deep_fused.py); not a result
FIG3_TINY = dataclasses.replace(FIG3, name="tiny", train=dataclasses.replace(FIG3.train, steps=100), n_test=64,
                                n_sums=32, n_group=32, n_placement=0, n_val=64, val_every=5, patience=2, n_norms=32,
                                lrs=(), searched_lr=0.0)
MECHANISM_PRESETS = {p.name: p for p in (ONE_LAYER_MECHANISM, FIG3, FIG3_NONE, MAMBA1, FIG3_TINY)}
# Ten seeds (issue 17); the step sizes above were searched on the two seeds after them, 10 and 11.
MECHANISM_SEEDS = tuple(range(10))


# ---------------------------------------------------------------- the training dynamics (Chapter 3)
# read by dynamics and dynamics_checks

DYNAMICS_SEEDS = tuple(range(20))
DYNAMICS_KINDS = ("mamba", "linear")


@dataclass(frozen=True)
class DynamicsPreset(Preset):
    """A complete Chapter 3 experiment: base settings (Figure 2's), sweep grids, measurement settings."""

    data: DataConfig = instance(DataConfig, factory=DataConfig)
    lr: dict = field(default_factory=lambda: {"mamba": 0.3, "linear": 0.01})
    batch_size: int = integer(64, 1)
    delta: float = real(0.2, 0.0, 0.2, low_open=True)
    steps: int = integer(400, 2)
    lr_grid: dict = field(default_factory=lambda: {"mamba": (0.0375, 0.075, 0.15, 0.3),
                                                   "linear": (0.0025, 0.005, 0.01, 0.02)})
    p_a_grid: tuple = reals((0.2, 0.4, 0.6, 0.8), 0.0, 1.0, high_open=True, min_len=2)
    beta_grid: tuple = reals((1.5, 2.0, 3.0, 4.5), 1.0, min_len=2)
    M1_grid: tuple = integers((3, 6, 9, 12), 1, min_len=2)
    l_tr_grid: tuple = integers((5, 10, 20, 40), 1, min_len=2)
    fraction: float = real(0.5, 0.0, 1.0, low_open=True, high_open=True)
    n_eval: int = integer(256, 1)
    dense_until: int = integer(40, 1)
    grid_ratio: float = real(1.06, 1.0, low_open=True)
    epsilon: float = real(0.25, 0.0, 1.0, low_open=True, high_open=True)
    absolute_epsilon: float = real(FIG2_EPSILON, 0.0, 1.0, low_open=True, high_open=True)
    early_min: int = integer(3, 1)
    check_delta: float | None = 0.05
    pattern_seed: int = integer(0, 0)

    def _check(self) -> None:
        for kind in DYNAMICS_KINDS:
            if kind not in self.lr or kind not in self.lr_grid:
                raise ConfigError(f"lr and lr_grid must give a value for each of {DYNAMICS_KINDS}; "
                                 f"got {self.lr!r}, {self.lr_grid!r}")
            check_real(f"lr[{kind!r}]", self.lr[kind], 0.0, 1.0, low_open=True)
            grid = check_reals(f"lr_grid[{kind!r}]", self.lr_grid[kind], 0.0, 1.0, low_open=True, min_len=2)
            if self.lr[kind] not in grid:
                raise ConfigError(f"lr_grid[{kind!r}] must contain the base step size {self.lr[kind]}; got {grid}")
        for name, base in (("p_a_grid", self.data.p_a), ("beta_grid", self.data.beta), ("M1_grid", self.data.M1),
                           ("l_tr_grid", self.data.l_tr)):
            if base not in getattr(self, name):
                raise ConfigError(f"{name} must contain the base value {base}; got {getattr(self, name)!r}")
        self.settings()  # every point of every sweep must be a valid DataConfig (raises ValueError)
        check_int("dense_until", self.dense_until, 1, self.steps)
        check_int("early_min", self.early_min, 1, self.dense_until)
        if self.check_delta is not None:
            check_real("check_delta", self.check_delta, 0.0, 0.2, low_open=True)

    def settings(self) -> list:
        """Every distinct setting of every sweep of both models."""
        seen = {}
        for kind in DYNAMICS_KINDS:
            for pts in sweep_settings(self, kind).values():
                for st in pts:
                    seen.setdefault(st, None)
        return list(seen)


@dataclass(frozen=True)
class Setting:
    """One run configuration of a sweep: model kind, data and step size."""

    kind: str
    data: DataConfig
    lr: float

    @property
    def group(self) -> tuple:
        """Settings with the same group share patterns and prompt shapes and train as one stack."""
        d = self.data
        return (self.kind, d.d, d.M1, d.M2, d.V, d.beta, d.outlier_norm, d.l_tr)


def sweep_settings(preset: DynamicsPreset, kind: str) -> dict:
    """``factor -> [Setting per grid value]`` for one model, every other factor at its base value."""
    check_choice("kind", kind, DYNAMICS_KINDS)
    base, lr = preset.data, preset.lr[kind]
    rep = dataclasses.replace
    return {"lr": [Setting(kind, base, float(v)) for v in preset.lr_grid[kind]],
            "one_minus_p_a": [Setting(kind, rep(base, p_a=float(v)), lr) for v in preset.p_a_grid],
            "beta": [Setting(kind, rep(base, beta=float(v)), lr) for v in preset.beta_grid],
            "M1": [Setting(kind, rep(base, M1=int(v)), lr) for v in preset.M1_grid],
            "l_tr": [Setting(kind, rep(base, l_tr=int(v)), lr) for v in preset.l_tr_grid]}


#: the book's preset: Figure 2's data and step sizes, 4 values per factor
DYNAMICS = DynamicsPreset(name="dynamics")
#: a seconds-long smoke test of the pipeline (tests, CLI); not a result of the book
DYNAMICS_TINY = DynamicsPreset(name="tiny", steps=16, dense_until=6, grid_ratio=1.5, n_eval=32,
                               lr_grid={"mamba": (0.15, 0.3), "linear": (0.005, 0.01)}, p_a_grid=(0.4, 0.6),
                               beta_grid=(2.0, 3.0), M1_grid=(4, 6), l_tr_grid=(10, 20), check_delta=None)


# ---------------------------------------------------------------- App. 14 (random outlier outputs)
# read by regression and app14_gates

APP14_KINDS = ("mamba", "linear")


@dataclass(frozen=True)
class App14Spec(Config):
    """App. 14: Figure 2's data and test shift with random outlier outputs (rule C), trained on the squared loss."""

    data: DataConfig = instance(DataConfig, factory=lambda: SYNTHETIC_DATA)  # Figure 2's patterns and prompts
    test: TestConfig = instance(TestConfig, factory=lambda: dataclasses.replace(SYNTHETIC_TEST, rule="C"))
    train: dict = trains(lambda: {k: v for k, v in synthetic_trains(loss="squared").items() if k in APP14_KINDS},
                         APP14_KINDS, loss="squared")
    alphas: tuple = reals((0.0, 0.2, 0.4, 0.6, 0.8, 0.9), 0.0, 1.0, high_open=True)
    n_test: int = integer(1000, 1)

    def _check(self) -> None:
        check_trains("app14.train", self.train, APP14_KINDS, min_m=self.data.d, loss="squared")
        check_choice("app14.test.rule", self.test.rule, ("C",))  # App. 14: outlier outputs are random
