"""What measures a trained model: Lemma 3-6 probes, Corollary 1-2 measurements, the theorems'
predicted quantities, fits of measured curves, and the statistics behind every claim.

============  ===================================================================
module        holds
============  ===================================================================
``lemmas``    probes of Lemmas 3-6 (attention along patterns, the gate vector's two phases)
``corollaries``  Corollary 1-2 measurements on one-layer and deep models (one implementation)
``theory``    the thresholds and iteration counts of Theorems 1-4
``fits``      decay factors, log-log exponents, iteration counts, break-down points
``stats``     means, standard errors and the book's rule: two-sided 95 % t intervals over seeds
``claims``    the registry of claims: every results row, its paper quote, criterion and verdict
============  ===================================================================
"""
from . import corollaries, fits, lemmas, stats, theory

__all__ = ["corollaries", "fits", "lemmas", "stats", "theory"]
