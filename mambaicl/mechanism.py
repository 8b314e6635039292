"""How a trained Mamba does in-context learning with outliers: Corollaries 1-2 measured (§3.5, §4.1, App. 8.1).

Glossary (code name -> paper symbol):

=====================  ===================================================================
``att``                ``p_i^T W_B^T W_C p_query`` for every token ``i`` (query last), ``(batch, l+1)``
``G``                  ``G_{i,l+1}(w)`` for every token, ``(batch, l+1)``
``same``, ``other``    the two sums of Corollary 1, Eq. (6): over ``N_1`` (context examples
                       with the query's relevant pattern) and over ``[l_ts] \\ N_1``
``h(j)``               index of the ``j``-th closest clean context example to the query (Cor. 2(ii))
``rank_medians[j-1]``  median over prompts of ``G_{h(j),l+1}``, compared with ``2^{-(j-1)}``, Eq. (8)
``FIG3``               the named configuration of the three-layer experiment of §4.1
=====================  ===================================================================

For a one-layer model (:class:`mambaicl.models.OneLayerMamba`) the terms are those of Eq. (3).
For a deep model (:func:`mambaicl.models.deep.build_model`) they are read, layer by layer, from
``model.probe(P)``: the query row of the layer's attention, and for the paper's Mamba layer the
gate of the label channel ``w = w_{d0}`` (for a Mamba-1 block, the gate averaged over channels
and states; see :func:`mambaicl.models.mamba1.s6_gate`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from .config import DataConfig, TestConfig
from .data import Patterns, Prompts, test_prompts, training_prompts
from .fit import LOSSES, OPTIMIZERS, TrainHistory, fit
from .models import OneLayerLinearTransformer, OneLayerMamba
from .models.deep import KINDS, build_model

__all__ = [
    "DeepMechanismConfig",
    "FIG3",
    "MAMBA1_MECHANISM",
    "query_terms",
    "attention_sums",
    "split_gates",
    "clean_gates_by_rank",
    "rank_medians",
    "LayerReport",
    "layer_report",
    "mechanism_report",
    "placement_cost",
    "build_deep",
    "train_deep",
    "float_patterns",
    "SumRecorder",
    "plot_attention_sums",
    "plot_gate_bars",
    "plot_rank_decay",
]


# ---------------------------------------------------------------- configuration


@dataclass(frozen=True)
class DeepMechanismConfig:
    """A deep model and how it is trained for the mechanism experiments (§4.1 "three-layer Mamba").

    The paper gives the depth (3 layers), ``p_a = 0.4`` and the data of §4.1; every other
    value here is ours and is quoted in Chapter 5.
    """

    kind: str = "mamba"
    n_layers: int = 3
    n_heads: int = 1
    d_model: int = 64
    d_state: int = 16
    delta: float = 0.2
    norm: str = "rms"
    p_a: float = 0.4
    optimizer: str = "adam"
    lr: float = 1e-3
    steps: int = 600
    batch: int = 64
    loss: str = "hinge"
    init_seed: int = 1
    data_seed: int = 3

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {self.kind!r}")
        for name in ("n_layers", "n_heads", "d_model", "d_state", "steps", "batch"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}")
        if not (0 <= self.p_a < 1):
            raise ValueError(f"p_a must lie in [0, 1); got {self.p_a!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}; got {self.optimizer!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {tuple(LOSSES)}; got {self.loss!r}")
        if not (0 < self.lr <= 1):
            raise ValueError(f"lr must lie in (0, 1]; got {self.lr!r}")
        if not (0 < self.delta <= 1):
            raise ValueError(f"delta must lie in (0, 1]; got {self.delta!r}")
        if self.norm not in ("rms", "none"):
            raise ValueError(f"norm must be 'rms' or 'none'; got {self.norm!r}")


#: Figures 3-5: the paper's three-layer Mamba (§4.1), single head, p_a = 0.4. Residual layers
#: without normalisation: with pre-norm RMSNorm the first-layer gate does not learn to suppress
#: outliers within our budget (Chapter 5, "Deviations from the paper").
FIG3 = DeepMechanismConfig(norm="none", optimizer="adam", lr=3e-4, steps=600)
#: The same question for three standard Mamba-1 blocks (Gu & Dao 2023), smaller to fit the CPU budget.
MAMBA1_MECHANISM = DeepMechanismConfig(kind="mamba1", d_model=32, optimizer="adam", lr=1e-3, steps=150, batch=32)


def float_patterns(pat: Patterns, dtype=torch.float32) -> Patterns:
    """``pat`` in another dtype (the deep models train in float32)."""
    return Patterns(**{k: v.to(dtype) for k, v in pat.to_dict().items()})


def build_deep(cfg: DeepMechanismConfig, d: int, device=None) -> torch.nn.Module:
    """The untrained model of ``cfg`` for data dimension ``d`` (seeded by ``cfg.init_seed``)."""
    extra = {} if cfg.kind == "mamba1" else {"delta": cfg.delta}
    return build_model(cfg.kind, d, n_layers=cfg.n_layers, n_heads=cfg.n_heads, d_model=cfg.d_model,
                       d_state=cfg.d_state, norm=cfg.norm, generator=torch.Generator().manual_seed(cfg.init_seed),
                       device=device, **extra)


def train_deep(cfg: DeepMechanismConfig, pat: Patterns, data: DataConfig, tasks: torch.Tensor, *,
               model: torch.nn.Module | None = None, probes: dict | None = None, record_every: int = 50,
               device=None, callback=None, progress: bool = True) -> tuple[torch.nn.Module, TrainHistory]:
    """Train ``cfg``'s model on Definition 1 prompts with ``p_a = cfg.p_a``.

    Args:
        pat, data, tasks: patterns (float32), data configuration (its ``p_a`` is replaced by
            ``cfg.p_a``) and training tasks.
        model: the model to train in place (default: :func:`build_deep` of ``cfg``).
        probes: ``name -> probe(model) -> float`` recorded every ``record_every`` steps.
        device: where to train (default CPU; pass ``default_device()`` to use a GPU).
        callback: ``callback(step, model)`` after every update (e.g. :meth:`SumRecorder.callback`).

    Returns:
        The trained model (on ``device``) and its :class:`TrainHistory`.
    """
    data = dataclasses.replace(data, p_a=cfg.p_a)
    if model is None:
        model = build_deep(cfg, data.d, device)

    def sample(batch: int, g: torch.Generator):
        pr = training_prompts(pat, data, tasks, batch, g)
        return pr.P, pr.z

    hist = fit(model, sample, steps=cfg.steps, batch_size=cfg.batch, lr=cfg.lr, optimizer=cfg.optimizer,
               loss=cfg.loss, seed=cfg.data_seed, device=device, record_every=record_every, probes=probes,
               progress=progress, callback=callback)
    if not all(math.isfinite(v) for v in hist.loss):
        raise FloatingPointError(f"training diverged (lr = {cfg.lr} too large for {cfg.kind!r})")
    return model, hist


# ---------------------------------------------------------------- reading the model


@torch.no_grad()
def query_terms(model, P: torch.Tensor, head: int = 0) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Per layer: the attention and the gate of every token as read by the query.

    Args:
        model: a one-layer model of Eq. (3) or a deep model from :func:`build_model`.
        P: prompts ``(batch, l+1, d+1)``.
        head: which head of a multi-head layer.

    Returns:
        ``[(att, G), ...]``, one pair per layer, each ``(batch, l+1)``; ``G`` is ``None`` for
        an ungated layer.
    """
    if isinstance(model, OneLayerMamba):
        return [(model.attention(P), model.gate(P))]
    if isinstance(model, OneLayerLinearTransformer):
        return [(model.attention(P), None)]
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
    if J < 1:
        raise ValueError(f"J must be a positive integer; got {J!r}")
    ctx = G[:, :-1]  # (batch, l)
    clean = ~outlier  # (batch, l)
    # rank of each clean example counted from the query: 1 for the closest
    rank = torch.flip(torch.cumsum(torch.flip(clean.long(), [1]), 1), [1]) * clean  # (batch, l), 0 if outlier
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

    For each placement (``"far"`` = FQ, ``"random"`` = R, ``"close"`` = CQ) the same ``n``
    prompts' draws (one seed) are used, so only the order of the examples differs in law.

    Returns:
        ``placement -> {"error", "clean_mass", "outlier_mass", "first_clean_gate",
        "first_clean_distance"}``: 0-1 error, mean total gate on clean / outlier examples,
        median ``G_{h(1)}`` and mean distance of ``h(1)`` from the query (1 = adjacent).
    """
    out = {}
    for placement in ("far", "random", "close"):
        pr = test_prompts(pat, dataclasses.replace(test, placement=placement), tasks, n,
                          torch.Generator().manual_seed(seed))
        F = model(pr.P.to(next(model.parameters()).device)).cpu()
        G = query_terms(model, pr.P)[layer][1][:, :-1]  # (n, l)
        clean = ~pr.outlier
        l = clean.shape[1]
        first = torch.where(clean.any(1), l - 1 - torch.flip(clean, [1]).float().argmax(1), -1)  # h(1), 0-based
        has = first >= 0
        out[placement] = {
            "error": float(((pr.z * F) < 0).float().mean()),
            "clean_mass": float((G * clean).sum(1).mean()),
            "outlier_mass": float((G * pr.outlier).sum(1).mean()),
            "first_clean_gate": float(G[has, first[has]].median()),
            "first_clean_distance": float((l - first[has]).float().mean()),
        }
    return out


# ---------------------------------------------------------------- recording along training


class SumRecorder:
    """Records Corollary 1's two sums (means over ``pr``) of every layer during training.

    Pass ``recorder.callback`` to :func:`mambaicl.fit.fit` (or :func:`train_deep` via
    ``callback``); call ``recorder.record(0, model)`` once before training.
    """

    def __init__(self, pr: Prompts, every: int) -> None:
        if every < 1:
            raise ValueError(f"every must be a positive integer; got {every!r}")
        self.pr, self.every = pr, every
        self.steps: list[int] = []
        self.same: list[list[float]] = []  # [record][layer]
        self.other: list[list[float]] = []

    def record(self, step: int, model) -> None:
        sums = [attention_sums(att, self.pr.relevant) for att, _ in query_terms(model, self.pr.P)]
        self.steps.append(step)
        self.same.append([float(s.mean()) for s, _ in sums])
        self.other.append([float(o.mean()) for _, o in sums])

    def callback(self, step: int, model) -> None:
        """``fit`` calls this after the update of step ``step`` (0-based): record after ``step + 1`` updates."""
        if (step + 1) % self.every == 0:
            with torch.no_grad():
                self.record(step + 1, model)


# ---------------------------------------------------------------- plots (Chapter 5)

CLEAN, OUTLIER, SAME, OTHER = "#2ca02c", "#d62728", "#1f77b4", "#7f7f7f"


def plot_attention_sums(ax, rec: SumRecorder, layer: int, title: str = "") -> None:
    """Figure 3 / App. Fig. 4: the two Corollary 1 sums of ``layer`` against the training step."""
    ax.plot(rec.steps, [s[layer] for s in rec.same], color=SAME, marker="o", ms=3, label="same pattern as query")
    ax.plot(rec.steps, [o[layer] for o in rec.other], color=OTHER, marker="s", ms=3, label="other pattern")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xlabel("training step")
    ax.set_ylabel("sum of attention scores")
    ax.set_title(title or f"layer {layer + 1}")


def plot_gate_bars(ax, G_row: torch.Tensor, outlier_row: torch.Tensor, title: str = "") -> None:
    """The gate figure / App. Fig. 5: ``G_{i,l+1}`` of each context example of one prompt.

    Red: examples with an outlier; green: clean. The x axis is the distance from the query.
    """
    l = outlier_row.shape[0]
    dist = torch.arange(l, 0, -1).numpy()
    ax.bar(dist, G_row[:l].detach().cpu().numpy(), color=[OUTLIER if o else CLEAN for o in outlier_row])
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("distance from the query")
    ax.set_ylabel("gate $G_{i,l+1}$")
    ax.set_title(title)


def plot_rank_decay(ax, rank: tuple, label: str, color=None) -> None:
    """Median ``G_{h(j)}`` against ``j`` with the ``2^{-(j-1)}`` trend of Eq. (8) through ``j = 1``."""
    j = list(range(1, len(rank) + 1))
    ax.semilogy(j, rank, marker="o", label=label, color=color)
    ax.semilogy(j, [rank[0] * 2.0 ** (1 - k) for k in j], ls="--", color=color or "black", lw=0.8)
    ax.set_xlabel("$j$ ($j$-th closest clean example)")
    ax.set_ylabel("median $G_{h(j),l+1}$")
