"""Why a mixed-precision training step is (not) faster: measured evidence, one finding per cause.

Evidence per arm (``StepProfile``), from two short passes outside the timed rounds:

* phases: the step split at its boundaries (forward+loss, backward, GradScaler unscale + inf check,
  optimizer step, scaler update) with CUDA events on the GPU, the host clock on a CPU;
* kernels: torch.profiler's device kernels, each classed FP16 / BF16 / TF32 / FP32 / other by its
  name (cuDNN, cuBLAS and ATen put the data type in kernel names: ``…f16…``, ``c10::Half``,
  ``bf16``, ``tf32``, ``float``); the classification is a heuristic, so the top kernels and their
  class are kept in the JSON for anyone to check; the time in ``aten::_to_copy`` (autocast's
  casts); kernels per step and the GPU's busy share of the step (launch-bound when low).

Static evidence from the ONNX graph: which Conv/Gemm/MatMul layers have channel counts that are
multiples of 8 (tensor cores need them for FP16/BF16; others fall back or pad).
"""
from __future__ import annotations

import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from ..diagnose.findings import Finding
from ..layers.graph import TC_MULTIPLE_FP16
from .step import PHASES, TorchTrainStep

PROFILE_STEPS = 3
PHASE_STEPS = 5
TOP_KERNELS = 12
# Below this share of the step with a kernel running, the GPU waits for the host (launch-bound).
BUSY_LAUNCH_BOUND = 0.6
# A candidate whose kernels run in low precision for less than this share of kernel time has not
# really been converted: most of its time is still FP32 work.
LOW_PRECISION_MIN_SHARE = 0.5
# Shares of the step worth a finding of their own.
CAST_SHARE = 0.05
SCALER_SHARE = 0.05
OPTIMIZER_SHARE = 0.15
KERNEL_SLOWER = 1.05  # candidate kernel time this much above the baseline's: the kernels themselves lose
TENSOR_CORE_MULTIPLE = TC_MULTIPLE_FP16  # the inference layer table's rule (layers.graph)
# The profiling pass's step must be within this factor of the timed median step for its phase split
# to describe the timed step (on a loaded CPU it is often not: then no phase shares are reported).
PROFILE_STEP_AGREEMENT = 1.5
# A memory difference at least this share of which is not weights/gradients/optimizer state/saved
# activations is called working memory (cuDNN workspaces and temporaries).
WORKSPACE_SHARE = 0.5

# In CUTLASS/cuDNN names the letter before the MMA shape is the accumulator ("s16816" = FP32
# accumulate), not the input type, so TF32 is recognised only by an explicit "tf32".
_BF16 = re.compile(r"bf16|bfloat16")
_TF32 = re.compile(r"tf32")
_FP16 = re.compile(r"f16|fp16|half|h884|h1688|h16816|hmma")
_FP32 = re.compile(r"float|f32|fp32|sgemm|scudnn")
MAX_KERNEL_NAMES = 300  # per-name kernel totals kept in the JSON, so classes can be re-derived


def kernel_class(name: str) -> str:
    """fp16 | bf16 | tf32 | fp32 | other, from a kernel's (demangled) name."""
    n = name.lower()
    if _BF16.search(n):
        return "bf16"
    if _TF32.search(n):
        return "tf32"
    if _FP16.search(n):
        return "fp16"
    if _FP32.search(n):
        return "fp32"
    return "other"


