"""What the engine trains: :class:`Member` (one run) and its prompts, :class:`PromptSource`.

A member is ``(seed, kind, data, lr)`` plus model keywords; its ``data`` draws the training prompts.
:class:`Draws` is the engine's one draw-replay: each member sees exactly the draws of its own
``(seed, stage)`` stream made by its own data, as if trained alone. :func:`mambaicl.train.train` trains
lists of members; the members of one kind and model keywords form one stacked model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import torch
from torch import nn

from .config import (DEEP_KINDS, ONE_LAYER_KINDS, ConfigError, DataConfig, check_choice, check_instance, check_int,
                     check_real, check_seeds)
from .data.source import KeyedSource
from .seeding import numpy_stream, torch_generator

__all__ = ["PromptSource", "SyntheticData", "SampledData", "Member", "members", "Draws", "MemberStack", "member_model",
           "build_members"]


@runtime_checkable
class PromptSource(Protocol):
    """What a :class:`Member` trains on (its ``data``): any hashable object with

    * ``d``: the data dimension (prompts are ``(..., l+1, d+1)``), read to build the model;
    * ``sample(batch, streams) -> (P, z)``: ``len(streams)`` batches (NumPy streams,
      :func:`mambaicl.seeding.numpy_stream`) stacked on a leading axis,
      ``P`` a tensor ``(S, batch, l+1, d+1)`` or a :class:`mambaicl.data.Prompts` ``(S, batch, ...)``
      and ``z`` ``(S, batch)``; batch ``s`` drawn from ``streams[s]`` only;
    * optionally ``stack_key``: members whose data have different keys never share a stack (e.g.
      different patterns or prompt lengths, which cannot be concatenated);
    * optionally ``sample_at(step, batch, streams)``: draws that depend on the training step (a curriculum);
      the engine calls it, with the step, instead of ``sample``.

    Equal data objects (``==``) share one draw per seed. :class:`SyntheticData` is Definition 1's;
    :class:`SampledData` wraps any ``sample`` function (regression, multiclass, SST-2 samplers).
    """

    d: int

    def sample(self, batch: int, streams: list) -> tuple: ...


class SyntheticData(KeyedSource):
    """Definition 1 training prompts (:func:`mambaicl.data.training_prompts`) on fixed patterns.

    Two are equal when their :class:`~mambaicl.data.Patterns` are equal in value (:attr:`Patterns.key`), with the
    same :class:`~mambaicl.config.DataConfig` and the same training tasks.
    """

    def __init__(self, pat, config: DataConfig, tasks: torch.Tensor | None = None) -> None:
        from .data import training_tasks

        self.pat = pat
        self.config = check_instance("data config", config, DataConfig)
        self.tasks = training_tasks(config.M1) if tasks is None else tasks
        self.key = (pat.key, config, tuple(map(tuple, self.tasks.tolist())))

    @property
    def d(self) -> int:
        return self.config.d

    @property
    def stack_key(self) -> tuple:
        return (self.pat.key, self.config.l_tr)

    def sample(self, batch: int, streams: list) -> tuple:
        from .data import training_prompts

        pr = training_prompts(self.pat, self.config, self.tasks, batch, list(streams))
        return pr, pr.z

    def __repr__(self) -> str:
        return f"SyntheticData({self.config})"


class SampledData(KeyedSource):
    """Any prompt sampler as a member's data: ``fn(batch, streams) -> (P, z)`` stacked over the
    streams (see :class:`PromptSource`); equal when ``key`` is equal (give every distinct sampler
    its own key); ``stack_key`` defaults to ``key``."""

    def __init__(self, fn: Callable, d: int, key, stack_key=None) -> None:
        if not callable(fn):
            raise ConfigError(f"fn must be callable; got {fn!r}")
        self.fn, self.d, self.key = fn, check_int("d", d, 1), key
        self.stack_key = key if stack_key is None else stack_key
        _check_hashable("key", key)

    def sample(self, batch: int, streams: list) -> tuple:
        return self.fn(batch, list(streams))

    def __repr__(self) -> str:
        return f"SampledData({self.key!r})"


_MODEL_KEYWORDS = ("m", "delta", "n_layers", "dtype")


@dataclass(frozen=True)
class Member:
    """One independent run: initial values from ``(seed, init)``, prompts from ``(seed, stage)`` drawn by
    ``data``, step size ``lr``, and the model ``build_model(kind, data.d, m=..., delta=..., n_layers=...,
    **options)`` (``None`` keywords are left to ``build_model``'s defaults; ``options`` a dict or pairs).

    ``init`` (default ``"init"``) and ``stage`` (default: the ``stage`` given to :func:`mambaicl.train.train`)
    name the member's own streams, e.g. one per level of a multi-class model.
    """

    seed: int
    kind: str
    data: PromptSource
    lr: float
    m: int | None = None
    delta: float | None = None
    n_layers: int | None = None
    options: tuple = ()
    dtype: torch.dtype | None = None
    init: str = "init"
    stage: str | None = None

    def __post_init__(self) -> None:
        check_int("seed", self.seed, 0)
        for name in ("init", "stage"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value) and not (name == "stage" and value is None):
                raise ConfigError(f"{name} must be a non-empty string naming a stream; got {value!r}")
        check_real("lr", self.lr, 0.0, low_open=True)
        if not isinstance(self.data, PromptSource) or not callable(getattr(self.data, "sample", None)):
            raise ConfigError(f"data must have d and sample(batch, streams) (PromptSource); got {self.data!r}")
        _check_hashable("data", self.data)
        if self.n_layers is None:
            check_choice("kind", self.kind, _one_layer_kinds())
        else:
            check_int("n_layers", self.n_layers, 1)
            check_choice("kind", self.kind, DEEP_KINDS)
        if self.m is not None:
            check_int("m", self.m, 1)
        if self.delta is not None:
            check_real("delta", self.delta, 0.0, low_open=True)
        opts = tuple(sorted(dict(self.options).items()))
        for name, _ in opts:
            if name in _MODEL_KEYWORDS + ("generator", "generators", "device", "kind", "d"):
                raise ConfigError(f"options must not set {name!r} (a field of Member or set by the engine)")
        object.__setattr__(self, "options", opts)

    def model_key(self) -> tuple:
        """Members with equal keys are stacked into one model and trained by one loop."""
        return (self.kind, self.m, self.delta, self.n_layers, self.options, self.dtype,
                getattr(self.data, "stack_key", None))

    def label(self) -> str:
        return f"seed {self.seed}, lr {self.lr}, kind {self.kind!r}, data {self.data!r}"


def members(seeds, kind: str, data, lrs, **model) -> list:
    """``[Member(seed, kind, data, lr, **model)]`` for every ``lr`` of ``lrs`` (outer) and seed (inner):
    member ``k S + s`` is ``(lrs[k], seeds[s])``; ``lrs`` may be one float."""
    lrs = [lrs] if isinstance(lrs, (int, float)) else list(lrs)
    return [Member(int(s), kind, data, float(lr), **model) for lr in lrs for s in check_seeds("seeds", seeds)]


def _check_hashable(name: str, value) -> None:
    try:
        hash(value)
    except TypeError:
        raise ConfigError(f"{name} must be hashable (equal data objects share one draw); got {value!r}") from None


def _one_layer_kinds() -> tuple:
    from .models import GATE_KINDS

    return ONE_LAYER_KINDS + tuple(GATE_KINDS)


class MemberStack(nn.Module):
    """Separate models (one per member) run as one: ``P`` ``(n, batch, ...)`` -> ``F`` ``(n, batch)``.
    For the deep kinds, whose layers have no member axis; each member keeps its own parameters.

    Members listed in ``resting`` (members the engine has stopped) are not run: their output is 0.
    """

    def __init__(self, models: list) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)
        self.resting: set = set()

    @property
    def n_seeds(self) -> int:
        return len(self.members)

    def forward(self, P) -> torch.Tensor:
        out = {k: m(P[k]) for k, m in enumerate(self.members) if k not in self.resting}  # each (batch,)
        if len(out) < len(self.members):
            zero = next(iter(out.values())).detach().new_zeros(next(iter(out.values())).shape)
            out = {k: out.get(k, zero) for k in range(len(self.members))}
        return torch.stack([out[k] for k in range(len(self.members))])


def member_model(model: nn.Module, i: int) -> nn.Module:
    """Slot ``i`` of a stacked model: the deep model itself (:class:`MemberStack`), or a copy of its parameters
    as a one-member model (a model with a member axis: a one-layer stack, or a
    :class:`mambaicl.models.deep_stack.StackedDeepModel`, whose slot comes back as a :class:`DeepICLModel`)."""
    return model.members[i] if isinstance(model, MemberStack) else model.member(i)


def build_members(group: list, device) -> torch.nn.Module:
    """The stacked model of one group of members (same :meth:`Member.model_key`): one-layer kinds a model with a
    member axis; deep kinds ``mamba``, ``linear``, ``softmax`` a :class:`~mambaicl.models.deep_stack.StackedDeepModel`
    of the members' own models; ``mamba1`` a :class:`MemberStack`."""
    from .models import build_model
    from .models.deep_stack import STACKED_KINDS, StackedDeepModel

    m0 = group[0]
    kw = {k: getattr(m0, k) for k in ("m", "delta", "dtype") if getattr(m0, k) is not None} | dict(m0.options)
    if m0.n_layers is None:
        return build_model(m0.kind, m0.data.d, generators=[torch_generator(m.seed, m.init) for m in group],
                           device=device, **kw)
    models = [build_model(m0.kind, m0.data.d, n_layers=m0.n_layers, generator=torch_generator(m.seed, m.init),
                          device=device, **kw) for m in group]  # each member from its own init stream, as alone
    if m0.kind in STACKED_KINDS:  # the seeds as a batch axis: one model, parameters stacked member-first
        return StackedDeepModel(models).to(device)
    return MemberStack(models).to(device)


def _join(parts: list):
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts)
    from .data.multiclass import concat_prompts

    return concat_prompts(parts)


