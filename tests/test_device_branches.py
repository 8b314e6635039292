"""The branches a GPU takes, run on a CPU: :func:`mambaicl.device.plain_kernels` forces them.

On any device but the CPU the one-layer models skip the compiled pattern kernel (``OneLayer.forward`` computes Eq. (3)
on the prompt tensor), :func:`mambaicl.models.gated_attention.gated_sum` uses autograd instead of its written-out
backward, and :func:`mambaicl.seeding.torch_generator` seeds by :func:`mambaicl.seeding.seed_by_summary`. Each is
compared here with the CPU's branch: values and gradients in float64 (1e-12 / 1e-11 absolute), and a short training
of Figure 2's ``tiny`` preset, whose parameters and losses agree to 1e-10 relative after 20 steps (measured: 3.5e-16;
the two branches differ only in rounding; a GPU adds its own, which ``benchmarks/gpu_check.py`` measures).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from mambaicl.config import DataConfig
from mambaicl.data import make_patterns, training_prompts, training_tasks
from mambaicl.device import plain_kernels, use_compiled
from mambaicl.models import OneLayerStack
from mambaicl.models import gated_attention, one_layer
from mambaicl.seeding import numpy_streams, seed_by_summary, stream_seed, torch_generator, torch_generators

DATA = DataConfig(d=14, M1=4, M2=5, V=3, l_tr=7, p_a=0.5)


def _both(fn):
    """``fn()`` on the CPU's branch and on the branch a GPU takes."""
    first = fn()
    with plain_kernels():
        second = fn()
    return first, second


def test_plain_kernels_selects_the_gpu_branch_and_only_inside_its_block():
    assert use_compiled("cpu") and not use_compiled("meta")
    with plain_kernels():
        assert not use_compiled("cpu")
        with plain_kernels():
            assert not use_compiled("cpu")
        assert not use_compiled("cpu")
    assert use_compiled("cpu")


def test_gated_sum_autograd_branch_matches_the_written_out_backward():
    """Random logits with saturated gates (|x| up to 40), scores and labels; F and both gradients in float64."""
    g = torch.Generator().manual_seed(3)
    logits = 4 * torch.randn(5, 6, 11, generator=g, dtype=torch.float64)
    logits[0, :, ::3], logits[1, :, 1::4] = 40.0, -40.0  # gates at 1 and 0
    att, y = torch.randn(5, 6, 11, generator=g, dtype=torch.float64), torch.randn(5, 6, 11, generator=g).sign().double()
    weights = torch.linspace(-1, 2, 30, dtype=torch.float64).view(5, 6)

    def run():
        x, a = logits.clone().requires_grad_(), att.clone().requires_grad_()
        F = gated_attention.gated_sum(x, a, y)
        return (F, *torch.autograd.grad((F * weights).sum(), (x, a)))

    fused, plain = _both(run)
    for name, f, p in zip(("F", "dF/dlogits", "dF/dscores"), fused, plain):
        assert (f - p).abs().max() < 1e-12, name


def _prompts(S: int, batch: int = 6):
    pat = make_patterns(DATA, torch.Generator().manual_seed(0))
    pr = training_prompts(pat, DATA, training_tasks(DATA.M1), batch, numpy_streams(range(S), "train"))
    assert bool(pr.outlier.any())  # the outlier look-ups of the pattern kernel are exercised
    return pr


@pytest.mark.parametrize("kind", ["mamba", "mamba_merged"])
def test_one_layer_tensor_branch_matches_the_pattern_kernel(kind, monkeypatch):
    pr = _prompts(3)
    stack = OneLayerStack(kind, DATA.d, 13, 0.3, torch_generators(range(3), "init"), dtype=torch.float64)
    with torch.no_grad():
        for p in stack.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(5), dtype=p.dtype))
    weights = torch.linspace(-1, 2, 18, dtype=torch.float64).view(3, 6)
    calls = []
    pattern = one_layer.Eq3._pattern_forward
    monkeypatch.setattr(one_layer.Eq3, "_pattern_forward", lambda self, P: calls.append(1) or pattern(self, P))

    def run():
        F = stack(pr)
        return (F, *torch.autograd.grad((F * weights).sum(), list(stack.parameters())))

    fused, plain = _both(run)
    assert len(calls) == 1  # the pattern kernel ran on the CPU's branch only
    assert (fused[0] - plain[0]).abs().max() < 1e-12
    for (name, _), f, p in zip(stack.named_parameters(), fused[1:], plain[1:]):
        assert (f - p).abs().max() < 1e-11, name


def test_a_short_training_of_figure_2s_tiny_preset_agrees_on_both_branches():
    """20 steps of the tiny preset's Mamba, two seeds: parameters and every recorded loss to 1e-10 relative."""
    from mambaicl.experiments import fig2

    tiny = dataclasses.replace(fig2.TINY, train={k: dataclasses.replace(v, steps=20)
                                                 for k, v in fig2.TINY.train.items()})
    pat = fig2.patterns(tiny)

    def run():
        stack, history = fig2.trained_models(tiny, pat, [0, 1], kinds=["mamba"], record_every=5)["mamba"]
        return {n: p.detach().clone() for n, p in stack.named_parameters()}, torch.tensor(history.loss)

    (fused, loss_f), (plain, loss_p) = _both(run)
    assert loss_f.numel() >= 4 and torch.allclose(loss_f, loss_p, rtol=1e-10, atol=1e-300)
    for name in fused:
        scale = fused[name].abs().max()
        assert (fused[name] - plain[name]).abs().max() <= 1e-10 * scale, name
    moved = fig2.trained_models(dataclasses.replace(tiny, train={k: dataclasses.replace(v, steps=1)
                                                              for k, v in tiny.train.items()}),
                                pat, [0, 1], kinds=["mamba"])["mamba"][0]
    assert any((fused[n] - p.detach()).abs().max() > 1e-3 for n, p in moved.named_parameters())  # it trained


