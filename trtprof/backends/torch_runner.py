"""The torch backend's runner: a loaded torch module driven by the profiler's device buffers and stream
(``TorchRunner``, set up as ``TorchRunnerSettings`` say), and the TF32 and cuDNN switches it runs under.
Moved out of ``backends.torch`` to keep that module within its length: ``backends.torch`` builds the
engines (its build runs the converted module once through a runner: ``check_and_export``), loads them
into runners made here, and re-exports the names its callers take from it.

cuDNN autotuning (``torch.backends.cudnn.benchmark``) is on by default while the runner runs
(``TorchRunner.autotune``; ``--no-autotune`` switches it off): with it off cuDNN picks convolution
kernels by heuristics, which on the H200 made the report's Conv+ELU net up to 2× slower and flipped
its FP16 verdict (FACTS.md). TensorRT always picks its tactics by timing them, so autotuned PyTorch
is the like-for-like comparison. Tuning happens on the first call per shape (``prepare`` and the
timing loop's warmup), never inside the measured iterations; the global flag is restored afterwards.

The runner reads and writes the profiler's device buffers directly: every pointer is wrapped as a
tensor through ``__cuda_array_interface__`` (no copy) and the module runs under
``torch.cuda.ExternalStream(stream)``. The one extra device operation per output is the ``copy_``
of the module's result into the profiler's output buffer (PyTorch allocates its own outputs); in
fp16 that copy also casts to float32.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np

from ..errors import BadModel, TrtprofError
from ..spec import Precision, TensorSpec
from ..system.preflight import is_out_of_memory
from .base import RunnerBase
from . import torch_artifact
from .torch_artifact import first_line
from .torch_module import CHANNELS_LAST, CONTIGUOUS
from .torch_convert import LOW_DTYPES, import_torch

if TYPE_CHECKING:
    from .torch_fixed import FixedShapeModules


@contextmanager
def tf32_mode(torch: Any, enabled: bool) -> Iterator[None]:
    """Set TF32 for matmul and cuDNN for a block and restore the previous setting (cheap when the
    flags already match, which is the steady state inside the timing loop)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    prev = (matmul.allow_tf32, cudnn.allow_tf32)
    if prev == (enabled, enabled):
        yield
        return
    matmul.allow_tf32 = cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = prev


@contextmanager
def cudnn_mode(torch: Any, tf32: bool, autotune: bool) -> Iterator[None]:
    """TF32 (see ``tf32_mode``) and cuDNN autotuning for a block, both restored afterwards."""
    cudnn = torch.backends.cudnn
    prev = cudnn.benchmark
    if prev != autotune:
        cudnn.benchmark = autotune
    try:
        with tf32_mode(torch, tf32):
            yield
    finally:
        if prev != autotune:
            cudnn.benchmark = prev


def capturing(torch: Any) -> bool:
    """Is a CUDA graph being captured on the current stream (its failures are the capture's, not the model's)?"""
    try:
        return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    except Exception:  # noqa: BLE001 - the query itself fails only when capture already broke
        return True


