"""Corollary 1-2 measurements: sums, ranks, gates of a trained one-layer model, deep-model probes."""
import dataclasses
import math

import pytest
import numpy as np
import torch

from mambaicl.seeding import numpy_stream, torch_generator
from mambaicl.analysis.corollaries import (
    SumRecorder,
    attention_sums,
    clean_gates_by_rank,
    mechanism_report,
    placement_cost,
    query_terms,
    split_gates,
)
from mambaicl.config import ConfigError, RunConfig
from mambaicl.data import all_tasks, make_patterns, training_tasks
from mambaicl.data import test_prompts as draw_test_prompts
from mambaicl.experiments.fig2 import FIG2
from mambaicl.experiments.mechanism import FIG3, MechanismPreset, log_steps
from mambaicl.models import build_model
from mambaicl.models.scan import paper_scan_terms
from reference_kernels import algorithm_1


@pytest.fixture(autouse=True)
def one_thread():
    """These tensors are small: one thread is faster than two on a shared machine (as in the chapters)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def small_setup(alpha=0.3, placement="R", n=16, seed=0):
    data = dataclasses.replace(FIG2.data, p_a=0.4)
    pat = make_patterns(data, torch.Generator().manual_seed(0))
    test = dataclasses.replace(FIG2.test, alpha=alpha, placement=placement)
    pr = draw_test_prompts(pat, test, all_tasks(data.M1), n, np.random.default_rng(seed))
    return data, pat, test, pr


def test_attention_sums_match_a_loop():
    _, _, _, pr = small_setup()
    att = torch.randn(pr.P.shape[:2], generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    same, other = attention_sums(att, pr.relevant)
    for b in range(att.shape[0]):
        s = sum(att[b, i] for i in range(att.shape[1] - 1) if pr.relevant[b, i] == pr.relevant[b, -1])
        o = sum(att[b, i] for i in range(att.shape[1] - 1) if pr.relevant[b, i] != pr.relevant[b, -1])
        assert abs(same[b] - s) < 1e-12 and abs(other[b] - o) < 1e-12


def test_clean_gates_by_rank_matches_a_loop():
    _, _, _, pr = small_setup(alpha=0.5)
    G = torch.rand(pr.P.shape[:2], generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ranks = clean_gates_by_rank(G, pr.outlier, J=20)
    for b in range(G.shape[0]):
        clean_from_query = [i for i in range(pr.outlier.shape[1] - 1, -1, -1) if not pr.outlier[b, i]]
        for j in range(20):
            if j < len(clean_from_query):
                assert ranks[b, j] == G[b, clean_from_query[j]]
            else:
                assert math.isnan(ranks[b, j])
    g_out, g_clean = split_gates(G, pr.outlier)
    assert g_out.numel() + g_clean.numel() == pr.outlier.numel()


def independent_gates(w, P):
    """G_{i,l+1}(w) of Eq. (3) with Python floats: sigma(w^T p_i) prod_{j>i} (1 - sigma(w^T p_j))."""
    sig = lambda t: 1.0 / (1.0 + math.exp(-t))  # noqa: E731
    out = []
    for prompt in P.tolist():
        logits = [sum(wk * pk for wk, pk in zip(w, p)) for p in prompt]
        row = []
        for i in range(len(prompt)):
            g = sig(logits[i])
            for j in range(i + 1, len(prompt)):
                g *= 1.0 - sig(logits[j])
            row.append(g)
        out.append(row)
    return torch.tensor(out, dtype=torch.float64)


def test_trained_one_layer_gates_match_an_independent_computation_from_saved_w(tmp_path):
    data, pat, _, pr = small_setup(n=8)
    cfg = RunConfig(lr=0.3, batch_size=32, steps=20)
    model = build_model("mamba", data.d, generator=torch.Generator().manual_seed(1))
    algorithm_1(model, pat, data, training_tasks(data.M1), numpy_stream(2, "train"), steps=cfg.steps,
                batch_size=cfg.batch_size, lr=cfg.lr)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    w = torch.load(tmp_path / "model.pt")["w"].tolist()
    reported = query_terms(model, pr.P)[0][1]
    assert (reported - independent_gates(w, pr.P)).abs().max() < 1e-6


def test_deep_query_terms_read_the_label_channel_of_the_first_layer():
    d = 30
    model = build_model("mamba", d, n_layers=2, d_model=40, generator=torch.Generator().manual_seed(0)).double()
    _, _, _, pr = small_setup(n=4)
    terms = query_terms(model, pr.P)
    assert len(terms) == 2
    u = model.norms[0](pr.P @ model.embed.T)
    mixer = model.mixers[0]
    scores, G = paper_scan_terms(u, mixer.W_B, mixer.W_C, mixer.W)
    assert (terms[0][0] - scores[:, 0, -1]).abs().max() < 1e-12
    assert (terms[0][1] - G[:, 0, -1, :, d]).abs().max() < 1e-12
    reps = mechanism_report(model, pr, J=3)
    assert len(reps) == 2 and len(reps[0].rank) == 3 and len(reps[0].decay) == 2


def test_linear_transformer_has_no_gate():
    model = build_model("linear", 30, n_layers=1, d_model=40, generator=torch.Generator().manual_seed(0)).double()
    _, _, _, pr = small_setup(n=4)
    (att, G), = query_terms(model, pr.P)
    assert G is None and att.shape == pr.P.shape[:2]


def test_placement_cost_moves_the_first_clean_example_away_under_cq():
    data, pat, test, _ = small_setup()
    model = build_model("mamba", 30, n_layers=1, d_model=40, generator=torch.Generator().manual_seed(0)).double()
    cost = placement_cost(model, pat, test, all_tasks(data.M1), n=64, seed=0)
    assert all(0 <= c["error"] <= 1 for c in cost.values())
    assert set(cost) == {"FQ", "R", "CQ"}
    assert cost["FQ"]["first_clean_distance"] == 1.0
    assert cost["CQ"]["first_clean_distance"] > cost["R"]["first_clean_distance"]


def test_patterns_cast():
    _, pat, _, _ = small_setup()
    assert pat.to(torch.float32).mu.dtype == torch.float32


@pytest.mark.parametrize("kw,name", [({"p_a": 1.0}, "p_a"), ({"alpha": -0.1}, "alpha"), ({"n_test": 0}, "n_test"),
                                     ({"J": 0}, "J"), ({"record_steps": (0, 5)}, "record_steps"),
                                     ({"model": "three layers"}, "model")])
def test_mechanism_preset_validation(kw, name):
    with pytest.raises(ConfigError, match=rf"^{name}(\[0\])? must be "):
        MechanismPreset(name="x", **kw)


def test_fig3_preset_is_the_papers_three_layer_mamba():
    assert FIG3.model.kind == "mamba" and FIG3.model.n_layers == 3 and FIG3.p_a == 0.4


def test_log_steps_and_recorder_records_at_those_steps():
    steps = log_steps(600, 12)
    assert steps[0] == 1 and steps[-1] == 600 and list(steps) == sorted(set(steps))
    ratios = [b / a for a, b in zip(steps[:-1], steps[1:])]
    assert max(ratios) < 3  # no big gap: log-spaced
    data, pat, _, pr = small_setup(n=8)
    model = build_model("mamba", data.d, generator=torch.Generator().manual_seed(1))
    rec = SumRecorder(pr, steps=(1, 3, 7))
    rec.record(0, model)
    algorithm_1(model, pat, data, training_tasks(data.M1), numpy_stream(0, "train"), steps=8, batch_size=8, lr=0.1,
                callback=rec.callback)
    assert rec.steps == [0, 1, 3, 7]
    with pytest.raises(ConfigError, match="^give exactly one of every"):
        SumRecorder(pr)


def test_explorer_static_frame_and_widget():
    import matplotlib

    matplotlib.use("Agg")
    pytest.importorskip("ipywidgets")
    from mambaicl.viz.explorer import defaults, make_explorer, static_explorer
    from mambaicl.models import OneLayerMamba

    data, pat, test, _ = small_setup()
    model = OneLayerMamba(data.d, 31, generator=torch.Generator().manual_seed(0)).double()
    fig = static_explorer(model, pat, test, all_tasks(data.M1))
    assert len(fig.axes) == 2
    assert defaults(test)["alpha"] == test.alpha
    widget = make_explorer(model, pat, test, all_tasks(data.M1))
    widget.children[1].children[0].value = "CQ"  # placement dropdown: redraws without error
    with pytest.raises(ValueError, match=r"^index must lie in \[0, 32\); got 99"):
        static_explorer(model, pat, test, all_tasks(data.M1), index=99)


# ---------------------------------------------------------------- the experiment: seeds, stacks, summaries


def _tiny(preset, steps=12, **kw):
    from mambaicl.experiments.mechanism import log_steps as ls

    train = dataclasses.replace(preset.train, steps=steps)
    # fixed steps at train.lr, no search and no recorded choice (the fitting protocol: test_deep_icl.py)
    kw = {"lrs": (), "searched_lr": 0.0, "val_every": 0, "n_norms": 0, **kw}
    return dataclasses.replace(preset, name="tiny", train=train, record_steps=ls(steps, 5), n_test=64, n_sums=16,
                               **kw)


@pytest.mark.parametrize("deep", [False, True])
def test_seed_runs_record_each_seed_as_if_trained_alone(deep):
    from mambaicl.experiments.mechanism import FIG3, ONE_LAYER, seed_runs

    base = dataclasses.replace(FIG3, model=dataclasses.replace(FIG3.model, d_model=16, n_layers=2)) if deep else ONE_LAYER
    preset = _tiny(base, steps=30 if not deep else 6)
    stacked = seed_runs(preset, (3, 5))
    for i, s in enumerate((3, 5)):
        alone = seed_runs(preset, (s,))[0]
        for name, p in alone.model.named_parameters():
            q = dict(stacked[i].model.named_parameters())[name]
            assert float((p - q).detach().abs().max()) <= 1e-6 * max(1.0, float(p.detach().abs().max())), name
        assert stacked[i].recorder.steps == alone.recorder.steps == [0, *preset.steps_to_record]
        for a, b in zip(stacked[i].recorder.same, alone.recorder.same):
            assert abs(a[0] - b[0]) < 1e-6
        assert stacked[i].history.loss_of(i)[-1] == pytest.approx(alone.history.loss_of(0)[-1], abs=1e-6)


def test_run_reports_every_layer_group_and_placement_and_is_byte_identical():
    from mambaicl.experiments.mechanism import FIG3, run

    preset = _tiny(dataclasses.replace(FIG3, model=dataclasses.replace(FIG3.model, d_model=32)), steps=6,
                   n_group=8, n_placement=8, J=3)
    res = run(preset, seeds=(0, 1), progress=False)
    assert len(res.layers) == 3 and len(res.test_error) == 2
    assert set(res.errors_by_group) == {"tiny"}  # {model: {group: [per seed]}}
    assert set(res.groups) == {"training", "reversed", "distance 2", "distance 3"}
    assert set(res.placement) == {"FQ", "R", "CQ"} and len(res.placement["FQ"]["error"]) == 2
    assert res.sums["steps"][0] == 0 and len(res.sums["same"][0]) == len(res.sums["steps"])
    steps, mean, se = res.sum_curve(2, "same")
    assert len(steps) == len(mean) == len(se)
    assert abs(mean[-1] - (res.sums["same"][0][-1][2] + res.sums["same"][1][-1][2]) / 2) < 1e-12
    ratio = res.per_seed(0, "other_over_same")
    assert all(r == abs(o) / s for r, s, o in zip(ratio, res.layers[0]["same"], res.layers[0]["other"]) if s > 0)
    assert res.to_json() == run(preset, seeds=(0, 1), progress=False).to_json()


def test_decay_summary_of_a_geometric_sequence():
    from mambaicl.experiments.mechanism import decay_summary

    d = decay_summary([0.4 * 0.6 ** j for j in range(6)])
    assert abs(d["factor"] - 0.6) < 1e-12 and abs(d["min_ratio"] - 0.6) < 1e-12 and abs(d["r2"] - 1) < 1e-12
    assert abs(d["constant"] - 1.0) < 1e-12  # 0.6 > 0.5: G_h(j) 2^(j-1) grows, its minimum is at j = 1
    fast = decay_summary([0.25 ** j for j in range(4)])
    assert abs(fast["constant"] - 0.5 ** 3) < 1e-12  # faster than 1/2: the constant shrinks with J
    assert math.isnan(decay_summary([0.3, float("nan")])["factor"])


def test_group_report_sums_are_per_group():
    from mambaicl.analysis.corollaries import group_report
    from mambaicl.data import task_groups

    data, pat, test, _ = small_setup()
    model = build_model("mamba", data.d, generator=torch.Generator().manual_seed(1))
    algorithm_1(model, pat, data, training_tasks(data.M1), numpy_stream(0, "train"), steps=30, batch_size=32, lr=0.3)
    rep = group_report(model, pat, test, 40, 9, "g")
    # the training group's sums, recomputed from its own prompts with a loop over examples
    tasks = all_tasks(data.M1)
    names = task_groups(tasks, data.M1)
    pr = draw_test_prompts(pat, test, tasks[torch.tensor([n == "training" for n in names])], 40,
                           numpy_stream(9, "g/group=training"))  # the training group's own stream
    att = model.attention(pr.P).detach()
    same = [sum(float(att[b, i]) for i in range(att.shape[1] - 1) if pr.relevant[b, i] == pr.relevant[b, -1])
            for b in range(40)]
    assert abs(sum(same) / 40 - rep["training"]["same"][0]) < 1e-10


def test_mechanism_groups_select_the_tasks_and_are_validated():
    from mambaicl.data import task_groups
    from mambaicl.experiments.mechanism import FIG3, mechanism_tasks

    tasks = mechanism_tasks(dataclasses.replace(FIG3, mechanism_groups=("training", "reversed")))
    assert set(task_groups(tasks, 6)) == {"training", "reversed"} and len(tasks) == 12
    assert len(mechanism_tasks(dataclasses.replace(FIG3, mechanism_groups=()))) == 30
    with pytest.raises(ValueError, match=r"^mechanism_groups\[0\] must be one of .*; got 'distance 9'"):
        MechanismPreset(name="x", mechanism_groups=("distance 9",))


def test_run_measures_the_mechanism_on_the_chosen_groups_and_finds_peaks():
    from mambaicl.experiments.mechanism import ONE_LAYER, run

    preset = _tiny(ONE_LAYER, steps=40, mechanism_groups=("training",), n_placement=0, n_group=0)
    res = run(preset, seeds=(0, 1), progress=False)
    tr = all_tasks(6)[torch.tensor([(b - a) % 6 == 1 for a, b in all_tasks(6).tolist()])]
    assert {tuple(t) for t in tr[res.prompts.task].tolist()} <= {tuple(t) for t in tr.tolist()}
    step, comp = res.peak(0, "same")
    steps, mean, _ = res.sum_curve(0, "same")
    assert step == steps[mean.index(max(mean))] and comp.n_seeds == 2
    assert res.errors_by_group == {} and res.placement == {}


def test_viz_mechanism_draws_every_figure(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mambaicl.experiments.mechanism import ONE_LAYER, run
    from mambaicl.viz import mechanism as vm

    res = run(_tiny(ONE_LAYER, steps=20, n_group=16, n_placement=16), seeds=(0, 1), progress=False)
    fig, axs = plt.subplots(2, 3)
    vm.plot_sums(axs[0, 0], res, 0, "sums")
    k = vm.typical_prompt(res.prompts.outlier, 0.3)
    vm.plot_gate_example(axs[0, 1], res, 0, k)
    vm.plot_rank(axs[0, 2], res, 0, "rank")
    vm.plot_group_errors(axs[1, 0], {"a": res, "b": res}, {"b": ("mamba", "//")})
    vm.plot_placements(axs[1, 1], {"a": res})
    assert axs[0, 1].get_legend() is not None and axs[1, 0].get_legend() is not None  # every colour has a legend
    assert all(float(t).is_integer() for t in axs[0, 2].get_xticks())  # integer j axis
    fig.savefig(tmp_path / "f.png")
    plt.close(fig)
    count = res.prompts.outlier.sum(1).double()
    assert abs(count[k] - 0.3 * 20) == (count - 0.3 * 20).abs().min()
    assert vm.mean_se_text([0.1, 0.3]) == "0.200 ± 0.100 (2 seeds)"
    assert vm.mean_se_text([0.5], 2, seeds=False) == "0.50 ± 0.00"
    table = vm.layer_table(res)
    assert table.splitlines()[1].split()[0] == "1"  # layers counted from 1


def test_analysis_parameters_are_checked_by_the_config_kit():
    from mambaicl.analysis.corollaries import clean_gates_by_rank
    from mambaicl.analysis.lemmas import pad

    _, _, _, pr = small_setup(n=4)
    with pytest.raises(ConfigError, match=r"^every must be an integer in \[1, inf\]; got 0$"):
        SumRecorder(pr, every=0)
    with pytest.raises(ConfigError, match=r"^steps\[1\] must be an integer in \[0, inf\]; got -1$"):
        SumRecorder(pr, steps=(1, -1))
    with pytest.raises(ConfigError, match=r"^J must be an integer in \[1, inf\]; got 0$"):
        clean_gates_by_rank(torch.ones(2, 4), torch.zeros(2, 3, dtype=torch.bool), 0)
    with pytest.raises(ConfigError, match=r"^n must be an integer in \[3, inf\]; got 2$"):
        pad(torch.ones(2, 3), 2)
    assert pad(torch.ones(2, 3), 5).shape == (2, 5)


def test_median_range_text_is_the_median_and_the_extremes_of_the_values():
    from mambaicl.viz.mechanism import median_range_text

    assert median_range_text([150, 50, 75, 100], "g") == "87.5 [50, 150]"  # even count: the two middle values' mean
    assert median_range_text([0.49, 0.93, 0.77]) == "0.77 [0.49, 0.93]"
    assert median_range_text([2.0], ".1e") == "2.0e+00 [2.0e+00, 2.0e+00]"
