"""The one training engine of the book: :func:`train` (Algorithm 1 and everything else).

Glossary (code name -> paper symbol):

================  ==========================================================
``Member``        one independent run: seed, model kind, the prompts it trains on (``data``), step
                  size ``eta`` (``lr``) and the model keywords
``data``          a :class:`PromptSource`: ``sample(batch, streams) -> (P, z)``, ``P``
                  ``(S, batch, l+1, d+1)`` (or :class:`mambaicl.data.Prompts`), ``z`` ``(S, batch)``
``hinge``         ``l(Psi; P, z) = max{0, 1 - z F(Psi; P)}`` (Section 2)
``logistic``      ``log(1 + exp(-z F))``, for the deep models of Chapters 5-6
``squared``       ``(F - z)^2 / 2``, for regression (App. 14)
``lr``            step size ``eta``; ``batch_size`` is ``B``; ``steps`` is ``T``
================  ==========================================================

**One engine.** ``train(members, cfg)`` groups the members by kind and model keywords (and the data's
``stack_key``), builds each group's stacked model (member axis first, one init stream ``(seed, "init")``
per member) and trains each group by ONE loop (:func:`_loop`), minimising the sum over members of each
member's mean loss, so that every member gets exactly its own gradient. Three mechanisms, each written once:

* :class:`Draws`, the draw-replay: member ``(seed, data)`` gets the draws of the stream ``(seed, stage)``
  made by its own ``data``: exactly those of a run of that member alone, whatever the other members'
  data (equal data objects share one draw per seed);
* :class:`StepSizes`, the per-member step size along the member axis;
* the non-finite check, which names the member (seed, lr, kind);
* early stopping (:mod:`mambaicl.convergence`): ``train(..., stop=EarlyStopping(...), validate=...)`` checks each
  member's validation score, stops (freezes) each member whose score stopped improving, ends the loop when all
  have stopped and gives each its parameters of its best check.

A test trains every model kind of :func:`mambaicl.models.build_model` in a batch and alone and finds
the same parameters (``tests/test_train.py``). :data:`ALGORITHM_1` (plain SGD on the hinge loss over fresh
prompts at every step, ``N = B T``) is a preset of the loop, not a second loop.

    members = [Member(seed=s, kind="mamba", data=SyntheticData(pat, cfg_data), lr=1.0, m=31, delta=0.2)
               for s in (0, 1, 2)]
    trained = train(members, TrainConfig(steps=1000))
    stack = trained.model(0)            # the stacked model; member i sits at slot trained.slot(i)
    trained.losses(2)                   # member 2's recorded batch losses
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.nn.functional as F_
from torch import nn
from tqdm.auto import tqdm

from .config import LOSSES, OPTIMIZERS, ConfigError, TrainConfig, check_choice, check_instance, check_int, check_ints
from .convergence import EarlyStopping, StopRecord, Watch
from .members import (Draws, Member, MemberStack, PromptSource, SampledData, SyntheticData, build_members,
                      member_model, members)

__all__ = ["LOSSES", "OPTIMIZERS", "ALGORITHM_1", "TrainHistory", "Member", "members", "PromptSource", "SyntheticData",
           "SampledData", "MemberStack", "member_model", "Draws", "StepSizes", "EarlyStopping", "StopRecord", "Group",
           "Trained", "train", "sgd_step", "loss_per_model", "hinge_loss", "logistic_loss", "squared_loss"]

#: Algorithm 1 of Li et al. (2025) as a preset of :func:`train`'s configuration: plain SGD on the hinge loss.
ALGORITHM_1 = {"optimizer": "sgd", "loss": "hinge"}


def hinge_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Hinge loss ``max{0, 1 - z F}`` (Section 2 of Li et al., 2025), averaged over the last axis."""
    return torch.clamp(1 - z * F, min=0).mean(-1)


def logistic_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Logistic loss ``log(1 + exp(-z F))`` (softplus, stable), averaged over the last axis."""
    return F_.softplus(-z * F).mean(-1)


def squared_loss(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Squared loss ``(F - z)^2 / 2`` (App. 14's regression), averaged over the last axis."""
    return 0.5 * (F - z).pow(2).mean(-1)