@dataclass
class StepProfile:
    """What one arm's step spends its time on (all times per step, ms)."""

    arm: str
    phases_ms: dict[str, float] = field(default_factory=dict)
    step_ms: float = 0.0
    kernel_ms_by_class: dict[str, float] = field(default_factory=dict)
    kernel_ms: float = 0.0
    kernels_per_step: float = 0.0
    cast_ms: float = 0.0
    top_kernels: list[dict[str, Any]] = field(default_factory=list)
    kernel_ms_by_name: dict[str, float] = field(default_factory=dict)
    clock: str = ""
    errors: list[str] = field(default_factory=list)
    library_output: list[str] = field(default_factory=list)  # what the profiler printed, captured

    @property
    def busy_share(self) -> float | None:
        """Kernel time / step time, at most 1: the two come from separate passes (profiler, events),
        so their raw ratio can exceed 1 by the passes' difference; both stay in the JSON."""
        return min(1.0, self.kernel_ms / self.step_ms) if self.step_ms > 0 and self.kernel_ms > 0 else None

    def share(self, phase: str) -> float:
        return self.phases_ms.get(phase, 0.0) / self.step_ms if self.step_ms > 0 else 0.0

    def low_precision_share(self) -> float | None:
        if self.kernel_ms <= 0:
            return None
        return (self.kernel_ms_by_class.get("fp16", 0.0) + self.kernel_ms_by_class.get("bf16", 0.0)) / self.kernel_ms

    def to_json(self) -> dict[str, Any]:
        return {"arm": self.arm, "clock": self.clock, "step_ms": self.step_ms, "phases_ms": self.phases_ms,
                "kernel_ms": self.kernel_ms, "kernel_ms_by_class": self.kernel_ms_by_class,
                "low_precision_kernel_share": self.low_precision_share(), "busy_share": self.busy_share,
                "kernels_per_step": self.kernels_per_step, "cast_ms": self.cast_ms,
                "top_kernels": self.top_kernels, "kernel_ms_by_name": self.kernel_ms_by_name, "errors": self.errors,
                "library_output": self.library_output,
                "kernel_class_method": "name heuristic (bf16/bfloat16, tf32/s1688, f16/half/h884/hmma, float/f32)"}


def profile_from_json(data: Mapping[str, Any]) -> StepProfile:
    return StepProfile(arm=data["arm"], phases_ms=dict(data.get("phases_ms", {})), step_ms=float(data.get("step_ms", 0.0)),
                       kernel_ms_by_class=dict(data.get("kernel_ms_by_class", {})), kernel_ms=float(data.get("kernel_ms", 0.0)),
                       kernels_per_step=float(data.get("kernels_per_step", 0.0)), cast_ms=float(data.get("cast_ms", 0.0)),
                       top_kernels=[dict(k) for k in data.get("top_kernels", [])],
                       kernel_ms_by_name=dict(data.get("kernel_ms_by_name", {})), clock=data.get("clock", ""),
                       errors=list(data.get("errors", [])), library_output=list(data.get("library_output", [])))


def reclassify(profile: StepProfile) -> int:
    """Re-derive kernel classes with the current ``kernel_class`` (for JSON written by an older
    one). From the per-name totals when present; else only the top kernels move between classes.
    Returns how many kernel names changed class."""
    changed = 0
    if profile.kernel_ms_by_name:
        by_class: dict[str, float] = {}
        for name, ms in profile.kernel_ms_by_name.items():
            by_class[kernel_class(name)] = by_class.get(kernel_class(name), 0.0) + ms
        rest = profile.kernel_ms - sum(by_class.values())  # names beyond MAX_KERNEL_NAMES keep their old class
        for k in profile.top_kernels:
            changed += int(k["class"] != kernel_class(k["name"]))
            k["class"] = kernel_class(k["name"])
        if rest > 1e-9:
            by_class["other"] = by_class.get("other", 0.0) + rest
        profile.kernel_ms_by_class = dict(sorted(by_class.items()))
        return changed
    for k in profile.top_kernels:
        new = kernel_class(k["name"])
        if new != k["class"]:
            ms = float(k["ms_per_step"])
            profile.kernel_ms_by_class[k["class"]] = profile.kernel_ms_by_class.get(k["class"], 0.0) - ms
            profile.kernel_ms_by_class[new] = profile.kernel_ms_by_class.get(new, 0.0) + ms
            k["class"] = new
            changed += 1
    profile.kernel_ms_by_class = {c: v for c, v in sorted(profile.kernel_ms_by_class.items()) if v > 1e-9}
    return changed


