"""Training prompts (Definition 1, Eq. (4)) and test prompts (Definition 2, Eq. (5)).

Glossary (code name -> paper symbol):

=================  ==========================================================
``P``              prompt, token-major ``(..., l+1, d+1)``; last token is the query (Eq. (2))
``z``              query label ``z = f(x_query)``, ``(...)``
``relevant``       index ``j`` of the relevant pattern ``mu_j`` of each token, ``(..., l+1)``
``irrelevant``     index ``k`` of the irrelevant pattern ``nu_k``, ``(..., l+1)``
``kappa``          ``kappa ~ U(-K, K)`` (train) or ``kappa' ~ U(-K', K')`` (test), ``(..., l+1)``
``outlier``        whether context example ``i`` carries an additive outlier, ``(..., l)``
``outlier_index``  which outlier row ``s`` (``v*_s`` in training, ``v'_s`` in test), ``(..., l)``
``outlier_scale``  ``kappa_a`` (train) or ``kappa_a'`` (test) on outlier examples, else 0, ``(..., l)``
``y``              labels ``y_i`` with 0 for the query, ``(..., l+1)``
``task``           row of the task tensor the prompt was drawn from, ``(...)``
=================  ==========================================================

**Prompts are stored by their variables.** A token is
``x_i = mu_{relevant_i} + kappa_i nu_{irrelevant_i} + outlier_scale_i * outliers[outlier_index_i]``
(Eq. (4)/(5)), so a batch of prompts is fully described by a few integer and real arrays of
shape ``(..., l+1)``; :attr:`Prompts.P` materialises the ``(..., l+1, d+1)`` tensor of Eq. (2)
on demand. The one-layer models read the projections they need through :meth:`Prompts.project`
(``w^T p_i``) and :meth:`Prompts.query_form` (``p_i^T M p_query``): a projection is a look-up in a
table of ``w^T mu_j``, ``w^T nu_k``, ``w^T v_s``, which makes a training step cost ``O(batch l)``
instead of ``O(batch l d)``.

**Leading dimensions.** With one NumPy stream (:func:`mambaicl.seeding.numpy_stream`) the arrays
are ``(batch, ...)``; with a list of ``S`` streams (one per seed) they are ``(S, batch, ...)`` and
seed ``s``'s prompts are drawn from its own stream only, so a seed-batched run sees exactly the
prompts a run of that seed alone would see.

**Randomness.** Each prompt consumes a fixed block of ``1 + 3 (l+1) + 3 l`` uniforms from its
stream, laid out by kind (task, pattern choices, irrelevant patterns, ``kappa``, outlier coins,
outlier rows, label coins), in one call per batch (:func:`draw_uniforms`); every choice of the data model is a
deterministic function of its uniform (categorical: ``floor(u n)``, Bernoulli: ``u < p``,
``kappa = (2u - 1) K``).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import torch

from ..config import RULES, ConfigError, DataConfig, TestConfig
from ..seeding import check_stream
from .vocabulary import placement_id
from .patterns import Patterns, test_outliers

__all__ = ["Prompts", "PatternCoords", "training_prompts", "test_prompts", "outlier_mask", "outlier_labels", "draw_uniforms",
           "materialize", "take"]


class PatternCoords(NamedTuple):
    """Stacked prompts ``(S, batch, ...)`` in pattern coordinates, for the fused Eq. (3) kernel
    (:mod:`mambaicl.models.pattern_eq3`): token ``i`` is ``mu_{relevant_i} + kappa_i nu_{irrelevant_i}
    + outlier_scale_i v_{outlier_index_i}`` with label ``y_i``; ``patterns`` is ``[mu; nu; outliers]`` ``(M1 + M2 + V, d)``."""

    relevant: torch.Tensor  # (S, B, L) long
    irrelevant: torch.Tensor  # (S, B, L) long
    kappa: torch.Tensor  # (S, B, L)
    outlier_index: torch.Tensor  # (S, B, l) long
    outlier_scale: torch.Tensor  # (S, B, l)
    y: torch.Tensor  # (S, B, L)
    patterns: torch.Tensor  # (M1 + M2 + V, d)
    M1: int
    M2: int


@dataclass(frozen=True)
class Prompts:
    """A batch of synthetic prompts, stored by the variables of Eq. (4)/(5) (see the module docstring)."""

    relevant: torch.Tensor  # (..., l+1) long
    irrelevant: torch.Tensor  # (..., l+1) long
    kappa: torch.Tensor  # (..., l+1)
    outlier: torch.Tensor  # (..., l) bool
    outlier_index: torch.Tensor  # (..., l) long
    outlier_scale: torch.Tensor  # (..., l)
    y: torch.Tensor  # (..., l+1), 0 at the query
    z: torch.Tensor  # (...)
    task: torch.Tensor  # (...) long
    mu: torch.Tensor  # (M1, d) relevant patterns
    nu: torch.Tensor  # (M2, d) irrelevant patterns
    outliers: torch.Tensor  # (S_out, d) outlier rows: v* (training) or v' (test)

    @functools.cached_property
    def P(self) -> torch.Tensor:
        """The prompts of Eq. (2), token-major, ``(..., l+1, d+1)``."""
        return materialize(self)

    @property
    def l(self) -> int:
        """Context examples per prompt."""
        return self.outlier.shape[-1]

    @property
    def batch_shape(self) -> tuple:
        return tuple(self.z.shape)

    def to(self, device) -> "Prompts":
        """The same prompts with every tensor on ``device``."""
        return Prompts(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def __getitem__(self, index) -> "Prompts":
        """Index the leading (batch or seed) dimensions, e.g. ``pr[s]`` or ``pr[:, :100]``."""
        shared = {"mu", "nu", "outliers"}
        return Prompts(**{f.name: getattr(self, f.name) if f.name in shared else getattr(self, f.name)[index]
                          for f in fields(self)})

    def __len__(self) -> int:
        return self.z.shape[0]

    def to_dtype(self, dtype: torch.dtype) -> "Prompts":
        """The same prompts with real-valued tensors (and the pattern rows) in ``dtype``."""
        return Prompts(**{f.name: (getattr(self, f.name).to(dtype) if getattr(self, f.name).is_floating_point()
                                   else getattr(self, f.name)) for f in fields(self)})

    # ------------------------------------------------------------ projections onto the patterns

    def coordinates(self) -> PatternCoords:
        """The prompts in pattern coordinates (:class:`PatternCoords`), with a seed axis (added if absent)."""
        if self.z.dim() == 1:
            return self[None].coordinates()
        return PatternCoords(self.relevant, self.irrelevant, self.kappa, self.outlier_index, self.outlier_scale,
                             self.y, torch.cat([self.mu, self.nu, self.outliers]), self.mu.shape[0],
                             self.nu.shape[0])

    def project(self, w: torch.Tensor) -> torch.Tensor:
        """``w^T p_i`` for every token, read from tables of the patterns' projections, ``(..., l+1)``.

        By Eq. (4)/(5), ``w^T p_i = w^T mu_{j_i} + kappa_i w^T nu_{k_i} + c_i w^T v_{s_i} + y_i w_{d+1}``:
        three look-ups instead of materialising :attr:`P`. ``w`` is ``(d+1,)`` for prompts
        ``(batch, ...)`` or ``(S, d+1)`` (one row per seed) for stacked prompts ``(S, batch, ...)``.
        """
        if w.dim() == 1:
            return self[None].project(w[None])[0]
        d, l = self.mu.shape[-1], self.l
        wx = w[:, :d]  # (S, d)
        out = take(wx @ self.mu.T, self.relevant) + self.kappa * take(wx @ self.nu.T, self.irrelevant)  # (S, B, L)
        out = out + self.y * w[:, d, None, None]
        head = out[..., :l] + self.outlier_scale * take(wx @ self.outliers.T, self.outlier_index)
        return torch.cat([head, out[..., l:]], dim=-1)

    def query_form(self, M: torch.Tensor) -> torch.Tensor:
        """``p_i^T M p_query`` for every token, ``(..., l+1)``; ``M`` is ``(D, D)`` (``(S, D, D)`` for stacked prompts).

        The query has no outlier and label 0, so ``u = M (x_query; 0)`` is a sum of two rows of
        the tables ``mu M^T``, ``nu M^T``; then ``p_i^T u`` is read like :meth:`project`.
        """
        if M.dim() == 2:
            return self[None].query_form(M[None])[0]
        d, l = self.mu.shape[-1], self.l
        S, B = self.relevant.shape[:2]
        Mx = M[..., :d]  # (S, D, d): acts on x_query
        A_mu, A_nu = self.mu @ Mx.transpose(1, 2), self.nu @ Mx.transpose(1, 2)  # (S, M1, D), (S, M2, D)
        D = M.shape[-1]
        j_q, k_q = self.relevant[..., -1], self.irrelevant[..., -1]  # (S, B)
        u = A_mu.gather(1, j_q.unsqueeze(-1).expand(S, B, D)) \
            + self.kappa[..., -1:] * A_nu.gather(1, k_q.unsqueeze(-1).expand(S, B, D))  # (S, B, D): M p_query
        ux = u[..., :d]  # (S, B, d)
        att = (ux @ self.mu.T).gather(2, self.relevant) + self.kappa * (ux @ self.nu.T).gather(2, self.irrelevant)
        att = att + self.y * u[..., d:]
        head = att[..., :l] + self.outlier_scale * (ux @ self.outliers.T).gather(2, self.outlier_index)
        return torch.cat([head, att[..., l:]], dim=-1)  # (S, B, L)


def take(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``out[s, ...] = table[s, index[s, ...]]`` for a table ``(S, n)`` (any strides) and index ``(S, ...)``: the one
    look-up of pattern tables by prompt coordinates (:meth:`Prompts.project`, :mod:`mambaicl.models.pattern_eq3`)."""
    return table.gather(1, index.reshape(index.shape[0], -1)).view(index.shape)


