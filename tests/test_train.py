"""The one training engine: Algorithm 1 step, determinism, records, non-finite stop, checks; and a member of a
batch equals that member trained alone, for every model kind, with members differing in seed, step size and data."""
import dataclasses

import pytest
import torch

from mambaicl import OneLayerMamba
from mambaicl.config import ConfigError, DataConfig, TrainConfig
from mambaicl.data import make_patterns, training_tasks
from mambaicl.models import build_model
from mambaicl.seeding import numpy_stream, numpy_streams, torch_generator, torch_generators
from reference_kernels import algorithm_1
from mambaicl.train import ALGORITHM_1, Member, SampledData, hinge_loss, logistic_loss, squared_loss, train


def sampler(d=4, l=6):
    def sample_batch(batch_size, stream):
        P = torch.from_numpy(stream.standard_normal((batch_size, l + 1, d + 1)))  # a NumPy prompt stream
        P[:, :, -1] = torch.sign(P[:, :, -1])
        P[:, -1, -1] = 0
        z = torch.where(P[:, -1, 0] > 0, 1.0, -1.0).double()
        return P, z
    return sample_batch


def test_losses_against_their_formulas():
    F = torch.tensor([2.0, 0.5, -1.0])
    z = torch.tensor([1.0, 1.0, 1.0])
    assert hinge_loss(F, z).item() == pytest.approx((0 + 0.5 + 2.0) / 3)
    assert logistic_loss(F, z).item() == pytest.approx(sum(__import__("math").log1p(__import__("math").exp(-f))
                                                           for f in (2.0, 0.5, -1.0)) / 3)
    assert squared_loss(F, z).item() == pytest.approx((1.0 + 0.25 + 4.0) / 6)


def _gaussian(d=4, l=6, scale=1.0):
    """A member's data: ``sampler``'s prompts, one batch per stream, stacked on a leading axis."""
    def fn(batch, gens):
        out = [sampler(d, l)(batch, g) for g in gens]
        return torch.stack([P * scale for P, _ in out]), torch.stack([z for _, z in out])
    return SampledData(fn, d, key=("gaussian", d, l, scale))


def test_one_sgd_step_is_algorithm_1():
    """One step of the engine with one member is Algorithm 1 written out: ``theta - eta * grad`` of the mean
    hinge loss ``max{0, 1 - z F}`` of the batch drawn from the stream ``(seed, "train")``, on an unstacked model."""
    trained = train([Member(3, "mamba", _gaussian(), 0.5, m=5)], TrainConfig(steps=1, batch_size=8, **ALGORITHM_1),
                    progress=False)
    ref = build_model("mamba", 4, m=5, generator=torch_generator(3, "init"))  # one unstacked float64 model
    assert type(ref).__name__ == "OneLayerMamba"
    before = {n: p.detach().clone() for n, p in ref.named_parameters()}
    P, z = sampler()(8, numpy_stream(3, "train"))  # the batch of the member's first step
    F = ref(P)
    torch.clamp(1 - z * F, min=0).mean().backward()
    stack = trained.model(0)
    for n, p in ref.named_parameters():
        expected = before[n] - 0.5 * p.grad  # the SGD step, by hand
        torch.testing.assert_close(getattr(stack, n).detach()[0], expected, rtol=0, atol=1e-12)


def test_deterministic_and_records():
    runs = []
    for _ in range(2):
        t = train([Member(1, "mamba", _gaussian(), 0.1, m=5)], TrainConfig(steps=25, batch_size=16), record_every=10,
                  progress=False, probes={"w_norm": lambda m: m.w.norm().item()})
        runs.append((t.groups[0].history, t.model(0).w.detach().clone()))
    (h1, w1), (h2, w2) = runs
    assert torch.equal(w1, w2) and h1.loss == h2.loss
    assert h1.steps == [0, 10, 20, 25] and len(h1.probes["w_norm"]) == 4


