"""How a trained Mamba does in-context learning with outliers: Corollaries 1-2 measured (§3.5, §4.1, App. 8.1).

Glossary (code name -> paper symbol):

=====================  ===================================================================
``att``                ``p_i^T W_B^T W_C p_query`` for every token ``i`` (query last), ``(batch, l+1)``
``G``                  ``G_{i,l+1}(w)`` for every token, ``(batch, l+1)``
``same``, ``other``    the two sums of Corollary 1, Eq. (6): over ``N_1`` (context examples
                       with the query's relevant pattern) and over ``[l_ts] \\ N_1``
``h(j)``               index of the ``j``-th closest clean context example to the query (Cor. 2(ii))
``rank_medians[j-1]``  median over prompts of ``G_{h(j),l+1}``, compared with ``2^{-(j-1)}``, Eq. (8)
=====================  ===================================================================

For a one-layer model (:class:`mambaicl.models.OneLayerMamba` and its kin) the terms are those of
Eq. (3). For a deep model (``build_model(..., n_layers=...)``) they are read, layer by layer, from
``model.probe(P)``: the query row of the layer's attention, and for the paper's Mamba layer the
gate of the label channel ``w = w_{d0}`` (for a Mamba-1 block, the gate averaged over channels
and states; see :func:`mambaicl.models.mamba1.s6_gate`). This module is the one implementation
of the Corollary measurements.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..config import ConfigError, TestConfig, check_int, check_ints
from ..data.vocabulary import PLACEMENTS_FAR_TO_CLOSE
from ..data import Patterns, Prompts, tasks_by_group, test_prompts
from ..evaluate import errors_by_task_group, predict, zero_one_error
from ..models.kernels import suffix_sum
from .fits import decay_stats
from ..seeding import numpy_stream, substage

__all__ = [
    "query_terms",
    "attention_sums",
    "split_gates",
    "clean_gates_by_rank",
    "rank_medians",
    "LayerReport",
    "layer_report",
    "mechanism_report",
    "placement_cost",
    "group_report",
    "SumRecorder",
    "decay_summary",
    "layer_table",
]


# ---------------------------------------------------------------- reading the model


@torch.no_grad()
def query_terms(model, P: torch.Tensor, head: int = 0) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Per layer: the attention and the gate of every token as read by the query.

    Args:
        model: a one-layer model of Eq. (3) or a deep model (``build_model(..., n_layers=...)``).
        P: prompts ``(batch, l+1, d+1)``.
        head: which head of a multi-head layer.

    Returns:
        ``[(att, G), ...]``, one pair per layer, each ``(batch, l+1)``; ``G`` is ``None`` for
        an ungated layer.
    """
    if hasattr(model, "bilinear"):  # a one-layer model of Eq. (3)
        return [(model.attention(P), model.gate(P) if model.gated else None)]
    if not isinstance(P, torch.Tensor):
        P = P.P
    P = P.to(next(model.parameters()).device)
    out = []
    for rec in model.probe(P):
        att = rec["attention"][:, head, -1]  # (batch, L)
        G = rec.get("gate")
        if G is not None:
            G = G[:, head]  # (batch, L, C)
            ch = model.label_channel if model.kind == "mamba" else None
            G = G[..., ch] if ch is not None else G.mean(-1)  # (batch, L)
        out.append((att.cpu(), None if G is None else G.cpu()))
    return out


