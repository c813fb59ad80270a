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

    class _Handle:
        """A raw cudaStream_t speaking the CUDA stream protocol (what Stream.from_external wants)."""

        def __init__(self, handle: int) -> None:
            self.handle = handle

        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, self.handle)

    from_external = getattr(cupy.cuda.Stream, "from_external", None)

    def make(handle: int):
        return from_external(_Handle(handle)) if from_external else cupy.cuda.ExternalStream(handle)

    streams: dict[int, object] = {}

    def launch(stream: int, ns: int) -> None:
        wrapped = streams.get(stream)
        if wrapped is None:
            wrapped = streams[stream] = make(stream)
        with wrapped:
            kernel((1,), (1,), (cupy.uint64(ns),))

    return launch
