"""One vocabulary for the outlier rules and placements: the paper's letters, with the long names as labels.

=============  ==========================================================================
identifier     meaning (display label)
=============  ==========================================================================
rule ``A``     an outlier example's label is flipped (``"flipped"``; §4.1)
rule ``B``     an outlier example carries the one targeted label (``"targeted"``; §4.1, Example 1)
rule ``C``     an outlier example's label is random (``"random label"``; §4.1, Definition 1's training prompts)
``R``          outlier examples at random positions (``"random position"``; Eq. (5))
``FQ``         outlier examples farthest from the query (``"far"``; §4.2)
``CQ``         outlier examples closest to the query (``"close"``; §4.2)
=============  ==========================================================================

The letters are the identifiers everywhere in code (:data:`mambaicl.config.RULES`,
:data:`mambaicl.config.PLACEMENTS`). The long names are display labels; as input they are accepted
as aliases and mapped to their letter once (each label names one rule or one placement: rule C and
placement R, both "random" in the paper's words, have distinct labels), where a rule or placement enters (:func:`rule_id`,
:func:`placement_id`: prompt builders and configurations that store them).
"""
from __future__ import annotations

from ..config import PLACEMENT_LABELS, PLACEMENTS, PLACEMENTS_FAR_TO_CLOSE, RULE_LABELS, RULES, check_choice

__all__ = ["RULES", "PLACEMENTS", "PLACEMENTS_FAR_TO_CLOSE", "RULE_LABELS", "PLACEMENT_LABELS", "LABELS", "rule_id", "placement_id"]

#: every display label, by kind
LABELS = {"rule": RULE_LABELS, "placement": PLACEMENT_LABELS}


def _letter(name: str, value, letters: tuple, labels: dict) -> str:
    aliases = {v: k for k, v in labels.items()}
    if isinstance(value, str) and value in aliases:
        return aliases[value]
    return check_choice(name, value, letters + tuple(aliases))


def rule_id(value, name: str = "rule") -> str:
    """The letter (§4.1: A, B, C) of a rule given by its letter or by its display label."""
    return _letter(name, value, RULES, RULE_LABELS)


def placement_id(value, name: str = "placement") -> str:
    """The letter (§4.2: R, FQ, CQ) of a placement given by its letter or by its display label."""
    return _letter(name, value, PLACEMENTS, PLACEMENT_LABELS)
