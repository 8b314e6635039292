"""The one step-size search of the book: train every (step size, seed) member at once and score each.

==================  =====================================================================
name                meaning
==================  =====================================================================
``lrs``             the candidate step sizes ``eta``
``seeds``           the search's seeds: by default the first ``n_seeds`` integers *not* among the
                    seeds an experiment reports (:func:`search_seeds`), so that the reported runs
                    play no part in choosing their own step size
``score``           a per-member validation number (lower is better), e.g. the hinge loss on
                    fresh Definition 1 prompts; a member whose training diverged scores ``inf``
``best``            the step size with the lowest mean score over seeds
==================  =====================================================================

All ``len(lrs) * len(seeds)`` members (member ``k S + s``: ``lrs[k]``, ``seeds[s]``) train as one stack by
:func:`mambaicl.train.train`, each with its own step size and its seed's draws; a diverging member
stops moving and scores ``inf`` (``nonfinite="mark"``) instead of stopping the others. Used by
Figure 2 (Chapter 4), the gate families (Chapter 7) and SST-2.

A search that a chapter does not repeat is written down once as a :class:`RecordedStep` (the choice, the
candidates, the search's seeds and how it scored); an experiment uses a record only for reported seeds
disjoint from the record's (:meth:`RecordedStep.usable_for`), and the search is re-run to check that it still
chooses the recorded step size (a slow test for the deep stacks and the gate families; SST-2's three
validation curves, about 25 CPU-minutes, by hand: see ``sst2.SEARCHED_LR``). Every recorded
step size of the book is one: Chapter 5's deep stacks (``MechanismPreset.recorded_step``), the gate
families (``gates.SEARCHED_LR``) and SST-2 (``sst2.SEARCHED_LR``).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..config import ConfigError, TrainConfig, check_instance, check_int, check_reals, check_seeds
from ..train import Member, Trained, train
from ..analysis.stats import Comparison, compare, error_mean_se

__all__ = ["search_seeds", "StepSizeSearch", "step_size_search", "RecordedStep", "warn_if_chosen_on"]


def search_seeds(reported: Sequence[int] = (), n: int = 5) -> tuple:
    """The first ``n`` non-negative integers not in ``reported``: search seeds disjoint from the reported ones."""
    check_int("n", n, 1)
    reported = set(check_seeds("reported", reported)) if len(reported) else set()
    out, s = [], 0
    while len(out) < n:
        if s not in reported:
            out.append(s)
        s += 1
    return tuple(out)


@dataclass(frozen=True)
class RecordedStep:
    """The step size ``lr`` that :func:`step_size_search` chose among ``lrs`` on the search seeds ``seeds``,
    written down so that a chapter need not repeat the search; ``how`` says what scored it (in words)."""

    lr: float
    lrs: tuple
    seeds: tuple
    how: str

    def __post_init__(self) -> None:
        lrs = check_reals("lrs", self.lrs, 0.0, low_open=True, distinct=True)
        object.__setattr__(self, "lrs", lrs)
        object.__setattr__(self, "seeds", check_seeds("seeds", self.seeds))
        if isinstance(self.lr, bool) or not isinstance(self.lr, (int, float)) or float(self.lr) not in lrs:
            raise ConfigError(f"lr must be one of lrs {lrs} (the search's choice); got {self.lr!r}")
        object.__setattr__(self, "lr", float(self.lr))
        if not isinstance(self.how, str) or not self.how.strip():
            raise ConfigError(f"how must say what scored the search (a non-empty string); got {self.how!r}")

    def usable_for(self, reported: Sequence[int]) -> bool:
        """Whether the record may stand for a search on seeds disjoint from ``reported``: only if none of the
        record's own seeds is reported (the reported runs play no part in choosing their step size)."""
        return not set(self.seeds) & set(check_seeds("reported", reported))


def warn_if_chosen_on(records, reported: Sequence[int], where: str) -> None:
    """Warn (never silently) when reported seeds are also seeds on which a record used for them was chosen: their
    results then took part in choosing their own step size (the gate families and SST-2 keep their records
    whatever seeds they report; the deep stacks search anew, :attr:`MechanismPreset.recorded_step`)."""
    overlap = sorted({s for r in records for s in r.seeds} & set(reported))
    if overlap:
        warnings.warn(f"{where}: seeds {overlap} are reported and also chose the recorded step sizes used for them; "
                      "their results are not independent of that choice (report other seeds, or search anew)",
                      stacklevel=3)


