"""RMSNorm's role tested by training: the three-layer Mamba of Figure 3 with normalisation after the first layer only.

Glossary (code name -> paper symbol):

====================  ==================================================================================
``AFTER_FIRST``       :data:`mambaicl.experiments.presets.FIG3` with ``norm="after_first"``: the first
                      layer's gate reads the raw token (an additive outlier makes it longer), the other
                      layers read RMSNorm's output, as in FIG3; its own step-size search and stopping
``gate_ratio``        per layer and seed, median outlier gate / median clean gate (Corollary 2(i))
``suppress``          ``gate_ratio < 1/M1`` (the rows ``cor2i`` and ``rmsnorm``'s measure)
``reversed_error``    test error on the reversed tasks (the in-context check of the row ``deep-icl``)
====================  ==================================================================================

The row ``rmsnorm`` (Chapter 5) explains the three-layer stack's gates by the normalisation; this experiment
removes the normalisation where it would matter first and asks whether layer 1's gate then suppresses outliers
in more seeds than FIG3's (row ``rmsnorm-causal`` of :mod:`mambaicl.analysis.claims_open`, declared before the
run). FIG3 is read through :func:`mambaicl.experiments.store.stored` (the call Chapter 5 makes), so a build
that runs both chapters can train it once.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import instance
from ..analysis.verdicts import M1_PAPER
from . import get as experiment
from ..recipes import presets
from ..recipes.base import Preset, Result, internal, resolve_seeds
from .store import stored

__all__ = ["RmsnormCausalPreset", "AFTER_FIRST", "FIG3", "TINY", "PRESETS", "DEFAULT_PRESET", "DEFAULT_SEEDS",
           "RmsnormCausalResult", "run", "report"]

AFTER_FIRST = dataclasses.replace(presets.FIG3, name="fig3_after_first",
                                  model=dataclasses.replace(presets.FIG3.model, norm="after_first"),
                                  n_placement=0, searched_lr=0.0)


@dataclass(frozen=True)
class RmsnormCausalPreset(Preset):
    """The stack without the first layer's normalisation and the reference stack (FIG3)."""

    after_first: presets.MechanismPreset = instance(presets.MechanismPreset, factory=lambda: AFTER_FIRST)
    reference: presets.MechanismPreset = instance(presets.MechanismPreset, factory=lambda: presets.FIG3)


FIG3 = RmsnormCausalPreset(name="fig3")
_TINY_TRAIN = dataclasses.replace(presets.FIG3.train, steps=20)
#: a seconds-long smoke test (tests); not a result of the book
TINY = RmsnormCausalPreset(
    name="tiny",
    after_first=dataclasses.replace(AFTER_FIRST, model=dataclasses.replace(AFTER_FIRST.model, d_model=16),
                                    train=_TINY_TRAIN, lrs=(), val_every=0, n_test=64, n_sums=16, n_group=32,
                                    n_norms=0, record_steps=(20,)),
    reference=dataclasses.replace(presets.FIG3, model=dataclasses.replace(presets.FIG3.model, d_model=16),
                                  train=_TINY_TRAIN, lrs=(), searched_lr=0.0, val_every=0, n_test=64, n_sums=16,
                                  n_group=32, n_norms=0, n_placement=0, record_steps=(20,)))
PRESETS = {"fig3": FIG3, "tiny": TINY}
DEFAULT_PRESET = "fig3"
DEFAULT_SEEDS = presets.MECHANISM_SEEDS


@dataclass
class RmsnormCausalResult(Result):
    """Per layer and seed the gate ratios of both stacks, the suppression indicators, reversed-task errors."""

    preset: str
    seeds: list
    gate_ratio: dict  # {"after_first" | "rms": [layer][s]}
    suppress: dict  # {"after_first" | "rms": [layer][s]} 1.0 / 0.0
    reversed_error: dict  # {"after_first" | "rms": [s]}
    n_group: int
    lr: dict  # step size each stack trained with
    test_error: dict  # {"after_first" | "rms": [s]} (all tasks, alpha of the preset)
    results: dict = internal()  # the two MechanismResults

    def claims(self) -> dict:
        """The row ``rmsnorm-causal`` (Chapter 12): per seed, layer 1's log gate ratio without its norm minus with
        it (a continuous paired contrast, judged by the exact sign test), and the reversed-task error without it
        (:class:`~mambaicl.analysis.claims.ClaimParts`)."""
        import math

        from ..analysis.claims import OUTCOME, ClaimParts
        from ..analysis.stats import error_mean_se

        n, af, rms = len(self.seeds), self.suppress["after_first"][0], self.suppress["rms"][0]
        contrast = [math.log(a) - math.log(b) for a, b in zip(self.gate_ratio["after_first"][0], self.gate_ratio["rms"][0])]
        rev_m, rev_se = error_mean_se(self.reversed_error["after_first"], self.n_group)
        return {"rmsnorm-causal": ClaimParts(
            f"layer 1's log gate ratio lower without its norm in {sum(c < 0 for c in contrast)}/{n} seeds; "
            f"suppressing (ratio < 1/6) in {int(sum(af))}/{n} without, {int(sum(rms))}/{n} with it; "
            f"reversed-task error {rev_m:.3f} ± {rev_se:.3f}; outcome: {OUTCOME}",
            parts=[contrast, self.reversed_error["after_first"]], n_prompts=None)}


