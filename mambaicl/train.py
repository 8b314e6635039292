"""The one training engine of the book: :func:`train` (Algorithm 1 and everything else).

Glossary (code name -> paper symbol):

================  ==========================================================
``Member``        one independent run: seed, model kind, the prompts it trains on (``data``), step
                  size ``eta`` (``lr``) and the model keywords
``data``          a :class:`PromptSource`: ``sample(batch, generators) -> (P, z)``, ``P``
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
* the non-finite check, which names the member (seed, lr, kind).

A test trains every model kind of :func:`mambaicl.models.build_model` in a batch and alone and finds
the same parameters (``tests/test_train.py``). :data:`ALGORITHM_1` (plain SGD on the hinge loss over fresh
prompts at every step, ``N = B T``) is a preset of the loop, not a second loop. :func:`fit` runs the same
loop on one given model (kept for the experiments not yet converted).

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

from .config import (LOSSES, OPTIMIZERS, ConfigError, TrainConfig, check_choice, check_instance, check_int,
                     check_ints, check_real, check_seeds)
from .members import (Draws, Member, PromptSource, SampledData, SyntheticData, build_members,
                      members)
from .seeding import torch_generator

__all__ = ["LOSSES", "OPTIMIZERS", "ALGORITHM_1", "TrainHistory", "Member", "members", "PromptSource", "SyntheticData",
           "SampledData", "MemberStack", "Draws", "StepSizes", "Group", "Trained", "train", "fit", "fit_kwargs",
           "loss_per_model", "hinge_loss", "logistic_loss", "squared_loss", "synthetic_sampler"]

#: Algorithm 1 of Li et al. (2025) as a preset of :func:`fit`: plain SGD on the hinge loss.
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


class MemberStack(nn.Module):
    """Separate models (one per member) run as one: ``P`` ``(n, batch, ...)`` -> ``F`` ``(n, batch)``.
    For the deep kinds, whose layers have no member axis; each member keeps its own parameters."""

    def __init__(self, models: list) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)

    @property
    def n_seeds(self) -> int:
        return len(self.members)

    def forward(self, P) -> torch.Tensor:
        return torch.stack([m(P[k]) for k, m in enumerate(self.members)])


class StepSizes:
    """The one per-member step-size mechanism: member ``k`` moves by its own ``lrs[k]``.

    Separate models (:class:`MemberStack`): one optimizer parameter group per member (exact). Stacked
    parameters (member axis first): one step size for all when they are equal (exactly ``torch.optim``),
    else SGD on gradients scaled by ``lrs[k]`` along the member axis, or Adam at step 1 whose update is
    then scaled by ``lrs[k]`` (equal to a run alone up to rounding). Members in ``dead`` do not move.
    """

    def __init__(self, model: nn.Module, lrs: list, optimizer: str) -> None:
        check_choice("optimizer", optimizer, OPTIMIZERS)
        cls = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
        self.optimizer, self.n, self.scale = optimizer, len(lrs), None
        if isinstance(model, MemberStack):
            self.per_member = [[p for p in m.parameters() if p.requires_grad] for m in model.members]
            self.opt = cls([{"params": ps, "lr": lr} for ps, lr in zip(self.per_member, lrs)], lr=lrs[0])
            return
        self.per_member = None
        self.params = [p for p in model.parameters() if p.requires_grad]
        for p in self.params:
            if p.dim() == 0 or p.shape[0] != self.n:
                raise ConfigError(f"a stacked model's parameters must have the member axis first ({self.n}); "
                                  f"got shape {tuple(p.shape)}")
        if len(set(lrs)) == 1:
            self.opt = cls(self.params, lr=lrs[0])
        else:
            self.opt = cls(self.params, lr=1.0)
            self.scale = torch.tensor(lrs, dtype=torch.float64)

    def __call__(self, total: torch.Tensor, dead: torch.Tensor | None = None) -> None:
        self.opt.zero_grad(set_to_none=True)
        total.backward()
        if dead is not None and bool(dead.any()):
            with torch.no_grad():
                if self.per_member is not None:
                    for k in dead.nonzero().flatten().tolist():
                        for p in self.per_member[k]:
                            p.grad = None
                else:
                    for p in self.params:
                        p.grad[dead.to(p.device)] = 0
        if self.scale is None:
            self.opt.step()
            return
        with torch.no_grad():
            views = [self.scale.to(p.device, p.dtype).view(-1, *([1] * (p.dim() - 1))) for p in self.params]
            if self.optimizer == "sgd":
                for p, c in zip(self.params, views):
                    p.grad.mul_(c)
                self.opt.step()
            else:
                before = [p.detach().clone() for p in self.params]
                self.opt.step()
                for p, b, c in zip(self.params, before, views):
                    p.copy_(b + c * (p - b))


def _recorder(record_every, steps: int) -> Callable[[int], bool]:
    if isinstance(record_every, int) and not isinstance(record_every, bool):
        check_int("record_every", record_every, 1)
        return lambda t: t % record_every == 0 or t == steps
    at = set(check_ints("record_every", record_every, 0, steps))
    return lambda t: t in at


def _loop(model: nn.Module, draw: Callable, update: Callable, *, steps: int, batch_size: int, loss: str,
          record: Callable[[int], bool], probes, progress: bool, desc: str, name: Callable, mark: bool = False,
          callback=None) -> tuple:
    """The one training loop: at each step draw a batch, take every member's loss, record, update.

    ``loss[k]`` of the history is the loss of the batch drawn at ``steps[k]``, before that step's
    update; probes see the model after ``steps[k]`` updates. Returns ``(history, dead)``, ``dead``
    the members whose loss turned non-finite (``mark=True``; else the first such loss raises).
    """
    history, dead = TrainHistory(), None
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
               dead)
        if callback is not None:
            callback(step, model)
    return history, dead


@dataclass
class Group:
    """Members trained as one stack: slot ``k`` of ``model`` is member ``members[k]`` of the call."""

    members: list
    model: nn.Module
    history: TrainHistory
    dead: list  # per slot: True if its loss turned non-finite (train(..., nonfinite="mark"))


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

    def losses(self, i: int) -> list:
        """Member ``i``'s recorded batch losses (at ``self.locate(i)[0].history.steps``)."""
        g, k = self.locate(i)
        return g.history.loss_of(k)

    def diverged(self, i: int) -> bool:
        g, k = self.locate(i)
        return g.dead[k]

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


