"""Symbolic shape checks for the models' public functions.

``check_shapes(P=(P, "batch L d0"), W_B=(W_B, "m d0"))`` checks each tensor against its symbols, binding a
symbol at its first use, and raises a :class:`~mambaicl.config.ConfigError` naming the first tensor that
disagrees, the shape it must have (with the sizes bound so far) and the shape it has.
"""
from __future__ import annotations

import torch

from ..config import ConfigError

__all__ = ["check_shapes", "tokens", "token_labels"]


def check_shapes(**named: tuple[torch.Tensor, str]) -> dict[str, int]:
    """Check ``name=(tensor, "sym sym ...")`` pairs in order; return the bound sizes ``{sym: size}``."""
    sizes: dict[str, int] = {}
    for name, (tensor, spec) in named.items():
        symbols = spec.split()
        ok = tensor.dim() == len(symbols)
        if ok:
            for sym, n in zip(symbols, tensor.shape):
                ok = ok and sizes.setdefault(sym, int(n)) == n
        if not ok:
            want = ", ".join(f"{s}={sizes[s]}" if s in sizes else s for s in symbols)
            raise ConfigError(f"{name} must have shape ({want}); got {tuple(tensor.shape)}")
    return sizes


def tokens(P) -> torch.Tensor:
    """The prompt tensor of Eq. (2), ``(..., l+1, d+1)``: ``P`` itself, or a prompt batch's :meth:`tokens`
    (:meth:`mambaicl.data.Prompts.tokens`): the one way a model reads a prompt batch as tokens."""
    return P if isinstance(P, torch.Tensor) else P.tokens()


def token_labels(P) -> torch.Tensor:
    """Every token's label entry ``y_i`` (0 at the query), ``(..., l+1)``: the last row of a prompt tensor, or a
    prompt batch's :meth:`labels`."""
    return P[..., -1] if isinstance(P, torch.Tensor) else P.labels()
