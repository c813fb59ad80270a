"""A PyTorch training step as a runner: one call = forward + loss + backward + optimizer step.

Why a runner: compare's interleaved rounds, CUDA-event timing and bootstrap statistics already answer
"is B faster than A, with a CI" for anything that satisfies the Runner protocol. A training step that
satisfies it (``infer`` on the CPU, ``prepare``/``enqueue``/``bind`` on the GPU) is measured by that
same machinery, so inference and training verdicts mean the same thing.

Training runners are stateful (the weights change every call). Each arm starts from a deep copy of
the same initial module, with its own optimizer, so no arm inherits another's weights or moments;
timing never depends on the weight values (no data-dependent control flow), while the accuracy side
(loss after N steps) is run separately from fresh copies on identical data.

Arms (``ARMS``): ``fp32`` (TF32 off: true FP32), ``tf32`` (TF32 on for cuDNN and matmul),
``amp-fp16`` (``torch.autocast`` float16 + ``GradScaler``), ``amp-bf16`` (autocast bfloat16, no
scaler: bfloat16 has FP32's exponent range). AMP arms run with TF32 off, so the ops autocast leaves
in FP32 are real FP32 and the comparison isolates AMP. ``NAME+graphed`` (GPU only) is arm NAME with
the whole step captured once in a CUDA graph and replayed: it measures whether removing the host's
launch cost shortens the step ("CUDA graphs would fix it" as a measurement, not advice).

cuDNN autotuning (``cudnn.benchmark``) is on by default in every arm, as a PyTorch user sets it for
fixed-shape training and as TensorFlow does by default: cuDNN times its algorithms on the first step
of each shape. That first step is always an untimed one (the solo pass and the timing loop's warmup
run before any timed step), so tuning never lands in a measurement.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from ..errors import BadInput, BadModel, UnsupportedPrecision
from ..spec import TensorSpec

LOSSES = ("mae-to-ones", "cross-entropy")
OPTIMIZERS = ("adam", "sgd")
ADAM_LR = 1e-3
SGD_LR = 1e-2
SGD_MOMENTUM = 0.9
LOSS_OUTPUT = TensorSpec(name="loss", dtype="float32", shape=(1,))
# Phases a step is split into for the reasons (CUDA events / host clock at each boundary).
PHASES = ("forward_loss", "backward", "unscale", "optimizer", "scaler_update")


@dataclass(frozen=True)
class TrainArm:
    """One way to run the training step."""

    name: str
    autocast_dtype: str | None  # "float16" | "bfloat16" | None (no autocast)
    tf32: bool
    grad_scaler: bool
    graphed: bool = False  # the whole step captured in a CUDA graph and replayed (GPU only)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "autocast_dtype": self.autocast_dtype, "tf32": self.tf32,
                "grad_scaler": self.grad_scaler, "graphed": self.graphed}

    @property
    def eager_name(self) -> str:
        """The arm this one is a graphed copy of (its own name when not graphed)."""
        return self.name[: -len(GRAPHED_SUFFIX)] if self.graphed else self.name


ARMS: dict[str, TrainArm] = {
    "fp32": TrainArm("fp32", None, tf32=False, grad_scaler=False),
    "tf32": TrainArm("tf32", None, tf32=True, grad_scaler=False),
    "amp-fp16": TrainArm("amp-fp16", "float16", tf32=False, grad_scaler=True),
    "amp-bf16": TrainArm("amp-bf16", "bfloat16", tf32=False, grad_scaler=False),
}
DEFAULT_GPU_ARMS = ("fp32", "tf32", "amp-fp16", "amp-bf16")
# On a CPU, TF32 does not exist and FP16 autocast has few fast kernels: the default checks
# correctness of the cheapest meaningful pair.
DEFAULT_CPU_ARMS = ("fp32", "amp-bf16")
GRAPHED_SUFFIX = "+graphed"


def graphed_arm(arm: TrainArm) -> TrainArm:
    return TrainArm(arm.name + GRAPHED_SUFFIX, arm.autocast_dtype, tf32=arm.tf32, grad_scaler=arm.grad_scaler,
                    graphed=True)


def _arm_for(name: str, device: str) -> TrainArm:
    """``fp32`` → ARMS["fp32"]; ``amp-bf16+graphed`` → its CUDA-graphed copy (refused where it cannot run)."""
    if not name.endswith(GRAPHED_SUFFIX):
        return ARMS[name]
    base = ARMS[name[: -len(GRAPHED_SUFFIX)]]
    if device != "cuda":
        raise UnsupportedPrecision(f"--precisions {name}: CUDA graphs need a GPU (this run is on the CPU)")
    if base.grad_scaler:
        raise UnsupportedPrecision(f"--precisions {name}: GradScaler reads its inf flag back to the host every step, "
                                   "which a CUDA graph cannot capture; graph amp-bf16 (no scaler) instead")
    return graphed_arm(base)


def parse_arms(text: str | None, device: str) -> list[TrainArm]:
    """``fp32,amp-fp16`` → arms, baseline first; None → the device's default list."""
    if text is None:
        names = list(DEFAULT_GPU_ARMS if device == "cuda" else DEFAULT_CPU_ARMS)
    else:
        names = list(dict.fromkeys(t.strip().lower() for t in text.split(",") if t.strip()))
    unknown = [n for n in names if n.removesuffix(GRAPHED_SUFFIX) not in ARMS]
    if unknown:
        raise BadInput(f"--precisions: unknown {', '.join(unknown)} (choose from {', '.join(ARMS)}, "
                       f"each optionally with {GRAPHED_SUFFIX} on a GPU)")
    if len(names) < 2:
        raise BadInput(f"--precisions {text!r}: give a baseline and at least one candidate, e.g. fp32,amp-fp16")
    if device == "cpu" and any(n.removesuffix(GRAPHED_SUFFIX) == "tf32" for n in names):
        raise UnsupportedPrecision("--precisions: tf32 exists on NVIDIA GPUs only (on a CPU it would be fp32 again)")
    return [_arm_for(n, device) for n in names]


