"""An independent ONNX Runtime CUDA loop, written as ORT's documentation shows a user (IO binding on the
device, ``enable_cuda_graph``), importing nothing from trtprof: the reference that onnxruntime-cuda's
numbers are checked against (benchmarks/ort_cuda_fidelity.sh).

For each ONNX file and batch size: one session on the CUDA EP with ORT's defaults except the two a user
sets for this (``enable_cuda_graph=1`` where ORT accepts it; where it refuses — shape nodes on the CPU EP —
the named dynamic dims fixed at the batch with ORT's ``add_free_dimension_override_by_name``, as ORT's docs
suggest, and the graph tried again; else without a graph; ``use_tf32`` 1 for a file
named ``*tf32*``/``--tf32``, else 0, so fp32 is FP32), inputs as OrtValues on the device, outputs bound to
the device, ``run_with_iobinding`` (which synchronises at its end) timed with ``time.perf_counter`` per
run, median of ``--iters`` runs after ``--warmup``. Two numbers: ``compute_ms`` (the run alone) and
``latency_ms`` (with copies: the input updated from pinned-free numpy with ``update_inplace`` and the
output read back with ``.numpy()``, as a user's serving loop does). A third, ``back_to_back_ms``: ``--iters``
runs queued one after another on ORT's own stream, the host clock over all of them divided by their count,
median of 5 such blocks: the time per inference when the host's work for a run (ORT's own, the sync's wake-up)
overlaps the GPU's, as in a throughput loop and in trtprof's and trtexec's GPU compute time. At batch 1 a
serial ``compute_ms`` is that plus the gap the GPU waits between runs. ORT's run config
``disable_synchronize_execution_providers`` queues a graph replay only together with an explicit ``gpu_graph_id``
(measured on the H200 with onnxruntime-gpu 1.31.1, ``benchmarks/ort_b1_gap.py``: without the id a replay still
waits for the GPU, 1.02 ms a call for ResNet-50 fp16 at batch 1; with it 0.024 ms), so the back-to-back runs
set both, on a graph of their own (``BACK_TO_BACK_GRAPH``), and the last run of each block synchronises.

With ``--sessions K`` each file is timed in K sessions opened one after another, the files taking turns
(session 1 of every file, then session 2, …), and a pooled row gives the median over the K sessions: at
batch 1 two sessions of one file differ by up to 6 % (BERT fp16 on the H200), more than one session can
tell; trtprof pools its 6 loads the same way.

    python3 benchmarks/reference_ort_iobinding.py --batch-sizes 1,32 a.onnx:fp32 b.onnx:fp16 c.onnx:tf32
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import onnxruntime as ort

BACK_TO_BACK_GRAPH = "2"  # the graph id the back-to-back runs replay (ORT captures it on its first runs)
DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
          "tensor(int32)": np.int32}


def session(path: str, tf32: bool, graph: bool, dims: dict | None = None) -> ort.InferenceSession:
    options = {"enable_cuda_graph": "1" if graph else "0", "use_tf32": "1" if tf32 else "0"}
    so = ort.SessionOptions()
    so.log_severity_level = 4  # fatal only: ORT logs cuDNN frontend fallbacks as errors
    for name, value in (dims or {}).items():
        so.add_free_dimension_override_by_name(name, value)
    return ort.InferenceSession(path, so, providers=[("CUDAExecutionProvider", options), "CPUExecutionProvider"])


def feeds_for(sess: ort.InferenceSession, batch: int, seq: int = 128, ints: str = "user") -> dict[str, np.ndarray]:
    """Seeded inputs as a user feeds them (``ints="user"``: token ids in [0, 1000), a mask of ones), or every integer
    input random in [0, 100) as trtprof's default ``--int-range`` makes them (``ints="trtprof"``: a mask too)."""
    rng = np.random.default_rng(0)
    out = {}
    for i in sess.get_inputs():
        shape = [batch if (j == 0 and not isinstance(d, int)) else (d if isinstance(d, int) else seq)
                 for j, d in enumerate(i.shape)]
        dtype = DTYPES[i.type]
        out[i.name] = (rng.integers(0, 1000 if ints == "user" else 100, shape).astype(dtype)
                       if np.issubdtype(dtype, np.integer) else rng.standard_normal(shape).astype(dtype))
        if "mask" in i.name and ints == "user":
            out[i.name] = np.ones(shape, dtype)
    return out


def named_dims(path: str, batch: int, seq: int = 128) -> dict:
    """The inputs' named dynamic dims at this batch (the first dim is the batch, any other the sequence)."""
    plain = session(path, False, graph=False)
    return {d: (batch if j == 0 else seq) for i in plain.get_inputs() for j, d in enumerate(i.shape)
            if isinstance(d, str)}


def open_timed(path: str, tf32: bool, batch: int, eager: bool) -> tuple:
    """The session a user times: graph as exported; refused, graph with the dims fixed; refused, eager."""
    if eager:
        return session(path, tf32, graph=False), False, "--eager", {}
    try:
        return session(path, tf32, graph=True), True, None, {}
    except Exception as err:  # ORT refuses a graph where a node is not on the CUDA EP
        refused = str(err).splitlines()[0][-160:]
    dims = named_dims(path, batch)
    try:
        return session(path, tf32, graph=True, dims=dims), True, None, dims
    except Exception as err:
        refused += " | dims fixed: " + str(err).splitlines()[0][-160:]
    return session(path, tf32, graph=False), False, refused, {}