def time_phases(runner: TorchTrainStep, tensors: list[Any], steps: int = PHASE_STEPS) -> tuple[dict[str, float], float]:
    """Median per-phase time and median step time over ``steps`` steps (after one warm step)."""
    torch = runner._torch
    on_gpu = runner.device == "cuda"
    with runner.modes():
        runner.step(tensors)
        per_phase: dict[str, list[float]] = {p: [] for p in PHASES}
        totals: list[float] = []
        for _ in range(steps):
            if on_gpu:
                torch.cuda.synchronize()
                marks: list[tuple[str, Any]] = [("start", torch.cuda.Event(enable_timing=True))]
                marks[0][1].record()

                def mark(phase: str) -> None:
                    ev = torch.cuda.Event(enable_timing=True)
                    ev.record()
                    marks.append((phase, ev))

                runner.step(tensors, mark)
                torch.cuda.synchronize()
                for (_, a), (phase, b) in zip(marks, marks[1:]):
                    per_phase[phase].append(float(a.elapsed_time(b)))
                totals.append(float(marks[0][1].elapsed_time(marks[-1][1])))
            else:
                stamps: list[tuple[str, float]] = [("start", time.perf_counter())]
                runner.step(tensors, lambda phase: stamps.append((phase, time.perf_counter())))
                for (_, a), (phase, b) in zip(stamps, stamps[1:]):
                    per_phase[phase].append((b - a) * 1e3)
                totals.append((stamps[-1][1] - stamps[0][1]) * 1e3)
    return ({p: float(np.median(v)) for p, v in per_phase.items() if v}, float(np.median(totals)))


def profile_kernels(runner: TorchTrainStep, tensors: list[Any], steps: int = PROFILE_STEPS) -> dict[str, Any]:
    """Kernel time by data-type class, cast time and kernels per step from torch.profiler."""
    torch = runner._torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    on_gpu = runner.device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with runner.modes():
        runner.step(tensors)
        if on_gpu:
            torch.cuda.synchronize()
        with captured_output() as printed, profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                runner.step(tensors)
            if on_gpu:
                torch.cuda.synchronize()
    by_class: dict[str, float] = {}
    by_name: dict[str, float] = {}
    count = 0
    cast_us = 0.0
    for evt in prof.events():
        if on_gpu and evt.device_type == DeviceType.CUDA:
            us = float(evt.device_time_total)
            cls = kernel_class(evt.name)
            by_class[cls] = by_class.get(cls, 0.0) + us
            by_name[evt.name] = by_name.get(evt.name, 0.0) + us
            count += 1
        elif evt.device_type == DeviceType.CPU and evt.name == "aten::_to_copy" and not _scalar_or_optimizer(evt):
            cast_us += float(evt.device_time_total if on_gpu else evt.cpu_time_total)
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
    return {
        "library_output": [line for line in printed if line.strip()][:MAX_CAPTURED_LINES],
        "kernel_ms_by_class": {k: v / 1e3 / steps for k, v in sorted(by_class.items())},
        "kernel_ms": sum(by_class.values()) / 1e3 / steps,
        "kernels_per_step": count / steps,
        "cast_ms": cast_us / 1e3 / steps,
        "top_kernels": [{"name": n[:200], "class": kernel_class(n), "ms_per_step": v / 1e3 / steps} for n, v in top],
        "kernel_ms_by_name": {n[:300]: v / 1e3 / steps
                              for n, v in sorted(by_name.items(), key=lambda kv: -kv[1])[:MAX_KERNEL_NAMES]},
    }


MAX_CAPTURED_LINES = 50


@contextmanager
def captured_output() -> Iterator[list[str]]:
    """Whatever C/C++ libraries print to file descriptors 1 and 2 inside the block (torch.profiler's
    Kineto prints ``USDT … profiler_start`` and, without a GPU, ``gpuGetDeviceCount failed with code
    35``) goes to a temporary file; the yielded list gets its lines afterwards, for the JSON. The
    terminal shows none of it."""
    import os
    import sys
    import tempfile

    lines: list[str] = []
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


def _scalar_or_optimizer(evt: Any) -> bool:
    """True for copies that are not autocast's casts: 0-dim tensors (Python scalars wrapped by
    arithmetic ops) and anything under torch.optim's own profiler range (``Optimizer.step#…``)."""
    shapes = getattr(evt, "input_shapes", None)
    if shapes and isinstance(shapes[0], (list, tuple)) and len(shapes[0]) == 0:
        return True
    parent = getattr(evt, "cpu_parent", None)
    while parent is not None:
        if str(parent.name).startswith("Optimizer."):
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False


