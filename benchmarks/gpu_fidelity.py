"""Does trtprof's GPU loop measure what a careful plain-PyTorch loop measures? Run on a GPU, one process.

For ResNet-50 (torchvision, random weights, exported to ONNX) at batch 1, 8, 64, 256 and the 4-layer
Conv2D+ELU nets of ``models/conv_elu.py`` (the report's literal ``report_conv_elu_k32_256`` and the
3×3 ``conv_elu_3x3_f32_256``; NHWC 128×128×3, TF 'same' padding),
in fp32 (TF32 off) and fp16, each model goes through the product path (``build_engines`` →
``load_runner`` → ``timing.time_device``) and through an independent reference loop written with
plain PyTorch (its own stream, ``torch.cuda.Event`` pairs made before the loop, two
iterations queued and a sync on the oldest: the same stream discipline), eagerly and with a CUDA graph (``torch.cuda.CUDAGraph``
replay as the bare-graph reference). Both loops run the same module object on the same input, so the
ratio isolates the measuring loop. Both autotune: trtprof's torch runner turns ``cudnn.benchmark`` on
by default and the reference sets it too (``--no-autotune``: both off), so they run the same kernels. Rounds alternate trtprof / reference (ABAB) so clock drift hits
both; medians are compared.

Also: known-duration kernels through trtprof's loop — a ``%globaltimer`` spin (duration fixed in
nanoseconds whatever the clocks) and ``torch.cuda._sleep`` (cycles; compared with torch events).

Usage (on the device machine):
    python3 benchmarks/gpu_fidelity.py --out benchmarks/results/gpu_fidelity-2026-11-30.json
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trtprof.system import cuda, nvml
from trtprof.measure import timing  # noqa: E402
from trtprof.measure.bench import load_runner  # noqa: E402
from trtprof.builder.pipeline import BuildSettings, build_engines  # noqa: E402
from trtprof.spec import Precision  # noqa: E402
from trtprof.measure.timing import TimingConfig  # noqa: E402

RATIO_TARGET = 0.02  # |trtprof / reference - 1|
KNOWN_DURATION_TARGET = 0.01
GRAPH_OVERHEAD_TARGET_US = 10.0


# ---------------------------------------------------------------------------------------- models
def export_resnet50(path: Path) -> Path:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    return _export(model, torch.randn(1, 3, 224, 224), path)


def export_mobilenetv2(path: Path) -> Path:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None).eval()
    return _export(model, torch.randn(1, 3, 224, 224), path)


def _conv_elu_maker(name: str):
    def make(path: Path) -> Path:
        sys.path.insert(0, str(ROOT / "models"))
        import conv_elu

        return conv_elu.make_onnx(name, path)

    return make


MAKERS = {"resnet50": export_resnet50, "mobilenetv2": export_mobilenetv2,
          "report_conv_elu_k32_256": _conv_elu_maker("report_conv_elu_k32_256"),
          "conv_elu_3x3_f32_256": _conv_elu_maker("conv_elu_3x3_f32_256")}


def _export(model, example, path: Path) -> Path:
    import torch

    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=17,
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    with torch.inference_mode(False), torch.no_grad():
        try:
            torch.onnx.export(model, (example,), str(path), dynamo=False, **kwargs)
        except TypeError:  # a torch without the dynamo switch
            torch.onnx.export(model, (example,), str(path), **kwargs)
    return path


# ------------------------------------------------------------------------------ reference loop
IN_FLIGHT = 2  # as trtprof's loop (and trtexec): the next iteration is queued while one runs


def torch_events_loop(stream, call, *, warmup: int, iterations: int, h2d=None, d2h=None) -> np.ndarray:
    """Time ``call`` with torch.cuda.Event pairs made before the loop; IN_FLIGHT iterations queued.

    With ``h2d``/``d2h`` the sample is from before the upload to after the download."""
    import torch

    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(IN_FLIGHT)]
    copies = h2d is not None

    def issue(e):
        if copies:
            e[0].record(stream)
            h2d()
        e[1].record(stream)
        call()
        e[2].record(stream)
        if copies:
            d2h()
            e[3].record(stream)

    def wait(e):
        (e[3] if copies else e[2]).synchronize()
        return e[0].elapsed_time(e[3]) if copies else e[1].elapsed_time(e[2])

    for _ in range(warmup):
        issue(ev[0])
        wait(ev[0])
    times, pending = [], []
    for i in range(iterations):
        issue(ev[i % IN_FLIGHT])
        pending.append(ev[i % IN_FLIGHT])
        if len(pending) == IN_FLIGHT:
            times.append(wait(pending.pop(0)))
    times += [wait(e) for e in pending]
    return np.asarray(times)


def reference_loop(module, x: np.ndarray, out_shape, *, half: bool, tf32: bool, warmup: int, iterations: int,
                   graph: bool, copies: bool, autotune: bool = True) -> np.ndarray:
    """Plain PyTorch: own stream, pinned tensors, events made before the loop; ``cudnn.benchmark`` as
    ``autotune`` says (restored after), tuned by the warmup before anything is timed."""
    import torch

    stream = torch.cuda.Stream()
    x_pin = torch.from_numpy(x).pin_memory()
    x_dev = torch.empty(x.shape, dtype=torch.float32, device="cuda")
    y_dev = torch.empty(tuple(out_shape), dtype=torch.float32, device="cuda")
    y_pin = torch.empty(tuple(out_shape), dtype=torch.float32).pin_memory()
    prev = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = autotune
    try:
        with torch.cuda.stream(stream), torch.inference_mode():
            x_dev.copy_(x_pin)

            def step():
                y_dev.copy_(module(x_dev.half() if half else x_dev))

            call = step
            if graph:
                for _ in range(3):
                    step()
                stream.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=stream):
                    step()
                call = g.replay
            kw = {}
            if copies:
                kw = {"h2d": lambda: x_dev.copy_(x_pin, non_blocking=True),
                      "d2h": lambda: y_pin.copy_(y_dev, non_blocking=True)}
            times = torch_events_loop(stream, call, warmup=warmup, iterations=iterations, **kw)
        stream.synchronize()
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = prev
    return times


# ------------------------------------------------------------------------------ known duration
class KernelRunner:
    """A fake runner for the loop (no backend, no IO): enqueues one known-duration kernel."""

    device = "cuda"
    inputs = outputs = ()

    def __init__(self, launch):
        self.launch = launch

    def prepare(self, input_shapes):
        return {}

    def enqueue(self, buffers, stream):
        self.launch(stream)

    def infer(self, feeds):
        return {}

    def close(self):
        pass


def known_duration(iterations: int) -> list[dict]:
    import torch

    sys.path.insert(0, str(ROOT))
    from tests.gpu_kernels import spin_kernel

    rows = []
    spin = spin_kernel()
    for ms in (0.1, 1.0, 5.0):
        runner = KernelRunner(lambda s, ns=int(ms * 1e6): spin(s, ns))
        for graph in (False, True):
            samples = timing.time_device(runner, {}, TimingConfig(warmup=10, iterations=iterations, cuda_graph=graph))
            got = float(np.median(samples.stages["compute_ms"]))
            rows.append({"kernel": "globaltimer_spin", "nominal_ms": ms, "cuda_graph": graph, "trtprof_ms": got,
                         "ratio": got / ms, "cv": float(np.std(samples.stages["compute_ms"]) / np.mean(samples.stages["compute_ms"]))})
    # torch.cuda._sleep counts SM cycles: its duration moves with the clock, so compare against
    # torch's own events in the same process instead of a nominal time.
    cycles = 5_000_000
    runner = KernelRunner(lambda s: _torch_sleep(s, cycles))
    samples = timing.time_device(runner, {}, TimingConfig(warmup=10, iterations=iterations))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ref = torch_events_loop(s, lambda: torch.cuda._sleep(cycles), warmup=10, iterations=iterations)
    got, want = float(np.median(samples.stages["compute_ms"])), float(np.median(ref))
    rows.append({"kernel": "torch.cuda._sleep", "cycles": cycles, "cuda_graph": False, "trtprof_ms": got,
                 "reference_ms": want, "ratio": got / want})
    return rows


_STREAMS: dict[int, object] = {}


def _torch_sleep(stream: int, cycles: int) -> None:
    import torch

    ext = _STREAMS.get(stream) or _STREAMS.setdefault(stream, torch.cuda.ExternalStream(stream))
    with torch.cuda.stream(ext):
        torch.cuda._sleep(cycles)


# ------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/gpu_fidelity-2026-11-30.json")
    ap.add_argument("--batches", default="1,8,64,256")
    ap.add_argument("--models", default="resnet50,report_conv_elu_k32_256,conv_elu_3x3_f32_256",
                    help=f"comma list of {','.join(MAKERS)}")
    ap.add_argument("--configs", default="eager,graph,copies",
                    help="eager (no copies), graph (CUDA graph, no copies), copies (eager with H2D/D2H)")
    ap.add_argument("--no-autotune", dest="autotune", action="store_false",
                    help="both sides with cudnn.benchmark off (default: both autotuned)")
    ap.add_argument("--skip-known-duration", action="store_true")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2, help="ABAB rounds (trtprof, reference) per entry")
    ap.add_argument("--engines", type=Path, default=None)
    ap.add_argument("--blocking", dest="spin_wait", action="store_false",
                    help="trtprof side with blocking sync (default: --spin-wait, which is how "
                         "torch.cuda.Event.synchronize waits in the reference)")
    args = ap.parse_args(argv)
    if cuda.device_count() == 0:
        print("gpu_fidelity: no CUDA device", file=sys.stderr)
        return 2
    import torch

    batches = [int(b) for b in args.batches.split(",")]
    work = Path(tempfile.mkdtemp(prefix="gpu_fidelity_"))
    engines = args.engines or work / "engines"
    makers = MAKERS
    configs = [{"eager": (False, False), "graph": (True, False), "copies": (False, True)}[c]
               for c in args.configs.split(",")]
    from trtprof.backends.base import set_autotune

    t_start = time.time()
    entries = []
    for model_name in args.models.split(","):
        onnx_path = makers[model_name](work / f"{model_name}.onnx")
        outcomes = build_engines(onnx_path, [Precision.FP32, Precision.FP16], batches,
                                 settings=BuildSettings(engines_dir=engines, backend="torch"))
        for outcome in outcomes:
            record = outcome.record
            runner = load_runner(record)
            set_autotune(runner, args.autotune)
            half = record.precision == "fp16"
            in_name = runner.inputs[0].name
            for batch in batches:
                shape = (batch,) + tuple(int(d) for d in record.inputs[0].shape[1:])
                x = np.random.default_rng(batch).standard_normal(shape, dtype=np.float32)
                out_shape = runner.prepare({in_name: shape})[runner.outputs[0].name]
                for graph, copies in configs:
                    config = TimingConfig(warmup=args.warmup, iterations=args.iterations, cuda_graph=graph,
                                          copies=copies, spin_wait=args.spin_wait)
                    ours, ref, notes = [], [], []
                    for _ in range(args.rounds):
                        samples = timing.time_device(runner, {in_name: x}, config)
                        ours.append(samples.latency_ms)
                        notes = samples.notes
                        ref.append(reference_loop(runner.module, x, out_shape, half=half, tf32=False,
                                                  warmup=args.warmup, iterations=args.iterations, graph=graph,
                                                  copies=copies, autotune=args.autotune))
                    t_ms, r_ms = float(np.median(np.concatenate(ours))), float(np.median(np.concatenate(ref)))
                    entry = {"model": model_name, "batch_size": batch, "precision": record.precision,
                             "cuda_graph": graph, "copies": copies, "trtprof_ms": round(t_ms, 5),
                             "reference_ms": round(r_ms, 5), "ratio_vs_reference": round(t_ms / r_ms, 5),
                             "n_per_side": args.iterations * args.rounds, "autotune": args.autotune, "notes": notes}
                    if graph:
                        entry["graph_overhead_us"] = round((t_ms - r_ms) * 1e3, 2)
                    entries.append(entry)
                    print(f"{model_name:9s} b{batch:<4d} {record.precision} graph={int(graph)} copies={int(copies)} "
                          f"trtprof {t_ms:9.4f} ms  ref {r_ms:9.4f} ms  ratio {t_ms / r_ms:.4f}", flush=True)
            runner.close()
    known = [] if args.skip_known_duration else known_duration(args.iterations * 2)
    elapsed = time.time() - t_start
    ratios = [abs(e["ratio_vs_reference"] - 1) for e in entries]
    overheads = [e["graph_overhead_us"] for e in entries if "graph_overhead_us" in e]
    known_err = [abs(k["ratio"] - 1) for k in known]
    graph_ratios = [abs(e["ratio_vs_reference"] - 1) for e in entries if e["cuda_graph"]]
    summary = {
        "max_abs_ratio_minus_1": max(ratios),
        "entries_within_target": sum(r <= RATIO_TARGET for r in ratios),
        "entries": len(ratios),
        "cuda_graph_max_abs_ratio_minus_1": max(graph_ratios) if graph_ratios else None,
        "cuda_graph_entries_within_target": sum(r <= RATIO_TARGET for r in graph_ratios),
        "cuda_graph_entries": len(graph_ratios),
        "autotune": args.autotune,
        "max_graph_overhead_us": max(overheads) if overheads else None,
        "median_graph_overhead_us": float(np.median(overheads)) if overheads else None,
        "max_known_duration_error": max(known_err) if known_err else None,
        "targets": {"ratio": RATIO_TARGET, "known_duration": KNOWN_DURATION_TARGET,
                    "graph_overhead_us": GRAPH_OVERHEAD_TARGET_US},
        "seconds": round(elapsed, 1),
    }
    gpu = nvml.describe_gpus()
    device = {"name": cuda.device_name(0), "compute_capability": "%d.%d" % cuda.compute_capability(0),
              "driver": cuda.driver_version(), "cuda_runtime": cuda.runtime_version(), "nvml": gpu,
              "state_after": nvml.gpu_state(pci_bus_id=cuda.pci_bus_id(0)), "torch": torch.__version__,
              "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    result = {"benchmark": "gpu_fidelity", "date": time.strftime("%Y-%m-%d"), "device": device,
              "config": {"iterations": args.iterations, "warmup": args.warmup, "rounds": args.rounds,
                         "statistic": "median", "fp32": "TF32 off", "autotune": args.autotune,
                         "configs": args.configs,
                         "trtprof_spin_wait": args.spin_wait, "in_flight": IN_FLIGHT, "reference": "plain torch, own stream, "
                         "torch.cuda.Event, sync per iteration; graph: torch.cuda.CUDAGraph.replay; cudnn.benchmark as autotune"},
              "entries": entries, "known_duration": known, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print()
    print(f"{'model':9s} {'batch':>5s} {'prec':4s} {'graph':>5s} {'copies':>6s} {'trtprof_ms':>11s} "
          f"{'ref_ms':>11s} {'ratio':>7s}")
    for e in entries:
        print(f"{e['model']:9s} {e['batch_size']:5d} {e['precision']:4s} {int(e['cuda_graph']):5d} "
              f"{int(e['copies']):6d} {e['trtprof_ms']:11.4f} {e['reference_ms']:11.4f} {e['ratio_vs_reference']:7.4f}")
    for k in known:
        print(f"known {k['kernel']:18s} graph={int(k['cuda_graph'])} {k.get('nominal_ms', k.get('reference_ms')):8.4f} ms "
              f"-> {k['trtprof_ms']:.4f} ms (ratio {k['ratio']:.5f})")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
