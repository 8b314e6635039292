"""Deep stacks of several seeds as one model: :class:`StackedDeepModel` (the seeds are a batch axis).

The engine trains the ten seeds of a deep preset together. A :class:`StackedDeepModel` holds ``S`` members of one
:class:`mambaicl.models.deep.DeepICLModel` architecture (kinds ``"mamba"``, ``"linear"``, ``"softmax"``) with every
parameter carrying the member axis first, under the names of :class:`DeepICLModel` (``embed`` ``(S, D, d+1)``,
``readout`` ``(S, D)``, ``norms.i.weight`` ``(S, D)``, ``mixers.i.W_B`` ``(S, H, m, D)``, ``mixers.i.W_O``
``(S, D, H D)``, ``mixers.i.W`` ``(S, H, D, D)``), and runs ``P`` ``(S, batch, L, d+1) -> F`` ``(S, batch)``: each
operation once for all members (batched matrix products; the compiled scan over the ``S batch`` rows in one call),
where :class:`mambaicl.members.MemberStack` ran the members one after another. Member ``k``'s output depends on
member ``k``'s parameters and prompts only.

It is built from the members' own models (:func:`mambaicl.members.build_members`: each built from its own
``(seed, "init")`` generator, then stacked), so a member's initial model is unchanged; :meth:`member` gives slot
``k`` back as an ordinary :class:`DeepICLModel` (a copy), what probes and evaluations read. Members in
``resting`` (stopped by early stopping) are not run: their output is 0.

Kernels: on a CPU (:func:`mambaicl.device.use_compiled`) the norm is
:func:`mambaicl.models.scan_kernel.rms_norm_fused` with one weight per member and the Mamba scan
:func:`mambaicl.models.scan_kernel.selective_scan_heads_fused_stacked`; elsewhere (a GPU,
:func:`mambaicl.device.plain_kernels`) the plain expressions: the norm with the member axis broadcast, and the
closed forms of :data:`mambaicl.models.deep.PAPER_SCANS` member by member (those forms have no member axis).
Linear and softmax attention are batched PyTorch on every device.

The readout reads the last layer's output at the last token only, so the last layer computes that token alone on
the compiled path (``last_only`` of :func:`~mambaicl.models.scan_kernel.selective_scan_heads_fused_stacked`; the
plain forms compute every token and keep the last), and on both paths its ``W_O`` multiplies that one token.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ..config import ConfigError
from ..device import use_compiled
from .deep import COMPILED_DTYPES, PAPER_SCANS, AttentionMixer, DeepICLModel, PaperMambaMixer, RMSNorm
from .gated_attention import check_prompt
from .kernels import causal_mask, causal_scores, row_softmax
from .scan_kernel import rms_norm_fused, selective_scan_heads_fused_stacked
from .shapes import tokens

__all__ = ["STACKED_KINDS", "StackedDeepModel"]

#: the deep kinds whose members stack into one :class:`StackedDeepModel` (``"mamba1"`` stays a MemberStack)
STACKED_KINDS = ("mamba", "linear", "softmax")


class StackedDeepModel(nn.Module):
    """``S`` deep models of one architecture as one: ``forward(P)`` ``(S, batch, L, d+1) -> (S, batch)``.

    Args:
        models: the members' :class:`DeepICLModel` s (same kind, sizes and options), in slot order.
    """

    def __init__(self, models: list) -> None:
        super().__init__()
        if not models or not all(isinstance(m, DeepICLModel) for m in models):
            raise ConfigError("a StackedDeepModel stacks DeepICLModel members (at least one)")
        first = models[0]
        if first.kind not in STACKED_KINDS:
            raise ConfigError(f"kind {first.kind!r} does not stack; stacked kinds: {STACKED_KINDS}")
        names = [n for n, _ in first.named_parameters()]
        for m in models[1:]:
            if (m.kind, [(n, p.shape) for n, p in m.named_parameters()]) != (
                    first.kind, [(n, p.shape) for n, p in first.named_parameters()]):
                raise ConfigError("the members of a StackedDeepModel must share kind and shapes")
        self.kind, self.d, self.d_model = first.kind, first.d, first.d_model
        # the structure (norms, mixers) of a member, each parameter replaced by the members' stacked values
        skeleton = copy.deepcopy(first)
        self.__dict__["_template"] = copy.deepcopy(first)  # not a submodule: what member() copies into
        self.norms, self.mixers = skeleton.norms, skeleton.mixers  # names as DeepICLModel's; values replaced below
        values = [dict(m.named_parameters()) for m in models]
        for name in names:
            owner, attr = self._owner(name)
            stacked = torch.stack([v[name].detach() for v in values])
            setattr(owner, attr, nn.Parameter(stacked, requires_grad=values[0][name].requires_grad))
        self.resting: set = set()

    def _owner(self, name: str):
        *path, attr = name.split(".")
        mod = self
        for p in path:
            mod = getattr(mod, p) if not p.isdigit() else mod[int(p)]
        return mod, attr

    @property
    def n_seeds(self) -> int:
        return self.readout.shape[0]

    @property
    def label_channel(self) -> int | None:
        return self._template.label_channel

    def member(self, k: int) -> DeepICLModel:
        """Slot ``k`` as an ordinary :class:`DeepICLModel` (a copy of its parameters, on the stack's device)."""
        if not 0 <= k < self.n_seeds:
            raise ConfigError(f"slot must lie in [0, {self.n_seeds}); got {k!r}")
        model = copy.deepcopy(self._template).to(device=self.readout.device, dtype=self.readout.dtype)
        with torch.no_grad():
            for name, p in model.named_parameters():
                stacked = self.get_parameter(name)
                p.copy_(stacked[k])
                p.requires_grad_(stacked.requires_grad)
        return model

    # ------------------------------------------------------------ forward

    def forward(self, P) -> torch.Tensor:
        """``F`` ``(S, batch)`` from ``P`` ``(S, batch, L, d+1)`` (or a prompt batch of that shape)."""
        P = tokens(P)
        check_prompt(P, self.d)
        S = self.n_seeds
        if P.dim() != 4 or P.shape[0] != S:
            raise ConfigError(f"P must be (S={S}, batch, l+1, d+1) for a stack of {S} members; got {tuple(P.shape)}")
        prm = dict(self.named_parameters())
        active = [k for k in range(S) if k not in self.resting]
        if len(active) == S:
            return self._run(P, prm)
        if not active:
            return P.new_zeros(P.shape[:2], dtype=self.readout.dtype)
        idx = torch.tensor(active, device=P.device)
        F = self._run(P[idx], {n: p[idx] for n, p in prm.items()})
        out = F.detach().new_zeros((S, F.shape[1]))
        return out.index_copy(0, idx, F)

    def _run(self, P: torch.Tensor, prm: dict) -> torch.Tensor:
        embed = prm["embed"]
        S, B, L, _ = P.shape
        D, n = self.d_model, len(self.mixers)
        x = torch.bmm(P.to(embed.dtype).reshape(S, B * L, -1), embed.transpose(1, 2)).view(S, B, L, D)
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers)):
            last = i == n - 1  # the readout reads the last layer's last token only: its other rows are not computed
            u = self._norm(norm, x, prm.get(f"norms.{i}.weight"))
            o = self._mix(mixer, u, {k: prm[f"mixers.{i}.{k}"] for k in ("W_B", "W_C", "W", "W_O")
                                     if f"mixers.{i}.{k}" in prm}, last)  # (S, B, L, H, D); (S, B, 1, H, D) if last
            Lo, H = o.shape[2:4]
            if last:
                x = x[:, :, -1:]
            # x + o W_O^T, the residual added inside the matrix product
            x = torch.baddbmm(x.reshape(S, B * Lo, D), o.reshape(S, B * Lo, H * D),
                              prm[f"mixers.{i}.W_O"].transpose(1, 2)).view(S, B, Lo, D)
        return torch.bmm(x[:, :, -1], prm["readout"].unsqueeze(-1)).squeeze(-1)  # (S, B)

    @staticmethod
    def _norm(norm: nn.Module, x: torch.Tensor, weight) -> torch.Tensor:
        if not isinstance(norm, RMSNorm):
            return x
        if use_compiled(x.device) and x.dtype in COMPILED_DTYPES:
            return rms_norm_fused(x, weight, norm.eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * weight[:, None, None, :]

    @staticmethod
    def _mix(mixer: nn.Module, u: torch.Tensor, w: dict, last_only: bool = False) -> torch.Tensor:
        """Every head's output of every member, ``(S, B, L, H, D)``; the last token's only, ``(S, B, 1, H, D)``, with
        ``last_only`` (the compiled scan then skips the other rows; the plain forms compute them and drop them)."""
        if isinstance(mixer, PaperMambaMixer):
            if mixer.scan == "factored" and use_compiled(u.device) and u.dtype in COMPILED_DTYPES:
                return selective_scan_heads_fused_stacked(u, w["W_B"], w["W_C"], w["W"], last_only=last_only)
            scan = PAPER_SCANS[mixer.scan]  # (B, H, L, D) per member: the closed forms have no member axis
            o = torch.stack([scan(u[k], w["W_B"][k], w["W_C"][k], w["W"][k])
                             for k in range(u.shape[0])]).permute(0, 1, 3, 2, 4)
        elif isinstance(mixer, AttentionMixer):
            keys = torch.einsum("nbld,nhmd->nbhlm", u, w["W_B"])  # (S, B, H, L, m)
            queries = torch.einsum("nbld,nhmd->nbhlm", u, w["W_C"])
            weights = causal_scores(keys, queries)  # (S, B, H, L, L), zero for s > t
            if mixer.softmax:
                weights = weights / math.sqrt(w["W_B"].shape[2])
                weights = row_softmax(weights.masked_fill(~causal_mask(u.shape[2], u.device), -math.inf))
            o = torch.einsum("nbhts,nbsd->nbthd", weights, u)
        else:
            raise ConfigError(f"mixer {type(mixer).__name__} does not stack")
        return o[:, :, -1:] if last_only else o