def profile_arm(runner: TorchTrainStep, tensors: list[Any]) -> StepProfile:
    """Both passes; a failure of one (a profiler that cannot start) is recorded, not fatal."""
    prof = StepProfile(arm=runner.arm.name, clock="cuda_events" if runner.device == "cuda" else "perf_counter")
    try:
        prof.phases_ms, prof.step_ms = time_phases(runner, tensors)
    except RuntimeError as err:
        prof.errors.append(f"phase timing failed: {str(err).splitlines()[0][:200]}")
    try:
        k = profile_kernels(runner, tensors)
        prof.kernel_ms_by_class, prof.kernel_ms = k["kernel_ms_by_class"], k["kernel_ms"]
        prof.kernels_per_step, prof.cast_ms, prof.top_kernels = k["kernels_per_step"], k["cast_ms"], k["top_kernels"]
        prof.kernel_ms_by_name = k["kernel_ms_by_name"]
        prof.library_output = k["library_output"]
    except (RuntimeError, AssertionError) as err:
        prof.errors.append(f"torch.profiler failed: {str(err).splitlines()[0][:200]}")
    return prof


# ---------------------------------------------------------------------------------------------
# Static: tensor-core eligibility of the layers
# ---------------------------------------------------------------------------------------------


def tensor_core_layers(model: Any) -> list[dict[str, Any]]:
    """Conv/ConvTranspose/Gemm/MatMul layers with the channel counts (GEMM K/N) tensor cores care about
    (FP16/BF16 need multiples of 8). The rule is the one the inference layer table uses
    (``layers.graph.tensor_core_dims``, depthwise convolutions included); unknown input dims are taken
    as 1, since the channel and K/N dims it reads do not depend on them."""
    from ..layers.graph import node_facts

    shapes = {vi.name: tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                             for d in vi.type.tensor_type.shape.dim)
              for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}}
    layers = []
    for name, facts in node_facts(model, shapes).items():
        dims = facts["tensor_core"]
        if dims is None:
            continue
        c_in, c_out = dims.get("input_channels", dims.get("k")), dims.get("output_channels", dims.get("n"))
        layers.append({"name": name, "op": facts["op_type"], "in_channels": c_in, "out_channels": c_out,
                       "kernel": dims.get("kernel", []), "tensor_core_eligible": dims["eligible"]})
    return layers


def module_tensor_core_layers(module: Any) -> list[dict[str, Any]]:
    """The same evidence for an ``nn.Module``: its Conv/ConvTranspose/Linear layers' channel counts
    per group (tensor cores need multiples of ``TENSOR_CORE_MULTIPLE`` for FP16/BF16)."""
    from .step import import_torch

    nn = import_torch().nn
    layers = []
    for name, m in module.named_modules():
        if isinstance(m, (nn.modules.conv._ConvNd,)):
            groups = int(m.groups)
            c_in, c_out = int(m.in_channels) // groups, int(m.out_channels) // groups
            op, kernel = type(m).__name__, list(m.kernel_size)
        elif isinstance(m, nn.Linear):
            c_in, c_out, op, kernel = int(m.in_features), int(m.out_features), "Linear", []
        else:
            continue
        eligible = c_in % TENSOR_CORE_MULTIPLE == 0 and c_out % TENSOR_CORE_MULTIPLE == 0
        layers.append({"name": name, "op": op, "in_channels": c_in, "out_channels": c_out, "kernel": kernel,
                       "tensor_core_eligible": eligible})
    return layers


# ---------------------------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


