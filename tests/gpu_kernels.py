"""Known-duration kernels for GPU tests and the fidelity benchmark (CuPy, compiled at first use).

``spin_ns`` busy-waits on ``%globaltimer`` (the GPU's nanosecond wall clock), so its duration does
not depend on SM clocks, unlike ``torch.cuda._sleep`` which counts cycles.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

SPIN_SOURCE = r"""
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


@lru_cache(maxsize=1)
def spin_kernel() -> Callable[[int, int], None]:
    """``launch(stream_handle, ns)``: one thread spinning for ``ns`` nanoseconds on that stream."""
    import pytest

    cupy = pytest.importorskip("cupy")
    kernel = cupy.RawKernel(SPIN_SOURCE, "spin_ns")

    def launch(stream: int, ns: int) -> None:
        with cupy.cuda.ExternalStream(stream):
            kernel((1,), (1,), (cupy.uint64(ns),))

    return launch
