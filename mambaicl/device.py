"""Device selection: use a GPU when one is present, never require it."""
from __future__ import annotations

import torch

__all__ = ["default_device"]


def default_device() -> torch.device:
    """``cuda`` when a GPU is visible to PyTorch, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