def materialize(pr: Prompts) -> torch.Tensor:
    """Eq. (2): ``p_i = (x_i; y_i)`` with ``x_i`` built from its variables (Eq. (4)/(5)), ``(..., l+1, d+1)``."""
    l = pr.l
    x = _rows(pr.mu, pr.relevant) + pr.kappa.unsqueeze(-1) * _rows(pr.nu, pr.irrelevant)  # (..., l+1, d)
    x[..., :l, :] += pr.outlier_scale.unsqueeze(-1) * _rows(pr.outliers, pr.outlier_index)
    return torch.cat([x, pr.y.unsqueeze(-1).to(x.dtype)], dim=-1)


def _rows(M: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``M[index]`` (rows of ``M`` at any index shape) by ``index_select``: the same values, several times faster."""
    return M.index_select(0, index.reshape(-1)).view(*index.shape, M.shape[-1])


def _check_tasks(tasks: torch.Tensor, M1: int) -> None:
    if tasks.dim() != 2 or tasks.shape[1] != 2 or tasks.shape[0] < 1:
        raise ConfigError(f"tasks must have shape (n_tasks, 2); got {tuple(tasks.shape)}")
    if tasks.min() < 0 or tasks.max() >= M1 or torch.any(tasks[:, 0] == tasks[:, 1]):
        raise ConfigError(f"tasks must be pairs (a, b) of distinct indices in [0, {M1}); got {tasks.tolist()}")


def draw_uniforms(stream, batch: int, l: int) -> torch.Tensor:
    """The uniforms of ``batch`` prompts of ``l`` examples: ``(batch, n)`` for one NumPy stream,
    ``(S, batch, n)`` for a list of ``S``; ``n = 1 + 3 (l+1) + 3 l`` (float64).

    ``stream`` is a :class:`numpy.random.Generator` (:func:`mambaicl.seeding.numpy_stream`): stream ``s``
    fills row ``s`` in place (``Generator.random(out=...)``), so a seed-batched draw costs one call per seed
    and no copy.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"batch must be a positive integer; got {batch!r}")
    n = 1 + 3 * (l + 1) + 3 * l
    if isinstance(stream, (list, tuple)):
        u = np.empty((len(stream), batch, n))  # (S, batch, n)
        for s, g in enumerate(stream):
            check_stream(f"stream[{s}]", g).random(out=u[s])
        return torch.from_numpy(u)
    return torch.from_numpy(check_stream("stream", stream).random((batch, n)))  # (batch, n)


