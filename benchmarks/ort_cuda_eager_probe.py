"""Why is trtprof's eager onnxruntime-cuda arm slower at batch 1 than a plain ORT loop (issue 42: ViT +7 %,
BERT +43-48 % on the H200, 2026-12-02)? One setting at a time, in one process, importing nothing from
trtprof: each variant opens its own session on the CUDA EP without a graph (dims as exported), binds inputs
and outputs on the device (IO binding, as ORT's docs show) and times ``run_with_iobinding`` with
``time.perf_counter`` around the run and a wait for the GPU (median of ``--iters`` after ``--warmup``).

Variants (each differs from the one before in one setting; the last ones are what trtprof sets):
  plain          ORT's defaults (the independent reference's eager path)
  options        + cudnn_conv_algo_search EXHAUSTIVE, max workspace, prefer_nhwc 0 (trtprof's CUDA_OPTIONS)
  user-stream    + user_compute_stream = a stream of this process, do_copy_in_default_stream 1
  copy-own       as user-stream, do_copy_in_default_stream 0 (copies on ORT's own streams)
  no-sync        as user-stream, run config disable_synchronize_execution_providers 1, the wait by the
                 stream's synchronize (trtprof's loop waits on an event instead)
  warn-log       as no-sync, log severity 2 (warnings) instead of 4

    python3 benchmarks/ort_cuda_eager_probe.py --batch 1 bert.fp32.onnx bert.fp16.onnx
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import onnxruntime as ort
import torch

from reference_ort_iobinding import feeds_for  # the independent loop's inputs (random ids, mask of ones)

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
          "tensor(int32)": np.int32}
OPTIONS = {"cudnn_conv_algo_search": "EXHAUSTIVE", "cudnn_conv_use_max_workspace": "1", "prefer_nhwc": "0"}


def variants(stream: torch.cuda.Stream) -> dict[str, tuple[dict, dict, int]]:
    """name -> (CUDA EP options, run config entries, log severity)."""
    user = {**OPTIONS, "user_compute_stream": str(stream.cuda_stream), "do_copy_in_default_stream": "1"}
    no_sync = {"disable_synchronize_execution_providers": "1"}
    return {"plain": ({}, {}, 4), "options": (dict(OPTIONS), {}, 4), "user-stream": (user, {}, 4),
            "copy-own": ({**user, "do_copy_in_default_stream": "0"}, {}, 4),
            "no-sync": (user, no_sync, 4), "warn-log": (user, no_sync, 2)}


def time_variant(path: str, batch: int, cuda: dict, run_config: dict, severity: int, stream, iters: int,
                 warmup: int) -> float:
    so = ort.SessionOptions()
    so.log_severity_level = severity
    sess = ort.InferenceSession(path, so, providers=[("CUDAExecutionProvider", cuda), "CPUExecutionProvider"])
    host = feeds_for(sess, batch)
    shapes = [o.shape for o in sess.run(None, host)]
    binding = sess.io_binding()
    keep = [ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for a in host.values()]
    for name, value in zip(host, keep):
        binding.bind_ortvalue_input(name, value)
    for meta, shape in zip(sess.get_outputs(), shapes):
        out = ort.OrtValue.ortvalue_from_shape_and_type(shape, DTYPES[meta.type], "cuda", 0)
        keep.append(out)
        binding.bind_ortvalue_output(meta.name, out)
    options = ort.RunOptions()
    for key, value in run_config.items():
        options.add_run_config_entry(key, value)
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        sess.run_with_iobinding(binding, options)
        stream.synchronize()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2, help="every variant this many times, interleaved")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.cuda.init()
    stream = torch.cuda.Stream()
    rows = []
    for path in args.files:
        for r in range(args.rounds):
            for name, (cuda, run_config, severity) in variants(stream).items():
                ms = time_variant(path, args.batch, cuda, run_config, severity, stream, args.iters, args.warmup)
                rows.append({"file": path, "batch": args.batch, "variant": name, "round": r, "ms": ms})
                print(f"probe {path.split('/')[-1]:40s} b{args.batch} {name:12s} round {r}: {ms:.4f} ms", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"onnxruntime": ort.__version__, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
