"""Orthogonal patterns of §3.2 and the test outliers of Theorem 2(a).

Glossary (code name -> paper symbol):

==========  ===========================================================
``mu``      relevant patterns ``mu_1..mu_{M1}``, rows, norm ``beta``, ``(M1, d)``
``nu``      irrelevant patterns ``nu_1..nu_{M2}``, rows, norm ``beta``, ``(M2, d)``
``v``       training outliers ``v*_1..v*_V``, rows, norm ``outlier_norm``, ``(V, d)``
``v_test``  test outliers ``v*_s' = sum_r lambda_{s,r} v*_r``, ``(S, d)``
==========  ===========================================================
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from ..config import ConfigError, DataConfig

__all__ = ["Patterns", "make_patterns", "test_outliers", "value_key"]


def value_key(*tensors: torch.Tensor) -> str:
    """A key of tensors by value: SHA-256 of their dtypes, shapes and bytes (equal tensors, equal keys)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Patterns:
    """The pattern vectors of §3.2 as rows; all mutually orthogonal."""

    mu: torch.Tensor  # (M1, d)
    nu: torch.Tensor  # (M2, d)
    v: torch.Tensor  # (V, d)

    def to_dict(self) -> dict:
        return {"mu": self.mu, "nu": self.nu, "v": self.v}

    @property
    def key(self) -> str:
        """A value key: patterns with the same dtype, shapes and numbers have equal keys (SHA-256 of the bytes)."""
        cached = self.__dict__.get("_key")
        if cached is None:
            cached = value_key(self.mu, self.nu, self.v)
            object.__setattr__(self, "_key", cached)  # computed once (the patterns are not changed in place)
        return cached

    def to(self, dtype: torch.dtype | None = None, device=None) -> "Patterns":
        """The same patterns in another dtype and/or on another device."""
        return Patterns(**{k: v.to(dtype=dtype or v.dtype, device=device or v.device) for k, v in self.to_dict().items()})


def make_patterns(cfg: DataConfig, generator: torch.Generator, dtype=torch.float64, device="cpu") -> Patterns:
    """Draw ``M1 + M2 + V`` orthonormal directions of R^d (QR of a Gaussian matrix) and scale them.

    Implements the pattern model of §3.2: ``||mu_j|| = ||nu_k|| = beta``, the ``v*_s`` orthogonal
    to each other and to every ``mu_j`` and ``nu_k``.
    """
    n = cfg.M1 + cfg.M2 + cfg.V
    G = torch.randn(cfg.d, n, generator=generator, dtype=torch.float64)  # (d, n)
    Q, R = torch.linalg.qr(G)  # Q: (d, n) with orthonormal columns
    Q = Q * torch.sign(torch.diagonal(R))  # unique QR: positive diagonal of R
    rows = Q.T.to(dtype=dtype, device=device)  # (n, d)
    mu = cfg.beta * rows[: cfg.M1]  # (M1, d)
    nu = cfg.beta * rows[cfg.M1 : cfg.M1 + cfg.M2]  # (M2, d)
    v = cfg.outlier_norm * rows[cfg.M1 + cfg.M2 :]  # (V, d)
    return Patterns(mu=mu, nu=nu, v=v)


def test_outliers(v: torch.Tensor, v_coeffs) -> torch.Tensor:
    """Test outliers ``v*_s' = sum_r lambda_{s,r} v*_r`` of Theorem 2(a), ``(S, d)``.

    Args:
        v: training outliers ``(V, d)``.
        v_coeffs: ``S`` rows of ``V`` coefficients ``lambda`` (each row sums to at least ``L``).
    """
    lam = torch.tensor(v_coeffs, dtype=v.dtype, device=v.device)  # (S, V)
    if lam.dim() != 2 or lam.shape[1] != v.shape[0]:
        raise ConfigError(f"v_coeffs must have shape (S, V) with V = {v.shape[0]}; got {tuple(lam.shape)}")
    return lam @ v  # (S, d)


test_outliers.__test__ = False  # not a pytest test, though its name starts with "test"
