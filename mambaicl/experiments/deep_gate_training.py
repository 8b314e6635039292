"""Does the three-layer stack's gate stop learning once its validation hinge loss reaches zero?

Chapter 5's three-layer Mamba (FIG3) is trained to a validation plateau, reached after 50-175 updates, and its
gates do not suppress outliers (rows ``cor2i`` and ``rmsnorm``). With the hinge loss ``max(0, 1 - z F)`` a prompt
whose margin ``z F`` is at least 1 sends no gradient at all: once (almost) every prompt clears the margin, no weight
moves, the gate included. This experiment trains the same stack for a fixed number of updates past that point,
recording the gates along the way, and asks whether the gate's outlier/clean contrast stops changing there.

Glossary (code name -> paper symbol):

================  ==================================================================================
``steps``         updates trained, the same for every seed (no early stopping): past FIG3's plateau
``every``         updates between two records (and a record before training)
``val_hinge``     per seed and record, the hinge loss on the seed's validation prompts ``(s, "val")``
                  (FIG3's early-stopping score; Definition 1 prompts of the training tasks)
``active``        per seed and record, the fraction of those prompts with ``z F < 1``: the prompts whose
                  hinge loss has a gradient
``log_ratio``     per seed, record and layer, ``log(median outlier gate / median clean gate)`` on test
                  prompts at FIG3's ``alpha`` (Corollary 2(i)'s measure; suppression is ``< log(1/M1)``)
``zero_step``     per seed, the first record with ``val_hinge <= zero`` (``-1``: never within ``steps``)
``rate``          per seed, layer 1: ``|change of log_ratio|`` per 100 updates, before ``zero_step`` (from the
                  first record) and after it (to the last record)
================  ==================================================================================

The row ``deep-gate-after-zero`` of :mod:`mambaicl.analysis.claims_open` was declared before the run.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ..analysis.corollaries import mechanism_report
from ..config import check_int, instance, integer, real
from ..data import test_prompts
from ..members import build_members, member_model
from ..seeding import numpy_stream
from ..train import train
from ..recipes import mechanism
from ..recipes import presets
from ..recipes.base import Preset, Result, resolve_device, resolve_seeds
from ..recipes.mechanism import validation_prompts

__all__ = ["DeepGatePreset", "FIG3", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS", "DeepGateResult",
           "rates_around_zero", "run", "report"]


@dataclass(frozen=True)
class DeepGatePreset(Preset):
    """FIG3's stack and step size, trained ``steps`` updates with a record every ``every``."""

    base: presets.MechanismPreset = instance(presets.MechanismPreset, factory=lambda: presets.FIG3)
    steps: int = integer(400, 1)  # FIG3's seeds stop after 50-175 updates: 400 leaves at least 225 after
    every: int = integer(25, 1)  # FIG3's validation checks are 25 updates apart
    n_gate: int = integer(256, 1)  # test prompts of the gate measure, per seed
    zero: float = real(1e-3, 0.0)  # a validation hinge at or below this counts as zero

    def _check(self) -> None:
        check_int("every", self.every, 1, self.steps)


#: Chapter 5's FIG3 (step size 0.03 as recorded, SGD on the hinge loss, batch 64), 400 updates, a record every 25
FIG3 = DeepGatePreset(name="fig3")
#: a seconds-long smoke test (tests); not a result of the book
TINY = DeepGatePreset(name="tiny", base=dataclasses.replace(
    presets.FIG3, model=dataclasses.replace(presets.FIG3.model, d_model=16), n_val=32),
                      steps=20, every=5, n_gate=32)
PRESETS = {"fig3": FIG3, "tiny": TINY}
DEFAULT_PRESET = "fig3"
DEFAULT_SEEDS = presets.MECHANISM_SEEDS


