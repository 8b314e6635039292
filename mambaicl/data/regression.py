"""Regression prompts with outliers: Garg et al.'s linear-regression task (with Park et al.'s outliers) and the
least-squares reference.

Glossary (code name -> paper symbol):

================  =====================================================================
``d``             input dimension; tokens ``p_i = (x_i; y_i)`` have ``d+1`` entries (Eq. (2)'s layout)
``w``             the prompt's regression vector ``w ~ N(0, I_d)`` (one per prompt), ``(..., d)``
``x_i``, ``y_i``  ``x_i ~ N(0, I_d)``, ``y_i = w^T x_i`` (clean example)
``z``             the target ``w^T x_query``; the query token is ``(x_query; 0)``
``outlier``       which context examples are outliers, ``(..., l)``; each with probability ``p``
``bias``          append a constant feature 1 to every input: tokens ``(x_i; 1; y_i)`` (a gate
                  logit ``w^T p_i`` then has an intercept; Garg et al.'s read-in layer has one)
``kind``          ``"dummy"``: the example becomes ``(x, y) = (1_d, 1)`` (Park et al. 2024's
                  many-outlier regression, their ``filter_linear_regression``);
                  ``"random"``: the output becomes ``y ~ N(0, d)`` (App. 14's "random outputs",
                  the variance of a clean ``y``), the input is kept
================  =====================================================================

The task is Garg et al. (2022)'s (noiseless, isotropic); Park et al. (2024) replace each example by the
dummy with probability 0.9 and score only clean positions. Here a prompt has one query (Eq. (2)),
always clean. :func:`least_squares_clean` is the reference: ordinary least squares on the clean examples
(minimum-norm when they are fewer than ``d``), the optimal estimator for this noiseless task given
which examples are clean.

Randomness: one call draws, in this order, ``w`` ``(batch, d)``, ``x`` ``(batch, l+1, d)``, the outlier
uniforms ``(batch, l)`` and (``"random"``) the replacement outputs ``(batch, l)``, from the NumPy stream
(:func:`mambaicl.seeding.numpy_stream`), or from each stream of a list: ``(S, batch, ...)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import ConfigError, check_choice, check_int, check_real
from ..seeding import check_stream

__all__ = ["OUTLIER_KINDS", "RegressionPrompts", "regression_prompts", "least_squares_clean", "squared_error"]

OUTLIER_KINDS = ("dummy", "random")


@dataclass(frozen=True)
class RegressionPrompts:
    """A batch of linear-regression prompts (leading dims ``(...)`` = ``(batch,)`` or ``(S, batch)``)."""

    P: torch.Tensor  # (..., l+1, d+1): tokens (x_i; y_i), query (x_query; 0) last
    z: torch.Tensor  # (...): w^T x_query
    w: torch.Tensor  # (..., d)
    outlier: torch.Tensor  # (..., l) bool

    @property
    def l(self) -> int:
        return self.outlier.shape[-1]


def _draw(stream, batch: int, l: int, d: int, p: float, kind: str, dtype, bias: bool = False):
    w = torch.from_numpy(stream.standard_normal((batch, d)))  # (batch, d)
    x = torch.from_numpy(stream.standard_normal((batch, l + 1, d)))  # (batch, l+1, d)
    u = torch.from_numpy(stream.random((batch, l)))  # (batch, l)
    y = (x @ w.unsqueeze(-1)).squeeze(-1)  # (batch, l+1)
    z = y[:, -1].clone()
    outlier = u < p
    if kind == "random":
        fake = torch.from_numpy(stream.standard_normal((batch, l))) * d ** 0.5
        y[:, :l] = torch.where(outlier, fake, y[:, :l])
    else:  # dummy: (1_d, 1)
        x[:, :l] = torch.where(outlier.unsqueeze(-1), torch.ones_like(x[:, :l]), x[:, :l])
        y[:, :l] = torch.where(outlier, torch.ones_like(y[:, :l]), y[:, :l])
    y[:, l] = 0.0
    if bias:  # a constant feature: tokens (x_i; 1; y_i)
        x = torch.cat([x, torch.ones_like(x[..., :1])], dim=-1)  # (batch, l+1, d+1)
    P = torch.cat([x, y.unsqueeze(-1)], dim=-1).to(dtype)  # (batch, l+1, d+1[+1])
    return P, z.to(dtype), w.to(dtype), outlier


def regression_prompts(batch: int, l: int, d: int, p: float, stream, kind: str = "dummy",
                       dtype=torch.float64, bias: bool = False) -> RegressionPrompts:
    """``batch`` prompts of ``l`` examples in ``R^d``, each example an outlier of ``kind`` with probability ``p``.

    Args:
        stream: a NumPy stream (:func:`mambaicl.seeding.numpy_stream`), or a list of ``S`` of them for
            ``(S, batch, ...)`` prompts (one seed each, drawn from its own stream only).
    """
    check_int("batch", batch, 1)
    check_int("l", l, 1)
    check_int("d", d, 1)
    check_real("p", p, 0.0, 1.0, high_open=True)
    check_choice("kind", kind, OUTLIER_KINDS)
    if isinstance(stream, (list, tuple)):
        parts = [_draw(check_stream(f"stream[{s}]", g), batch, l, d, p, kind, dtype, bias) for s, g in enumerate(stream)]
        return RegressionPrompts(*(torch.stack(t) for t in zip(*parts)))
    return RegressionPrompts(*_draw(check_stream("stream", stream), batch, l, d, p, kind, dtype, bias))


def least_squares_clean(P: torch.Tensor, outlier: torch.Tensor, d: int | None = None) -> torch.Tensor:
    """The least-squares prediction for the query from the clean examples only, ``(...)``.

    ``w_hat = pinv(X_clean) y_clean`` (minimum norm when the clean examples do not determine ``w``);
    outlier rows are zeroed, which leaves the least-squares problem and its minimum-norm solution
    unchanged. Returns ``w_hat^T x_query``.

    Args:
        P: prompts ``(..., l+1, d+1)`` with the label in the last column and the query last.
        outlier: ``(..., l)`` bool.
        d: regress on the first ``d`` features only (default: every column but the label), e.g. to leave
            out the constant feature of ``bias=True`` prompts.
    """
    l = outlier.shape[-1]
    d = P.shape[-1] - 1 if d is None else check_int("d", d, 1, P.shape[-1] - 1)
    keep = (~outlier).to(P.dtype).unsqueeze(-1)  # (..., l, 1)
    X = P[..., :l, :d] * keep  # (..., l, d)
    y = P[..., :l, -1:] * keep  # (..., l, 1)
    w_hat = torch.linalg.pinv(X) @ y  # (..., d, 1)
    return (P[..., -1, :d].unsqueeze(-2) @ w_hat).squeeze(-1).squeeze(-1)  # (...)


def squared_error(F: torch.Tensor, z: torch.Tensor, d: int | None = None) -> float:
    """Mean squared error ``mean (F - z)^2`` (divided by ``d`` if given: Garg et al.'s normalisation, where
    predicting 0 scores 1); ``inf`` if any ``F`` is not finite."""
    F, z = torch.as_tensor(F), torch.as_tensor(z)
    if F.shape != z.shape or F.numel() == 0:
        raise ConfigError(f"F and z must have the same non-empty shape; got {tuple(F.shape)} and {tuple(z.shape)}")
    if not bool(torch.isfinite(F).all()):
        return float("inf")
    err = float((F.double() - z.double()).pow(2).mean())
    return err / d if d is not None else err