_LOSS_FNS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "hinge": hinge_loss, "logistic": logistic_loss, "squared": squared_loss}


def loss_per_model(name: str, F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The loss ``name`` of every model: a scalar for ``F`` ``(batch,)``, ``(S,)`` for ``F`` ``(S, batch)``."""
    check_choice("loss", name, LOSSES)
    return _LOSS_FNS[name](F, z)


@dataclass
class TrainHistory:
    """Loss and probe values recorded every ``record_every`` steps (step 0 and the last step included).

    ``loss[k]`` is the loss of the batch drawn at ``steps[k]``, before that step's update: a float,
    or a list of one float per seed for a seed-batched model.
    """

    steps: list[int] = field(default_factory=list)
    loss: list = field(default_factory=list)
    probes: dict[str, list] = field(default_factory=dict)

    def loss_of(self, s: int) -> list[float]:
        """The recorded losses of seed ``s`` (of the only model when unbatched)."""
        return [v[s] if isinstance(v, list) else v for v in self.loss]


def _record(history: TrainHistory, step: int, per_model: torch.Tensor, model: nn.Module, probes) -> None:
    history.steps.append(step)
    history.loss.append(per_model.detach().tolist())
    for name, probe in (probes or {}).items():
        value = probe(model)  # a float, a tensor, or a dict of them (each recorded under its own name)
        for key, v in (value.items() if isinstance(value, dict) else [(name, value)]):
            history.probes.setdefault(key, []).append(v.tolist() if isinstance(v, torch.Tensor) else float(v))


# ---------------------------------------------------------------- the engine: members trained as one stack


def sgd_step(params, lr: float) -> None:
    """One step of Algorithm 1, once the batch's loss is backpropagated: ``p <- p - lr * dloss/dp`` for every
    parameter that has a gradient (plain SGD: no momentum, no weight decay).

    The engine's SGD update (:class:`StepSizes`) calls it. It is ``torch.optim.SGD``'s arithmetic at these
    settings, operation for operation (one in-place update per parameter on a CPU; on a GPU, where that optimizer
    updates the whole list at once, the same list update), so no number differs from that optimizer's.
    """
    with torch.no_grad():
        params = [p for p in params if p.grad is not None]
        if params and params[0].is_cuda:  # torch.optim.SGD's default on a GPU: one fused update of the list
            torch._foreach_add_(params, [p.grad for p in params], alpha=-lr)
            return
        for p in params:
            p.add_(p.grad, alpha=-lr)  # p <- p - lr * grad


class StepSizes:
    """The one per-member step-size mechanism: member ``k`` moves by its own ``lrs[k]``; members in ``frozen``
    do not move.

    * Separate models (:class:`MemberStack`): one parameter group per member, with its own ``lr``; a frozen
      member's gradients are dropped, so the step skips it.
    * Stacked parameters (member axis first), equal step sizes: one step with that ``lr``.
    * Stacked parameters, different step sizes: one step with ``lr = 1`` and each member's move scaled by
      its own ``lrs[k]`` (:meth:`_scaled_step`).

    SGD (Algorithm 1) steps with :func:`sgd_step`, Adam with ``torch.optim.Adam`` (one parameter group per member,
    or one group).
    """

    def __init__(self, model: nn.Module, lrs: list, optimizer: str) -> None:
        check_choice("optimizer", optimizer, OPTIMIZERS)
        self.optimizer, self.n, self.scale, self.opt = optimizer, len(lrs), None, None
        if isinstance(model, MemberStack):
            self.per_member = [[p for p in m.parameters() if p.requires_grad] for m in model.members]
            self.groups = list(zip(self.per_member, lrs))  # (parameters, lr) per member
            if optimizer == "adam":
                self.opt = torch.optim.Adam([{"params": ps, "lr": lr} for ps, lr in self.groups], lr=lrs[0])
            return
        self.per_member = None
        self.params = [p for p in model.parameters() if p.requires_grad]
        for p in self.params:
            if p.dim() == 0 or p.shape[0] != self.n:
                raise ConfigError(f"a stacked model's parameters must have the member axis first ({self.n}); "
                                  f"got shape {tuple(p.shape)}")
        lr = lrs[0] if len(set(lrs)) == 1 else 1.0
        if len(set(lrs)) > 1:
            self.scale = torch.tensor(lrs, dtype=torch.float64)
        self.groups = [(self.params, lr)]
        if optimizer == "adam":
            self.opt = torch.optim.Adam(self.params, lr=lr)

    def _step(self) -> None:
        """One step of every parameter group: :func:`sgd_step` for SGD, ``torch.optim.Adam``'s step for Adam."""
        if self.opt is not None:
            self.opt.step()
            return
        for params, lr in self.groups:
            sgd_step(params, lr)

    def __call__(self, total: torch.Tensor, frozen: torch.Tensor | None = None) -> None:
        """Backpropagate ``total`` (the sum of the members' losses) and move every member not ``frozen``."""
        for params, _ in self.groups:
            for p in params:
                p.grad = None  # as torch.optim's zero_grad(set_to_none=True)
        total.backward()
        frozen = frozen if frozen is not None and bool(frozen.any()) else None
        if self.per_member is not None:
            for k in ([] if frozen is None else frozen.nonzero().flatten().tolist()):
                for p in self.per_member[k]:
                    p.grad = None  # the step skips a parameter without a gradient
            self._step()
            return
        kept = None if frozen is None else [p.detach()[frozen.to(p.device)].clone() for p in self.params]
        if kept is not None:
            for p in self.params:
                p.grad[frozen.to(p.device)] = 0
        self._scaled_step() if self.scale is not None else self._step()
        if kept is not None:
            with torch.no_grad():
                for p, v in zip(self.params, kept):
                    p[frozen.to(p.device)] = v  # Adam moves even on a zero gradient (its momentum)

    def _scaled_step(self) -> None:
        """Different step sizes on stacked parameters. SGD: the gradient of member ``k`` times ``lrs[k]``, then a
        step of size 1 (exact). Adam: Adam's step ``d_k`` at step size 1, then member ``k`` moved by
        ``lrs[k] d_k`` instead (Adam's step is proportional to its step size, so this is Adam at ``lrs[k]`` up to
        rounding)."""
        with torch.no_grad():
            views = [self.scale.to(p.device, p.dtype).view(-1, *([1] * (p.dim() - 1))) for p in self.params]
            if self.optimizer == "sgd":
                for p, c in zip(self.params, views):
                    p.grad.mul_(c)
                self._step()
                return
            before = [p.detach().clone() for p in self.params]
            self.opt.step()  # p = before + d (step size 1)
            for p, b, c in zip(self.params, before, views):
                p.copy_(b + c * (p - b))  # p = before + lrs[k] d


def _recorder(record_every, steps: int) -> Callable[[int], bool]:
    if isinstance(record_every, int) and not isinstance(record_every, bool):
        check_int("record_every", record_every, 1)
        return lambda t: t % record_every == 0 or t == steps
    at = set(check_ints("record_every", record_every, 0, steps))
    return lambda t: t in at


def _loop(model: nn.Module, draw: Callable, update: Callable, *, steps: int, batch_size: int, loss: str,
          record: Callable[[int], bool], probes, progress: bool, desc: str, name: Callable, mark: bool = False,
          callback=None, watch: Watch | None = None) -> tuple:
    """The one training loop: at each step draw a batch, take every member's loss, record, update.

    ``loss[k]`` of the history is the loss of the batch drawn at ``steps[k]``, before that step's
    update; probes see the model after ``steps[k]`` updates. With a ``watch`` (early stopping), its checks
    run after the updates it names (and on the initial model if it asks), stopped members rest, and the loop
    ends when all rest. Returns ``(history, dead)``, ``dead`` the members whose loss turned non-finite
    (``mark=True``; else the first such loss raises).
    """
    history, dead = TrainHistory(), None
    if watch is not None and watch.due(0):
        _watch(watch, 0, model)
    for step in tqdm(range(steps + 1), desc=desc, disable=not progress, mininterval=1.0):
        P, z = draw(batch_size)
        F = model(P)
        per_model = loss_per_model(loss, F, z)  # () or (n,)
        bad = ~torch.isfinite(per_model) | ~torch.isfinite(F.detach()).reshape(*per_model.shape, -1).all(-1)
        if bool(bad.any()):
            if not mark:
                raise FloatingPointError(f"non-finite training loss at step {step} ({name(bad)}); "
                                         "the step size is too large for this model")
            dead = bad if dead is None else dead | bad
        if record(step):
            with torch.no_grad():
                _record(history, step, per_model, model, probes)
        if step == steps:
            break
        update(per_model.sum() if dead is None else torch.where(dead, torch.zeros_like(per_model), per_model).sum(),
               _frozen(dead, watch))
        if callback is not None:
            callback(step, model)
        if watch is not None and watch.due(step + 1) and _watch(watch, step + 1, model):
            break
    return history, dead


def _watch(watch: Watch, t: int, model: nn.Module) -> bool:
    """Run the early-stopping check after ``t`` updates; rest the stopped members; whether all rest."""
    watch.check(t, model)
    if hasattr(model, "resting"):  # a MemberStack or a StackedDeepModel: stopped members are not run
        model.resting = set(watch.resting.nonzero().flatten().tolist())
    return watch.all_resting


def _frozen(dead: torch.Tensor | None, watch: Watch | None) -> torch.Tensor | None:
    """The members that must not move: those whose loss turned non-finite and those that early stopping stopped."""
    if watch is None or not bool(watch.resting.any()):
        return dead
    return watch.resting.to(dead.device) | dead if dead is not None else watch.resting


@dataclass
class Group:
    """Members trained as one stack: slot ``k`` of ``model`` is member ``members[k]`` of the call."""

    members: list
    model: nn.Module
    history: TrainHistory
    dead: list  # per slot: True if its loss turned non-finite (train(..., nonfinite="mark"))
    stops: list | None = None  # per slot: its StopRecord (train(..., stop=...))


@dataclass
class Trained:
    """What :func:`train` returns: the members (in the order given) and the groups that trained them."""

    members: list
    groups: list

    def locate(self, i: int) -> tuple:
        """``(group, slot)`` of member ``i``."""
        for g in self.groups:
            if i in g.members:
                return g, g.members.index(i)
        raise ConfigError(f"member index must lie in [0, {len(self.members)}); got {i!r}")

    def model(self, i: int) -> nn.Module:
        """The stacked model that holds member ``i`` (at slot :meth:`slot`)."""
        return self.locate(i)[0].model

    def slot(self, i: int) -> int:
        return self.locate(i)[1]

    def member_model(self, i: int) -> nn.Module:
        """Member ``i`` alone: its deep model, or a one-member copy of a stacked model's slot."""
        g, k = self.locate(i)
        return member_model(g.model, k)

    def losses(self, i: int) -> list:
        """Member ``i``'s recorded batch losses (at ``self.locate(i)[0].history.steps``)."""
        g, k = self.locate(i)
        return g.history.loss_of(k)

    def diverged(self, i: int) -> bool:
        g, k = self.locate(i)
        return g.dead[k]

    def stopping(self, i: int) -> StopRecord:
        """Member ``i``'s early stopping (``train(..., stop=...)``)."""
        g, k = self.locate(i)
        if g.stops is None:
            raise ConfigError("stopping needs a training run with early stopping: train(..., stop=EarlyStopping(...))")
        return g.stops[k]

    @property
    def models(self) -> list:
        return [g.model for g in self.groups]


def _freeze(model: nn.Module, names) -> None:
    mods = model.members if isinstance(model, MemberStack) else [model]
    for mod in mods:
        params = dict(mod.named_parameters())
        for name in names:
            if name not in params:
                raise ConfigError(f"freeze must name parameters of the model, among {sorted(params)}; got {name!r}")
            params[name].requires_grad_(False)


def _check_call(members: list, cfg, stage, nonfinite, stop, validate) -> None:
    if not members:
        raise ConfigError("members must hold at least one Member")
    for m in members:
        check_instance("member", m, Member)
    check_instance("cfg", cfg, TrainConfig)
    check_choice("nonfinite", nonfinite, ("raise", "mark"))
    if not isinstance(stage, str) or not stage:
        raise ConfigError(f"stage must be a non-empty string; got {stage!r}")
    if stop is not None:
        check_instance("stop", stop, EarlyStopping)
        if not callable(validate):
            raise ConfigError(f"validate must be a function validate(model, i) -> float with stop; got {validate!r}")


def train(members: Sequence[Member], cfg: TrainConfig, *, stage: str = "train", device=None, progress: bool = True,
          record_every=10, probes: dict | None = None, freeze: tuple = (), nonfinite: str = "raise",
          callback: Callable | None = None, stop: EarlyStopping | None = None,
          validate: Callable | None = None) -> Trained:
    """Train every member; members with equal :meth:`Member.model_key` form one stacked model trained by one loop.

    Each group's model is ``build_model`` with one init generator ``(seed, "init")`` per member (deep
    kinds: a :class:`MemberStack`); member ``i`` trains on ``members[i].data``'s draws from the stream
    ``(seed, stage)`` (:class:`Draws`) with its own step size ``lr`` (:class:`StepSizes`), so it ends where
    a run of that member alone ends (up to rounding; tested for every kind).

    Args:
        members: :class:`Member` objects (order kept: group slots follow it).
        cfg: ``steps``, ``batch_size``, ``optimizer`` and ``loss`` of the loop (the step sizes are the members').
        stage: the stream name of the training prompts.
        device: where models and batches live (default CPU).
        record_every: an interval (step 0 and the last included) or the list of steps to record at.
        probes: ``name -> probe(model)``, evaluated (no gradients) on each group's model at every record; a
            probe may return a dict ``{key: value}``, recorded under each key.
        freeze: parameter names kept at their initial values (a diagnostic).
        nonfinite: ``"raise"``: a non-finite loss or output raises ``FloatingPointError`` naming the member
            (seed, lr, kind); ``"mark"``: that member stops moving and ``Group.dead`` says so.
        callback: ``callback(step, model)`` after every update of each group.
        stop: early stopping (:class:`mambaicl.convergence.EarlyStopping`): members stop when ``validate(model_i,
            i)`` (member ``i``'s validation score, lower is better) stops improving and end at their best check;
            :meth:`Trained.stopping` reports each member's :class:`~mambaicl.convergence.StopRecord`.
    """
    members = list(members)
    _check_call(members, cfg, stage, nonfinite, stop, validate)
    device = torch.device(device if device is not None else "cpu")
    record = _recorder(record_every, cfg.steps)
    by_key: dict = {}
    for i, m in enumerate(members):
        by_key.setdefault(m.model_key(), []).append(i)
    groups = []
    for idx in by_key.values():
        group = [members[i] for i in idx]
        model = build_members(group, device)
        _freeze(model, freeze)
        update = StepSizes(model, [m.lr for m in group], cfg.optimizer)
        watch = None if stop is None else Watch(stop, validate, idx, cfg.steps)
        history, dead = _loop(model, Draws(group, stage, device), update, steps=cfg.steps, batch_size=cfg.batch_size,
                              loss=cfg.loss, record=record, probes=probes, progress=progress,
                              desc=f"{group[0].kind} x{len(group)} {cfg.optimizer}/{cfg.loss}",
                              name=lambda bad, g=group: "member " + g[int(bad.nonzero()[0])].label(),
                              mark=nonfinite == "mark", callback=callback, watch=watch)
        groups.append(Group(members=list(idx), model=model, history=history,
                            dead=[False] * len(idx) if dead is None else dead.tolist(),
                            stops=None if watch is None else watch.finish(model, dead)))
    return Trained(members=members, groups=groups)