def test_non_finite_loss_stops_with_step_and_member():
    with pytest.raises(FloatingPointError, match=r"step 0 \(member seed 0, lr 0.3, kind 'mamba'"):
        train([Member(0, "mamba", _gaussian(scale=1e200), 0.3)], TrainConfig(steps=3, batch_size=4), progress=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"steps": -1}, r"^steps must be an integer in \[0, inf\]; got -1"), ({"batch_size": 0}, r"^batch_size must be an integer in \[1, inf\]; got 0"),
    ({"optimizer": "lbfgs"}, "^optimizer must be one of"), ({"loss": "mse"}, "^loss must be one of"),
])
def test_bad_loop_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


# ---------------------------------------------------------------- the engine: train(members, cfg)

from mambaicl.recipes.stepsize import search_seeds, step_size_search  # noqa: E402
from mambaicl.models import GATE_KINDS  # noqa: E402
from mambaicl.train import Draws, SyntheticData  # noqa: E402

_DATA = DataConfig(d=8, M1=3, M2=2, V=1, l_tr=5)
_PAT = make_patterns(_DATA, torch_generator(0, "patterns"))
_D1 = SyntheticData(_PAT, _DATA)
_D2 = SyntheticData(_PAT, dataclasses.replace(_DATA, p_a=0.3))
_DEEP = {"n_layers": 2, "options": {"d_model": 8, "d_state": 4}, "dtype": torch.float64}
#: every model kind build_model knows: (kind, model keywords, step-size scale)
_KINDS = [(k, {}, 1.0) for k in ("mamba", "mamba_merged", "linear", *GATE_KINDS)] + \
         [(k, _DEEP, 0.05) for k in ("mamba", "linear", "softmax", "mamba1")]


def _params(trained, i):
    """Member i's parameters, as a flat list of tensors."""
    model, k = trained.model(i), trained.slot(i)
    if hasattr(model, "members"):  # MemberStack: separate models
        return [p.detach() for p in model.members[k].parameters()]
    return [p.detach()[k] for p in model.parameters()]