GRAPH_WARMUP_STEPS = 3  # eager steps on a side stream before capture (PyTorch's recipe uses 3)


def make_optimizer(torch: Any, params: list[Any], name: str, optimizer_fn: Callable[[Any], Any] | None, *,
                   capturable: bool = False) -> Any:
    """The factory's ``optimizer_fn(params)`` or the CLI's choice. ``capturable``: the graphed arm's
    Adam keeps its step count on the device (PyTorch's flag for CUDA-graph capture); same math."""
    if optimizer_fn is not None:
        opt = optimizer_fn(params)
        if capturable:
            for group in opt.param_groups:
                if "capturable" in group:
                    group["capturable"] = True
        return opt
    if name == "adam":
        return torch.optim.Adam(params, lr=ADAM_LR, capturable=capturable)
    return torch.optim.SGD(params, lr=SGD_LR, momentum=SGD_MOMENTUM)


def import_torch() -> Any:
    from ..backends import torch as torch_backend

    return torch_backend.import_torch()


def load_module(model: Path, proto: Any = None) -> tuple[Any, tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """ONNX → trainable float32 torch module (onnx2torch, after the Identity pre-pass), plus the
    model's inputs and outputs. Weights become parameters; a graph with none cannot be trained.
    ``proto``: the model already loaded from ``model`` (the pre-pass changes it in place)."""
    from ..backends.torch import fold_identity_initializers, to_torch_module
    from ..model.onnx_model import describe, load_onnx

    if proto is None:
        proto = load_onnx(Path(model))
    info = describe(proto, Path(model))
    fold_identity_initializers(proto)
    module = to_torch_module(proto, fuse=False).float().train()  # its initializers are what trains
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise BadModel("the model has no trainable weights after conversion (nothing to train)", path=model)
    return module, info.inputs, info.outputs


def resolve_device(text: str) -> str:
    torch = import_torch()
    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if text not in ("cpu", "cuda"):
        raise BadInput(f"--device {text!r}: choose auto, cpu or cuda")
    if text == "cuda" and not torch.cuda.is_available():
        from ..errors import BackendUnavailable

        raise BackendUnavailable("--device cuda: torch sees no CUDA GPU here")
    return text


def check_arm(arm: TrainArm, device: str) -> None:
    torch = import_torch()
    if device == "cuda" and arm.autocast_dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise UnsupportedPrecision(f"{arm.name}: this GPU has no bfloat16 support")


@dataclass(frozen=True)
class StepSettings:
    """How every arm's step trains: the optimizer and loss by name (``OPTIMIZERS``, ``LOSSES``), the seed of
    the cross-entropy targets, cuDNN autotuning while the step runs (GPU), and the user's factory's own
    ``loss_fn``/``optimizer_fn`` (``factory.load_factory``), which replace the named ones."""

    optimizer: str = "adam"
    loss: str = "mae-to-ones"
    seed: int = 0
    autotune: bool = True
    loss_fn: Callable[[Any], Any] | None = None
    optimizer_fn: Callable[[Any], Any] | None = None


class TorchTrainStep:
    """Runner whose one call is a whole training step on a private copy of the module.

    ``device`` "cpu": timed on the host clock around ``infer``. ``device`` "cuda": ``enqueue`` /
    ``bind`` run the step on the profiler's stream, reading the inputs from the profiler's buffers
    (no copy) and writing the loss into its output buffer; everything else stays on the GPU.
    """

    def __init__(self, module: Any, arm: TrainArm, inputs: tuple[TensorSpec, ...], *, device: str,
                 settings: StepSettings = StepSettings()) -> None:
        torch = import_torch()
        optimizer, loss = settings.optimizer, settings.loss
        if optimizer not in OPTIMIZERS:
            raise BadInput(f"--optimizer {optimizer!r}: choose {' or '.join(OPTIMIZERS)}")
        if loss not in LOSSES:
            raise BadInput(f"--loss {loss!r}: choose {' or '.join(LOSSES)}")
        self._torch = torch
        self.device = device
        self.arm = arm
        self.inputs = inputs
        self.outputs = (LOSS_OUTPUT,)
        self.loss_name = loss
        self.seed = settings.seed
        self.autotune = settings.autotune  # cudnn.benchmark while the step runs (GPU)
        self.loss_fn = settings.loss_fn
        self.module = copy.deepcopy(module).to(device).train()
        params = [p for p in self.module.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(torch, params, optimizer, settings.optimizer_fn, capturable=arm.graphed)
        self._graph: tuple[tuple, Any, list[Any], Any] | None = None  # (shapes, CUDAGraph, static ins, static loss)
        self.scaler = torch.amp.GradScaler(device) if arm.grad_scaler else None
        self._dtype = getattr(torch, arm.autocast_dtype) if arm.autocast_dtype else None
        self._streams: dict[int, Any] = {}
        self._feeds_key: tuple | None = None
        self._feeds: list[Any] = []
        self._targets: dict[tuple, Any] = {}
        self._bound: tuple[tuple, list[Any], Any] | None = None
        self._input_shapes: dict[str, tuple[int, ...]] = {}

    # -- the step -------------------------------------------------------------------------------
    def _target(self, y: Any) -> Any:
        """Class labels for cross-entropy: seeded, one per row, fixed per output shape."""
        key = tuple(y.shape)
        target = self._targets.get(key)
        if target is None:
            if y.dim() < 2:
                raise BadInput(f"--loss cross-entropy needs logits [batch, classes]; the model's output is {list(y.shape)}")
            rng = np.random.default_rng(self.seed)
            labels = rng.integers(0, int(y.shape[1]), size=(int(y.shape[0]),) + tuple(int(d) for d in y.shape[2:]))
            target = self._targets[key] = self._torch.as_tensor(labels, dtype=self._torch.long, device=y.device)
        return target

    def _loss(self, out: Any) -> Any:
        """The user's ``loss_fn(output)`` when the factory gave one (called inside autocast, as the
        AMP recipe computes the loss); else computed in FP32 on the FP32 view of the first output,
        for every arm alike."""
        torch = self._torch
        if self.loss_fn is not None:
            return self.loss_fn(out)
        y = out if isinstance(out, torch.Tensor) else (tuple(out.values()) if isinstance(out, dict) else tuple(out))[0]
        y = y.float()
        if self.loss_name == "cross-entropy":
            return torch.nn.functional.cross_entropy(y, self._target(y))
        return torch.mean(torch.abs(y - 1.0))  # the report's reduce_mean(|y - 1|): needs no labels

    def step(self, tensors: list[Any], mark: Callable[[str], None] | None = None) -> Any:
        """One training step; ``mark(phase)`` is called at the end of each phase (reasons only).
        The unscale is explicit (``scaler.unscale_``) so its cost can be seen apart from the
        optimizer's; ``scaler.step`` then skips it, which is GradScaler's documented pattern."""
        torch = self._torch
        opt, scaler = self.optimizer, self.scaler
        opt.zero_grad(set_to_none=True)
        # autocast's weight cache cannot live across a CUDA-graph capture (PyTorch's graph docs), so the
        # graphed arm runs without it
        with torch.autocast(device_type=self.device, dtype=self._dtype, enabled=self._dtype is not None,
                            cache_enabled=False if self.arm.graphed else None):
            out = self.module(*tensors)
            loss = self._loss(out) if self.loss_fn is not None else None
        if loss is None:
            loss = self._loss(out)
        if mark:
            mark("forward_loss")
        if scaler is not None:
            scaler.scale(loss).backward()
            if mark:
                mark("backward")
            scaler.unscale_(opt)
            if mark:
                mark("unscale")
            scaler.step(opt)
            if mark:
                mark("optimizer")
            scaler.update()
            if mark:
                mark("scaler_update")
        else:
            loss.backward()
            if mark:
                mark("backward")
            opt.step()
            if mark:
                mark("optimizer")
        return loss

    @contextmanager
    def modes(self) -> Iterator[None]:
        """TF32 as the arm asks and cuDNN autotuning as set (GPU only; a no-op on a CPU)."""
        if self.device != "cuda":
            yield
            return
        from ..backends.torch import cudnn_mode

        with cudnn_mode(self._torch, self.arm.tf32, self.autotune):
            yield

    # -- host path (cpu timing, and the accuracy/memory/reasons passes on either device) ----------
    def tensors_for(self, feeds: Mapping[str, np.ndarray]) -> list[Any]:
        """The feeds as tensors on the runner's device, converted once per feeds object."""
        key = tuple((t.name, id(feeds[t.name])) for t in self.inputs)
        if key != self._feeds_key:
            torch = self._torch
            self._feeds = [torch.as_tensor(np.ascontiguousarray(feeds[t.name])).to(self.device) for t in self.inputs]
            self._feeds_key = key
        return self._feeds

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One step; returns the loss (reading it back synchronises, as a host-timed step must)."""
        tensors = self.tensors_for(feeds)
        with self.modes():
            loss = self.step(tensors)
        return {"loss": np.array([float(loss.detach().item())], dtype=np.float32)}

    # -- device path (time_device) ---------------------------------------------------------------
    def prepare(self, input_shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        missing = [t.name for t in self.inputs if t.name not in input_shapes]
        if missing:
            raise BadModel(f"no shape given for input(s) {', '.join(missing)}")
        self._input_shapes = {t.name: tuple(input_shapes[t.name]) for t in self.inputs}
        self._bound = None
        return {"loss": LOSS_OUTPUT.shape}  # type: ignore[dict-item]

    def _bind_tensors(self, buffers: Mapping[str, int]) -> tuple[list[Any], Any]:
        from ..backends.torch import DeviceArray

        key = tuple(int(buffers[t.name]) for t in self.inputs) + (int(buffers["loss"]),)
        if self._bound is None or self._bound[0] != key:
            torch = self._torch
            ins = [torch.as_tensor(DeviceArray(buffers[t.name], self._input_shapes[t.name], t.dtype), device="cuda")
                   for t in self.inputs]
            out = torch.as_tensor(DeviceArray(buffers["loss"], LOSS_OUTPUT.shape, "float32"), device="cuda")  # type: ignore[arg-type]
            self._bound = (key, ins, out)
        return self._bound[1], self._bound[2]

    def _stream(self, stream: int) -> Any:
        ext = self._streams.get(stream)
        if ext is None:
            ext = self._streams[stream] = self._torch.cuda.ExternalStream(stream)
        return ext

    def enqueue(self, buffers: Mapping[str, int], stream: int) -> None:
        with self.bind(buffers, stream) as launch:
            launch()

    @contextmanager
    def bind(self, buffers: Mapping[str, int], stream: int) -> Iterator[Callable[[], None]]:
        """Enter the stream and TF32 contexts once per measurement; each launch is one step whose
        loss lands in the profiler's output buffer. GradScaler's inf check reads one flag back to
        the host inside ``scaler.step`` (that synchronisation is part of an FP16 step)."""
        torch = self._torch
        ins, out = self._bind_tensors(buffers)
        step = self.step

        def eager() -> None:
            out.copy_(step(ins).detach().reshape(1))

        with torch.cuda.stream(self._stream(stream)), self.modes():
            launch: Callable[[], None] = eager
            if self.arm.graphed:
                graph, static_ins, static_loss = self._capture(ins)

                def replay() -> None:
                    for dst, src in zip(static_ins, ins):
                        dst.copy_(src)
                    graph.replay()
                    out.copy_(static_loss.reshape(1))

                launch = replay
            yield launch

    def _capture(self, ins: list[Any]) -> tuple[Any, list[Any], Any]:
        """The whole step (forward, loss, backward, optimizer) captured once per input shape, over
        static input tensors the launch copies the bound inputs into (one device copy per step).
        PyTorch's whole-network capture recipe: warm up on a side stream (autotuning, optimizer
        state and the allocator's pools happen there), grads set to None, then capture."""
        torch = self._torch
        key = tuple(tuple(t.shape) for t in ins)
        if self._graph is not None and self._graph[0] == key:
            return self._graph[1], self._graph[2], self._graph[3]
        static_ins = [t.clone() for t in ins]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARMUP_STEPS):
                self.step(static_ins)
        torch.cuda.current_stream().wait_stream(side)
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = self.step(static_ins).detach()
        self._graph = (key, graph, static_ins, static_loss)
        return graph, static_ins, static_loss

    def close(self) -> None:
        self._bound = None
        self._graph = None
        self._streams.clear()
        self._feeds = []
        self.module = None
        self.optimizer = None  # type: ignore[assignment]
