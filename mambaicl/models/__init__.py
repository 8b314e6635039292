"""Models: the literal recurrence (Eq. 1), gated linear attention (Eq. 3), App. 12 gates, deep stacks.

Layout (each module imports only the ones above it):

==================  ======================================================================
``kernels``         the two cumulative sums (suffix / running) and the causal score block
``shapes``          symbolic shape checks;  ``defaults``: model defaults and shared checks
``gated_attention`` Eq. (3) as functions: scores, the gate, the fused gated sum
``pattern_eq3``     Eq. (3) on synthetic prompts in a token basis: one compiled kernel (tables T, R)
``gates``           the App. 12 gate families, any shape
``scan``            Eq. (1) for every head in closed form (quadratic, factored, chunked)
``recurrence``      Eq. (1) as the literal recurrence, and its closed form (one head of ``scan``)
``one_layer``       the one-layer models of Eq. (3): single models and seed stacks
``gla``             the App. 12 families as seed stacks (a ``OneLayerStack`` with another gate)
``mamba1``          a standard Mamba-1 block (Gu & Dao 2023)
``deep``            residual multi-layer stacks of every kind
``factory``         :func:`build_model`, the one factory for every model of the book
==================  ======================================================================
"""
from .gated_attention import (
    attention_scores,
    bilinear_scores,
    check_prompt,
    gate_from_logits,
    gate_grad_w,
    gate_naive,
    gate_values,
    gated_sum,
    mamba_output,
)
from .one_layer import (
    ONE_LAYER_KINDS,
    OneLayerLinearTransformer,
    OneLayerMamba,
    OneLayerMambaMerged,
    OneLayerStack,
)
from .recurrence import discretize, selective_scan, selective_scan_closed_form
from .deep import KINDS, DeepICLModel  # noqa: E402
from .mamba1 import Mamba1Block  # noqa: E402
from .factory import GATE_KINDS, build_model  # noqa: E402

#: the models' names in text, tables and legends (the book's one spelling of each kind; viz.style re-exports it)
LABELS = {
    "mamba": "Mamba",
    "mamba_merged": "Mamba, merged product",
    "linear": "linear Transformer",
    "softmax": "softmax Transformer",
    "mamba1": "Mamba-1 block",
    "oracle": "encoder ceiling (oracle)",
}

__all__ = ["LABELS", 
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
    "mamba_output",
    "selective_scan",
    "selective_scan_closed_form",
]