def _categorical(u: torch.Tensor, n: int) -> torch.Tensor:
    """``floor(u n)`` in ``[0, n)``: a uniform categorical from a uniform."""
    return (u * n).long().clamp_(max=n - 1)


def _signs(flag: torch.Tensor, dtype) -> torch.Tensor:
    """``-1`` where ``flag`` holds, else ``+1``, in ``dtype`` (one pass; the values of ``1 - 2 flag``)."""
    one = torch.ones((), dtype=dtype, device=flag.device)
    return torch.where(flag, -one, one)


def _clean_part(u: torch.Tensor, tasks: torch.Tensor, M2: int, l: int, K: float, dtype):
    """The clean part ``mu_j + kappa nu_k`` of Eq. (4)/(5) for ``l`` examples and the query."""
    L = l + 1
    task = _categorical(u[..., 0], tasks.shape[0])  # (...)
    second = u[..., 1 : 1 + L] < 0.5  # (..., L): mu_b instead of mu_a
    ab = tasks[task]  # (..., 2)
    relevant = torch.where(second, ab[..., 1:2], ab[..., 0:1])  # (..., L)
    labels = _signs(second, dtype)  # (..., L): f(x)
    irrelevant = _categorical(u[..., 1 + L : 1 + 2 * L], M2)  # (..., L)
    kappa = u[..., 1 + 2 * L : 1 + 3 * L].mul(2).sub_(1).mul_(K).to(dtype)  # (2u - 1) K ~ U(-K, K)
    return task, relevant, labels, irrelevant, kappa


