"""From sentence embeddings to prompt features: PCA (App. 8.2, Table 5) and a linear probe.

Glossary (code name -> meaning):

==============  ===========================================================================
``X``           embeddings or features, ``(n, D)``
``s``           sentiment labels in {+1, -1}, ``(n,)``
``k``           principal components kept (5, 7, 10 in App. Table 5; ``d = 72`` for prompts,
                the data dimension of App. 8.1)
``PCA``         mean ``(D,)``, components ``(k, D)`` (rows orthonormal), explained variance ``(k,)``
``scale``       one global factor so that features have unit variance per coordinate on average
``l2``          ridge penalty of the logistic linear probe
==============  ===========================================================================

App. 8.2 reads the top principal components of sentence vectors as the paper's orthogonal
"relevant patterns" (§3.2) and checks that a classifier on a few of them is nearly as good as on
all of them. The linear probe is the accuracy ceiling the encoder allows for sentiment.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import ConfigError, check_int

__all__ = ["PCA", "fit_pca", "linear_probe", "probe_accuracy"]


@dataclass
class PCA:
    """A fitted PCA: ``transform(X) = scale * (X - mean) @ components.T``."""

    mean: torch.Tensor
    components: torch.Tensor
    variance: torch.Tensor
    scale: float = 1.0

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        """``(n, D) -> (n, k)`` projected, centred, scaled features."""
        return self.scale * (X.to(self.mean.dtype) - self.mean) @ self.components.T  # (n, k)


def fit_pca(X: torch.Tensor, k: int, unit_variance: bool = False) -> PCA:
    """Top-``k`` principal directions of ``X`` (n, D) by an SVD of the centred data (float64).

    Args:
        unit_variance: set ``scale`` so the projected features have mean per-coordinate variance 1.
    """
    if X.dim() != 2:
        raise ConfigError(f"X must have shape (n, D); got {tuple(X.shape)}")
    check_int("k", k, 1, min(X.shape))  # at most min(n, D) principal directions
    X = X.double()
    mean = X.mean(dim=0)  # (D,)
    _, S, Vh = torch.linalg.svd(X - mean, full_matrices=False)  # S (min(n,D),), Vh (min(n,D), D)
    Vh = Vh * torch.sign(Vh[:, :1] + 1e-300)  # fix each direction's sign: deterministic output
    variance = S[:k] ** 2 / (X.shape[0] - 1)  # (k,)
    scale = float(variance.mean().rsqrt()) if unit_variance else 1.0
    return PCA(mean=mean, components=Vh[:k], variance=variance, scale=scale)


def linear_probe(X: torch.Tensor, s: torch.Tensor, l2: float = 1e-3, steps: int = 200) -> torch.Tensor:
    """Weights ``(D+1,)`` (bias last) of an L2-regularised logistic regression, full-batch L-BFGS, float64.

    Features are standardised inside (mean / std of ``X``); the returned weights act on raw ``X``.
    """
    X, s = X.double(), s.double()
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-12)  # (D,), (D,)
    Z = torch.cat([(X - mu) / sd, torch.ones(len(X), 1, dtype=X.dtype)], dim=1)  # (n, D+1)
    w = torch.zeros(Z.shape[1], dtype=X.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=steps, tolerance_grad=1e-9, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.softplus(-s * (Z @ w)).mean() + l2 * (w[:-1] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    w = w.detach()
    w_raw = w[:-1] / sd  # (D,)
    return torch.cat([w_raw, (w[-1] - (mu * w_raw).sum()).reshape(1)])


def probe_accuracy(X_tr: torch.Tensor, s_tr: torch.Tensor, X_te: torch.Tensor, s_te: torch.Tensor,
                   l2: float = 1e-3) -> float:
    """Test accuracy of :func:`linear_probe` fitted on ``(X_tr, s_tr)``; labels in {+1, -1}.

    Scored with the book's one 0-1 error (:func:`mambaicl.evaluate.zero_one_error`: a zero margin is wrong).
    """
    from ..metric import zero_one_error

    w = linear_probe(X_tr, s_tr, l2)
    margin = X_te.double() @ w[:-1] + w[-1]  # (n_te,)
    return 1.0 - zero_one_error(margin, s_te.double())
