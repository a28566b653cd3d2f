"""The prover's fast path to the exact modular LU (`checker/kernel/modlu.py`): BLAS thread
control and a CUDA backend. Speed only: every function here runs the kernel's own steps,
with a backend that changes how a product is scheduled (on how many OpenBLAS threads, or on
a GPU in torch float64), never what it computes — the exactness bound is the kernel's, and
the residues are the same on every backend (tests/checker/test_modular_lu_against_flint.py compares
them with FLINT and with the plain numpy path). The checker never uses this module: it runs the
kernel's plain numpy path.

- `det_mod`, `pivot_columns`, `solve_floats`: the kernel's, inside `blas_threads` with the
  `Threaded` backend;
- `det_auto`, `functional_auto`: on a CUDA device (torch) when one is present, the order is
  at least GPU_FROM and ABSORB_FORMAL_GPU is not 0; else as above.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..checker.kernel import modlu
from ..checker.kernel.modlu import det_floats, functional_floats

THREADED_FROM = 1 << 26  # multiply-adds from which a product may use every BLAS thread


class _BlasThreads:
    """OpenBLAS's thread count, where numpy's OpenBLAS exposes its setter (else nothing is
    changed). A product split over threads waits for the slowest: on a machine whose cores
    are busy with other work that made the LU 4–8 times slower than on one thread. So inside
    the LU (`blas_threads`) a product runs on one thread when it has fewer than THREADED_FROM
    multiply-adds or when another process is running (Linux: the running count of
    /proc/loadavg less this process's own running threads, read before each large product),
    and on OpenBLAS's own count otherwise; the count is restored afterwards. Speed only: no
    value depends on it (each thread computes whole dot products, and the bound holds for any
    order of summation)."""

    def __init__(self) -> None:
        self.get: Any = None
        self.set: Any = None
        self.default = self.current = 1
        try:
            import ctypes
            import glob

            folder = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
            for path in sorted(glob.glob(os.path.join(folder, "*openblas*"))):
                library = ctypes.CDLL(path)
                for prefix in ("scipy_openblas", "openblas"):
                    for suffix in ("64_", ""):
                        getter = getattr(library, f"{prefix}_get_num_threads{suffix}", None)
                        setter = getattr(library, f"{prefix}_set_num_threads{suffix}", None)
                        if getter is not None and setter is not None:
                            getter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
                            self.get, self.set = getter, setter
                            return
        except OSError:
            pass

    def use(self, count: int) -> None:
        if self.set is not None and count != self.current:
            self.set(count)
            self.current = count

    @staticmethod
    def others_running() -> int:
        """Tasks running or runnable now that are not this process's (0 where unknown)."""
        try:
            with open("/proc/loadavg", encoding="ascii") as stream:
                running = int(stream.read().split()[3].split("/")[0])
            mine = 0
            for task in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{task}/stat", encoding="ascii") as stream:
                    mine += stream.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, ValueError, IndexError):
            return 0
        return max(0, running - max(mine, 1))


_BLAS: list[_BlasThreads] = []
_SESSION: list[bool] = []  # inside `blas_threads`


def _blas() -> _BlasThreads:
    if not _BLAS:
        _BLAS.append(_BlasThreads())
    return _BLAS[0]


class blas_threads:  # noqa: N801 - a context manager, used like a function
    """The LU's products choose their thread count (`_BlasThreads`); OpenBLAS's own count is
    restored on leaving."""

    def __enter__(self) -> None:
        blas = _blas()
        if blas.get is not None and not _SESSION:
            blas.default = blas.current = int(blas.get())
        _SESSION.append(True)

    def __exit__(self, *exc: object) -> None:
        _SESSION.pop()
        if not _SESSION:
            _blas().use(_blas().default)


def _choose_threads(work: int) -> None:
    """Before a product of `work` multiply-adds, inside `blas_threads`."""
    if _SESSION:
        blas = _blas()
        if blas.set is not None:
            idle = work >= THREADED_FROM and blas.default > 1 and blas.others_running() == 0
            blas.use(blas.default if idle else 1)



class Threaded(modlu.Numpy):
    """The kernel's numpy backend, each product on the thread count `_choose_threads` picks
    (inside `blas_threads`)."""

    @staticmethod
    def product(a: Any, b: Any) -> Any:
        _choose_threads(a.shape[0] * a.shape[1] * b.shape[1])
        return modlu.Numpy.product(a, b)

    @staticmethod
    def sub_product(c: Any, a: Any, b: Any, p: int) -> None:
        _choose_threads(a.shape[0] * a.shape[1] * b.shape[1])
        modlu.Numpy.sub_product(c, a, b, p)


