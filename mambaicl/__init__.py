"""mambaicl: the support package of the book *Can Mamba Learn In Context with Outliers?*

A reproduction of Li, Lu, Cui, Chen and Wang (2025), arXiv:2510.00399. The chapters of the
book (``book/``) call this package; every function that implements an equation of the paper
names it in its docstring.

Layout (data flows one way)::

    config      validated configurations and the validator kit
    data        patterns, tasks, prompts (synthetic, §3.2); SST-2, poisoning, encoders (§4.2)
    models      Eq. (1) and (3), App. 12 gates, deep stacks, Mamba-1; build_model
    members     what the engine trains: Member (seed, kind, data, step size), stacked models
    convergence early stopping, the engine's one rule
    train       train: the one training loop (Algorithm 1 is its SGD + hinge preset)
    evaluate    zero_one_error, test error, sweeps
    analysis    Lemma 3-6 probes, Corollary 1-2 measurements, theory, fits and statistics
    experiments one module per experiment of the book: presets, run(...) -> Result
    viz         the book's style, palette, figures and the explorer
    allocator   glibc's allocator keeps freed memory (set on import: no page faults per training step)
"""
from .allocator import keep_freed_memory
from .device import default_device
from .evaluate import zero_one_error
from .models import (
    OneLayerLinearTransformer,
    OneLayerMamba,
    OneLayerMambaMerged,
    attention_scores,
    build_model,
    gate_grad_w,
    gate_naive,
    gate_values,
    selective_scan,
    selective_scan_closed_form,
)

keep_freed_memory()  # before any experiment runs: training steps reuse freed blocks instead of faulting pages in

__version__ = "0.2.0"

__all__ = [
    "OneLayerLinearTransformer",
    "OneLayerMamba",
    "OneLayerMambaMerged",
    "attention_scores",
    "build_model",
    "default_device",
    "gate_grad_w",
    "gate_naive",
    "gate_values",
    "selective_scan",
    "selective_scan_closed_form",
    "zero_one_error",
]
