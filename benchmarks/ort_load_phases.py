"""Where an ONNX Runtime CUDA load's seconds go (issue 42: a trtprof load on onnxruntime-cuda costs 2.3–4.2 s for
ResNet-50, and the 60-s target needs cheaper loads). One fresh process per batch size, as a worker is: the
import, the CUDA context (the first device allocation), the session (CUDA EP with trtprof's default provider
options: EXHAUSTIVE search, TF32 off, NCHW, CUDA graph on), the first IO-bound run (``run0``: cuDNN's algorithm choice,
the output shape learnt), then three more with the output bound (ORT warms up, captures the graph, replays). Imports nothing from trtprof.

    python3 benchmarks/ort_load_phases.py MODEL.onnx [--batch-sizes 1,32,256] [--sessions 1]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter(); marks = {}
import numpy as np
import onnxruntime as ort
marks["import"] = time.perf_counter() - t0
path, batch, sessions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter(); ort.OrtValue.ortvalue_from_numpy(np.zeros(1, np.float32), "cuda", 0)
marks["cuda_context"] = time.perf_counter() - t
for s in range(sessions):
    opts = {"device_id": 0, "cudnn_conv_algo_search": "EXHAUSTIVE", "use_tf32": 0, "prefer_nhwc": 0,
            "enable_cuda_graph": 1}
    t = time.perf_counter()
    sess = ort.InferenceSession(path, providers=[("CUDAExecutionProvider", opts)])
    marks[f"s{s}_session"] = time.perf_counter() - t
    inp = sess.get_inputs()[0]
    shape = [batch] + [int(d) for d in inp.shape[1:]]
    x = ort.OrtValue.ortvalue_from_numpy(np.random.default_rng(0).standard_normal(shape, dtype=np.float32), "cuda", 0)
    binding = sess.io_binding()
    binding.bind_ortvalue_input(inp.name, x)
    out = sess.get_outputs()[0]
    binding.bind_output(out.name, "cuda")
    t = time.perf_counter(); sess.run_with_iobinding(binding); binding.synchronize_outputs()
    marks[f"s{s}_run0"] = time.perf_counter() - t  # the first run: cuDNN's algorithm choice; learns the output shape
    y = binding.get_outputs()[0]
    binding.clear_binding_outputs(); binding.bind_ortvalue_output(out.name, y)
    for label in ("run1", "run2", "run3"):
        t = time.perf_counter(); sess.run_with_iobinding(binding); binding.synchronize_outputs()
        marks[f"s{s}_{label}"] = time.perf_counter() - t
    del sess
marks["total"] = time.perf_counter() - t0
print(json.dumps(marks))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch-sizes", default="1,32,256")
    ap.add_argument("--sessions", type=int, default=1, help="sessions opened one after another in the process")
    args = ap.parse_args()
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, args.model, str(batch), str(args.sessions)],
                              capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            print(f"batch {batch}: rc {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
            continue
        marks = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"batch {batch}: process wall {wall:.2f} s; " + ", ".join(f"{k} {v:.3f}" for k, v in marks.items()),
              flush=True)


if __name__ == "__main__":
    main()
