"""Issue 42's batch-1 gap, probed: at batch 1 trtprof's ORT-CUDA compute time for ViT-B/16 and BERT-base
was 5-14 % (0.11-0.14 ms a run) below the independent loop's (``reference_ort_iobinding.py``), where
ResNet-50's was 0.015 ms. The two time different things: the loop times ``run_with_iobinding`` on the
host clock, synchronised at its end (ORT's default); trtprof runs with
``disable_synchronize_execution_providers`` on its own stream and times the stream with CUDA events.
Hypothesis: ORT's host work per run that the GPU does not overlap (before the launch, and the end-of-run
synchronisation and bookkeeping after it) is in the first and not in the second.

One session per model as the reference opens it (IO binding on the device, ORT's CUDA graph, the named
dims fixed at batch 1), plus ``user_compute_stream`` (a torch stream) so CUDA events can be recorded on
the stream ORT runs on. For each, the median over ``--iters`` runs of:
  wall_sync      run_with_iobinding with ORT's end-of-run synchronisation, host clock (the reference)
  wall_nosync    the same with disable_synchronize_execution_providers, then stream.synchronize()
  call_nosync    the call alone without synchronisation (host time ORT spends per run)
  events_nosync  CUDA events recorded on ORT's stream before and after the call (trtprof's way)
Imports nothing from trtprof (torch only for the stream and events).

    python3 benchmarks/ort_b1_gap_probe.py vit.onnx:fp32 vit16.onnx:fp16 [--iters 300]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import onnxruntime as ort
import torch

from reference_ort_iobinding import feeds_for, named_dims

NO_SYNC = "disable_synchronize_execution_providers"


def open_session(path: str, stream: torch.cuda.Stream) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 4
    for name, value in named_dims(path, 1).items():
        so.add_free_dimension_override_by_name(name, value)
    options = {"enable_cuda_graph": "1", "use_tf32": "0", "user_compute_stream": str(stream.cuda_stream)}
    return ort.InferenceSession(path, so, providers=[("CUDAExecutionProvider", options), "CPUExecutionProvider"])


def bound(sess: ort.InferenceSession) -> ort.IOBinding:
    io = sess.io_binding()
    for name, value in feeds_for(sess, 1).items():
        io.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, "cuda", 0))
    for out in sess.get_outputs():
        io.bind_output(out.name, "cuda")
    return io


def probe(path: str, iters: int) -> dict:
    stream = torch.cuda.Stream()
    sess = open_session(path, stream)
    io = bound(sess)
    sync, nosync = ort.RunOptions(), ort.RunOptions()
    nosync.add_run_config_entry(NO_SYNC, "1")
    for _ in range(20):
        sess.run_with_iobinding(io, sync)
    out = {"wall_sync": [], "wall_nosync": [], "call_nosync": [], "events_nosync": []}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run_with_iobinding(io, sync)
        out["wall_sync"].append((time.perf_counter() - t0) * 1e3)
        stream.synchronize()
        t0 = time.perf_counter()
        sess.run_with_iobinding(io, nosync)
        t1 = time.perf_counter()
        stream.synchronize()
        out["wall_nosync"].append((time.perf_counter() - t0) * 1e3)
        out["call_nosync"].append((t1 - t0) * 1e3)
        start.record(stream)
        sess.run_with_iobinding(io, nosync)
        end.record(stream)
        end.synchronize()
        out["events_nosync"].append(start.elapsed_time(end))
    return {k: round(statistics.median(v), 4) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="PATH:LABEL")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = []
    for item in args.models:
        path, _, label = item.partition(":")
        row = {"model": path, "label": label, "onnxruntime": ort.__version__, **probe(path, args.iters)}
        row["sync_minus_events"] = round(row["wall_sync"] - row["events_nosync"], 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
