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
on demand (:meth:`Prompts.tokens`). The one-layer models read a batch through :meth:`Prompts.basis`
(:class:`TokenBasis`): every token as four terms over the rows ``[mu; nu; v]`` and the label entry, so that
``w^T p_i`` and ``p_i^T M p_query`` are look-ups in tables of the rows' projections and a training step
costs ``O(batch l)`` instead of ``O(batch l d)``; no model reads the fields below by name.

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
from numba import njit

from ..config import RULES, ConfigError, DataConfig, TestConfig
from ..device import use_compiled
from ..seeding import check_stream
from .vocabulary import placement_id
from .patterns import Patterns, test_outliers

__all__ = ["Prompts", "TokenBasis", "training_prompts", "test_prompts", "outlier_mask", "outlier_labels", "draw_uniforms",
           "materialize"]


class TokenBasis(NamedTuple):
    """Prompts ``(S, batch, l+1)`` as sparse combinations of ``n + 1`` basis vectors of ``R^{d+1}``, for the fused
    Eq. (3) kernel (:mod:`mambaicl.models.pattern_eq3`): token ``i`` is ``p_i = sum_k coef[..., i, k] e_{index[..., i, k]}``
    with ``e_a = (rows[a]; 0)`` for ``a < n`` and ``e_n = (0; 1)`` (the label entry). The last term of every token is
    its label: index ``n``, coefficient ``y_i`` (0 at the query). A model needs nothing else of the data model."""

    index: torch.Tensor  # (S, B, L, K) long, in [0, n]
    coef: torch.Tensor  # (S, B, L, K)
    rows: torch.Tensor  # (n, d)


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

    def tokens(self) -> torch.Tensor:
        """The prompts of Eq. (2), token-major, ``(..., l+1, d+1)`` (materialised once)."""
        return self.P

    def labels(self) -> torch.Tensor:
        """Every token's label entry ``y_i``, 0 at the query, ``(..., l+1)``."""
        return self.y

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

    # ------------------------------------------------------------ what the models read

    def basis(self) -> TokenBasis:
        """The prompts as :class:`TokenBasis`, with a seed axis (added if absent): by Eq. (4)/(5) token ``i`` is
        ``1 * mu_{j_i} + kappa_i * nu_{k_i} + outlier_scale_i * v_{s_i} + y_i * e_label`` over the rows
        ``[mu; nu; outliers]`` (the query's outlier term has coefficient 0)."""
        if self.z.dim() == 1:
            return self[None].basis()
        M1, M2, l = self.mu.shape[0], self.nu.shape[0], self.l
        rows = torch.cat([self.mu, self.nu, self.outliers])  # (n, d)
        S, B, L = self.y.shape
        index = torch.empty(S, B, L, 4, dtype=torch.long, device=self.y.device)  # (S, B, L, K)
        coef = torch.empty(S, B, L, 4, dtype=self.y.dtype, device=self.y.device)  # (S, B, L, K)
        if use_compiled(self.y.device):  # one compiled pass; the same values as the tensor operations below
            shape = (S, B, L)
            _basis_fill(*(torch.broadcast_to(t, shape).numpy() for t in (self.relevant, self.irrelevant, self.kappa,
                                                                          self.y)),
                        *(torch.broadcast_to(t, (S, B, l)).numpy() for t in (self.outlier_index, self.outlier_scale)),
                        M1, M2, rows.shape[0], index.numpy(), coef.numpy())
            return TokenBasis(index, coef, rows)
        index[..., 0], coef[..., 0] = self.relevant, 1
        torch.add(self.irrelevant, M1, out=index[..., 1])
        coef[..., 1] = self.kappa
        torch.add(self.outlier_index, M1 + M2, out=index[..., :l, 2])
        index[..., l, 2], coef[..., :l, 2], coef[..., l, 2] = M1 + M2, self.outlier_scale, 0
        index[..., 3], coef[..., 3] = rows.shape[0], self.y
        return TokenBasis(index, coef, rows)