@dataclass
class DeepGateResult(Result):
    """The records of every seed and the per-seed rates around the step the validation hinge reaches zero."""

    preset: str
    seeds: list
    lr: float
    steps: list  # update counts of the records, 0 first
    val_hinge: list  # [s][record]
    active: list  # [s][record]
    log_ratio: list  # [s][record][layer]
    zero_step: list  # [s]: first record with val_hinge <= zero, -1 if none
    rate_before: list  # [s]: layer 1, |d log_ratio| per 100 updates before zero_step (nan if zero_step is -1 or 0)
    rate_after: list  # [s]: the same after zero_step (nan if zero_step is -1)
    active_at_zero: list  # [s]: active fraction at zero_step (nan if -1)

    def reached(self) -> list:
        """The indices of the seeds whose validation hinge reaches zero."""
        return [i for i, z in enumerate(self.zero_step) if z >= 0]

    def claims(self) -> dict:
        """The row ``deep-gate-after-zero`` (Chapter 12): per seed that reaches zero, layer 1's gate rate after minus
        half its rate before, judged by the exact sign test (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        from ..analysis.claims import OUTCOME, ClaimParts
        from ..analysis.stats import mean_se

        reached = self.reached()
        (z_m, z_se), (b_m, b_se), (a_m, a_se) = (mean_se([x[i] for i in reached])
                                                 for x in (self.zero_step, self.rate_before, self.rate_after))
        return {"deep-gate-after-zero": ClaimParts(
            f"validation hinge at zero after {z_m:.0f} ± {z_se:.0f} updates ({len(reached)} of {len(self.seeds)} "
            f"seeds); layer 1's log gate ratio moves {b_m:.3f} ± {b_se:.3f} per 100 updates before, {a_m:.3f} ± "
            f"{a_se:.3f} after; outcome: {OUTCOME}", parts=[self.contrast()])}

    def contrast(self) -> list:
        """Per seed that reaches zero (both rates finite): layer 1's rate after minus half its rate before, the
        row's contrast (below 0: the gate moves less than half as fast per update once the hinge is zero)."""
        return [self.rate_after[i] - 0.5 * self.rate_before[i] for i in self.reached()
                if math.isfinite(self.rate_after[i]) and math.isfinite(self.rate_before[i])]


def _record(model, val, pr) -> tuple:
    """Validation hinge, the active fraction, and every layer's log outlier/clean gate ratio of one member."""
    with torch.no_grad():
        margin = val.z.to(torch.get_default_dtype()) * model(val.P)  # (n_val,)
        hinge = float(torch.clamp(1 - margin, min=0).mean())
        active = float((margin < 1).double().mean())
        reps = mechanism_report(model, pr)
    ratios = [math.log(r.gate_outlier / r.gate_clean) if r.gate_outlier > 0 and r.gate_clean > 0 else math.nan
              for r in reps]
    return hinge, active, ratios


def rates_around_zero(steps, log_ratio, zero_step: int, layer: int = 0) -> tuple:
    """``(before, after)``: ``|log_ratio[zero] - log_ratio[0]|`` and ``|log_ratio[-1] - log_ratio[zero]|`` of
    ``layer`` per 100 updates (``nan`` where the interval is empty or the hinge never reaches zero)."""
    if zero_step < 0:
        return math.nan, math.nan
    k = list(steps).index(zero_step)
    before = (100 * abs(log_ratio[k][layer] - log_ratio[0][layer]) / steps[k]) if steps[k] > 0 else math.nan
    after = (100 * abs(log_ratio[-1][layer] - log_ratio[k][layer]) / (steps[-1] - steps[k])
             if steps[-1] > steps[k] else math.nan)
    return before, after


