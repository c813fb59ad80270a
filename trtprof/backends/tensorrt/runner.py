"""A loaded TensorRT engine as a DeviceRunner: the shared timing loop owns buffers and the stream.

``enqueue`` is one ``execute_async_v3`` on the profiler's stream: nothing is copied, nothing is
synchronized, so the same call works inside a CUDA-graph capture. Tensor addresses are set only when
a pointer changes (they persist in the context), keeping the per-iteration host work to one call.
"""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ...errors import BadInput, CudaError
from ...spec import TensorSpec
from ..base import RunnerBase
from .compat import dims_tuple
from .tail_logger import LogTail

if TYPE_CHECKING:
    import tensorrt as trt

    from .inspect import EngineInspection, LayerProfile


class TensorRTRunner(RunnerBase):
    """DeviceRunner over one engine and one execution context (optimization profile 0)."""

    device = "cuda"

    def __init__(
        self, runtime: "trt.Runtime", engine: "trt.ICudaEngine", tail: LogTail, module: ModuleType | None = None
    ) -> None:
        from .compat import tensorrt_module

        self._trt = tensorrt_module(module)  # tensorrt or tensorrt_rtx
        self._runtime = runtime  # TensorRT requires the runtime to outlive its engines
        self._engine: "trt.ICudaEngine | None" = engine
        self._tail = tail
        context = self._create_context(engine)
        if context is None:
            raise CudaError("TensorRT could not create an execution context (out of GPU memory?): " + tail.text(3))
        self._context: "trt.IExecutionContext | None" = context
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self._input_names = tuple(n for n in names if engine.get_tensor_mode(n) == self._trt.TensorIOMode.INPUT)
        self._output_names = tuple(n for n in names if n not in self._input_names)
        self.inputs = tuple(self._spec(n) for n in self._input_names)
        self.outputs = tuple(self._spec(n) for n in self._output_names)
        self._addresses: dict[str, int] = {}
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._forks = 0  # execution contexts created by ``fork`` (one per serving stream)
        self._parent: "TensorRTRunner | None" = None  # set on a fork: the runner it was forked from

    def _create_context(self, engine: "trt.ICudaEngine") -> "trt.IExecutionContext | None":
        """One execution context (a subclass may pass a runtime configuration)."""
        return engine.create_execution_context()

    def _spec(self, name: str) -> TensorSpec:
        engine = self.engine
        dims = tuple(None if d < 0 else d for d in dims_tuple(engine.get_tensor_shape(name)))
        return TensorSpec(name=name, dtype=np.dtype(self._trt.nptype(engine.get_tensor_dtype(name))).name, shape=dims)

    @property
    def engine(self) -> "trt.ICudaEngine":
        if self._engine is None:
            raise BadInput("runner is closed")
        return self._engine

    @property
    def context(self) -> "trt.IExecutionContext":
        if self._context is None:
            raise BadInput("runner is closed")
        return self._context

    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """``set_input_shape`` for every input; the output shapes TensorRT infers from them."""
        missing = [n for n in self._input_names if n not in input_shapes]
        if missing:
            raise BadInput(f"no shape given for engine input(s) {', '.join(missing)}")
        context = self.context
        for name in self._input_names:
            shape = tuple(int(d) for d in input_shapes[name])
            if not context.set_input_shape(name, shape):
                profile = self.engine.get_tensor_profile_shape(name, 0)
                low, high = dims_tuple(profile[0]), dims_tuple(profile[2])
                raise BadInput(
                    f"input {name!r}: shape {shape} is outside the engine's profile {low}..{high} "
                    "(rebuild with those --batch-sizes)"
                )
        self._shapes = {n: tuple(int(d) for d in input_shapes[n]) for n in self._input_names}
        outputs = {}
        for name in self._output_names:
            shape = dims_tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise BadInput(f"output {name!r}: TensorRT could not infer its shape from the inputs ({shape})")
            outputs[name] = shape
        return outputs

    def enqueue(self, buffers: Mapping[str, int], stream: int) -> None:
        """Bind every IO tensor (where its pointer changed) and enqueue one inference on ``stream``."""
        context = self.context
        for name in (*self._input_names, *self._output_names):
            ptr = int(buffers[name])
            if self._addresses.get(name) != ptr:
                if not context.set_tensor_address(name, ptr):
                    raise CudaError(f"TensorRT rejected the address of tensor {name!r}: {self._tail.text(2)}")
                self._addresses[name] = ptr
        if not context.execute_async_v3(int(stream)):
            raise CudaError("TensorRT execute_async_v3 failed: " + (self._tail.text(3) or "no message"))

    def memory_report(self) -> dict[str, Any]:
        """Device memory of this engine's execution context: ``device_memory_size_v2`` (TensorRT
        >= 10.1 and TensorRT-RTX; ``device_memory_size`` before), the activation memory a context
        allocates for its largest profile (STATIC strategy, the default). Weights live on the device
        besides and are about the plan's bytes (the result's ``engine.artifact_bytes``)."""
        engine = self.engine
        size = getattr(engine, "device_memory_size_v2", None)
        api = "ICudaEngine.device_memory_size_v2"
        if size is None:
            size, api = getattr(engine, "device_memory_size", None), "ICudaEngine.device_memory_size"
        if size is None:
            return {"kind": "n/a", "reason": "this TensorRT exposes no device_memory_size"}
        contexts = self.contexts
        return {"kind": "tensorrt", "context_device_memory_bytes": int(size), "contexts": contexts,
                "in_use_bytes": int(size) * contexts,
                "method": f"{api} per execution context × contexts; weights ≈ the plan's bytes, not included"}

    def fork(self) -> "TensorRTRunner":
        """A second runner over the same engine with its own execution context: what each stream of
        the serving driver (``trtprof.serving.driver``) needs, since one context must not run on two streams
        at once. Weights are shared; each context allocates its own activation memory. The fork's
        ``close`` drops only its context."""
        import copy

        twin = copy.copy(self)
        twin.__dict__.update({k: dict(v) for k, v in vars(self).items() if isinstance(v, dict)})
        twin._addresses, twin._shapes, twin._forks = {}, {}, 0
        context = twin._create_context(self.engine)
        if context is None:
            raise CudaError("TensorRT could not create another execution context (GPU out of memory?): "
                            + self._tail.text(3))
        twin._context = context
        twin._parent = self
        self._forks += 1
        return twin

    @property
    def contexts(self) -> int:
        """Execution contexts in use over this engine: this runner's own and its forks' (serving)."""
        return 1 + self._forks

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Host in, host out (accuracy checks). Allocates per call: not a path to time."""
        from contextlib import ExitStack

        from ...system import cuda

        out_shapes = self.prepare({n: tuple(np.shape(feeds[n])) for n in self._input_names if n in feeds})
        dtypes = {s.name: np.dtype(s.dtype) for s in (*self.inputs, *self.outputs)}
        pointers: dict[str, int] = {}
        hosts: dict[str, np.ndarray] = {}
        with ExitStack() as stack:
            stream = stack.enter_context(cuda.Stream())
            for name in self._input_names:
                data = np.asarray(feeds[name], dtype=dtypes[name])
                host = stack.enter_context(cuda.PinnedHostBuffer(max(1, data.nbytes))).array(data.shape, data.dtype)
                host[...] = data
                pointers[name] = stack.enter_context(cuda.DeviceBuffer(max(1, data.nbytes))).ptr
                cuda.memcpy_htod_async(pointers[name], host, stream)
            for name, shape in out_shapes.items():
                nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtypes[name].itemsize)
                pointers[name] = stack.enter_context(cuda.DeviceBuffer(nbytes)).ptr
                hosts[name] = stack.enter_context(cuda.PinnedHostBuffer(nbytes)).array(shape, dtypes[name])
            try:
                self.enqueue(pointers, stream.handle)
            finally:
                self._addresses.clear()  # these buffers are freed below; the next enqueue rebinds
            for name in out_shapes:
                cuda.memcpy_dtoh_async(hosts[name], pointers[name], stream)
            stream.synchronize()
            results = {name: np.array(hosts[name], copy=True) for name in out_shapes}
        return results

    def inspect(self) -> "EngineInspection":
        """Inspector view; shapes resolved for the last ``prepare`` when there was one."""
        from .inspect import inspect_engine

        return inspect_engine(self.engine, self.context if self._shapes else None, self._trt)

    def profile_layers(
        self, input_shapes: Mapping[str, tuple[int, ...]], feeds: Mapping[str, Any], iterations: int
    ) -> "LayerProfile":
        from .inspect import profile_layers

        return profile_layers(self.engine, input_shapes, feeds, iterations=iterations, module=self._trt)

    def close(self) -> None:
        parent, self._parent = self._parent, None
        if parent is not None and self._context is not None:  # a fork: its context no longer counts
            parent._forks -= 1
        self._context = None
        self._engine = None
        self._addresses.clear()
