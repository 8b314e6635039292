"""Presets shared by several experiments (not an experiment: it declares no ``PRESETS``).

Figure 2's setting (:class:`Fig2Preset` and its named presets, the step-size grids, the reported seeds, the
claim's task groups and the patterns) is read by :mod:`mambaicl.experiments.fig2` (which re-exports it) and by
:mod:`mambaicl.experiments.fig2_ablations`, so that no experiment imports another experiment's presets.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..config import (RULES, SYNTHETIC_DATA, SYNTHETIC_TEST, ConfigError, DataConfig, RunConfig, TestConfig,
                      check_choice, check_trains, choices, instance, integer, reals, synthetic_trains, trains)
from ..data import Patterns, make_patterns
from ..models import ONE_LAYER_KINDS
from ..seeding import torch_generator
from .base import Preset

__all__ = ["Fig2Preset", "PLAIN", "FIG2", "TINY", "FIG2_PRESETS", "ETA_GRIDS", "DEFAULT_SEEDS", "CLAIM_GROUPS", "patterns"]

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
