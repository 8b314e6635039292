"""Early stopping: the engine's one rule for training until the validation score stops improving.

Glossary:

==================  ====================================================================
``validate``        ``validate(model_i, i) -> float``: member ``i``'s validation score (lower is better), on
                    the caller's validation prompts (never test prompts)
``every``           updates between two checks (a check also runs after the last update, ``steps``)
``patience``        checks in a row without a new lowest score after which a member stops
``start``           checks before update ``start`` are recorded but neither set a best nor count
``initial``         also check the initial model (update 0), so a member may keep its initial parameters
``together``        ``False``: each member stops on its own; ``True``: members train on until every one has gone
                    ``patience`` checks without a new lowest score, and then all stop at that check
``best_step``       the check with a member's lowest score: the member ends with its parameters of then
==================  ====================================================================

:func:`mambaicl.train.train` with ``stop=EarlyStopping(...)`` and ``validate`` runs this rule on every group: a
stopped member is *resting* (its parameters no longer move and a deep member is no longer run), the loop ends
when every member rests (or after ``steps`` updates), and each member is given back its parameters of its best
check. What happened is reported per member as a :class:`StopRecord` (``Trained.stopping(i)``). Deterministic:
the same members stop at the same checks, and a member stops where it would stop alone.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from .config import check_int
from .members import MemberStack, member_model

__all__ = ["EarlyStopping", "StopRecord", "Watch", "slot_state", "load_slot"]


@dataclass(frozen=True)
class EarlyStopping:
    """When the engine checks the validation score and when a member stops (see the module's glossary)."""

    every: int
    patience: int
    start: int = 0
    initial: bool = False
    together: bool = False

    def __post_init__(self) -> None:
        check_int("every", self.every, 1)
        check_int("patience", self.patience, 1)
        check_int("start", self.start, 0)


@dataclass
class StopRecord:
    """One member's early stopping: its checks (update counts) and scores while it trained, its best check and
    score, the update count at which it stopped, whether that was the cap (``capped``: still improving), and
    whether its training loss or validation score turned non-finite (``diverged``)."""

    steps: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    best_step: int | None = None
    best_loss: float = math.inf
    stopped_at: int | None = None
    capped: bool = False
    diverged: bool = False


def slot_state(model: nn.Module, k: int) -> dict:
    """A copy of slot ``k``'s parameters (and buffers) in a stacked model."""
    if isinstance(model, MemberStack):
        return copy.deepcopy(model.members[k].state_dict())
    return {name: p[k].detach().clone() for name, p in model.named_parameters()}


def load_slot(model: nn.Module, k: int, state: dict) -> None:
    """Put :func:`slot_state`'s copy back into slot ``k``."""
    if isinstance(model, MemberStack):
        model.members[k].load_state_dict(state)
        return
    with torch.no_grad():
        for name, p in model.named_parameters():
            p[k].copy_(state[name])


class Watch:
    """The rule of :class:`EarlyStopping` applied to one group of ``n`` members trained for at most ``cap`` updates.

    ``check(t, model, slots)`` reads the score of every training member after ``t`` updates and decides who
    stops; ``resting`` is the mask of stopped members (the engine freezes them); ``finish(model)`` gives each
    member back its best parameters.
    """

    def __init__(self, rule: EarlyStopping, validate: Callable, members: list, cap: int) -> None:
        self.rule, self.validate, self.index, self.cap = rule, validate, list(members), cap
        self.records = [StopRecord() for _ in self.index]
        self.best: list = [None] * len(self.index)
        self.waited = [0] * len(self.index)
        self.resting = torch.zeros(len(self.index), dtype=torch.bool)

    def due(self, t: int) -> bool:
        """Whether a check runs after ``t`` updates."""
        return t == self.cap or (t > 0 and t % self.rule.every == 0) or (t == 0 and self.rule.initial)

    def check(self, t: int, model: nn.Module) -> None:
        """Score every training member after ``t`` updates; keep each one's best; stop members by the rule."""
        for k, rec in enumerate(self.records):
            if rec.stopped_at is not None:
                continue
            with torch.no_grad():
                v = float(self.validate(member_model(model, k), self.index[k]))
            rec.steps.append(t)
            rec.loss.append(v)
            rec.diverged = rec.diverged or not math.isfinite(v)
            if t < self.rule.start:
                continue
            if v < rec.best_loss:
                rec.best_loss, rec.best_step, self.waited[k] = v, t, 0
                self.best[k] = slot_state(model, k)
            else:
                self.waited[k] += 1
        self._decide(t)

    def _decide(self, t: int) -> None:
        """Stop the members whose patience ran out (all at once when ``together``); at the cap, stop the rest."""
        running = [k for k, r in enumerate(self.records) if r.stopped_at is None]
        if self.rule.together:
            done = running if running and min(self.waited[k] for k in running) >= self.rule.patience else []
        else:
            done = [k for k in running if self.waited[k] >= self.rule.patience]
        for k in running:
            if k in done or t == self.cap:
                self.records[k].stopped_at, self.records[k].capped = t, k not in done
                self.resting[k] = True

    @property
    def all_resting(self) -> bool:
        return bool(self.resting.all())

    def finish(self, model: nn.Module, dead) -> list:
        """Give every member its best check's parameters (a member never checked keeps its own); returns the records."""
        for k, state in enumerate(self.best):
            if state is not None:
                load_slot(model, k, state)
            if dead is not None:
                self.records[k].diverged = self.records[k].diverged or bool(dead[k])
        if hasattr(model, "resting"):
            model.resting = set()
        return self.records