def det_mod(matrix: Any, p: int) -> int:
    """`modlu.det_mod`, its products on the threads `blas_threads` picks."""
    with blas_threads():
        return modlu.det_mod(matrix, p, Threaded)


def pivot_columns(matrix: Any, p: int) -> list[int]:
    """`modlu.pivot_columns`, its products on the threads `blas_threads` picks."""
    with blas_threads():
        return modlu.pivot_columns(matrix, p, Threaded)


def solve_floats(work: Any, p: int) -> list[int] | None:
    """`modlu.solve_floats`, its products on the threads `blas_threads` picks."""
    with blas_threads():
        return modlu.solve_floats(work, p, Threaded)

def torch_backend() -> Any | None:
    """The same steps on a CUDA device (torch float64), or None without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None

    class _Torch(modlu.Numpy):  # product and swap_rows as for numpy
        name = "torch"

        @staticmethod
        def reduce(x: Any, p: int) -> None:
            x -= torch.round(x * (1.0 / p)) * p

        @staticmethod
        def sub_product(c: Any, a: Any, b: Any, p: int) -> None:
            c -= a @ b
            c -= torch.round(c * (1.0 / p)) * p

        @staticmethod
        def integers_below(a: Any, p: int) -> bool:
            return bool((a.abs() < p).all() and (torch.round(a) == a).all())

        @staticmethod
        def first_nonzero(column: Any) -> int | None:
            found = torch.nonzero(column)
            return int(found[0, 0]) if found.shape[0] else None

        @staticmethod
        def take_rows(a: Any, order: Any) -> None:
            a.copy_(a[order])

        @staticmethod
        def arange(n: int) -> Any:
            return torch.arange(n, device="cuda")

        @staticmethod
        def identity_like(a: Any) -> Any:
            return torch.eye(a.shape[0], dtype=a.dtype, device=a.device)

        @staticmethod
        def to_list(v: Any) -> list[int]:
            return [int(x) for x in v.cpu().tolist()]

        @staticmethod
        def copy(a: Any) -> Any:
            return a.clone()

        @staticmethod
        def strict_lower(a: Any) -> Any:
            return torch.tril(a, -1)

        @staticmethod
        def strict_upper(a: Any) -> Any:
            return torch.triu(a, 1)

        @staticmethod
        def from_list(values: list[int], like: Any) -> Any:
            return torch.tensor(values, dtype=like.dtype, device=like.device)

        @staticmethod
        def zeros(n: int, like: Any) -> Any:
            return torch.zeros(n, dtype=like.dtype, device=like.device)

    # TF32 never applies to float64; ask for full precision regardless
    torch.backends.cuda.matmul.allow_tf32 = False
    return _Torch


def _gpu(work: np.ndarray) -> tuple[Any, Any] | None:
    """(the array on the CUDA device, the torch backend) when a device should take this
    order: at least GPU_FROM, ABSORB_FORMAL_GPU not 0, an NVIDIA driver visible (torch is
    imported only then: it costs seconds) and torch with CUDA; else None."""
    if (work.shape[0] < GPU_FROM or os.environ.get("ABSORB_FORMAL_GPU", "1") == "0"
            or not os.path.exists("/proc/driver/nvidia/version")):
        return None
    backend = torch_backend()
    if backend is None:
        return None
    import torch

    return torch.from_numpy(work).to("cuda"), backend


def det_floats_gpu(work: np.ndarray, p: int) -> int | None:
    """det_floats on the GPU (the array copied to the device), or None without one."""
    backend = torch_backend()
    if backend is None:
        return None
    import torch

    with blas_threads():
        return det_floats(torch.from_numpy(work).to("cuda"), p, backend)


GPU_FROM = 2048  # order from which a CUDA device, when present, takes the LU


def det_auto(work: np.ndarray, p: int) -> int:
    """det_floats, on a CUDA device (torch) when one is present, the order is at least
    GPU_FROM and ABSORB_FORMAL_GPU is not 0; else on the CPU. The same steps either way."""
    found = _gpu(work)
    with blas_threads():
        if found is not None:
            return det_floats(found[0], p, found[1])
        return det_floats(work, p, Threaded)


def functional_auto(work: np.ndarray, p: int) -> tuple[list[int], int] | None:
    """functional_floats, on a CUDA device when one is present (as `det_auto`), else on the
    CPU."""
    found = _gpu(work)
    with blas_threads():
        if found is not None:
            return functional_floats(found[0], p, found[1])
        return functional_floats(work, p, Threaded)