def run(preset: RmsnormCausalPreset = FIG3, *, seeds=DEFAULT_SEEDS, device=None,
        progress: bool = True) -> RmsnormCausalResult:
    """Train the after_first stack (and read FIG3 from the store, or train it) for every seed; compare their gates."""
    seeds = resolve_seeds(seeds)
    mechanism = experiment("mechanism")  # the mechanism experiment's result, composed through the registry and store
    res = {"after_first": mechanism.run(preset.after_first, seeds=seeds, device=device, progress=progress),
           "rms": stored(mechanism.run, preset.reference, seeds=seeds, progress=False)}
    ratio = {k: [r.per_seed(layer, "gate_ratio") for layer in range(len(r.layers))] for k, r in res.items()}
    return RmsnormCausalResult(
        preset=preset.name, seeds=list(seeds), gate_ratio=ratio,
        suppress={k: [[float(v < 1 / M1_PAPER) for v in row] for row in rows] for k, rows in ratio.items()},
        reversed_error={k: list(r.groups["reversed"]) for k, r in res.items()},
        n_group=preset.after_first.n_group, lr={k: r.lr for k, r in res.items()},
        test_error={k: list(r.test_error) for k, r in res.items()}, results=res)


def report(res: RmsnormCausalResult, judged) -> tuple:
    """``(text, glued)`` for Chapter 12: per stack its step size, reversed-task error, kept checks and each layer's
    gate ratio (median [min, max] over seeds) with the seeds suppressing; the glued numbers and words of the row
    ``rmsnorm-causal`` (``judged``: its Judgement)."""
    import numpy as np

    from ..analysis.stats import error_mean_se
    from ..analysis.text import median_range_text as median_range  # per-seed values: median [min, max]

    n = len(res.seeds)
    lines = ["per layer: median [min, max] over seeds of the seed's median outlier/clean gate ratio; seeds suppressing"]
    for k, label in (("rms", "RMSNorm in every layer (FIG3)"), ("after_first", "no norm before layer 1")):
        m, se = error_mean_se(res.reversed_error[k], res.n_group)
        lines.append(f"{label}: step size {res.lr[k]:g}; reversed-task error {m:.3f} ± {se:.3f}; kept checks at "
                     f"{median_range(res.results[k].best_step, 'g')} updates")
        for layer in range(3):
            lines.append(f"   layer {layer + 1}: outlier/clean gate {median_range(res.gate_ratio[k][layer], '.2e')}"
                         f"   suppressing {int(sum(res.suppress[k][layer]))}/{n}")
    rev_m, rev_se = error_mean_se(res.reversed_error["after_first"], res.n_group)
    import math

    from ..analysis.stats import sign_test

    held = judged.outcome == "reproduced"
    contrast = judged.measured[0].values  # per seed: log gate ratio without layer 1's norm - with it
    st = sign_test(contrast, 0.0)
    words = ("the explanation survives the causal test: without its normalisation layer 1's gate "
             "suppresses outliers more strongly, by the exact sign test" if held else
             "the explanation does not survive the causal test as declared (not holding: "
             + ("; ".join(judged.parts_failing()) or "none") + "): removing the first layer's normalisation does "
             "not make its gate suppress outliers distinguishably more strongly")
    lines.append(f"layer 1, log gate ratio without its norm - with it: median {float(np.median(contrast)):+.2f}; "
                 f"lower without it in {st['n_neg']} of {st['n_pos'] + st['n_neg']} seeds, exact sign test p = "
                 f"{st['p_below']:.2g}; geometric-mean ratio {math.exp(float(np.mean(contrast))):.2f}")
    return "\n".join(lines), {
        "ch8_rc_af": f"{int(sum(res.suppress['after_first'][0]))} of {n}",
        "ch8_rc_rms": f"{int(sum(res.suppress['rms'][0]))} of {n}",
        "ch8_rc_rev": f"{rev_m:.3f} ± {rev_se:.3f}",
        "ch8_rc_med_af": median_range(res.gate_ratio["after_first"][0]),
        "ch8_rc_med_rms": median_range(res.gate_ratio["rms"][0]),
        "ch8_fig3_checks": median_range(res.results["rms"].best_step, "g"),
        "ch8_rc_lower": f"{st['n_neg']} of {st['n_pos'] + st['n_neg']}", "ch8_rc_p": f"{st['p_below']:.2g}",
        "ch8_rc_words": words}