def train(members: Sequence[Member], cfg: TrainConfig, *, stage: str = "train", device=None, progress: bool = True,
          record_every=10, probes: dict | None = None, freeze: tuple = (), nonfinite: str = "raise",
          callback: Callable | None = None) -> Trained:
    """Train every member; members with equal :meth:`Member.model_key` form one stacked model trained by one loop.

    Each group's model is ``build_model`` with one init generator ``(seed, "init")`` per member (deep
    kinds: a :class:`MemberStack`); member ``i`` trains on ``members[i].data``'s draws from the stream
    ``(seed, stage)`` (:class:`Draws`) with its own step size ``lr`` (:class:`StepSizes`), so it ends where
    a run of that member alone ends (up to rounding; tested for every kind).

    Args:
        members: :class:`Member` objects (order kept: group slots follow it).
        cfg: ``steps``, ``batch_size``, ``optimizer`` and ``loss`` of the loop (its ``lr``, ``m``,
            ``delta`` are *not* read: they are the members').
        stage: the stream name of the training prompts.
        device: where models and batches live (default CPU).
        record_every: an interval (step 0 and the last included) or the list of steps to record at.
        probes: ``name -> probe(model)``, evaluated (no gradients) on each group's model at every record; a
            probe may return a dict ``{key: value}``, recorded under each key.
        freeze: parameter names kept at their initial values (a diagnostic).
        nonfinite: ``"raise"``: a non-finite loss or output raises ``FloatingPointError`` naming the member
            (seed, lr, kind); ``"mark"``: that member stops moving and ``Group.dead`` says so.
        callback: ``callback(step, model)`` after every update of each group.
    """
    members = list(members)
    if not members:
        raise ConfigError("members must hold at least one Member")
    for m in members:
        check_instance("member", m, Member)
    check_instance("cfg", cfg, TrainConfig)
    check_choice("nonfinite", nonfinite, ("raise", "mark"))
    if not isinstance(stage, str) or not stage:
        raise ConfigError(f"stage must be a non-empty string; got {stage!r}")
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
        history, dead = _loop(model, Draws(group, stage, device), update, steps=cfg.steps, batch_size=cfg.batch_size,
                              loss=cfg.loss, record=record, probes=probes, progress=progress,
                              desc=f"{group[0].kind} x{len(group)} {cfg.optimizer}/{cfg.loss}",
                              name=lambda bad, g=group: "member " + g[int(bad.nonzero()[0])].label(),
                              mark=nonfinite == "mark", callback=callback)
        groups.append(Group(members=list(idx), model=model, history=history,
                            dead=[False] * len(idx) if dead is None else dead.tolist()))
    return Trained(members=members, groups=groups)


