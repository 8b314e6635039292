"""mambaicl: the support package of the book *Can Mamba Learn In Context with Outliers?*

A reproduction of Li, Lu, Cui, Chen and Wang (2025), arXiv:2510.00399. The chapters of the
book (``book/``) call this package; every function that implements an equation of the paper
names it in its docstring.
"""
from .device import default_device
from .models import (
    OneLayerLinearTransformer,
    OneLayerMamba,
    attention_scores,
    gate_grad_w,
    gate_naive,
    gate_values,
    selective_scan,
    selective_scan_closed_form,
)
from .config import FIG2, PLAIN, DataConfig, Preset, TestConfig, TrainConfig, get_preset

__version__ = "0.1.0"

__all__ = [
    "DataConfig",
    "FIG2",
    "PLAIN",
    "Preset",
    "TestConfig",
    "TrainConfig",
    "get_preset",
    "OneLayerLinearTransformer",
    "OneLayerMamba",
    "attention_scores",
    "default_device",
    "gate_grad_w",
    "gate_naive",
    "gate_values",
    "selective_scan",
    "selective_scan_closed_form",
]