@dataclass
class StepSizeSearch:
    """The book's one step-size search result. Scores of every step size: ``per_seed[k][s]`` (``inf`` if that
    member diverged), their mean over seeds (``inf`` if any seed diverged) and standard error, and the best step
    size; ``trained`` holds the stack (member ``k S + s`` = ``(lrs[k], seeds[s])``). A caller that measured more
    adds it: ``kind``, ``error`` (each step size's mean 0-1 error, 1 where a seed diverged) and ``steps`` (the
    budget), as Chapter 4's step-size table does (:func:`mambaicl.experiments.fig2.eta_table`)."""

    lrs: list
    seeds: list
    per_seed: list
    mean: list
    se: list
    best: float
    diverged: list  # [k][s]
    trained: Trained = field(repr=False)
    kind: str = ""
    error: list | None = None
    steps: int | None = None

    def member(self, k: int, s: int) -> int:
        """Index of the member of ``lrs[k]`` and ``seeds[s]`` in ``trained.members``."""
        return k * len(self.seeds) + s

    def rows(self) -> list:
        """``(lr, mean score, its SE, 0-1 error)`` per step size, for a table (``error`` must be set)."""
        if self.error is None:
            raise ConfigError("rows() needs the 0-1 error of each step size (error is None)")
        return list(zip(self.lrs, self.mean, self.se, self.error))

    def versus_best(self, lr: float) -> Comparison:
        """:func:`mambaicl.analysis.stats.compare` (paired over seeds) of ``lr``'s score with the best one's."""
        return compare(self.per_seed[self.lrs.index(lr)], self.per_seed[self.lrs.index(self.best)])


def step_size_search(template: Member, lrs, cfg: TrainConfig, score: Callable[[Trained], list], *,
                     reported: Sequence[int], seeds=None, n_seeds: int = 5, stage: str = "train",
                     device=None, progress: bool = False) -> StepSizeSearch:
    """Train ``template`` (its kind, data and model keywords) with every step size of ``lrs`` and every seed,
    as one batch, and score each member.

    Args:
        template: a :class:`mambaicl.train.Member`; its ``seed`` and ``lr`` are replaced.
        lrs: candidate step sizes; cfg: the training budget (its own ``lr`` is not read).
        score: ``score(trained) -> [value per member]`` (members in ``trained.members`` order), lower
            is better; computed once, after training.
        reported: the seeds the experiment reports (required: the one place where the search's seeds are
            checked to be disjoint from them).
        seeds: the search's seeds; default :func:`search_seeds` ``(reported, n_seeds)``. Seeds that
            are also in ``reported`` raise :class:`~mambaicl.config.ConfigError`.
    """
    check_instance("template", template, Member)
    lrs = check_reals("lrs", lrs, 0.0, low_open=True, distinct=True)
    seeds = search_seeds(reported, n_seeds) if seeds is None else check_seeds("seeds", seeds)
    overlap = sorted(set(seeds) & set(reported))
    if overlap:
        raise ConfigError(f"seeds must be disjoint from the reported seeds; both hold {overlap}")
    ms = [dataclasses.replace(template, seed=s, lr=float(lr)) for lr in lrs for s in seeds]
    trained = train(ms, cfg, stage=stage, device=device, progress=progress, record_every=max(cfg.steps, 1),
                    nonfinite="mark")
    values = [float(v) for v in score(trained)]
    if len(values) != len(ms):
        raise ConfigError(f"score must return one value per member ({len(ms)}); got {len(values)}")
    S = len(seeds)
    dead = [[trained.diverged(k * S + s) for s in range(S)] for k in range(len(lrs))]
    per_seed = [[math.inf if dead[k][s] or not math.isfinite(values[k * S + s]) else values[k * S + s]
                 for s in range(S)] for k in range(len(lrs))]
    stats = [error_mean_se(h) if all(map(math.isfinite, h)) else (math.inf, math.nan) for h in per_seed]
    mean = [m for m, _ in stats]
    best = lrs[min(range(len(lrs)), key=lambda k: mean[k])]
    return StepSizeSearch(lrs=list(lrs), seeds=list(seeds), per_seed=per_seed, mean=mean, se=[s for _, s in stats],
                          best=best, diverged=dead, trained=trained)