@njit(cache=True)
def _basis_fill(relevant, irrelevant, kappa, y, outlier_index, outlier_scale, M1, M2, n, index, coef):
    """:meth:`Prompts.basis` in one pass: fills ``index`` / ``coef`` ``(S, B, L, 4)`` from the prompts' variables
    (every input broadcast to ``(S, B, L)``, the outlier fields to ``(S, B, l)``); the same values as its tensor
    operations (its plain twin, ``tests/test_synthetic.py``)."""
    S, B, L = y.shape
    l = L - 1
    for s in range(S):
        for b in range(B):
            for i in range(L):
                index[s, b, i, 0] = relevant[s, b, i]
                coef[s, b, i, 0] = 1
                index[s, b, i, 1] = irrelevant[s, b, i] + M1
                coef[s, b, i, 1] = kappa[s, b, i]
                if i < l:
                    index[s, b, i, 2] = outlier_index[s, b, i] + M1 + M2
                    coef[s, b, i, 2] = outlier_scale[s, b, i]
                else:
                    index[s, b, i, 2] = M1 + M2
                    coef[s, b, i, 2] = 0
                index[s, b, i, 3] = n
                coef[s, b, i, 3] = y[s, b, i]


def materialize(pr: Prompts) -> torch.Tensor:
    """Eq. (2): ``p_i = (x_i; y_i)`` with ``x_i`` built from its variables (Eq. (4)/(5)), ``(..., l+1, d+1)``.

    On the CPU one compiled pass (:func:`_materialize_fill`) writes the same values as the tensor operations
    below, operation for operation (``mu + kappa nu``, then ``+ scale v``; tested bit for bit)."""
    l = pr.l
    floats = (pr.mu, pr.nu, pr.outliers, pr.kappa, pr.outlier_scale, pr.y)
    dtype = pr.mu.dtype
    if use_compiled(pr.y.device) and all(t.dtype == dtype for t in floats) and dtype in (torch.float64, torch.float32):
        lead = tuple(pr.y.shape[:-1])
        L, d = l + 1, pr.mu.shape[-1]
        out = torch.empty(*lead, L, d + 1, dtype=dtype)  # (..., l+1, d+1)

        def flat(t, n):
            return torch.broadcast_to(t, lead + (n,)).reshape(-1, n).numpy()

        _materialize_fill(pr.mu.contiguous().numpy(), pr.nu.contiguous().numpy(), pr.outliers.contiguous().numpy(),
                          flat(pr.relevant, L), flat(pr.irrelevant, L), flat(pr.kappa, L), flat(pr.y, L),
                          flat(pr.outlier_index, l), flat(pr.outlier_scale, l), out.view(-1, L, d + 1).numpy())
        return out
    x = _rows(pr.mu, pr.relevant) + pr.kappa.unsqueeze(-1) * _rows(pr.nu, pr.irrelevant)  # (..., l+1, d)
    x[..., :l, :] += pr.outlier_scale.unsqueeze(-1) * _rows(pr.outliers, pr.outlier_index)
    return torch.cat([x, pr.y.unsqueeze(-1).to(x.dtype)], dim=-1)


@njit(cache=True)
def _materialize_fill(mu, nu, outliers, relevant, irrelevant, kappa, y, outlier_index, outlier_scale, out):
    """:func:`materialize` in one pass over ``N`` prompts: ``out[p, i] = (mu_{j} + kappa nu_{k} [+ scale v_{s}]; y)``
    ``(N, l+1, d+1)``; each product and sum rounded as the tensor operations round them (no fused multiply-add)."""
    N, L = relevant.shape
    l, d = L - 1, mu.shape[1]
    for p in range(N):
        for i in range(L):
            a, b, k = relevant[p, i], irrelevant[p, i], kappa[p, i]
            for c in range(d):
                out[p, i, c] = mu[a, c] + k * nu[b, c]
            if i < l:
                v, sc = outlier_index[p, i], outlier_scale[p, i]
                for c in range(d):
                    out[p, i, c] += sc * outliers[v, c]
            out[p, i, d] = y[p, i]