def fit(model: nn.Module, sample_batch: Callable, *, steps: int, batch_size: int, lr: float,
        optimizer: str = "sgd", loss: str = "hinge", seed: int | Sequence[int] = 0, stage: str = "train",
        device=None, record_every: int = 10, probes: dict[str, Callable[[nn.Module], float]] | None = None,
        progress: bool = True, callback: Callable[[int, nn.Module], None] | None = None) -> TrainHistory:
    """Train one given ``model`` in place by the engine's loop (:func:`_loop`) on ``sample_batch``'s draws.

    ``sample_batch(batch_size, generator)`` draws from the stream ``(seed, stage)`` (a list of generators
    when ``seed`` is a list); one step size ``lr`` for the whole model. Prefer :func:`train`.

    Raises:
        FloatingPointError: at the first non-finite loss, naming the step, ``lr`` and the seed.
    """
    check_int("steps", steps, 0)
    check_int("batch_size", batch_size, 1)
    check_real("lr", lr, 0.0, low_open=True)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("loss", loss, LOSSES)
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device)
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)(
        [p for p in model.parameters() if p.requires_grad], lr=lr)
    if isinstance(seed, (list, tuple)):
        generator = [torch_generator(s, stage) for s in check_seeds("seed", seed)]
    else:
        generator = torch_generator(check_int("seed", seed, 0), stage)

    def draw(batch: int) -> tuple:
        P, z = sample_batch(batch, generator)
        return P.to(device), z.to(device)

    def update(total: torch.Tensor, dead) -> None:
        opt.zero_grad(set_to_none=True)
        total.backward()
        opt.step()

    def name(bad: torch.Tensor) -> str:
        if bad.dim() == 0:
            return f"lr = {lr}"
        k = int(bad.flatten().nonzero()[0])
        seeds = list(seed) if isinstance(seed, (list, tuple)) else []
        return f"lr = {lr}, seed {seeds[k]}" if bad.dim() == 1 and k < len(seeds) == bad.numel() else \
            f"lr = {lr}, stacked model {k}"

    history, _ = _loop(model, draw, update, steps=steps, batch_size=batch_size, loss=loss,
                       record=_recorder(record_every, steps), probes=probes, progress=progress,
                       desc=f"{optimizer}/{loss}", name=name, callback=callback)
    return history


def fit_kwargs(cfg: TrainConfig) -> dict:
    """``steps``, ``batch_size``, ``lr``, ``optimizer``, ``loss`` of a :class:`TrainConfig`, for :func:`fit`."""
    return {"steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "optimizer": cfg.optimizer,
            "loss": cfg.loss}


def synthetic_sampler(pat, data, tasks) -> Callable:
    """``sample_batch`` of Definition 1 training prompts (:func:`mambaicl.data.training_prompts`) for :func:`fit`."""
    from .data import training_prompts

    def sample(batch: int, generator):
        pr = training_prompts(pat, data, tasks, batch, generator)
        return pr, pr.z

    return sample