def run(preset: DeepGatePreset = FIG3, *, seeds=DEFAULT_SEEDS, device=None, progress: bool = True) -> DeepGateResult:
    """Train FIG3's stack for ``preset.steps`` updates, recording every ``preset.every``; see the module docstring."""
    seeds = resolve_seeds(seeds)
    dev = resolve_device(device)
    base = preset.base
    lr = base.searched_lr or base.train.lr
    group = mechanism.seed_members(base, seeds, lr)
    pat = group[0].data.pat
    data, test = mechanism.setting(base)
    val = [validation_prompts(pat, data, s, base.n_val, "mechanism validation").to(dev) for s in seeds]
    prs = [test_prompts(pat, test, mechanism.mechanism_tasks(base), preset.n_gate,
                        numpy_stream(s, "test/gate-training")).to(dev) for s in seeds]
    rec = {"steps": [], "val_hinge": [[] for _ in seeds], "active": [[] for _ in seeds],
           "log_ratio": [[] for _ in seeds]}

    def record(step: int, model_of) -> None:
        rec["steps"].append(step)
        for i in range(len(seeds)):
            h, a, r = _record(model_of(i), val[i], prs[i])
            rec["val_hinge"][i].append(h)
            rec["active"][i].append(a)
            rec["log_ratio"][i].append(r)

    start = build_members(group, dev)
    record(0, lambda i: member_model(start, i).eval())

    def callback(step: int, model) -> None:
        if (step + 1) % preset.every == 0:
            record(step + 1, lambda i: member_model(model, i))

    train(group, dataclasses.replace(base.train, steps=preset.steps), device=dev, progress=progress,
          record_every=preset.steps, callback=callback)
    zero = [next((t for t, h in zip(rec["steps"], hs) if h <= preset.zero), -1) for hs in rec["val_hinge"]]
    rates = [rates_around_zero(rec["steps"], rec["log_ratio"][i], z) for i, z in enumerate(zero)]
    at_zero = [rec["active"][i][rec["steps"].index(z)] if z >= 0 else math.nan for i, z in enumerate(zero)]
    return DeepGateResult(preset=preset.name, seeds=list(seeds), lr=float(lr), steps=rec["steps"],
                          val_hinge=rec["val_hinge"], active=rec["active"], log_ratio=rec["log_ratio"],
                          zero_step=zero, rate_before=[b for b, _ in rates], rate_after=[a for _, a in rates],
                          active_at_zero=at_zero)


def report(res: DeepGateResult, judged) -> tuple:
    """``(text, glued)`` for Chapter 12: where the validation hinge reaches zero, layer 1's gate rates before and
    after, the row ``deep-gate-after-zero``'s statistic (``judged``: its Judgement) and layer 1's final log ratio."""
    import numpy as np

    from ..analysis.stats import mean_se, sign_test

    n, reached = len(res.seeds), res.reached()
    m = judged.measured[0]
    st = sign_test(m.values, 0.0)
    (z_m, z_se), (b_m, b_se), (a_m, a_se), (act_m, act_se) = (
        mean_se([x[i] for i in reached]) for x in (res.zero_step, res.rate_before, res.rate_after, res.active_at_zero))
    end_ratio = [res.log_ratio[i][-1][0] for i in range(n)]
    end = f"{np.mean(end_ratio):+.2f} ± {np.std(end_ratio, ddof=1) / np.sqrt(n):.2f}"
    text = (f"step size {res.lr:g}; validation hinge at zero in {len(reached)} of {n} seeds, "
            f"after {z_m:.0f} ± {z_se:.0f} updates; active prompts there {act_m:.4f} ± {act_se:.4f}\n"
            f"layer 1, |change of log gate ratio| per 100 updates: before {b_m:.3f} ± {b_se:.3f}, "
            f"after {a_m:.3f} ± {a_se:.3f}\n"
            f"after - 1/2 before: {m.mean:.3f} [{m.low:.3f}, {m.high:.3f}] (mean [95 % t interval], {m.n_seeds} "
            f"seeds); below 0 in {st['n_neg']} of {st['n_pos'] + st['n_neg']} seeds, exact sign test p = "
            f"{st['p_below']:.2g}\n"
            f"layer 1's log gate ratio after 400 updates: {end} (suppression: below {np.log(1 / 6):+.2f})")
    held = judged.outcome == "reproduced"
    words = ("the gate stops learning where the hinge loss stops sending gradients: what it has not "
             "learned by then, it does not learn" if held else
             "the row's criterion is not met (" + ("; ".join(judged.parts_failing()) or "none") + "): the gate does "
             "not distinguishably slow down once the validation hinge is zero, so the loss's zero gradient does not "
             "explain why it does not suppress")
    return text, {"ch8_dg_sign": f"{st['n_neg']} of {st['n_pos'] + st['n_neg']}", "ch8_dg_p": f"{st['p_below']:.2g}",
                  "ch8_dg_reached": f"{len(reached)} of {n}", "ch8_dg_zero": f"{z_m:.0f} ± {z_se:.0f}",
                  "ch8_dg_active": f"{act_m:.4f} ± {act_se:.4f}", "ch8_dg_before": f"{b_m:.3f} ± {b_se:.3f}",
                  "ch8_dg_after": f"{a_m:.3f} ± {a_se:.3f}", "ch8_dg_end": end, "ch8_dg_words": words}
