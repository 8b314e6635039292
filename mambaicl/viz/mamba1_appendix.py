"""The Mamba-1 appendix's numbers: the three forms of S6 compared, the trained Mamba-1 stack's results by task
group and their words, and the exercise that compares the S6 gate with the paper's. Each function prints what the
appendix's cell shows and returns the values it glues (``{glue name: text}``); the appendix only glues them."""
from __future__ import annotations

import torch

from ..analysis.stats import interval
from ..analysis.text import GROUP_ORDER, mean_se_text
from ..models.mamba1 import selective_scan_s6, selective_scan_s6_kernel, selective_scan_s6_seq
from ..seeding import torch_generator

__all__ = ["s6_form_gaps", "print_mamba1", "mamba1_numbers", "source_text", "exercise1"]


def s6_form_gaps() -> dict:
    """The fast and the attention-like form of S6 against the plain loop on one random input (float32)."""
    g = torch_generator(0, "appendix/s6")
    x = torch.randn(2, 21, 8, generator=g)
    dt = torch.nn.functional.softplus(torch.randn(2, 21, 8, generator=g))
    A = -4 * torch.rand(8, 4, generator=g)
    Bm, Cm, Dv = torch.randn(2, 21, 4, generator=g), torch.randn(2, 21, 4, generator=g), torch.ones(8)
    y_ref = selective_scan_s6_seq(x, dt, A, Bm, Cm, Dv)
    gaps = {name: float((f(x, dt, A, Bm, Cm, Dv) - y_ref).abs().max())
            for name, f in (("fast", selective_scan_s6), ("attention-like", selective_scan_s6_kernel))}
    for name, gap in gaps.items():
        print(f"{name:>14s} form vs the loop: max |difference| {gap:.0e} (float32)")
    assert max(gaps.values()) < 1e-5
    return {"app_s6_gap": f"{max(gaps.values()):.0e}"}


def print_mamba1(res, alpha: float) -> None:
    """The trained stack's step size, stopping, validation loss, test error (at test outlier fraction ``alpha``) and
    errors by task group."""
    n_g, n_test = res.config["n_group"], res.config["n_test"]
    print(f"step size {res.lr:g}: the search over {res.search['lrs']} on held-out seeds {res.search['seeds']} "
          "(recorded in the preset, searched_lr)")
    print(f"stopped after {res.stopped} updates; kept checks {res.best_step}; validation loss "
          f"{mean_se_text(res.val_loss, 3)}")
    print(f"test error at alpha = {alpha}: {mean_se_text(res.test_error, 3, n_test)}")
    for g in GROUP_ORDER:
        print(f"  {g:>10s}: {mean_se_text(res.groups[g], 3, n_g)}")


def mamba1_numbers(res, seeds) -> dict:
    """Whether the stack learns in context (reversed tasks) or memorises (training tasks), in numbers and words."""
    n_g, n_test = res.config["n_group"], res.config["n_test"]
    rev, tr = res.groups["reversed"], res.groups["training"]
    far = [sum(v) / 2 for v in zip(res.groups["distance 2"], res.groups["distance 3"])]
    learns = interval(rev, n_g).high < 0.25
    memorises = interval(rev, n_g).low > 0.5 and interval(tr, n_g).high < 0.25
    return {
        "app_m1_steps": str(max(res.best_step)), "app_m1_stopped": str(res.stopped), "app_m1_lr": f"{res.lr:g}",
        "app_m1_n_seeds": str(len(seeds)),
        "app_m1_err": mean_se_text(res.test_error, 3, n_test, seeds=False),
        "app_m1_loss": mean_se_text(res.val_loss, 3, seeds=False),
        "app_m1_rev": mean_se_text(rev, 3, n_g, seeds=False),
        "app_m1_tr": mean_se_text(tr, 3, n_g, seeds=False),
        "app_m1_far": mean_se_text(far, 3, n_g, seeds=False),
        "app_m1_words": "It learns in context: it is right on the reversed tasks." if learns else (
            "It does not learn in context: it is right on the training tasks and wrong on their reversals, the "
            "signature of a model that memorised which pattern goes with which label, and on the tasks whose pattern "
            "pairs it never saw it is at chance. Under the chapter's budget no Mamba-1 stack we trained learns in "
            "context, so no mechanism of in-context learning is read off it." if memorises else
            "It is not shown to learn in context (its reversed-task error is not below 0.25), so no mechanism of "
            "in-context learning is read off it.")}


def source_text(read_back: bool) -> dict:
    """Where the appendix's Mamba-1 seeds came from (the result store or a training here)."""
    return {"app_m1_source": "the ten Mamba-1 seeds read back from the result store, where the mechanism chapter put "
            "them; training them here, as a reader who opens this page first does, adds about as much as that chapter "
            "spends on them" if read_back else "the ten Mamba-1 seeds trained here; the mechanism chapter reads them "
            "back from the result store"}


def exercise1() -> None:
    """Exercise 1, numerically: one channel, one state, A = -1, Delta = softplus(logit); the paper's gate against
    S6's (Euler input factor Delta_s) and the zero-order hold's (1 - e^{-Delta_s})."""
    g = torch_generator(1, "appendix/exercise")
    logit = torch.randn(1, 9, 1, generator=g, dtype=torch.float64)
    delta = torch.nn.functional.softplus(logit)  # (1, L, 1)
    sigma = torch.sigmoid(logit)[0, :, 0]  # (L,)
    t = 8  # the reading position (0-based: the last of 9 tokens)
    G_paper = torch.stack([sigma[s] * torch.prod(1 - sigma[s + 1 : t + 1]) for s in range(t + 1)])
    decay = torch.exp(-(torch.cumsum(delta[0, :, 0], 0)[t] - torch.cumsum(delta[0, :, 0], 0)))  # e^{-sum_{r>s} Delta_r}
    G_s6 = delta[0, :, 0] * decay  # Euler input factor Delta_s
    G_zoh = (1 - torch.exp(-delta[0, :, 0])) * decay  # zero-order hold input factor 1 - e^{-Delta_s}
    print("paper G / S6 gate   :", [f"{v:.3f}" for v in (G_paper / G_s6).tolist()])
    print("paper G - ZOH gate  :", f"{float((G_paper - G_zoh).abs().max()):.1e}")
    assert float((G_paper - G_zoh).abs().max()) < 1e-12  # equal with the zero-order hold
    assert torch.allclose(G_paper / G_s6, sigma[: t + 1] / delta[0, :, 0])  # differ only by sigma_s / Delta_s