def _scale(outlier: torch.Tensor, value: float, dtype) -> torch.Tensor:
    """``value`` on outlier examples, ``0`` elsewhere, in ``dtype`` (one pass; the values of ``outlier * value``)."""
    return torch.where(outlier, torch.tensor(float(value), dtype=dtype, device=outlier.device),
                       torch.zeros((), dtype=dtype, device=outlier.device))


def _outlier_uniforms(u: torch.Tensor, l: int):
    o = 1 + 3 * (l + 1)
    return u[..., o : o + l], u[..., o + l : o + 2 * l], u[..., o + 2 * l : o + 3 * l]


def training_prompts(pat: Patterns, cfg: DataConfig, tasks: torch.Tensor, batch: int, stream) -> Prompts:
    """Definition 1: ``l_tr`` examples following Eq. (4), outlier labels uniform in {+1, -1}.

    Each context example carries ``kappa_a v*_s`` with probability ``p_a`` (``s`` uniform in
    ``[V]``); the query never does.

    Args:
        stream: a NumPy stream (:func:`mambaicl.seeding.numpy_stream`), or a list of ``S`` of them (one per
            seed, :func:`mambaicl.seeding.numpy_streams`) for prompts of shape ``(S, batch, ...)``.
    """
    _check_tasks(tasks, pat.mu.shape[0])
    l, dtype = cfg.l_tr, pat.mu.dtype
    u = draw_uniforms(stream, batch, l)
    task, relevant, labels, irrelevant, kappa = _clean_part(u, tasks, pat.nu.shape[0], l, cfg.K, dtype)
    u_out, u_s, u_coin = _outlier_uniforms(u, l)
    outlier = u_out < cfg.p_a  # (..., l)
    coin = _signs(u_coin < 0.5, dtype)  # random labels on outlier examples
    y = labels.clone()
    y[..., :l] = torch.where(outlier, coin, labels[..., :l])
    y[..., l] = 0
    return Prompts(relevant=relevant, irrelevant=irrelevant, kappa=kappa, outlier=outlier,
                   outlier_index=_categorical(u_s, pat.v.shape[0]),
                   outlier_scale=_scale(outlier, cfg.kappa_a, dtype), y=y, z=labels[..., l].clone(), task=task,
                   mu=pat.mu, nu=pat.nu, outliers=pat.v)