def _kernel_findings(baseline: StepProfile, candidate: StepProfile) -> list[Finding]:
    """What the candidate's kernels say: the share that ran in low precision (AMP) or in TF32, and kernels
    slower than the baseline's."""
    out: list[Finding] = []
    amp = candidate.arm.startswith("amp-")
    low = candidate.low_precision_share()
    if amp and low is not None:
        ev = {"low_precision_kernel_share": low, "kernel_ms_by_class": candidate.kernel_ms_by_class,
              "top_kernels": candidate.top_kernels[:5]}
        if low < LOW_PRECISION_MIN_SHARE:
            out.append(Finding("low_precision_share",
                               f"only {_pct(low)} of {candidate.arm}'s kernel time ran in FP16/BF16 kernels; the rest "
                               "stayed FP32 (ops autocast keeps in FP32, layers without half kernels, elementwise work), "
                               "so AMP can speed up at most that part", ev))
        else:
            out.append(Finding("low_precision_share",
                               f"{_pct(low)} of {candidate.arm}'s kernel time ran in FP16/BF16 kernels", ev))
    if candidate.arm == "tf32" and candidate.kernel_ms > 0:
        share = candidate.kernel_ms_by_class.get("tf32", 0.0) / candidate.kernel_ms
        out.append(Finding("tf32_share",
                           f"{_pct(share)} of tf32's kernel time ran in TF32 (tensor-core) kernels; the rest is FP32 "
                           "work TF32 does not touch (elementwise ops, layout conversions, the optimizer) and any "
                           "convolution/GEMM for which no TF32 algorithm was chosen (see top_kernels)",
                           {"tf32_kernel_share": share, "kernel_ms_by_class": candidate.kernel_ms_by_class}))
    if candidate.kernel_ms > 0 and baseline.kernel_ms > 0 and candidate.kernel_ms > KERNEL_SLOWER * baseline.kernel_ms:
        top = candidate.top_kernels[0] if candidate.top_kernels else {}
        out.append(Finding("slower_kernels",
                           f"{candidate.arm}'s kernels take {candidate.kernel_ms:.3g} ms per step against {baseline.kernel_ms:.3g} ms "
                           f"in {baseline.arm}: the kernels picked for these layers in this precision are slower than the "
                           f"{baseline.arm} ones (top: {top.get('name', '?')[:90]} {top.get('ms_per_step', 0):.3g} ms, "
                           f"{top.get('class', '?')})",
                           {"kernel_ms": candidate.kernel_ms, "baseline_kernel_ms": baseline.kernel_ms,
                            "top_kernels": candidate.top_kernels[:5], "baseline_top_kernels": baseline.top_kernels[:5]}))
    return out


@dataclass(frozen=True)
class RunFacts:
    """What a comparison knows of the candidate's run beside the two step profiles: the steps it ran and
    skipped (GradScaler), ``timed_ms`` its median step in the timed rounds (its phase split is reported only
    when the profiling pass agrees with it), ``memory`` both arms' (``{"baseline": …, "candidate": …}``),
    the device, and ``autotune``: what cuDNN ran with (memory wording)."""

    steps_run: int
    skipped_steps: int | None = None
    timed_ms: float | None = None
    memory: Mapping[str, Any] | None = None
    device: str = "cuda"
    autotune: bool | None = None


def findings_for(baseline: StepProfile, candidate: StepProfile, run: RunFacts, *,
                 layers: Sequence[Mapping[str, Any]], peer: tuple[StepProfile, float] | None = None) -> list[Finding]:
    """Every cause with evidence for one candidate arm against the baseline at one batch size, from the
    profiles and what ``run`` says; ``peer``: amp-fp16's profile and amp-bf16's speed over it (median step
    ratio), for an amp-bf16 candidate."""
    skipped_steps, steps_run, timed_ms, memory = run.skipped_steps, run.steps_run, run.timed_ms, run.memory
    device, autotune = run.device, run.autotune
    peer_speedup = peer[1] if peer is not None else None
    out = _kernel_findings(baseline, candidate)
    amp = candidate.arm.startswith("amp-")
    out += _phase_findings(baseline, candidate, skipped_steps, steps_run, timed_ms)
    busy = candidate.busy_share
    if device == "cuda" and busy is not None and busy < BUSY_LAUNCH_BOUND:
        out.append(Finding("launch_bound",
                           f"the GPU runs kernels only {_pct(busy)} of {candidate.arm}'s step "
                           f"({candidate.kernels_per_step:.0f} kernels, {candidate.kernel_ms:.3g} of {candidate.step_ms:.3g} ms): "
                           "the step is bound by the host launching kernels, and faster kernels cannot shorten it "
                           + ("(a larger batch can; CUDA graphs cannot capture GradScaler's host read-back, so "
                              "amp-bf16+graphed in --precisions measures a graphed AMP step)" if candidate.arm == "amp-fp16"
                              else f"(a larger batch can; whether CUDA graphs would is measured by adding "
                                   f"{candidate.arm}+graphed to --precisions)"),
                           {"busy_share": busy, "kernels_per_step": candidate.kernels_per_step,
                            "kernel_ms": candidate.kernel_ms, "step_ms": candidate.step_ms}))
    if amp and layers and device == "cuda":  # tensor cores: a GPU-only reason
        out.append(_tensor_core_finding(layers))
    if device == "cuda" and peer_speedup is not None and candidate.arm == "amp-bf16":
        out.append(Finding("bf16_vs_fp16",
                           f"amp-bf16 is {peer_speedup:.3f}× amp-fp16 (median step ratio): BF16 needs no GradScaler "
                           "(no unscale, no inf check, no host read-back) at the cost of 3 fewer mantissa bits",
                           {"bf16_over_fp16_speed": peer_speedup}))
    if memory:
        out += _memory_findings(baseline.arm, memory, amp=amp, autotune=autotune)
    if device == "cpu":
        out.append(Finding("cpu_only", "measured on a CPU: a correctness run; speed claims need a GPU", {}))
    return out