@pytest.mark.parametrize("kind, model, scale", _KINDS, ids=[f"{k}{'-deep' if m else ''}" for k, m, _ in _KINDS])
def test_a_member_of_a_batch_is_that_member_trained_alone(kind, model, scale):
    """Members differing in seed, step size and data config, trained as one stack, each end where they end alone."""
    ms = [Member(0, kind, _D1, 0.1 * scale, **model), Member(1, kind, _D2, 0.05 * scale, **model),
          Member(0, kind, _D2, 0.2 * scale, **model), Member(1, kind, _D1, 0.1 * scale, **model)]
    cfg = TrainConfig(steps=6 if not model else 3, batch_size=8 if not model else 4)
    batch = train(ms, cfg, progress=False, record_every=3)
    assert len(batch.groups) == 1
    for i, m in enumerate(ms):
        alone = train([m], cfg, progress=False, record_every=3)
        for p, q in zip(_params(batch, i), _params(alone, 0)):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
        assert batch.losses(i) == pytest.approx(alone.losses(0), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_per_member_step_sizes_with_each_optimizer(optimizer):
    ms = [Member(s, "mamba", _D1, lr) for lr in (0.01, 0.3) for s in (2, 3)]
    cfg = TrainConfig(steps=5, batch_size=8, optimizer=optimizer)
    batch = train(ms, cfg, progress=False)
    for i, m in enumerate(ms):
        alone = train([m], cfg, progress=False)
        for p, q in zip(_params(batch, i), _params(alone, 0)):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_equal_step_sizes_train_exactly_like_a_plain_sgd_loop():
    """One step size for all members: the engine is a plain ``torch.optim.SGD`` loop on the stack, bit for bit."""
    seeds = [4, 7]
    trained = train([Member(s, "mamba", _D1, 0.2) for s in seeds], TrainConfig(steps=5, batch_size=8), progress=False)
    stack = build_model("mamba", _DATA.d, generators=torch_generators(seeds, "init"))
    algorithm_1(stack, _PAT, _DATA, training_tasks(_DATA.M1), numpy_streams(seeds, "train"), steps=5, batch_size=8,
                lr=0.2)
    for p, q in zip(trained.models[0].parameters(), stack.parameters()):
        assert torch.equal(p, q)


def test_draws_replay_each_member_s_own_stream():
    ms = [Member(5, "mamba", _D1, 0.1), Member(5, "mamba", _D2, 0.1), Member(6, "mamba", _D1, 0.1),
          Member(5, "mamba", _D1, 0.3)]
    draws = Draws(ms, "train", "cpu")
    assert len(draws.gens) == 2 and draws.index.tolist() == [0, 2, 1, 0]  # equal (data, seed) share a draw
    draws(3)  # two steps: member i's second batch is the second batch of its own stream
    P, z = draws(3)
    for i, m in enumerate(ms):
        g = numpy_stream(m.seed, "train")
        m.data.sample(3, [g])
        ref, zr = m.data.sample(3, [g])
        assert torch.equal(P[i].P, ref[0].P) and torch.equal(z[i], zr[0])


def test_groups_follow_kind_and_model_keywords():
    ms = [Member(0, "mamba", _D1, 0.1), Member(0, "linear", _D1, 0.01), Member(1, "mamba", _D1, 0.1, m=9),
          Member(1, "mamba", _D1, 0.2)]
    trained = train(ms, TrainConfig(steps=2, batch_size=4), progress=False)
    assert [g.members for g in trained.groups] == [[0, 3], [1], [2]]
    assert trained.slot(3) == 1 and trained.model(2).W_B.shape[1] == 9


def test_a_non_finite_loss_names_the_member_or_marks_it():
    ms = [Member(0, "linear", _D1, 0.01), Member(3, "linear", _D1, 1e6)]
    cfg = TrainConfig(steps=40, batch_size=8)
    with pytest.raises(FloatingPointError, match=r"member seed 3, lr 1000000.0, kind 'linear'"):
        train(ms, cfg, progress=False)
    marked = train(ms, cfg, progress=False, nonfinite="mark")
    assert marked.diverged(1) and not marked.diverged(0)
    alone = train(ms[:1], cfg, progress=False)
    for p, q in zip(_params(marked, 0), _params(alone, 0)):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_probes_freeze_and_record_steps():
    seen = []
    trained = train([Member(0, "mamba", _D1, 0.1), Member(1, "mamba", _D1, 0.1)], TrainConfig(steps=4, batch_size=4),
                    progress=False, record_every=[0, 3], freeze=("W_B",),
                    probes={"w": lambda m: m.w.norm(dim=-1), "pair": lambda m: {"a": 1.0, "b": torch.ones(2)}},
                    callback=lambda step, m: seen.append(step))
    h = trained.groups[0].history
    assert h.steps == [0, 3] and len(h.probes["w"][0]) == 2 and h.probes["a"] == [1.0, 1.0]
    assert seen == [0, 1, 2, 3]
    init = build_model("mamba", _DATA.d, generators=torch_generators([0, 1], "init"))
    assert torch.equal(trained.models[0].W_B, init.W_B)


def test_sampled_data_plugs_any_sampler():
    def fn(batch, gens):
        out = [sampler(d=6)(batch, g) for g in gens]
        return torch.stack([P for P, _ in out]), torch.stack([z for _, z in out])

    data = SampledData(fn, 6, key="gaussian")
    assert data == SampledData(fn, 6, key="gaussian") and data != SampledData(fn, 6, key="other")
    ms = [Member(0, "mamba", data, 0.1), Member(1, "mamba", data, 0.05)]
    batch = train(ms, TrainConfig(steps=3, batch_size=4), progress=False)
    alone = train(ms[1:], TrainConfig(steps=3, batch_size=4), progress=False)
    for p, q in zip(_params(batch, 1), _params(alone, 0)):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make, message", [
    (lambda: Member(-1, "mamba", _D1, 0.1), "^seed must be"),
    (lambda: Member(0, "transformer", _D1, 0.1), "^kind must be one of"),
    (lambda: Member(0, "mamba_merged", _D1, 0.1, n_layers=2), "^kind must be one of"),
    (lambda: Member(0, "mamba", _D1, 0.0), "^lr must be"),
    (lambda: Member(0, "mamba", object(), 0.1), "^data must have d and sample"),
    (lambda: Member(0, "mamba", _D1, 0.1, options={"generator": None}), "^options must not set 'generator'"),
    (lambda: train([], TrainConfig()), "^members must hold at least one Member"),
    (lambda: train([Member(0, "mamba", _D1, 0.1)], TrainConfig(steps=1), nonfinite="ignore"), "^nonfinite must be one of"),
    (lambda: train([Member(0, "mamba", _D1, 0.1)], TrainConfig(steps=1), freeze=("W_X",)), "^freeze must name parameters"),
    (lambda: train([Member(0, "mamba", _D1, 0.1)], TrainConfig(steps=1), record_every=0), "^record_every must be"),
])
def test_engine_rejects_bad_input(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_step_size_search_uses_seeds_disjoint_from_the_reported_ones():
    assert search_seeds((0, 1, 2, 3, 4)) == (5, 6, 7, 8, 9)
    assert search_seeds((1, 3), n=3) == (0, 2, 4)
    val = _D1.sample(50, [numpy_stream(0, "validation")])[0]

    def score(trained):
        out = []
        for i in range(len(trained.members)):
            F = trained.model(i)(val.P.expand(len(trained.members), *val.P.shape[1:]))[trained.slot(i)]
            out.append(float(hinge_loss(F.detach(), val.z[0])))
        return out

    template = Member(0, "linear", _D1, 0.01)
    s = step_size_search(template, (0.001, 0.01, 1e6), TrainConfig(steps=40, batch_size=8), score, reported=(0, 1),
                         n_seeds=2)
    assert s.seeds == [2, 3] and s.mean[2] == float("inf") and all(s.diverged[2])
    assert s.best == s.lrs[min(range(2), key=lambda k: s.mean[k])]
    assert s.versus_best(s.best).diff == 0.0
    with pytest.raises(ConfigError, match="^seeds must be disjoint from the reported seeds"):
        step_size_search(template, (0.01,), TrainConfig(steps=1), score, seeds=(1, 2), reported=(0, 1))


def test_members_with_their_own_streams():
    """Per-member init and training streams (e.g. one per level of a multi-class model) are used as given."""
    ms = [Member(0, "mamba", _D1, 0.1, init=f"init/level{h}", stage=f"train/level{h}") for h in range(2)]
    batch = train(ms, TrainConfig(steps=3, batch_size=4), progress=False)
    alone = build_model("mamba", _DATA.d, generators=[torch_generator(0, "init/level1")])
    algorithm_1(alone, _PAT, _DATA, training_tasks(_DATA.M1), [numpy_stream(0, "train/level1")], steps=3,
                batch_size=4, lr=0.1)
    for p, q in zip(_params(batch, 1), [p.detach()[0] for p in alone.parameters()]):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
    with pytest.raises(ConfigError, match="^stage must be a non-empty string"):
        Member(0, "mamba", _D1, 0.1, stage="")


def test_a_recorded_step_size_is_validated_and_stands_only_for_disjoint_seeds():
    """The book's one kind of record of a search (gates, SST-2, the deep stacks): the choice must be one of the
    candidates, and the record stands for reported seeds only when none of its own search seeds is reported."""
    from mambaicl.recipes.stepsize import RecordedStep

    r = RecordedStep(0.03, (0.1, 0.03, 0.01), (5, 6), "validation loss")
    assert r.lr == 0.03 and r.lrs == (0.1, 0.03, 0.01) and r.seeds == (5, 6)
    assert r.usable_for((0, 1, 2, 3, 4)) and not r.usable_for(range(10)) and not r.usable_for((6,))
    for kw, message in [({"lr": 0.02}, "^lr must be one of lrs"), ({"lr": True}, "^lr must be one of lrs"),
                        ({"lr": "0.03"}, "^lr must be one of lrs"), ({"how": " "}, "^how must say"),
                        ({"seeds": (-1,)}, r"^seeds\[0\] must be"), ({"lrs": (0.1, 0.1)}, "^lrs must be distinct")]:
        args = {"lr": 0.1, "lrs": (0.1, 0.03), "seeds": (5, 6), "how": "x", **kw}
        with pytest.raises(ConfigError, match=message):
            RecordedStep(**args)


def test_every_recorded_step_size_of_the_book_is_a_record_disjoint_from_its_reported_seeds():
    from mambaicl.recipes.stepsize import RecordedStep
    from mambaicl.experiments import gates, mechanism, sst2

    records = [(f"gates.{f}", r, gates.DEFAULT_SEEDS) for f, r in gates.SEARCHED_LR.items()]
    records += [(f"sst2.{k}", r, sst2.DEFAULT_SEEDS) for k, r in sst2.SEARCHED_LR.items()]
    records += [(f"mechanism.{p.name}", p.recorded_step, mechanism.DEFAULT_SEEDS)
                for p in mechanism.PRESETS.values() if p.searched_lr]
    assert len(records) == 6 + 3 + 3
    for name, r, reported in records:
        assert isinstance(r, RecordedStep) and r.usable_for(reported), (name, r)
    assert {k: v["lr"] for k, v in sst2.SCHEDULES.items()} == {k: r.lr for k, r in sst2.SEARCHED_LR.items()}
    for f, r in gates.SEARCHED_LR.items():
        assert gates.APP12.train[f].lr == r.lr, f


def test_reporting_the_seeds_that_chose_a_recorded_step_size_warns():
    import warnings

    from mambaicl.recipes.stepsize import RecordedStep, warn_if_chosen_on

    r = RecordedStep(0.1, (0.1, 0.3), (3, 4), "validation loss")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_chosen_on([r], (0, 1, 2), "here")  # disjoint: no warning
    with pytest.warns(UserWarning, match=r"^here: seeds \[3\] are reported and also chose the recorded step sizes"):
        warn_if_chosen_on([r], (0, 3), "here")


# ---------------------------------------------------------------- early stopping: the engine's one rule

from mambaicl.convergence import EarlyStopping  # noqa: E402


def _scripted(scores):
    """``validate`` returning ``scores[i]`` one after the other for member ``i`` (a member that rests is not asked)."""
    calls = {i: iter(v) for i, v in enumerate(scores)}
    return lambda model, i: next(calls[i])


@pytest.mark.parametrize("model", [{}, _DEEP], ids=["stacked", "deep"])
def test_each_member_stops_on_its_own_and_keeps_its_best_check(model):
    scale = 0.05 if model else 1.0
    ms = [Member(0, "mamba", _D1, 0.1 * scale, **model), Member(1, "mamba", _D1, 0.1 * scale, **model)]
    # member 0: best at check 2 (update 2), then two checks without a new minimum -> stops after update 4;
    # member 1: improves at every check -> runs to the cap (update 6), capped
    scores = [[5.0, 4.0, 4.5, 4.0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]]
    cfg = TrainConfig(steps=6, batch_size=4)
    t = train(ms, cfg, progress=False, stop=EarlyStopping(every=1, patience=2), validate=_scripted(scores))
    r0, r1 = t.stopping(0), t.stopping(1)
    assert (r0.steps, r0.best_step, r0.best_loss, r0.stopped_at, r0.capped) == ([1, 2, 3, 4], 2, 4.0, 4, False)
    assert (r1.steps, r1.best_step, r1.stopped_at, r1.capped) == ([1, 2, 3, 4, 5, 6], 6, 6, True)
    for i, steps in ((0, 2), (1, 6)):  # each ends with the parameters of a run of it alone for best_step updates
        alone = train([ms[i]], dataclasses.replace(cfg, steps=steps), progress=False)
        for p, q in zip(_params(t, i), _params(alone, 0)):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_members_stop_together_and_the_initial_model_is_checked():
    ms = [Member(0, "mamba", _D1, 0.1), Member(1, "mamba", _D1, 0.1)]
    # member 0 stalls after the initial check but member 1 still improves: both train on until neither
    # improves for 2 checks (after update 6), and member 0 keeps its initial parameters
    scores = [[1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0], [6.0, 5.0, 4.0, 3.0, 3.0, 3.0, 3.0]]
    stop = EarlyStopping(every=2, patience=2, initial=True, together=True)
    t = train(ms, TrainConfig(steps=20, batch_size=4), progress=False, stop=stop, validate=_scripted(scores))
    assert [t.stopping(i).stopped_at for i in (0, 1)] == [10, 10]
    assert t.stopping(0).steps == [0, 2, 4, 6, 8, 10] and t.stopping(0).best_step == 0
    assert t.stopping(1).best_step == 6
    init = build_model("mamba", _DATA.d, generators=torch_generators([0], "init"))
    assert all(torch.equal(p, q.detach()[0]) for p, q in zip(_params(t, 0), init.parameters()))


def test_checks_before_start_count_for_nothing():
    scores = [[1.0, 3.0, 2.0, 2.5, 2.5]]  # update 1's 1.0 comes before start = 2: best is update 3's 2.0
    t = train([Member(0, "mamba", _D1, 0.1)], TrainConfig(steps=5, batch_size=4), progress=False,
              stop=EarlyStopping(every=1, patience=2, start=2), validate=_scripted(scores))
    assert (t.stopping(0).best_step, t.stopping(0).stopped_at) == (3, 5)


@pytest.mark.parametrize("make, message", [
    (lambda: EarlyStopping(every=0, patience=1), r"^every must be an integer in \[1, inf\]; got 0"),
    (lambda: EarlyStopping(every=1, patience=0), r"^patience must be an integer in \[1, inf\]; got 0"),
    (lambda: train([Member(0, "mamba", _D1, 0.1)], TrainConfig(steps=1), stop=EarlyStopping(1, 1)),
     "^validate must be a function validate"),
    (lambda: train([Member(0, "mamba", _D1, 0.1)], TrainConfig(steps=1), progress=False).stopping(0),
     "^stopping needs a training run with early stopping"),
])
def test_early_stopping_rejects_bad_input(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_synthetic_data_are_equal_by_value_of_their_patterns():
    """Stacking and shared draws follow the patterns' values, not the Python object that holds them."""
    twin = make_patterns(_DATA, torch_generator(0, "patterns"))  # the same numbers as _PAT, another object
    other = make_patterns(_DATA, torch_generator(1, "patterns"))
    assert twin is not _PAT and SyntheticData(twin, _DATA) == _D1 and hash(SyntheticData(twin, _DATA)) == hash(_D1)
    assert SyntheticData(other, _DATA) != _D1 and SyntheticData(other, _DATA).stack_key != _D1.stack_key


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_sgd_step_is_torch_sgd_bit_for_bit(device):
    """Algorithm 1's step (listed in Part I) moves every parameter exactly as torch.optim.SGD would (no momentum,
    no weight decay), so replacing that optimizer moved no number; a parameter without a gradient stays."""
    from mambaicl.train import sgd_step

    g = torch.Generator().manual_seed(0)
    ref = [torch.randn(4, 5, generator=g, dtype=torch.float64).to(device).requires_grad_() for _ in range(3)]
    ours = [p.detach().clone().requires_grad_() for p in ref]
    for t in range(3):
        for a, b in zip(ref, ours):
            a.grad = b.grad = None
        for ps in (ref, ours):
            (sum((p ** 2 * (k + 1)).sum() for k, p in enumerate(ps[:2])) * (t + 1.5)).backward()
        torch.optim.SGD(ref, lr=0.37).step()
        sgd_step(ours, 0.37)
    for a, b in zip(ref, ours):
        assert torch.equal(a, b)
    assert ours[2].grad is None and torch.equal(ours[2], ref[2])