def outlier_mask(u: torch.Tensor, alpha: float, placement: str) -> torch.Tensor:
    """Which test examples carry an outlier, from their uniforms ``u`` ``(..., l)``; bool ``(..., l)``.

    ``R`` (random): each example independently with probability ``alpha`` (Eq. (5)). ``FQ`` /
    ``CQ``: the same Binomial(l, alpha) number of outliers, put on the examples farthest from /
    closest to the query (§4.2). The display labels ``"random position"``, ``"far"``, ``"close"`` are
    accepted as aliases (:func:`mambaicl.config.placement_id`).
    """
    placement = placement_id(placement)
    hit = u < alpha  # (..., l)
    if placement == "R":
        return hit
    count = hit.sum(dim=-1, keepdim=True)  # (..., 1): Binomial(l, alpha)
    pos = torch.arange(u.shape[-1], device=u.device)  # (l,): 0 is the farthest from the query
    if placement == "FQ":
        return pos < count
    return pos >= u.shape[-1] - count  # CQ


def outlier_labels(labels: torch.Tensor, rule: str, target: int, u_coin: torch.Tensor) -> torch.Tensor:
    """Labels of outlier examples under §4.1's rules: A flipped, B ``target``, C random (from ``u_coin``)."""
    if rule == "A":
        return -labels
    if rule == "B":
        return torch.full_like(labels, float(target))
    if rule == "C":
        return (1.0 - 2.0 * (u_coin < 0.5).to(torch.float64)).to(labels.dtype)
    raise ConfigError(f"rule must be one of {RULES}; got {rule!r}")


def test_prompts(pat: Patterns, test: TestConfig, tasks: torch.Tensor, batch: int, stream) -> Prompts:
    """Definition 2: ``l_ts`` examples following Eq. (5); outlier labels by ``test.rule``.

    Outlier examples carry ``kappa_a' v'_s`` with ``v'_s`` uniform over the rows of
    :func:`test_outliers`; irrelevant patterns are scaled by ``kappa' ~ U(-K', K')``.

    Args:
        stream: a NumPy stream (:func:`mambaicl.seeding.numpy_stream`), or a list of ``S`` of them for
            ``(S, batch, ...)`` prompts.
    """
    _check_tasks(tasks, pat.mu.shape[0])
    l, dtype = test.l_ts, pat.mu.dtype
    v_test = test_outliers(pat.v, test.v_coeffs)  # (S_out, d)
    u = draw_uniforms(stream, batch, l)
    task, relevant, labels, irrelevant, kappa = _clean_part(u, tasks, pat.nu.shape[0], l, test.K_prime, dtype)
    u_out, u_s, u_coin = _outlier_uniforms(u, l)
    outlier = outlier_mask(u_out, test.alpha, test.placement)  # (..., l)
    y = labels.clone()
    bad = outlier_labels(labels[..., :l], test.rule, test.target_label, u_coin)  # (..., l)
    y[..., :l] = torch.where(outlier, bad, labels[..., :l])
    y[..., l] = 0
    return Prompts(relevant=relevant, irrelevant=irrelevant, kappa=kappa, outlier=outlier,
                   outlier_index=_categorical(u_s, v_test.shape[0]),
                   outlier_scale=_scale(outlier, test.kappa_a_prime, dtype), y=y, z=labels[..., l].clone(), task=task,
                   mu=pat.mu, nu=pat.nu, outliers=v_test)



test_prompts.__test__ = False  # not a pytest test, though its name starts with "test"
