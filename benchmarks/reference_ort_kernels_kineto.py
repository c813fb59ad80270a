"""An independent count of ONNX Runtime's GPU kernels, written as a PyTorch user profiles a process: ORT's
CUDA EP session run under ``torch.profiler`` (Kineto, its own CUPTI client), importing nothing from trtprof.
It checks trtprof's per-node kernel times on onnxruntime-cuda (layers.ort_kernels, cupti-python): the GPU
time per run and per kernel name that Kineto sees in the same kind of session must match what trtprof's
profile attributes to nodes (benchmarks/ort_cuda_fidelity.sh, stage ``kernels``).

For each ONNX file: a session on the CUDA EP with the options trtprof's timed session records
(EXHAUSTIVE conv search, max workspace, ``use_tf32`` 1 only for ``:tf32``, prefer_nhwc 0; no graph: a
profiled run is eager), ``session.run`` on numpy inputs (as trtprof's profiled run does, so the same
host↔device copies), ``--warmup`` runs, then ``--iterations`` runs under the profiler.

    python3 benchmarks/reference_ort_kernels_kineto.py --batch 10 --iterations 20 --out k.json a.onnx:fp32
    python3 benchmarks/reference_ort_kernels_kineto.py --compare k.json --trtprof profile.json
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
          "tensor(int32)": np.int32}


def kernels_of(path: str, precision: str, batch: int, iterations: int, warmup: int) -> dict:
    import onnxruntime as ort
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.init()
    options = {"cudnn_conv_algo_search": "EXHAUSTIVE", "cudnn_conv_use_max_workspace": "1", "prefer_nhwc": "0",
               "use_tf32": "1" if precision == "tf32" else "0"}
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(path, so, providers=[("CUDAExecutionProvider", options), "CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(DTYPES[i.type])
    for _ in range(warmup):
        sess.run(None, feeds)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            sess.run(None, feeds)
        torch.cuda.synchronize()
    per_name: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per_name[e.name] += e.time_range.elapsed_us() / 1e3
            calls[e.name] += 1
    return {"file": path, "precision": precision, "batch": batch, "iterations": iterations,
            "gpu_ms_per_run": sum(per_name.values()) / iterations,
            "per_kernel_ms_per_run": {k: v / iterations for k, v in sorted(per_name.items(), key=lambda kv: -kv[1])},
            "calls_per_run": {k: v / iterations for k, v in calls.items()}, "onnxruntime": ort.__version__,
            "torch": torch.__version__}


def base_name(name: str) -> str:
    """A trtprof kernel name less the provider label it appends ("k (CUDAExecutionProvider; ORT node n)")."""
    return name.rsplit(" (", 1)[0] if name.endswith(")") and "ExecutionProvider" in name.rsplit(" (", 1)[-1] else name


def demangler():
    """c++filt (or CUDA's cu++filt) as a function on a list of names; identity where neither is installed.
    CUPTI records kernels by their mangled names, Kineto demangles them."""
    import shutil
    import subprocess

    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None:
        return lambda names: list(names)

    def run(names):
        names = list(names)
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
        return out if len(out) == len(names) else names
    return run


def compare(reference: list[dict], profile: dict) -> list[str]:
    """Per precision: GPU ms per run (trtprof's iteration total, Kineto's sum) and the top kernels side by side."""
    table = profile.get("table", profile)
    lines = []
    for ref in reference:
        p = ref["precision"]
        prof = table["profiles"].get(p)
        if prof is None:
            continue
        ours: dict[str, float] = defaultdict(float)
        kernels = [k for row in table["rows"] for k in row["kernels"].get(p, [])]
        for k, name in zip(kernels, demangler()([base_name(k["name"]) for k in kernels])):
            ours[name] += k["median_ms"]
        total = prof.get("iteration_total_ms")
        lines.append(f"{p} b{ref['batch']}: GPU ms/run trtprof {total:.4f} (attributed {prof['config'].get('attributed_share')},"
                     f" kernel_times {prof.get('kernel_times')}) vs kineto {ref['gpu_ms_per_run']:.4f} "
                     f"({total / ref['gpu_ms_per_run'] - 1:+.1%})")
        for name, ms in list(ref["per_kernel_ms_per_run"].items())[:6]:
            got = ours.get(name)
            lines.append(f"    {ms:8.4f} kineto  {got if got is None else round(got, 4)!s:>8} trtprof  {name[:90]}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="*", help="FILE.onnx:PRECISION")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out")
    parser.add_argument("--compare", help="a JSON this script wrote")
    parser.add_argument("--trtprof", help="trtprof profile --out JSON to compare with")
    args = parser.parse_args()
    if args.compare:
        with open(args.compare, encoding="utf-8") as f, open(args.trtprof, encoding="utf-8") as g:
            print("\n".join(compare(json.load(f), json.load(g))))
        return
    rows = []
    for item in args.files:
        path, _, precision = item.rpartition(":")
        rows.append(kernels_of(path, precision, args.batch, args.iterations, args.warmup))
        print(f"kineto {precision} b{args.batch}: {rows[-1]['gpu_ms_per_run']:.4f} GPU ms per run, "
              f"{len(rows[-1]['per_kernel_ms_per_run'])} kernel names", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