class DeviceArray:
    """A raw device pointer described by ``__cuda_array_interface__`` (v2: no stream to sync with,
    the profiler orders work on its own stream), so ``torch.as_tensor`` wraps it without a copy."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: str) -> None:
        self.__cuda_array_interface__ = {
            "shape": tuple(int(d) for d in shape),
            "typestr": np.dtype(dtype).str,
            "data": (int(ptr), False),
            "version": 2,
        }


@dataclass(frozen=True)
class TorchRunnerSettings:
    """Where a ``TorchRunner`` runs and how it hands the module its inputs.

    ``device``: "cuda" for timing; "cpu" only for the what-if's output check and its tests (``infer``).
    ``cast_io``: an fp16/bf16 engine's float inputs are cast to its dtype by the runner (a ``.to(dtype)``
    module); False for a module converted from the FP16 ONNX graph, which casts inside itself.
    ``memory_format``: the build option (``CONTIGUOUS`` or ``CHANNELS_LAST``); ``nhwc_inputs``: the inputs a
    channels-last runner hands the module in NHWC memory (``torch_module.conv_fed_inputs``; ignored by a
    contiguous one)."""

    device: str = "cuda"
    cast_io: bool = True
    memory_format: str = CONTIGUOUS
    nhwc_inputs: frozenset[str] = frozenset()


class TorchRunner(RunnerBase):
    """A loaded torch module on the GPU, driven by the profiler's buffers and stream."""
    per_node: Any = None  # the conversion without torch_fuse's rewrites (per-layer profiling), set by the loader

    device = "cuda"
    autotune: bool  # always set here (RunnerBase's None means "no such setting")
    tf32: bool

    def __init__(self, module: Any, precision: Precision, inputs: tuple[TensorSpec, ...],
                 outputs: tuple[TensorSpec, ...], *, settings: TorchRunnerSettings = TorchRunnerSettings(),
                 fixed: "FixedShapeModules | None" = None) -> None:
        self._torch = import_torch()
        # "cpu" only for the what-if's output check and its tests (infer); timing is on CUDA
        self.device = settings.device
        self.memory_format = settings.memory_format
        self._channels_last = self._torch.channels_last if settings.memory_format == CHANNELS_LAST else None
        self.nhwc_inputs = settings.nhwc_inputs if self._channels_last is not None else frozenset()
        self.module = module
        self.precision = precision
        self.inputs = inputs
        self.outputs = outputs
        self.tf32 = precision == Precision.TF32
        # fp16/bf16 of a .to(dtype) module: float IO cast here; a module from the FP16 ONNX graph casts inside
        low = LOW_DTYPES.get(precision) if settings.cast_io else None
        self._low = getattr(self._torch, low) if low else None
        self._half = self._low is not None
        # cuDNN picks convolution kernels by timing them (as TensorRT does) unless switched off:
        # bench/compare/profile set this from --no-autotune and record it in their config.
        self.autotune = True
        self._input_shapes: dict[str, tuple[int, ...]] = {}
        self._output_shapes: dict[str, tuple[int, ...]] = {}
        self._bound: tuple[tuple[int, ...], list[Any], list[Any]] | None = None
        self._streams: dict[int, Any] = {}
        # How the module was loaded (torch_artifact): the saved torch.export program, or onnx2torch's
        # conversion; ``reconvert`` (exported loads only) makes the converted module, for what needs one
        # submodule per ONNX node (per-layer profiling) or shapes the exported program refuses.
        self.loaded_by = torch_artifact.LOADED_CONVERTED
        self.reconvert: Any = None
        # An engine built at fixed shapes (``FixedShapeModules``): ``module`` is the one of the shapes last
        # prepared (or inferred), loaded then; ``fixed_batch`` the batch size it was folded at (None: unfolded)
        self.fixed = fixed
        self.fixed_batch: int | None = None
        self._selected: Any = None

    def select(self, input_shapes: Mapping[str, Any]) -> None:
        """An engine built at fixed shapes: make ``module`` the one of these input shapes (loaded the
        first time they are met; the previous one is let go). Nothing to do for other engines."""
        if self.fixed is None:
            return
        key = torch_artifact.shapes_key({t.name: tuple(input_shapes[t.name]) for t in self.inputs})
        if key == self._selected:
            return
        self.module = self.reconvert = None  # one module in memory at a time
        self.module, self.loaded_by, self.reconvert, self.fixed_batch = self.fixed.module_for(dict(key))
        self._selected = key
        self._bound = None

    def use_per_node_module(self, why: str) -> None:
        """Swap the module for onnx2torch's conversion of the same graph with one submodule per ONNX node
        (``torch_fuse``'s rewrites left out; same precision and memory format): per-layer ranges need it."""
        if self.fixed is not None and self._selected is not None:
            self.module = self.fixed.per_node_module(dict(self._selected))
        elif self.per_node is not None:
            self.module = self.per_node()
        else:
            return
        self.reconvert, self.per_node = None, None
        self.loaded_by = f"{torch_artifact.LOADED_CONVERTED} ({why})"
        self._bound = None

    def use_converted_module(self, why: str) -> bool:
        """Swap a saved program's module for onnx2torch's conversion of the same graph (same
        precision and memory format); False when the module already is the conversion."""
        if self.reconvert is None:
            return False
        self.module, self.reconvert = self.reconvert(), None
        self.loaded_by = f"{torch_artifact.LOADED_CONVERTED} ({why})"
        self._bound = None
        return True

    # -- shapes ---------------------------------------------------------------------------------
    def cast_in(self, tensor: Any, name: str) -> Any:
        """fp16/bf16 engines take float inputs in their dtype, a channels-last runner its ``nhwc_inputs``
        in NHWC memory: both happen on the device, in the stream, in one ``to``."""
        low = self._low if self._low is not None and tensor.is_floating_point() and tensor.dtype != self._low else None
        if name in self.nhwc_inputs and tensor.dim() == 4:
            return tensor.to(dtype=low or tensor.dtype, memory_format=self._channels_last)
        if low is not None:
            return tensor.to(low)
        return tensor

    def check_layout(self, tensors: list[Any]) -> None:
        """A channels-last runner must hand the module NHWC inputs: checked on the tensors the module
        really receives (``prepare``, outside the timing), so a cast path that drops the layout fails
        loudly instead of measuring NCHW under a channels-last label."""
        for spec, t in zip(self.inputs, tensors):
            if spec.name not in self.nhwc_inputs:
                continue
            got = self.cast_in(t, spec.name)
            if not got.is_contiguous(memory_format=self._channels_last):
                raise BadModel(f"input {spec.name!r} reaches the module in strides {tuple(got.stride())}, "
                               "not channels-last")

    def _run(self, tensors: list[Any]) -> tuple[Any, ...]:
        try:
            result = self.module(*[self.cast_in(t, spec.name) for spec, t in zip(self.inputs, tensors)])
        except TrtprofError:
            raise
        except Exception as err:  # noqa: BLE001 - the converted module's failure, in one line
            if is_out_of_memory(err) or capturing(self._torch):
                raise  # out of memory is the batch's answer (preflight); a failed capture falls back to eager
            raise BadModel(f"the converted torch module ({self.precision.value}) failed: "
                           f"{type(err).__name__}: {first_line(err)}") from err
        if isinstance(result, self._torch.Tensor):
            return (result,)
        if isinstance(result, dict):
            return tuple(result.values())
        return tuple(result)

    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        """Run the module once on these shapes (default stream, synchronised) to learn the output
        shapes; also leaves cuDNN handles and the allocator warm before the profiler's stream."""
        torch = self._torch
        missing = [t.name for t in self.inputs if t.name not in input_shapes]
        if missing:
            raise BadModel(f"no shape given for input(s) {', '.join(missing)}")
        self.select(input_shapes)
        tensors = [torch.zeros(tuple(input_shapes[t.name]), dtype=getattr(torch, t.dtype), device=self.device)
                   for t in self.inputs]
        self.check_layout(tensors)
        with torch.inference_mode(), cudnn_mode(torch, self.tf32, self.autotune):
            try:
                outs = self._run(tensors)
            except BadModel as err:  # an exported program guards the shapes it was exported for
                if not self.use_converted_module(f"the saved program refused these shapes: {err.message[:120]}"):
                    raise
                outs = self._run(tensors)
        if self.device == "cuda":
            torch.cuda.synchronize()
        if len(outs) != len(self.outputs):
            raise BadModel(f"the torch module returned {len(outs)} outputs, the model declares {len(self.outputs)}")
        self._input_shapes = {t.name: tuple(input_shapes[t.name]) for t in self.inputs}
        self._output_shapes = {spec.name: tuple(int(d) for d in out.shape) for spec, out in zip(self.outputs, outs)}
        self._bound = None
        return dict(self._output_shapes)

    # -- the hot path ---------------------------------------------------------------------------
    def _bind(self, buffers: Mapping[str, int]) -> tuple[list[Any], list[Any]]:
        """Tensors over the profiler's pointers, made once per set of pointers (no copy)."""
        key = tuple(int(buffers[t.name]) for t in self.inputs + self.outputs)
        if self._bound is None or self._bound[0] != key:
            torch = self._torch
            ins = [torch.as_tensor(DeviceArray(buffers[t.name], self._input_shapes[t.name], t.dtype), device="cuda")
                   for t in self.inputs]
            outs = [torch.as_tensor(DeviceArray(buffers[t.name], self._output_shapes[t.name], t.dtype), device="cuda")
                    for t in self.outputs]
            self._bound = (key, ins, outs)
        return self._bound[1], self._bound[2]

    def enqueue(self, buffers: Mapping[str, int], stream: int) -> None:
        """Launch one inference on ``stream``; no synchronisation, no host-device traffic."""
        torch = self._torch
        ins, outs = self._bind(buffers)
        ext = self._streams.get(stream)
        if ext is None:
            ext = self._streams[stream] = torch.cuda.ExternalStream(stream)
        with torch.cuda.stream(ext), torch.inference_mode(), cudnn_mode(torch, self.tf32, self.autotune):
            for dst, src in zip(outs, self._run(ins)):
                dst.copy_(src)

    @contextmanager
    def bind(self, buffers: Mapping[str, int], stream: int) -> Iterator[Any]:
        """Optional fast path the timing loop uses: enter the stream, inference-mode and TF32
        contexts once for the whole measurement and yield a launch that only runs the module and
        the output copy. Per-call context switching costs tens of microseconds of host time, which
        an idle GPU waits for: at small batch that would be measured as the model's time."""
        torch = self._torch
        ins, outs = self._bind(buffers)
        ext = self._streams.get(stream)
        if ext is None:
            ext = self._streams[stream] = torch.cuda.ExternalStream(stream)
        run = self._run

        def launch() -> None:
            for dst, src in zip(outs, run(ins)):
                dst.copy_(src)

        with torch.cuda.stream(ext), torch.inference_mode(), cudnn_mode(torch, self.tf32, self.autotune):
            yield launch

    @contextmanager
    def hold_mode(self) -> Iterator[None]:
        """TF32 and autotune flags set once for a multi-threaded run (``trtprof.serving.driver``): they are
        process-wide, so every thread's own ``bind`` then finds them set and leaves them alone
        instead of restoring them under another thread's feet."""
        with cudnn_mode(self._torch, self.tf32, self.autotune):
            yield

    # -- correctness path -------------------------------------------------------------------------
    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self._torch
        self.select({t.name: np.shape(feeds[t.name]) for t in self.inputs})
        tensors = [torch.from_numpy(np.ascontiguousarray(feeds[t.name])).to(self.device) for t in self.inputs]
        self.check_layout(tensors)
        with torch.inference_mode(), cudnn_mode(torch, self.tf32, self.autotune):
            outs = self._run(tensors)
        return {spec.name: np.ascontiguousarray(  # a channels-last output comes back NCHW-ordered like the others
                    out.float().cpu().numpy() if self._half and out.is_floating_point() else out.cpu().numpy())
                for spec, out in zip(self.outputs, outs)}

    # -- memory (trtprof.system.memory) ------------------------------------------------------------------
    def reset_memory_peak(self) -> None:
        """Start a new peak window of the caching allocator (bench calls it before the timed runs)."""
        self._torch.cuda.reset_peak_memory_stats()

    def memory_report(self) -> dict[str, Any]:
        """What the caching allocator saw since ``reset_memory_peak``: the peak of allocated bytes
        (weights, activations, cuDNN workspaces) and the bytes it holds reserved from the driver.
        The timing loop's input/output buffers (plain cudaMalloc) are not in these figures."""
        cuda = self._torch.cuda
        peak = int(cuda.max_memory_allocated())
        return {"kind": "torch_allocator", "allocated_peak_bytes": peak, "in_use_bytes": peak,
                "reserved_bytes": int(cuda.memory_reserved()), "allocated_bytes": int(cuda.memory_allocated()),
                "method": "torch.cuda.max_memory_allocated since reset_peak_memory_stats before the timed runs; "
                          "memory_reserved after them"}

    def trim(self) -> None:
        """Return the caching allocator's unused blocks to the driver (workers call it before idling);
        tensors in use, the bound buffers and captured graphs' pools stay."""
        self._torch.cuda.empty_cache()

    def close(self) -> None:
        self._bound = None
        self._streams.clear()
        self.module = None
        self.fixed = self.reconvert = None