class Draws:
    """The draw-replay of a group: member ``i`` with data ``D`` and seed ``s`` gets the prompts of the stream
    ``(s, stage)`` (its own ``Member.stage`` if set) drawn by ``D`` -- exactly those of a run of that member
    alone. Each distinct ``(D, s, stage)`` has its own NumPy stream (:func:`mambaicl.seeding.numpy_stream`) and is drawn once per step (members equal in
    all three share the draw)."""

    def __init__(self, group: list, stage: str, device) -> None:
        self.sources = {}  # data -> list of (seed, stage), in order of first use
        streams = [(m.seed, m.stage or stage) for m in group]
        for m, st in zip(group, streams):
            seeds = self.sources.setdefault(m.data, [])
            if st not in seeds:
                seeds.append(st)
        self.gens = [[numpy_stream(s, name) for s, name in seeds] for seeds in self.sources.values()]  # prompt streams
        offset, row = 0, {}
        for data, seeds in self.sources.items():
            row.update({(data, st): offset + j for j, st in enumerate(seeds)})
            offset += len(seeds)
        self.index = torch.tensor([row[(m.data, st)] for m, st in zip(group, streams)])
        self.identity = offset == len(group) and bool((self.index == torch.arange(len(group))).all())
        self.device, self.step = device, 0

    def __call__(self, batch: int) -> tuple:
        """The batch of the next training step (steps counted from 0)."""
        parts = [data.sample_at(self.step, batch, gens) if hasattr(data, "sample_at") else data.sample(batch, gens)
                 for data, gens in zip(self.sources, self.gens)]
        self.step += 1
        P, z = parts[0] if len(parts) == 1 else (_join([p for p, _ in parts]), torch.cat([z for _, z in parts]))
        if not self.identity:
            P, z = P[self.index], z[self.index]
        return P.to(self.device), z.to(self.device)