def time_one(path: str, precision: str, batch: int, iters: int, warmup: int, eager: bool = False,
             ints: str = "user") -> dict:
    tf32 = precision == "tf32"
    sess, graph, refused, dims = open_timed(path, tf32, batch, eager)
    host = feeds_for(sess, batch, ints=ints)
    binding = sess.io_binding()
    values = {n: ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for n, a in host.items()}
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    # outputs: a plain run on a second session WITHOUT a graph tells their shapes (a plain run on the graph
    # session would be the one ORT captures, with its host copies inside); then device OrtValues bound
    first = session(path, tf32, graph=False).run(None, host)
    outs = [ort.OrtValue.ortvalue_from_shape_and_type(o.shape, o.dtype, "cuda", 0) for o in first]
    for meta, value in zip(sess.get_outputs(), outs):
        binding.bind_ortvalue_output(meta.name, value)
    for _ in range(warmup):
        sess.run_with_iobinding(binding)
    compute = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run_with_iobinding(binding)
        compute.append(time.perf_counter() - t0)
    queued, last = ort.RunOptions(), ort.RunOptions()
    queued.add_run_config_entry("disable_synchronize_execution_providers", "1")
    for options in (queued, last):
        if graph:  # a replay is queued only with an explicit graph id (module docstring)
            options.add_run_config_entry("gpu_graph_id", BACK_TO_BACK_GRAPH)
    for _ in range(warmup):  # its graph captured and warm
        sess.run_with_iobinding(binding, last)
    per_run = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters - 1):
            sess.run_with_iobinding(binding, queued)
        sess.run_with_iobinding(binding, last)  # synchronises: the queue before it has finished too
        per_run.append((time.perf_counter() - t0) / iters)
    latency = []
    for _ in range(iters):
        t0 = time.perf_counter()
        for name, value in values.items():
            value.update_inplace(host[name])
        sess.run_with_iobinding(binding)
        [o.numpy() for o in outs]
        latency.append(time.perf_counter() - t0)
    row = {"file": path, "precision": precision, "batch": batch, "cuda_graph": graph,
           "compute_ms": 1e3 * float(np.median(compute)), "latency_ms": 1e3 * float(np.median(latency)),
           "back_to_back_ms": 1e3 * float(np.median(per_run)),
           "iters": iters, "onnxruntime": ort.__version__, "free_dims": dims, "ints": ints}
    if not graph:
        row["graph_refused"] = refused
    return row


def pooled(rows: list[dict]) -> dict:
    """One row for a file's K sessions: the median of their medians (and each session's, to see the spread)."""
    return {**rows[0], "sessions": len(rows), "compute_ms": float(np.median([r["compute_ms"] for r in rows])),
            "latency_ms": float(np.median([r["latency_ms"] for r in rows])),
            "back_to_back_ms": float(np.median([r["back_to_back_ms"] for r in rows])),
            "per_session_compute_ms": [r["compute_ms"] for r in rows],
            "per_session_latency_ms": [r["latency_ms"] for r in rows]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+", help="FILE.onnx:PRECISION")
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=1, help="sessions per file, taking turns; pooled by median")
    parser.add_argument("--out", default=None)
    parser.add_argument("--eager", action="store_true", help="no CUDA graph, dims as exported")
    parser.add_argument("--ints", choices=("user", "trtprof"), default="user",
                        help="integer inputs as a user feeds them (a mask of ones; default) or as trtprof's default "
                             "--int-range 0,100 makes them (every integer input random in [0, 100), a mask too)")
    args = parser.parse_args()
    rows = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        per_file: dict[str, list[dict]] = {item: [] for item in args.files}
        for _ in range(max(1, args.sessions)):
            for item in args.files:
                path, _, precision = item.rpartition(":")
                iters = max(20, args.iters // max(1, batch // 32))
                r = time_one(path, precision, batch, iters, args.warmup, args.eager, args.ints)
                per_file[item].append(r)
                print(f"ref-ort {precision:5s} b{batch:<4d} compute {r['compute_ms']:.4f} ms  latency "
                      f"{r['latency_ms']:.4f} ms  back-to-back {r['back_to_back_ms']:.4f} ms  graph={r['cuda_graph']} "
                      f"{r['free_dims'] or ''}", flush=True)
        for item, runs in per_file.items():
            rows.append(pooled(runs) if args.sessions > 1 else runs[0])
            if args.sessions > 1:
                r = rows[-1]
                print(f"ref-ort-pooled {r['precision']:5s} b{batch:<4d} compute {r['compute_ms']:.4f} ms  latency "
                      f"{r['latency_ms']:.4f} ms  back-to-back {r['back_to_back_ms']:.4f} ms  over {r['sessions']} sessions "
                      f"(compute {min(r['per_session_compute_ms']):.4f}-{max(r['per_session_compute_ms']):.4f})",
                      flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
