"""Device selection and the one choice of kernel: use a GPU when one is present, never require it.

The package's compiled kernels (Numba: :mod:`mambaicl.models.pattern_eq3`, the gate of
:func:`mambaicl.models.gated_attention.gated_sum`, the deep stacks' scan) run on CPU tensors only;
on any other device the same formulas run as plain PyTorch with autograd, their tested twins.
Every such branch asks :func:`use_compiled`, and :func:`plain_kernels` forces the plain branch on
a CPU, so that the tests exercise what a GPU runs without a GPU.
"""
from __future__ import annotations

import contextlib
import threading

import torch

__all__ = ["default_device", "use_compiled", "plain_kernels"]

_state = threading.local()


def default_device() -> torch.device:
    """``cuda`` when a GPU is visible to PyTorch, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def use_compiled(device) -> bool:
    """Whether tensors on ``device`` take the compiled CPU kernels (``True`` on the CPU unless
    :func:`plain_kernels` is active; ``False`` on every other device)."""
    if getattr(_state, "plain", 0):
        return False
    return torch.device(device).type == "cpu"


@contextlib.contextmanager
def plain_kernels():
    """Within this block every kernel choice takes the plain PyTorch branch (the one a GPU runs)."""
    _state.plain = getattr(_state, "plain", 0) + 1
    try:
        yield
    finally:
        _state.plain -= 1