def _rows(M: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``M[index]`` (rows of ``M`` at any index shape) by ``index_select``: the same values, several times faster."""
    return M.index_select(0, index.reshape(-1)).view(*index.shape, M.shape[-1])


def _check_tasks(tasks: torch.Tensor, M1: int) -> None:
    if tasks.dim() != 2 or tasks.shape[1] != 2 or tasks.shape[0] < 1:
        raise ConfigError(f"tasks must have shape (n_tasks, 2); got {tuple(tasks.shape)}")
    if tasks.min() < 0 or tasks.max() >= M1 or torch.any(tasks[:, 0] == tasks[:, 1]):
        raise ConfigError(f"tasks must be pairs (a, b) of distinct indices in [0, {M1}); got {tasks.tolist()}")


def draw_uniforms(stream, batch: int, l: int) -> np.ndarray:
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
        return u
    return check_stream("stream", stream).random((batch, n))  # (batch, n)


# ---------------------------------------------------------------- Definitions 1-2 from the uniforms
# Every choice of the data model is a function of its own uniform: categorical floor(u n) (kept below n),
# Bernoulli u < p, kappa = (2u - 1) K. The kernels below run once per batch over all prompts (compiled by
# Numba; plain float64 arithmetic, so the same bits on every CPU).

_PLACEMENT_CODE = {"R": 0, "FQ": 1, "CQ": 2}
_RULE_CODE = {"A": 0, "B": 1, "C": 2}


@njit(cache=True)
def _categorical(u, n):
    """``floor(u n)`` in ``[0, n)``: a uniform categorical from a uniform."""
    return min(int(u * n), n - 1)


@njit(cache=True)
def _mask_row(u, alpha, placement, out):
    """Which of the ``l`` examples of one prompt carry an outlier (see :func:`outlier_mask`), into ``out``."""
    l = u.shape[0]
    count = 0
    for i in range(l):
        out[i] = u[i] < alpha
        count += out[i]
    if placement == 1:  # FQ: the count on the examples farthest from the query
        for i in range(l):
            out[i] = i < count
    elif placement == 2:  # CQ: on the closest
        for i in range(l):
            out[i] = i >= l - count


@njit(cache=True)
def _bad_label(label, rule, target, u_coin):
    """An outlier example's label under §4.1's rules: A flipped, B ``target``, C random (from ``u_coin``)."""
    if rule == 0:
        return -label
    if rule == 1:
        return float(target)
    return 1.0 - 2.0 * (u_coin < 0.5)


@njit(cache=True)
def _mask_rows(u, alpha, placement, out):
    """:func:`_mask_row` for every row of ``u`` ``(N, l)``."""
    for p in range(u.shape[0]):
        _mask_row(u[p], alpha, placement, out[p])


@njit(cache=True)
def _bad_labels(labels, rule, target, u_coin):
    """:func:`_bad_label` for every entry of ``labels`` ``(N,)``."""
    out = np.empty(labels.shape[0])
    for i in range(labels.shape[0]):
        out[i] = _bad_label(labels[i], rule, target, u_coin[i])
    return out


@njit(cache=True)
def _definition_fields(u, tasks, M2, V, K, alpha, scale, placement, rule, target):
    """Definition 1 (training: placement R, rule C) or 2 (test) for prompts ``u`` ``(N, 1 + 3 (l+1) + 3 l)``."""
    N = u.shape[0]
    L = (u.shape[1] + 2) // 6
    l = L - 1
    o = 1 + 3 * L
    task = np.empty(N, np.int64)
    relevant, irrelevant = np.empty((N, L), np.int64), np.empty((N, L), np.int64)
    kappa, y = np.empty((N, L)), np.empty((N, L))
    outlier, outlier_index, outlier_scale = np.empty((N, l), np.bool_), np.empty((N, l), np.int64), np.empty((N, l))
    z = np.empty(N)
    for p in range(N):
        t = _categorical(u[p, 0], tasks.shape[0])
        task[p] = t
        for i in range(L):
            second = u[p, 1 + i] < 0.5  # mu_b instead of mu_a
            relevant[p, i] = tasks[t, 1] if second else tasks[t, 0]
            y[p, i] = -1.0 if second else 1.0  # f(x)
            irrelevant[p, i] = _categorical(u[p, 1 + L + i], M2)
            kappa[p, i] = (u[p, 1 + 2 * L + i] * 2.0 - 1.0) * K  # (2u - 1) K ~ U(-K, K)
        z[p] = y[p, l]
        y[p, l] = 0.0
        _mask_row(u[p, o : o + l], alpha, placement, outlier[p])
        for i in range(l):
            outlier_index[p, i] = _categorical(u[p, o + l + i], V)
            outlier_scale[p, i] = scale if outlier[p, i] else 0.0
            if outlier[p, i]:
                y[p, i] = _bad_label(y[p, i], rule, target, u[p, o + 2 * l + i])
    return task, relevant, irrelevant, kappa, outlier, outlier_index, outlier_scale, y, z


def _prompts(u: np.ndarray, tasks: torch.Tensor, pat_rows: tuple, outliers: torch.Tensor, K: float, alpha: float,
             scale: float, placement: str, rule: str, target: int) -> Prompts:
    """The :class:`Prompts` of the uniforms ``u`` ``(..., n)`` (see :func:`_definition_fields`)."""
    lead, (mu, nu) = u.shape[:-1], pat_rows
    fields_ = _definition_fields(u.reshape(-1, u.shape[-1]), tasks.numpy(), nu.shape[0], outliers.shape[0], float(K),
                                 float(alpha), float(scale), _PLACEMENT_CODE[placement], _RULE_CODE[rule], int(target))
    t = [torch.from_numpy(a).view(*lead, *a.shape[1:]) for a in fields_]
    real = lambda a: a.to(mu.dtype)  # noqa: E731 - the pattern dtype; the values are rounded once
    return Prompts(relevant=t[1], irrelevant=t[2], kappa=real(t[3]), outlier=t[4], outlier_index=t[5],
                   outlier_scale=real(t[6]), y=real(t[7]), z=real(t[8]), task=t[0], mu=mu, nu=nu, outliers=outliers)


def training_prompts(pat: Patterns, cfg: DataConfig, tasks: torch.Tensor, batch: int, stream) -> Prompts:
    """Definition 1: ``l_tr`` examples following Eq. (4), outlier labels uniform in {+1, -1}.

    Each context example carries ``kappa_a v*_s`` with probability ``p_a`` (``s`` uniform in
    ``[V]``); the query never does.

    Args:
        stream: a NumPy stream (:func:`mambaicl.seeding.numpy_stream`), or a list of ``S`` of them (one per
            seed, :func:`mambaicl.seeding.numpy_streams`) for prompts of shape ``(S, batch, ...)``.
    """
    _check_tasks(tasks, pat.mu.shape[0])
    u = draw_uniforms(stream, batch, cfg.l_tr)
    # random labels on outlier examples: rule C; each example independently: placement R
    return _prompts(u, tasks, (pat.mu, pat.nu), pat.v, cfg.K, cfg.p_a, cfg.kappa_a, "R", "C", 1)


def outlier_mask(u: torch.Tensor, alpha: float, placement: str) -> torch.Tensor:
    """Which test examples carry an outlier, from their uniforms ``u`` ``(..., l)``; bool ``(..., l)``.

    ``R`` (random): each example independently with probability ``alpha`` (Eq. (5)). ``FQ`` /
    ``CQ``: the same Binomial(l, alpha) number of outliers, put on the examples farthest from /
    closest to the query (§4.2). The display labels ``"random position"``, ``"far"``, ``"close"`` are
    accepted as aliases (:func:`mambaicl.config.placement_id`).
    """
    code = _PLACEMENT_CODE[placement_id(placement)]
    rows = np.ascontiguousarray(u.detach().cpu().to(torch.float64).reshape(-1, u.shape[-1]).numpy())  # (N, l)
    out = np.empty(rows.shape, np.bool_)
    _mask_rows(rows, float(alpha), code, out)
    return torch.from_numpy(out).view(u.shape).to(u.device)


def outlier_labels(labels: torch.Tensor, rule: str, target: int, u_coin: torch.Tensor) -> torch.Tensor:
    """Labels of outlier examples under §4.1's rules: A flipped, B ``target``, C random (from ``u_coin``)."""
    if rule not in _RULE_CODE:
        raise ConfigError(f"rule must be one of {RULES}; got {rule!r}")
    lab = labels.detach().cpu().to(torch.float64).reshape(-1).numpy()
    coin = u_coin.detach().cpu().to(torch.float64).reshape(-1).numpy()
    out = _bad_labels(np.ascontiguousarray(lab), _RULE_CODE[rule], int(target), np.ascontiguousarray(coin))
    return torch.from_numpy(out).view(labels.shape).to(dtype=labels.dtype, device=labels.device)


def test_prompts(pat: Patterns, test: TestConfig, tasks: torch.Tensor, batch: int, stream) -> Prompts:
    """Definition 2: ``l_ts`` examples following Eq. (5); outlier labels by ``test.rule``.

    Outlier examples carry ``kappa_a' v'_s`` with ``v'_s`` uniform over the rows of
    :func:`test_outliers`; irrelevant patterns are scaled by ``kappa' ~ U(-K', K')``.

    Args:
        stream: a NumPy stream (:func:`mambaicl.seeding.numpy_stream`), or a list of ``S`` of them for
            ``(S, batch, ...)`` prompts.
    """
    _check_tasks(tasks, pat.mu.shape[0])
    v_test = test_outliers(pat.v, test.v_coeffs)  # (S_out, d)
    u = draw_uniforms(stream, batch, test.l_ts)
    if test.rule not in _RULE_CODE:
        raise ConfigError(f"rule must be one of {RULES}; got {test.rule!r}")
    return _prompts(u, tasks, (pat.mu, pat.nu), v_test, test.K_prime, test.alpha, test.kappa_a_prime,
                    placement_id(test.placement), test.rule, test.target_label)


test_prompts.__test__ = False  # not a pytest test, though its name starts with "test"