def _phase_findings(baseline: StepProfile, candidate: StepProfile, skipped_steps: int | None, steps_run: int,
                    timed_ms: float | None) -> list[Finding]:
    """Casts, GradScaler and optimizer as shares of the profiling pass's step, each stated with that
    step's time. A share is never above 100 % of the step it is a share of; when the profiling pass
    does not agree with the timed median within ``PROFILE_STEP_AGREEMENT`` the shares are withheld."""
    out: list[Finding] = []
    step = candidate.step_ms
    amp = candidate.arm.startswith("amp-")
    agrees = step > 0 and (timed_ms is None or timed_ms <= 0
                           or 1 / PROFILE_STEP_AGREEMENT <= step / timed_ms <= PROFILE_STEP_AGREEMENT)
    skipped = "" if skipped_steps is None else f"{skipped_steps} of {steps_run} steps were skipped (inf/NaN gradients)"
    if step > 0 and not agrees:
        out.append(Finding("phase_split", f"{candidate.arm}'s profiling pass took {step:.3g} ms per step against a timed "
                           f"median of {timed_ms:.3g} ms: its phase split does not describe the timed step, so no "
                           "phase shares are given (a loaded host changes step times between passes)",
                           {"profile_step_ms": step, "timed_median_ms": timed_ms,
                            "agreement_factor": PROFILE_STEP_AGREEMENT}))
        if candidate.arm == "amp-fp16" and skipped:
            out.append(Finding("grad_scaler", f"GradScaler: {skipped}", {"skipped_steps": skipped_steps, "steps": steps_run}))
        return out
    if step <= 0:
        return out

    def of_step(ms: float) -> str:
        return f"{ms:.3g} ms of a {step:.3g} ms step ({_pct(min(1.0, ms / step))})"

    if amp and candidate.cast_ms / step >= CAST_SHARE:
        out.append(Finding("casts", f"autocast's casts (aten::_to_copy, profiled): {of_step(min(candidate.cast_ms, step))} "
                           f"of {candidate.arm}: time the FP32 step does not spend",
                           {"cast_ms": candidate.cast_ms, "step_ms": step}))
    if candidate.arm == "amp-fp16":
        unscale = candidate.phases_ms.get("unscale", 0.0) + candidate.phases_ms.get("scaler_update", 0.0)
        share = min(1.0, unscale / step)
        ev = {"unscale_ms": candidate.phases_ms.get("unscale"), "scaler_update_ms": candidate.phases_ms.get("scaler_update"),
              "share_of_step": share, "skipped_steps": skipped_steps, "steps": steps_run}
        msg = (f"GradScaler: unscale + inf check + scale update take {of_step(unscale)}"
               f"{'; ' + skipped if skipped else ''}; its found-inf check reads a flag back to the host every step")
        out.append(Finding("grad_scaler", msg if share >= SCALER_SHARE or skipped_steps else msg + " (small)", ev))
    opt_ms = candidate.phases_ms.get("optimizer", 0.0)
    if candidate.share("optimizer") >= OPTIMIZER_SHARE:
        base_opt = baseline.phases_ms.get("optimizer")
        out.append(Finding("optimizer_step",
                           f"the optimizer step takes {of_step(opt_ms)} in {candidate.arm} "
                           f"({'?' if base_opt is None else f'{base_opt:.3g}'} ms in {baseline.arm}): it updates FP32 "
                           "master weights in every precision, so AMP cannot shrink it",
                           {"optimizer_ms": opt_ms, "baseline_optimizer_ms": base_opt,
                            "share_of_step": min(1.0, candidate.share("optimizer")), "step_ms": step}))
    return out


