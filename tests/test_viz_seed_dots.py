"""Robustness figures draw one dot per seed (a failing seed shows as itself, not as a wider band)."""
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from mambaicl.viz import beyond as vb  # noqa: E402


def test_gate_family_figure_has_one_dot_per_seed_at_alpha_08():
    alphas = [0.0, 0.4, 0.8]
    per_seed = {"mamba": [[0.0, 0.01, 0.02], [0.0, 0.01, 0.3], [0.0, 0.02, 0.03]],
                "retnet": [[0.0, 0.2, 0.6], [0.0, 0.3, 0.7], [0.0, 0.2, 0.65]]}
    res = SimpleNamespace(alphas=alphas, families=list(per_seed), errors_per_seed=per_seed,
                          errors={f: [sum(r[i] for r in v) / 3 for i in range(3)] for f, v in per_seed.items()},
                          errors_se={f: [0.01] * 3 for f in per_seed})
    fig, ax = plt.subplots()
    vb.plot_family_errors(ax, res)
    dots = [c.get_offsets() for c in ax.collections if c.get_offsets().shape[0] == 3]
    assert len(dots) == 2  # one scatter per family, three seeds each
    assert sorted(dots[0][:, 1].tolist()) == [0.02, 0.03, 0.3]  # mamba's seeds at alpha = 0.8, the failing one too
    assert all(abs(x - 0.8) < 0.2 for d in dots for x in d[:, 0])
    plt.close(fig)


def test_multiclass_and_bound_figures_draw_every_seed():
    from mambaicl.viz import open_questions as vo

    alphas = [0.0, 0.4, 0.8]
    per = {"mamba": {"2": [[0.1, 0.1, 0.2], [0.1, 0.2, 0.9]]}, "linear": {"2": [[0.0, 0.3, 0.9], [0.0, 0.4, 0.8]]}}
    mean = {k: {"2": [sum(r[i] for r in v["2"]) / 2 for i in range(3)]} for k, v in per.items()}
    res = SimpleNamespace(alphas=alphas, errors_all=mean, errors_all_per_seed=per, independent_prediction=mean)
    fig, ax = plt.subplots()
    vb.plot_multiclass(ax, res, 2)
    dots = [c.get_offsets() for c in ax.collections if c.get_offsets().shape[0] == 6]
    assert len(dots) == 2 and 0.9 in dots[0][:, 1].tolist()  # the failing seed of Mamba at alpha = 0.8 is drawn
    plt.close(fig)
    fig, axes = plt.subplots(1, 1)
    errors = {"all": [[0.1, 0.2, 0.3], [0.1, 0.2, 0.6]]}  # [seed][alpha]
    vo.plot_bound_by_group([axes], alphas, errors, lambda g, a: 0.05, order=("all",))
    pts = [c.get_offsets() for c in axes.collections if c.get_offsets().shape[0] == 6]
    assert len(pts) == 1 and sorted(pts[0][:, 1].tolist()) == [0.1, 0.1, 0.2, 0.2, 0.3, 0.6]
    plt.close(fig)
