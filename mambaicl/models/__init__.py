"""Models: the literal recurrence (Eq. 1) and its closed form, gated linear attention (Eq. 3)."""
from .gated_attention import (
    OneLayerLinearTransformer,
    OneLayerMamba,
    attention_scores,
    check_prompt,
    gate_grad_w,
    gate_naive,
    gate_values,
    linear_transformer_output,
    mamba_output,
)
from .recurrence import discretize, selective_scan, selective_scan_closed_form

__all__ = [
    "OneLayerLinearTransformer",
    "OneLayerMamba",
    "attention_scores",
    "check_prompt",
    "discretize",
    "gate_grad_w",
    "gate_naive",
    "gate_values",
    "linear_transformer_output",
    "mamba_output",
    "selective_scan",
    "selective_scan_closed_form",
]

# Multi-layer models and the Mamba-1 block (chapter 5; D4).
from .deep import KINDS, DeepICLModel, build_model  # noqa: E402
from .mamba1 import Mamba1Block  # noqa: E402

__all__ += ["KINDS", "DeepICLModel", "Mamba1Block", "build_model"]