def _memory_findings(baseline: str, memory: Mapping[str, Any], *, amp: bool, autotune: bool | None) -> list[Finding]:
    """Peak allocated memory, and — when the solo pass measured what it is made of — whether the
    difference is weights/gradients/optimizer state, activations saved for backward, or working
    memory (cuDNN workspaces of the chosen algorithms and temporaries: the rest of the peak)."""
    b, c = memory.get("baseline"), memory.get("candidate")
    if not (b and c and b.get("peak_allocated_mib") and c.get("peak_allocated_mib")):
        return []
    ratio = c["peak_allocated_mib"] / b["peak_allocated_mib"]
    if ratio < 0.9:
        why = "activations kept for backward are stored in half precision"
    elif ratio <= 1.1:
        why = "no visible saving"
    else:
        why = "more memory, not less"
    parts = ("state_mib", "saved_for_backward_mib", "workspace_and_temporaries_mib")
    ev: dict[str, Any] = {"ratio": ratio, "baseline": b, "candidate": c}
    if all(k in b and k in c for k in parts):
        delta = {k: c[k] - b[k] for k in parts}
        d_peak = c["peak_allocated_mib"] - b["peak_allocated_mib"]
        ev["delta_mib"] = {**delta, "peak_allocated_mib": d_peak}
        tuned = {True: "autotuned", False: "heuristically chosen", None: "chosen"}[autotune]
        split = (f"weights+gradients+optimizer state {b['state_mib']:.0f} → {c['state_mib']:.0f}, saved for backward "
                 f"{b['saved_for_backward_mib']:.0f} → {c['saved_for_backward_mib']:.0f}, working memory "
                 f"{b['workspace_and_temporaries_mib']:.0f} → {c['workspace_and_temporaries_mib']:.0f} MiB")
        if d_peak > 0 and delta["workspace_and_temporaries_mib"] >= WORKSPACE_SHARE * d_peak:
            why += (f": the difference is working memory, not parameters or activations — cuDNN's workspaces for the "
                    f"{tuned} algorithms and temporaries ({split})")
        else:
            why += f" ({split})"
    elif ratio > 1.1:
        why += (": weights and activations have the same size in both, so the difference is the workspace of "
                "the convolution algorithms chosen for this precision" if not amp else
                ": weights, gradients and optimizer state stay FP32, autocast adds half copies of the weights, "
                "and when activations are small the saving is smaller than those and cuDNN's workspaces")
    return [Finding("memory", f"peak allocated {c['peak_allocated_mib']:.0f} MiB vs {b['peak_allocated_mib']:.0f} "
                    f"MiB in {baseline} ({ratio:.2f}×): {why}", ev)]


def _tensor_core_finding(layers: Sequence[Mapping[str, Any]]) -> Finding:
    """Static evidence: layers whose channel counts FP16/BF16 tensor cores cannot take as they are."""
    bad = [x for x in layers if not x["tensor_core_eligible"]]
    if bad:
        return Finding("tensor_core_eligibility",
                       f"{len(bad)} of {len(layers)} Conv/Gemm layers have channel counts that are not multiples "
                       f"of {TENSOR_CORE_MULTIPLE} (e.g. {bad[0]['name']}: {bad[0]['in_channels']}→"
                       f"{bad[0]['out_channels']} channels): FP16/BF16 tensor cores cannot run them as they are",
                       {"ineligible": bad[:20], "layers": len(layers)})
    return Finding("tensor_core_eligibility",
                   f"all {len(layers)} Conv/Gemm layers have channel counts in multiples of {TENSOR_CORE_MULTIPLE}",
                   {"layers": len(layers)})
