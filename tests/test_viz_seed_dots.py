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