def attention_sums(att: torch.Tensor, relevant: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two sums of Corollary 1, Eq. (6), per prompt.

    Args:
        att: ``(batch, l+1)`` attention of every token read by the query.
        relevant: ``(batch, l+1)`` relevant-pattern index of every token (query last).

    Returns:
        ``(same, other)``, each ``(batch,)``: sums over context examples with / without the
        query's relevant pattern.
    """
    ctx = att[:, :-1]  # (batch, l)
    same = relevant[:, :-1] == relevant[:, -1:]  # (batch, l): i in N_1
    return (ctx * same).sum(1), (ctx * ~same).sum(1)


def split_gates(G: torch.Tensor, outlier: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gates of outlier and of clean context examples (Corollary 2(i)), two 1-D tensors."""
    ctx = G[:, :-1]  # (batch, l)
    return ctx[outlier], ctx[~outlier]


def clean_gates_by_rank(G: torch.Tensor, outlier: torch.Tensor, J: int) -> torch.Tensor:
    """``G_{h(j), l+1}`` for ``j = 1..J``: the gate of the ``j``-th closest clean example (Cor. 2(ii)).

    Returns:
        ``(batch, J)``, NaN where a prompt has fewer than ``j`` clean examples.
    """
    check_int("J", J, 1)
    ctx = G[:, :-1]  # (batch, l)
    clean = ~outlier  # (batch, l)
    # rank of each clean example counted from the query: 1 for the closest
    rank = suffix_sum(clean.long(), dim=1) * clean  # (batch, l), 0 if outlier
    out = torch.full((G.shape[0], J), math.nan, dtype=G.dtype)
    for j in range(1, J + 1):
        hit = rank == j  # (batch, l): at most one True per row
        has = hit.any(1)
        out[has, j - 1] = ctx[hit]
    return out


def rank_medians(G: torch.Tensor, outlier: torch.Tensor, J: int) -> torch.Tensor:
    """Median over prompts of ``G_{h(j), l+1}``, ``j = 1..J``, ``(J,)``."""
    return torch.nanmedian(clean_gates_by_rank(G, outlier, J), dim=0).values


@dataclass
class LayerReport:
    """Corollaries 1-2 measured on one layer (means and medians over the test prompts)."""

    same: float  # mean over prompts of the Corollary 1 sum over N_1
    other: float  # mean over prompts of the sum over the other examples
    gate_outlier: float = math.nan  # median gate of outlier examples
    gate_clean: float = math.nan  # median gate of clean examples
    rank: tuple = ()  # median G_{h(j)} for j = 1..J

    @property
    def decay(self) -> tuple:
        """Successive ratios ``rank[j] / rank[j-1]``: the per-step decay of clean gates."""
        return tuple(b / a for a, b in zip(self.rank[:-1], self.rank[1:]))


def layer_report(att: torch.Tensor, G: torch.Tensor | None, pr: Prompts, J: int = 8) -> LayerReport:
    """:class:`LayerReport` of one layer's ``(att, G)`` on the prompts ``pr``."""
    same, other = attention_sums(att, pr.relevant)
    rep = LayerReport(same=float(same.mean()), other=float(other.mean()))
    if G is not None:
        g_out, g_clean = split_gates(G, pr.outlier)
        rep.gate_outlier = float(g_out.median()) if g_out.numel() else math.nan
        rep.gate_clean = float(g_clean.median())
        rep.rank = tuple(float(v) for v in rank_medians(G, pr.outlier, J))
    return rep


def mechanism_report(model, pr: Prompts, J: int = 8, head: int = 0) -> list[LayerReport]:
    """One :class:`LayerReport` per layer of ``model`` on the test prompts ``pr``."""
    return [layer_report(att, G, pr, J) for att, G in query_terms(model, pr.P, head)]


# ---------------------------------------------------------------- the cost of locality


@torch.no_grad()
def placement_cost(model, pat: Patterns, test: TestConfig, tasks: torch.Tensor, n: int,
                   seed: int, layer: int = 0) -> dict[str, dict[str, float]]:
    """Error and gate mass when the outliers are placed far from / randomly / close to the query.

    For each placement (FQ, R, CQ; :data:`mambaicl.config.PLACEMENTS`) the same ``n``
    prompts' draws (the stream ``(seed, "test/placement")``) are used, so only the order of the
    examples differs.

    Returns:
        ``placement -> {"error", "clean_mass", "outlier_mass", "first_clean_gate",
        "first_clean_distance"}``: 0-1 error, mean total gate on clean / outlier examples,
        median ``G_{h(1)}`` and mean distance of ``h(1)`` from the query (1 = adjacent).
    """
    out = {}
    for placement in PLACEMENTS_FAR_TO_CLOSE:
        pr = test_prompts(pat, dataclasses.replace(test, placement=placement), tasks, n,
                          numpy_stream(seed, "test/placement"))
        F = predict(model, pr.P)
        G = query_terms(model, pr.P)[layer][1][:, :-1]  # (n, l)
        clean = ~pr.outlier
        l = clean.shape[1]
        first = torch.where(clean.any(1), l - 1 - torch.flip(clean, [1]).float().argmax(1), -1)  # h(1), 0-based
        has = first >= 0
        out[placement] = {
            "error": zero_one_error(F, pr.z),
            "clean_mass": float((G * clean).sum(1).mean()),
            "outlier_mass": float((G * pr.outlier).sum(1).mean()),
            "first_clean_gate": float(G[has, first[has]].median()),
            "first_clean_distance": float((l - first[has]).float().mean()),
        }
    return out


@torch.no_grad()
def group_report(model, pat: Patterns, test: TestConfig, n: int, seed: int,
                 stage: str = "test/groups") -> dict[str, dict]:
    """Test error and Corollary 1's sums on each task group (:func:`mambaicl.data.task_groups`).

    The error is :func:`mambaicl.evaluate.errors_by_task_group`'s; the sums are read on the same prompts: ``n``
    per group ``g``, from the stream ``(seed, f"{stage}/group={g}")``.

    Returns:
        ``group -> {"error": float, "same": [per layer], "other": [per layer]}``: the 0-1 error and
        the means over the group's prompts of the two sums of Eq. (6), layer by layer.
    """
    errors = errors_by_task_group(model, pat, test, n, seed, stage)
    out = {}
    for name, tasks in tasks_by_group(pat.mu.shape[0]).items():
        pr = test_prompts(pat, test, tasks, n, numpy_stream(seed, substage(stage, group=name)))
        sums = [attention_sums(att, pr.relevant) for att, _ in query_terms(model, pr.P)]
        out[name] = {"error": errors[name], "same": [float(a.mean()) for a, _ in sums],
                     "other": [float(b.mean()) for _, b in sums]}
    return out


# ---------------------------------------------------------------- recording along training


class SumRecorder:
    """Records Corollary 1's two sums (means over ``pr``) of every layer during training.

    Pass ``recorder.callback`` to :func:`mambaicl.train.train`; call ``recorder.record(0, model)``
    once before training. ``steps`` are the numbers of updates after which to record (e.g.
    log-spaced, to see the early dynamics), or ``every`` records every ``every`` updates.
    """

    def __init__(self, pr: Prompts, every: int | None = None, steps=None) -> None:
        if (every is None) == (steps is None):
            raise ConfigError("give exactly one of every (record every so many updates) and steps (when to record)")
        self.pr, self.every = pr, None if every is None else check_int("every", every, 1)
        self.at = None if steps is None else set(check_ints("steps", steps, 0, min_len=0))
        self.steps: list[int] = []
        self.same: list[list[float]] = []  # [record][layer]
        self.other: list[list[float]] = []

    def record(self, step: int, model) -> None:
        sums = [attention_sums(att, self.pr.relevant) for att, _ in query_terms(model, self.pr.P)]
        self.steps.append(step)
        self.same.append([float(s.mean()) for s, _ in sums])
        self.other.append([float(o.mean()) for _, o in sums])

    def callback(self, step: int, model) -> None:
        """The engine calls this after the update of step ``step`` (0-based): record after ``step + 1`` updates."""
        n = step + 1
        if (self.at is not None and n in self.at) or (self.every is not None and n % self.every == 0):
            with torch.no_grad():
                self.record(n, model)


def decay_summary(rank) -> dict:
    """Corollary 2(ii) on one seed's median clean gates ``G_{h(1)}, ..., G_{h(J)}``.

    Returns ``factor`` (fitted per-step factor, :func:`mambaicl.analysis.fits.decay_stats`),
    ``min_ratio`` (smallest successive ratio), ``r2`` (of the log-linear fit) and ``constant``:
    ``min_j G_{h(j)} 2^{j-1} / G_{h(1)}``, the largest ``c`` with ``G_{h(j)} >= c G_{h(1)} 2^{-(j-1)}``
    for all ``j <= J`` (Eq. (8) says such a constant exists, independent of ``j``).
    NaN entries (prompts with fewer than ``j`` clean examples) are dropped from the end.
    """
    g = [float(v) for v in rank if v == v]
    if len(g) < 2 or min(g) <= 0:
        return {"factor": math.nan, "min_ratio": math.nan, "r2": math.nan, "constant": math.nan}
    ratios, factor, r2 = decay_stats(g)
    return {"factor": factor, "min_ratio": float(ratios.min()), "r2": r2,
            "constant": min(v * 2.0 ** j for j, v in enumerate(g)) / g[0]}


def layer_table(reports: list) -> list:
    """Per layer of :func:`mechanism_report` results (``reports[seed][layer]``), Corollaries 1-2 per seed (the sums, the median gates, the rank curve) and Corollary
    2(ii)'s decay summary of each seed's rank curve (:func:`decay_summary`)."""
    layers = []
    for i in range(len(reports[0])):
        entry = {attr: [getattr(rep[i], attr) for rep in reports]
                 for attr in ("same", "other", "gate_outlier", "gate_clean")}
        entry["rank"] = [list(rep[i].rank) for rep in reports]
        if entry["rank"][0]:
            dec = [decay_summary(rk) for rk in entry["rank"]]
            for k in ("factor", "min_ratio", "r2", "constant"):
                entry[f"decay_{k}"] = [d[k] for d in dec]
        layers.append(entry)
    return layers