def test_the_non_cpu_seeding_runs_on_a_cpu_generator():
    """seed_by_summary is what torch_generator does on a GPU: the 63-bit stream summary as the generator's seed."""
    g = seed_by_summary(torch.Generator(), 3, "init")
    assert g.initial_seed() == stream_seed(3, "init")
    again = seed_by_summary(torch.Generator(), 3, "init")
    assert torch.equal(torch.randn(5, generator=g), torch.randn(5, generator=again))
    other = seed_by_summary(torch.Generator(), 3, "train")
    assert other.initial_seed() != g.initial_seed()
    # the CPU's stream is not this one: its whole twister state comes from the seed sequence
    cpu_stream = torch_generator(3, "init").get_state()
    assert not torch.equal(cpu_stream, seed_by_summary(torch.Generator(), 3, "init").get_state())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (the branch is tested on the CPU above)")
def test_torch_generator_on_a_gpu_is_seeded_by_the_summary():
    assert torch_generator(3, "init", "cuda").initial_seed() == stream_seed(3, "init")


def test_gpu_check_without_cuda_says_so_and_exits_0():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(root))
    run = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_check.py")], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines() == [
        "gpu_check: no CUDA device on this machine (torch.cuda.is_available() is False); nothing to check"]


_SET_THREADS = """
import torch
from mambaicl.device import set_threads
g = torch.Generator().manual_seed(0)
a, b = torch.randn(64, 4096, generator=g, dtype=torch.float64), torch.randn(4096, 64, generator=g, dtype=torch.float64)
x = torch.randn(256, 31, requires_grad=True, generator=g, dtype=torch.float64)
products = {}
for n in (1, 2, 1):
    set_threads(n)
    assert torch.get_num_threads() == n
    torch.ones(1 << 20).mul_(2)  # a parallel loop after the call (PyTorch's per-thread start-up)
    y = a @ b
    x.grad = None
    (x @ x.T).pow(2).sum().backward()  # the products of autograd's backward too
    products.setdefault(n, []).append((y, x.grad.clone()))
ref = products[1][0]
for y, gx in products[1] + products[2]:
    assert torch.equal(y, ref[0]) and torch.equal(gx, ref[1])
print("same")
"""


@pytest.mark.parametrize("path", ["native", "mkl-avx2"])
def test_set_threads_changes_no_bit_of_a_matrix_product(path):
    """``set_threads(2)`` gives the same bytes as ``set_threads(1)`` for products with long inner sums, forward and
    backward, on MKL's native path and on its AVX2 branch (where two MKL threads round differently: measured); in a
    subprocess, since MKL reads ``MKL_CBWR`` once."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if path == "mkl-avx2":
        env["MKL_CBWR"] = "AVX2"
    r = subprocess.run([sys.executable, "-c", _SET_THREADS], env=env, cwd=root, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "same", r.stderr


def test_set_threads_rejects_a_count_below_one():
    from mambaicl.config import ConfigError
    from mambaicl.device import set_threads

    previous = torch.get_num_threads()
    with pytest.raises(ConfigError, match=r"threads must be an integer in \[1, inf\]"):
        set_threads(0)
    assert torch.get_num_threads() == previous


def test_serial_elementwise_gives_the_op_bit_for_bit_with_its_gradient():
    """``serial_elementwise(torch.exp, x)``: the values and the gradient of ``torch.exp(x)`` (MKL's vector math is the
    same per element on any slice here), any shape, non-contiguous input included; one call below the chunk."""
    from mambaicl.device import serial_elementwise

    g = torch.Generator().manual_seed(3)
    for shape in [(7,), (20, 64, 21), (5000,), (33, 17, 9)]:
        x = (-8 * torch.rand(*shape, generator=g, dtype=torch.float64)).requires_grad_()
        for inp in (x, x.transpose(0, -1) if x.dim() > 1 else x):
            y = serial_elementwise(torch.exp, inp)
            assert y.shape == inp.shape and torch.equal(y, torch.exp(inp))
            (gx,) = torch.autograd.grad((y * y).sum(), x)
            (ref,) = torch.autograd.grad((torch.exp(inp) ** 2).sum(), x)
            assert torch.equal(gx, ref)


def test_a_gate_read_out_never_hands_pytorch_a_splittable_exp():
    """The gate read-out (``gate_from_logits``, the gates experiment's and the lemmas' probes) calls ``exp`` only on
    slices of at most :data:`mambaicl.device.VML_GRAIN` elements at two threads: PyTorch runs each in one MKL call on
    the calling thread. (A whole ``(20, 64, 21)`` read-out was cut in two by PyTorch's loop, and on CI's CPU the half
    computed inside the loop by the calling thread came back ~1e-9 off: the gates tiny preset wrote other bytes.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    from mambaicl.device import VML_GRAIN
    from mambaicl.models.gated_attention import gate_from_logits, log_gate

    sizes = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.split(".")[0] in ("exp", "exp_"):
                sizes.append(args[0].numel())
            return func(*args, **(kwargs or {}))

    logits = torch.randn(20, 64, 21, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with Record():
            G = gate_from_logits(logits)
    finally:
        torch.set_num_threads(previous)
    assert sizes and max(sizes) <= VML_GRAIN and sum(sizes) == logits.numel()
    F_ = torch.nn.functional
    assert torch.equal(G, torch.exp(log_gate(F_.logsigmoid(logits), F_.logsigmoid(-logits))))  # the same bits here
