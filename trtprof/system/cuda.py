"""Thin, checked wrappers over the CUDA runtime (cuda-python's ``cuda.bindings.runtime``).

Why cuda-python and the runtime API: it imports on a machine without a driver (calls then return
``cudaErrorInsufficientDriver`` instead of raising), needs no compiler (pycuda does), and its handles
are plain integers that TensorRT, PyTorch (``ExternalStream``, ``__cuda_array_interface__``) and CuPy
all accept. Every call goes through :func:`check`, so a CUDA failure surfaces as
:class:`trtprof.errors.CudaError` carrying the CUDA error *name*, never as a silent tuple.

Every resource (stream, event, buffer, graph) has ``close()`` and is a context manager, so the timing
loop releases device memory deterministically instead of waiting for garbage collection.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, TypeVar

import numpy as np

from ..errors import CudaError, MissingDependency

T = TypeVar("T")


def _rt():
    """The runtime bindings, imported on first use (cuda-python is a core dependency, but keep the
    failure a one-line TrtprofError when it is missing)."""
    try:
        from cuda.bindings import runtime
    except ImportError as err:  # pragma: no cover - cuda-python is in install_requires
        raise MissingDependency("cuda-python", "all", why="needed for GPU timing") from err
    return runtime


def runtime() -> Any:
    """The ``cuda.bindings.runtime`` module, for hot loops that call it directly with :func:`ok`."""
    return _rt()


def memory_info() -> tuple[int, int]:
    """(free bytes, total bytes) of the current device: cudaMemGetInfo, the whole device (other processes too)."""
    free, total = check(_rt().cudaMemGetInfo(), "cudaMemGetInfo")
    return int(free), int(total)


def ok(result: Any, what: str = "CUDA call") -> None:
    """Fast path of :func:`check` for calls that return only an error: one comparison when it
    succeeded (the timing loop calls this between events, where every microsecond shows)."""
    if result[0] != 0:
        check(result, what)


def error_name(code: Any) -> str:
    """``cudaErrorMemoryAllocation`` for a runtime error code (its enum name, else the number)."""
    name = getattr(code, "name", None)
    if name:
        return str(name)
    try:
        err, text = _rt().cudaGetErrorName(code)
        if text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # noqa: BLE001 - naming an error must never raise a second one
        pass
    return f"cudaError({int(code)})"


def check(result: Any, what: str = "CUDA call") -> Any:
    """Unwrap a cuda-python result tuple ``(err, *values)``; raise CudaError named after ``err``.

    Returns None for ``(err,)``, the value for ``(err, value)``, else the tuple of values.
    """
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if int(err) != 0:
        raise CudaError(f"{what} failed: {error_name(err)}")
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return values


def device_count() -> int:
    """Number of CUDA devices; 0 when there is no driver or no device (never raises)."""
    try:
        rt = _rt()
        err, count = rt.cudaGetDeviceCount()
    except Exception:  # noqa: BLE001 - "no GPU" is an answer here, not an error
        return 0
    return int(count) if int(err) == 0 else 0


def current_device() -> int:
    return int(check(_rt().cudaGetDevice(), "cudaGetDevice"))


def device_name(device: int = 0) -> str:
    props = check(_rt().cudaGetDeviceProperties(device), "cudaGetDeviceProperties")
    name = props.name
    return (name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)).strip()


def compute_capability(device: int = 0) -> tuple[int, int]:
    rt = _rt()
    major = check(rt.cudaDeviceGetAttribute(rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, device))
    minor = check(rt.cudaDeviceGetAttribute(rt.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, device))
    return int(major), int(minor)


def pci_bus_id(device: int = 0) -> str:
    """PCI bus id (``0000:1A:00.0``): how NVML finds the same GPU whatever CUDA_VISIBLE_DEVICES says."""
    raw = check(_rt().cudaDeviceGetPCIBusId(32, device), "cudaDeviceGetPCIBusId")
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return text.split("\0", 1)[0]


def runtime_version() -> str:
    v = int(check(_rt().cudaRuntimeGetVersion(), "cudaRuntimeGetVersion"))
    return f"{v // 1000}.{(v % 1000) // 10}"


def driver_version() -> str:
    v = int(check(_rt().cudaDriverGetVersion(), "cudaDriverGetVersion"))
    return f"{v // 1000}.{(v % 1000) // 10}"


class _Resource:
    """Shared close-once / context-manager behaviour."""

    _closed = False

    def _release(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._release()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # A fallback only: the timing loop closes explicitly. Never raise from a finalizer.
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class Stream(_Resource):
    """A non-blocking stream (does not synchronize with the legacy default stream, like trtexec's)."""

    def __init__(self, non_blocking: bool = True) -> None:
        rt = _rt()
        flags = rt.cudaStreamNonBlocking if non_blocking else rt.cudaStreamDefault
        self._stream = check(rt.cudaStreamCreateWithFlags(flags), "cudaStreamCreateWithFlags")
        self.handle = int(self._stream)

    @property
    def raw(self) -> Any:
        return self._stream

    def __int__(self) -> int:
        return self.handle

    def synchronize(self) -> None:
        check(_rt().cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")

    def _release(self) -> None:
        check(_rt().cudaStreamDestroy(self._stream), "cudaStreamDestroy")


class Event(_Resource):
    """A timing event.

    ``blocking_sync=True`` (the default) makes ``synchronize`` yield the CPU while waiting
    (cudaEventBlockingSync); with False, ``synchronize`` busy-polls ``cudaEventQuery``: trtexec's
    ``--useSpinWait``, which wakes up faster and so gives slightly lower, steadier host-side latency
    at the price of one busy core.
    """

    def __init__(self, blocking_sync: bool = True, timing: bool = True) -> None:
        rt = _rt()
        flags = rt.cudaEventDefault
        if blocking_sync:
            flags |= rt.cudaEventBlockingSync
        if not timing:
            flags |= rt.cudaEventDisableTiming
        self.blocking_sync = blocking_sync
        self._event = check(rt.cudaEventCreateWithFlags(flags), "cudaEventCreateWithFlags")
        self.handle = int(self._event)

    @property
    def raw(self) -> Any:
        return self._event

    def record(self, stream: "Stream | int") -> None:
        check(_rt().cudaEventRecord(self._event, _stream_arg(stream)), "cudaEventRecord")

    def query(self) -> bool:
        """True when the work before the event is done."""
        rt = _rt()
        (err,) = rt.cudaEventQuery(self._event)
        if err == rt.cudaError_t.cudaErrorNotReady:
            return False
        check((err,), "cudaEventQuery")
        return True

    def synchronize(self) -> None:
        if self.blocking_sync:
            check(_rt().cudaEventSynchronize(self._event), "cudaEventSynchronize")
            return
        query = _rt().cudaEventQuery
        not_ready = _rt().cudaError_t.cudaErrorNotReady
        while True:
            (err,) = query(self._event)
            if err != not_ready:
                check((err,), "cudaEventQuery")
                return

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to ``end`` (both recorded and complete)."""
        return float(check(_rt().cudaEventElapsedTime(self._event, end._event), "cudaEventElapsedTime"))

    def _release(self) -> None:
        check(_rt().cudaEventDestroy(self._event), "cudaEventDestroy")


def elapsed_ms(start: Event, end: Event) -> float:
    """Milliseconds between two completed events."""
    return start.elapsed_ms(end)


class PinnedHostBuffer(_Resource):
    """Page-locked host memory (cudaHostAlloc): the only host memory async copies really overlap with,
    and the kind TensorRT's samples and trtexec use, so H2D/D2H times mean the same thing."""

    def __init__(self, nbytes: int) -> None:
        rt = _rt()
        self.nbytes = int(nbytes)
        self.ptr = int(check(rt.cudaHostAlloc(max(self.nbytes, 1), rt.cudaHostAllocDefault), "cudaHostAlloc"))

    def array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A numpy view of the buffer (no copy). Valid until ``close``."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * dtype.itemsize > self.nbytes:
            raise ValueError(f"{shape} {dtype} does not fit in {self.nbytes} bytes")
        raw = (ctypes.c_byte * max(count * dtype.itemsize, 1)).from_address(self.ptr)
        return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)

    def _release(self) -> None:
        check(_rt().cudaFreeHost(self.ptr), "cudaFreeHost")


class DeviceBuffer(_Resource):
    """Device memory from plain cudaMalloc (no managed memory: see the device machine's notes)."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = int(nbytes)
        self.ptr = int(check(_rt().cudaMalloc(max(self.nbytes, 1)), "cudaMalloc"))

    def __int__(self) -> int:
        return self.ptr

    def _release(self) -> None:
        check(_rt().cudaFree(self.ptr), "cudaFree")


def _stream_arg(stream: "Stream | int") -> Any:
    if isinstance(stream, Stream):
        return stream.raw
    return _rt().cudaStream_t(int(stream))


def memcpy_htod_async(dst_ptr: int, host_array: np.ndarray, stream: "Stream | int") -> None:
    """Copy a (pinned, C-contiguous) host array to ``dst_ptr`` on ``stream``."""
    rt = _rt()
    if not host_array.flags.c_contiguous:
        raise ValueError("host array must be C-contiguous")
    check(
        rt.cudaMemcpyAsync(int(dst_ptr), host_array.ctypes.data, host_array.nbytes,
                           rt.cudaMemcpyKind.cudaMemcpyHostToDevice, _stream_arg(stream)),
        "cudaMemcpyAsync(HostToDevice)",
    )


def memcpy_dtoh_async(host_array: np.ndarray, src_ptr: int, stream: "Stream | int") -> None:
    """Copy from ``src_ptr`` into a (pinned, C-contiguous) host array on ``stream``."""
    rt = _rt()
    if not host_array.flags.c_contiguous:
        raise ValueError("host array must be C-contiguous")
    check(
        rt.cudaMemcpyAsync(host_array.ctypes.data, int(src_ptr), host_array.nbytes,
                           rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, _stream_arg(stream)),
        "cudaMemcpyAsync(DeviceToHost)",
    )


class Graph(_Resource):
    """A CUDA graph captured from whatever ``fn`` enqueues on ``stream``; ``launch`` replays it.

    Capture uses thread-local mode so another thread's unsafe calls do not invalidate it. ``fn`` must
    only enqueue (no synchronization, no allocation that is not already cached) — exactly the
    contract of ``DeviceRunner.enqueue``.
    """

    def __init__(self, fn: Callable[[], Any], stream: Stream) -> None:
        rt = _rt()
        self._stream = stream
        self._graph = None
        self._exec = None
        check(rt.cudaStreamBeginCapture(stream.raw, rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture")
        try:
            fn()
        except BaseException:
            # End the capture so the stream is usable again; the partial graph is discarded.
            err, graph = rt.cudaStreamEndCapture(stream.raw)
            if int(err) == 0 and graph is not None:
                rt.cudaGraphDestroy(graph)
            raise
        self._graph = check(rt.cudaStreamEndCapture(stream.raw), "cudaStreamEndCapture")
        self._exec = check(rt.cudaGraphInstantiate(self._graph, 0), "cudaGraphInstantiate")

    def launch(self, stream: "Stream | None" = None) -> None:
        check(_rt().cudaGraphLaunch(self._exec, (stream or self._stream).raw), "cudaGraphLaunch")

    def _release(self) -> None:
        rt = _rt()
        if self._exec is not None:
            check(rt.cudaGraphExecDestroy(self._exec), "cudaGraphExecDestroy")
        if self._graph is not None:
            check(rt.cudaGraphDestroy(self._graph), "cudaGraphDestroy")
