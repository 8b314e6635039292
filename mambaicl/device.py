"""Device selection and the one choice of kernel: use a GPU when one is present, never require it.

The package's compiled kernels (Numba: :mod:`mambaicl.models.pattern_eq3`, the gate of
:func:`mambaicl.models.gated_attention.gated_sum`, the deep stacks' scan) run on CPU tensors only;
on any other device the same formulas run as plain PyTorch with autograd, their tested twins.
Every such branch asks :func:`use_compiled`, and :func:`plain_kernels` forces the plain branch on
a CPU, so that the tests exercise what a GPU runs without a GPU.

:func:`set_threads` sets PyTorch's CPU threads for the command line (``--threads``) so that the count
changes speed only, never a bit: MKL's matrix products split their sums across threads, and on some of
its code paths (its AVX2 branch, the one AMD CPUs and ``MKL_CBWR=AVX2`` take) a product at two threads
differs in its last bit from the same product at one. So the calling thread's MKL calls stay at one
thread (MKL's thread-local setting) while PyTorch's own parallel loops take ``n``. MKL's vector math (``exp``,
``log``, ... of a CPU tensor: PyTorch calls MKL's VML on each slice of its parallel loop) is the other place where
MKL runs inside PyTorch's threads; on some CPUs the slice computed on the calling thread inside that loop comes back
with different bits (seen on CI: ``exp`` of a ``(20, 64, 21)`` gate read-out at two threads, the first half of the
seeds ~1e-9 off). :func:`serial_elementwise` applies such an operation in slices PyTorch never splits.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading

import torch

from .checks import check_int

__all__ = ["default_device", "use_compiled", "plain_kernels", "set_threads", "serial_elementwise", "VML_GRAIN"]

_state = threading.local()


def default_device() -> torch.device:
    """``cuda`` when a GPU is visible to PyTorch, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def use_compiled(device) -> bool:
    """Whether tensors on ``device`` take the compiled CPU kernels (``True`` on the CPU unless
    :func:`plain_kernels` is active; ``False`` on every other device)."""
    if getattr(_state, "plain", 0):
        return False
    return torch.device(device).type == "cpu"


@contextlib.contextmanager
def plain_kernels():
    """Within this block every kernel choice takes the plain PyTorch branch (the one a GPU runs)."""
    _state.plain = getattr(_state, "plain", 0) + 1
    try:
        yield
    finally:
        _state.plain -= 1


@functools.lru_cache(maxsize=1)
def _mkl_local_threads():
    """MKL's ``mkl_set_num_threads_local`` (its C entry point) from the MKL inside PyTorch, or ``None``
    where PyTorch has no MKL (ARM, macOS: other BLAS libraries, which this guard does not reach)."""
    if not torch.backends.mkl.is_available():
        return None
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for name in ("libtorch_cpu.so", "libtorch_cpu.dylib", "torch_cpu.dll"):
        path = os.path.join(lib_dir, name)
        if os.path.exists(path):
            try:
                fn = ctypes.CDLL(path).MKL_Set_Num_Threads_Local  # the C interface (int by value)
            except (OSError, AttributeError):
                return None
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            return fn
    return None


def set_threads(n: int) -> None:
    """PyTorch's intra-op CPU threads set to ``n`` (``torch.set_num_threads``), with MKL's matrix
    products kept at one thread in the calling thread, so that every result is the same bytes at
    any ``n`` (tested: the CLI at 1 and 2 threads, on MKL's native and AVX2 code paths)."""
    n = check_int("threads", n, 1)
    torch.set_num_threads(n)
    fn = _mkl_local_threads()
    if fn is not None:
        # PyTorch sets a thread's counts again (MKL's included) at its first parallel loop: run one now,
        # so that the one-thread setting below is not undone by the experiment's first large tensor
        torch.ones(1 << 16).add_(1)
        fn(1)


#: PyTorch's grain for its MKL vector-math loops (``exp``, ``log``, ``log1p``, ``sqrt``, ``tanh``, ...; ATen's
#: ``UnaryOpsKernel``): a CPU tensor of at most this many elements is computed in one call on the calling thread
VML_GRAIN = 2048


def serial_elementwise(op, x: torch.Tensor, chunk: int = VML_GRAIN // 2) -> torch.Tensor:
    """``op(x)`` for an elementwise ``op`` (``torch.exp``, ...), computed on a CPU tensor in slices of at most
    ``chunk`` elements, whatever the thread count, so that no slice is cut by PyTorch's parallel loop: the same
    calls, hence the same bits, at any ``--threads`` (see the module docstring). Differentiable (slices and a
    concatenation); on other devices simply ``op(x)``."""
    if x.device.type != "cpu" or x.numel() <= chunk:
        return op(x)
    flat = x.reshape(-1)
    return torch.cat([op(part) for part in flat.split(chunk)]).view(x.shape)
