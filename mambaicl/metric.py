"""The book's one 0-1 error.

**The convention.** :func:`zero_one_error` counts a prompt as an error when ``z F <= 0`` or
when ``F`` is not finite. The paper writes ``E[1[z F(Psi; P') < 0]]`` (Section 2), which would
score a model that outputs 0 everywhere (or NaN) as perfect; a tie is no prediction, so we
count it as wrong (Chapter 2, "Deviations from the paper"). Every error and accuracy in the
package and the book goes through :func:`zero_one_error`.

It lives below :mod:`mambaicl.data` (which scores its oracles with it) and :mod:`mambaicl.evaluate`
(which draws test prompts from the data), so that neither imports the other in a cycle.
"""
from __future__ import annotations

import torch

from .config import ConfigError

__all__ = ["zero_one_error", "wrong"]


def wrong(F: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Per prompt, whether it is an error: ``z * F <= 0`` or a non-finite ``F`` (a bool tensor of ``F``'s shape).

    Args:
        F: model outputs, any shape; z: labels in {+1, -1} of the same shape.
    """
    F, z = torch.as_tensor(F), torch.as_tensor(z)
    if F.shape != z.shape or F.numel() == 0:
        raise ConfigError(f"F and z must have the same non-empty shape; got {tuple(F.shape)} and {tuple(z.shape)}")
    return ~(z.to(F.dtype) * F > 0) | ~torch.isfinite(F)


def zero_one_error(F: torch.Tensor, z: torch.Tensor) -> float:
    """Fraction of prompts with ``z * F <= 0`` or a non-finite ``F`` (ties and NaN/inf are errors): the mean of
    :func:`wrong`."""
    return float(wrong(F, z).double().mean())
