"""Models: the literal recurrence (Eq. 1), gated linear attention (Eq. 3), App. 12 gates, deep stacks.

:func:`build_model` is the one factory for every model of the book.
"""
from .gated_attention import (
    ONE_LAYER_KINDS,
    OneLayerLinearTransformer,
    OneLayerMamba,
    OneLayerMambaMerged,
    OneLayerStack,
    attention_scores,
    bilinear_scores,
    check_prompt,
    gate_from_logits,
    gate_grad_w,
    gate_naive,
    gate_values,
    gated_sum,
    gated_sum_reference,
    linear_transformer_output,
    mamba_output,
    prompt_logits,
    query_attention,
)
from .recurrence import discretize, selective_scan, selective_scan_closed_form
from .deep import KINDS, DeepICLModel  # noqa: E402
from .mamba1 import Mamba1Block  # noqa: E402
from .factory import GATE_KINDS, build_model  # noqa: E402

__all__ = [
    "GATE_KINDS",
    "KINDS",
    "ONE_LAYER_KINDS",
    "DeepICLModel",
    "Mamba1Block",
    "OneLayerLinearTransformer",
    "OneLayerMamba",
    "OneLayerMambaMerged",
    "OneLayerStack",
    "attention_scores",
    "bilinear_scores",
    "build_model",
    "check_prompt",
    "discretize",
    "gate_from_logits",
    "gate_grad_w",
    "gate_naive",
    "gate_values",
    "gated_sum",
    "gated_sum_reference",
    "linear_transformer_output",
    "mamba_output",
    "prompt_logits",
    "query_attention",
    "selective_scan",
    "selective_scan_closed_form",
]
